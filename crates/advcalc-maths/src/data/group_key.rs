//! A group label (`uid`, `session_id`) as read from the file.

/// A group label as read from the file: string or integer column. Equality is verl's loop
/// estimators' rule (Python `==` on the label), so `"1"` and `"01"` are different groups.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupKey {
    Int(i128),
    Str(Box<str>),
}

impl std::fmt::Display for GroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupKey::Int(i) => write!(f, "{i}"),
            GroupKey::Str(s) => write!(f, "\"{s}\""),
        }
    }
}
