//! Typed keys out of the merged `algorithm` tree: each key read once, with verl's default when
//! absent. A wrong type, an invalid value or a key nobody reads is a usage error that names
//! the key and the source its value came from (`in FILE`, `from --set`, `from -e`).

use super::sources::Origins;
use super::value::{Map, Value};
use crate::error::{Error, Reason, Result};
use crate::nearest::nearest;
use crate::settings::{Invalid, Keys};

/// One mapping being read; `prefix` is its dotted path below `algorithm`.
pub struct Section<'o> {
    /// The section's place in the configuration file (`algorithm`, `actor_rollout_ref.actor`),
    /// which messages put before a key's path.
    root: &'static str,
    origins: &'o Origins,
    prefix: String,
    map: Map,
    /// The keys asked for, for a "did you mean" on an unknown one.
    asked: Vec<String>,
}

impl<'o> Section<'o> {
    /// The `algorithm` section itself.
    pub fn root(origins: &'o Origins, value: Value) -> Result<Self> {
        Self::new("algorithm", origins, "", value)
    }

    /// Another top section (`actor_rollout_ref.actor`), with the origins of its own keys.
    pub fn named(root: &'static str, origins: &'o Origins, value: Value) -> Result<Self> {
        Self::new(root, origins, "", value)
    }

    fn new(root: &'static str, origins: &'o Origins, prefix: &str, value: Value) -> Result<Self> {
        match value {
            Value::Map(map) => Ok(Section {
                root,
                origins,
                prefix: prefix.to_string(),
                map,
                asked: Vec::new(),
            }),
            Value::Null => Ok(Self::empty(root, origins, prefix)),
            other => Err(Error::usage(format!(
                "{root}{}: expected a section (mapping), found {}{}",
                dotted(prefix),
                describe(&other),
                origins.note(prefix)
            ))),
        }
    }

    fn empty(root: &'static str, origins: &'o Origins, prefix: &str) -> Self {
        Section {
            root,
            origins,
            prefix: prefix.to_string(),
            map: Map::new(),
            asked: Vec::new(),
        }
    }

    /// The dotted path of `key` below `algorithm`.
    pub fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    /// " (in FILE)", " (from --set)", ... for `key` of this section.
    pub fn note(&self, key: &str) -> String {
        self.origins.note(&self.path(key))
    }

    /// Whether the section holds `key` with an explicit null (not the same as absent).
    pub fn is_null(&self, key: &str) -> bool {
        matches!(self.map.get(key), Some(Value::Null))
    }

    /// A nested section; `None` when absent or null.
    pub fn subsection(&mut self, key: &str) -> Result<Option<Section<'o>>> {
        let path = self.path(key);
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => Section::new(self.root, self.origins, &path, v).map(Some),
        }
    }

    /// A nested section, empty when absent or null.
    pub fn subsection_or_empty(&mut self, key: &str) -> Result<Section<'o>> {
        let path = self.path(key);
        Ok(self
            .subsection(key)?
            .unwrap_or_else(|| Section::empty(self.root, self.origins, &path)))
    }

    /// Every key must have been read: an unknown key is an error naming it.
    pub fn finish(&mut self) -> Result<()> {
        // Hydra's instantiation keys (`_target_`, ...) configure Python objects, not verl
        for key in super::hydra::INSTANTIATION_KEYS {
            self.map.remove(key);
        }
        let Some(key) = self.map.keys().next() else {
            return Ok(());
        };
        let key = key.clone();
        let path = self.path(&key);
        let error = Error::usage(format!(
            "unknown key `{}.{path}`{}: verl 0.9.1 has no such setting",
            self.root,
            self.origins.note(&path)
        ))
        .with_reason(Reason::UnknownKey);
        Err(match nearest(&key, self.asked.iter().map(String::as_str)) {
            Some(known) => error.with_hint(format!(
                "did you mean `{}.{}`?",
                self.root,
                self.path(known)
            )),
            None => error,
        })
    }
}

/// Typed keys ([`Keys`]'s readers) out of this mapping; errors name the key's path and origin.
impl Keys for Section<'_> {
    /// `algorithm.KEY (in FILE): message`, with the hint.
    fn reject(&self, invalid: Invalid) -> Error {
        let error = Error::usage(format!(
            "{}.{}{}: {}",
            self.root,
            self.path(invalid.key),
            self.note(invalid.key),
            invalid.message
        ));
        match invalid.hint {
            Some(hint) => error.with_hint(hint),
            None => error,
        }
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        self.asked.push(key.to_string());
        self.map.remove(key)
    }

    fn type_error(&self, key: &str, want: &str, got: &Value) -> Error {
        let path = self.path(key);
        Error::usage(format!(
            "{}.{path}: expected {want}, found {}{}",
            self.root,
            describe(got),
            self.origins.note(&path)
        ))
    }
}

fn dotted(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        format!(".{prefix}")
    }
}

/// A YAML value as an error message shows it.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("`{b}`"),
        Value::Int(n) => format!("`{n}`"),
        Value::Float(x) => format!("`{}`", super::value::py_float_repr(*x)),
        Value::Str(s) => format!("\"{s}\""),
        Value::Seq(_) => "a list".into(),
        Value::Map(_) => "a mapping".into(),
    }
}
