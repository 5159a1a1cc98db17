//! What the `settings!` list in `extensions.rs` needs of a setting's type: how a value is read
//! from its key (with the key's errors) and written back as YAML ([`SettingValue`]), and the
//! walk over the list's dotted keys that opens each subsection once ([`Reader`]). A new
//! setting of a type already here (a flag, a count, a number, one of an enum's names) is one
//! entry of that list; a new type implements [`SettingValue`] here.

use super::section::{Invalid, Section};
use super::value::{Map, Value};
use crate::error::Result;
use crate::estimators::conventions::Convention;
use crate::estimators::reinforce_plus_plus::MaskMode;
use crate::estimators::rloo_loo_std::NemoGroupBy;
use crate::shaping::openrlhf_kl::ApproxKl;

/// A setting's type: read from its key of a section, `default` when absent, and written back
/// as the value that reads back to it.
pub(crate) trait SettingValue: Sized {
    /// The value of `key` in `s`, `default` when absent; the key's usage error when invalid.
    fn read(s: &mut Section<'_>, key: &'static str, default: Self) -> Result<Self>;
    /// The value in the resolved configuration ([`super::Config::to_yaml`]).
    fn to_value(&self) -> Value;
}

impl SettingValue for bool {
    fn read(s: &mut Section<'_>, key: &'static str, default: Self) -> Result<Self> {
        s.bool(key, default)
    }
    fn to_value(&self) -> Value {
        (*self).into()
    }
}

/// A positive count, or null (`None`, which the default must be: null and absent read alike).
impl SettingValue for Option<usize> {
    fn read(s: &mut Section<'_>, key: &'static str, default: Self) -> Result<Self> {
        Ok(s.opt_count(key)?.or(default))
    }
    fn to_value(&self) -> Value {
        self.map_or(Value::Null, |n| (n as u64).into())
    }
}

/// A finite number.
impl SettingValue for f64 {
    fn read(s: &mut Section<'_>, key: &'static str, default: Self) -> Result<Self> {
        let x = s.float(key, default)?;
        if !x.is_finite() {
            return Err(s.reject(Invalid::new(
                key,
                format!("expected a finite number, found {x}"),
            )));
        }
        Ok(x)
    }
    fn to_value(&self) -> Value {
        (*self).into()
    }
}

/// A range `[low, high]` with low ≤ high.
impl SettingValue for (f64, f64) {
    fn read(s: &mut Section<'_>, key: &'static str, default: Self) -> Result<Self> {
        let Some(range) = s.opt_float_list(key)? else {
            return Ok(default);
        };
        match range[..] {
            [lo, hi] if lo <= hi => Ok((lo, hi)),
            _ => {
                let v: Value = range.iter().copied().collect();
                Err(s.type_error(key, "[low, high] with low ≤ high", &v))
            }
        }
    }
    fn to_value(&self) -> Value {
        [self.0, self.1].into_iter().collect()
    }
}

/// A list of finite numbers (`.nan` or `.inf` in a weight would turn every score it touches
/// into NaN).
impl SettingValue for Vec<f64> {
    fn read(s: &mut Section<'_>, key: &'static str, default: Self) -> Result<Self> {
        let Some(list) = s.opt_float_list(key)? else {
            return Ok(default);
        };
        if let Some((i, &x)) = list.iter().enumerate().find(|(_, x)| !x.is_finite()) {
            return Err(s.reject(Invalid::new(
                key,
                format!(
                    "expected a list of finite numbers, found `{}` (item {i}, counted from 0)",
                    super::value::py_float_repr(x)
                ),
            )));
        }
        Ok(list)
    }
    fn to_value(&self) -> Value {
        self.iter().copied().collect()
    }
}

impl SettingValue for Convention {
    fn read(s: &mut Section<'_>, key: &'static str, default: Self) -> Result<Self> {
        let Some(name) = s.opt_string(key)? else {
            return Ok(default);
        };
        Convention::from_name(&name).ok_or_else(|| {
            let known: Vec<&str> = Convention::ALL.iter().map(|c| c.name()).collect();
            s.reject(
                Invalid::new(key, format!("unknown convention `{name}`"))
                    .hint(format!("known conventions: {}", known.join(", "))),
            )
        })
    }
    fn to_value(&self) -> Value {
        self.name().into()
    }
}

/// An enum written as one of its names: `expected a, b or c, found "x"` otherwise.
macro_rules! named {
    ($($ty:ty => [$($variant:expr),+ $(,)?],)*) => {$(
        impl SettingValue for $ty {
            fn read(s: &mut Section<'_>, key: &'static str, default: Self) -> Result<Self> {
                read_named(s, key, default, &[$($variant),+], <$ty>::name)
            }
            fn to_value(&self) -> Value {
                self.name().into()
            }
        }
    )*};
}

named! {
    MaskMode => [MaskMode::Carry, MaskMode::Reset],
    NemoGroupBy => [NemoGroupBy::Uid, NemoGroupBy::PromptIds],
    ApproxKl => [ApproxKl::K1, ApproxKl::K2, ApproxKl::K3],
}

fn read_named<T: Copy>(
    s: &mut Section<'_>,
    key: &'static str,
    default: T,
    all: &[T],
    name: fn(T) -> &'static str,
) -> Result<T> {
    let Some(given) = s.opt_string(key)? else {
        return Ok(default);
    };
    all.iter()
        .copied()
        .find(|&v| name(v) == given)
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|&v| name(v)).collect();
            let expected = match names.split_last() {
                Some((last, [])) => last.to_string(),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => String::new(),
            };
            s.reject(Invalid::new(
                key,
                format!("expected {expected}, found \"{given}\""),
            ))
        })
}

/// A struct of declared settings (generated by `settings!`: [`Extensions`](super::Extensions),
/// an estimator's own `Options`): its keys, reading, YAML and changed keys.
pub trait SettingList:
    Default + std::fmt::Debug + Clone + PartialEq + Send + Sync + 'static
{
    /// Every key, in the declaration's order (dotted below a subsection).
    fn keys() -> Vec<&'static str>;
    /// Read every key with the walk `r` (which checks each subsection's unknown keys).
    fn read(r: &mut Reader<'_, '_>) -> Result<Self>;
    /// Every key with its value, into `m` (subsections nested).
    fn to_map(&self, m: &mut Map);
    /// The keys whose values differ from their defaults, in the declaration's order.
    fn changed(&self) -> Vec<&'static str>;
}

/// No settings of its own (most estimators).
impl SettingList for () {
    fn keys() -> Vec<&'static str> {
        Vec::new()
    }
    fn read(_: &mut Reader<'_, '_>) -> Result<Self> {
        Ok(())
    }
    fn to_map(&self, _: &mut Map) {}
    fn changed(&self) -> Vec<&'static str> {
        Vec::new()
    }
}

/// `value` at the dotted `key` of `m` (one level of subsection).
pub(crate) fn insert(m: &mut Map, key: &str, value: Value) {
    match key.split_once('.') {
        None => m.insert(key, value),
        Some((sub, leaf)) => {
            if !matches!(m.get(sub), Some(Value::Map(_))) {
                m.insert(sub, Value::Map(Map::new()));
            }
            if let Some(Value::Map(section)) = m.get_mut(sub) {
                section.insert(leaf, value);
            }
        }
    }
}

/// The walk over the `settings!` list in its order: a top-level key is read from the
/// section itself, `sub.key` from the subsection `sub`, opened at its first key and checked
/// for unknown keys when the walk leaves it (the list keeps each subsection's keys together).
pub struct Reader<'s, 'o> {
    root: &'s mut Section<'o>,
    /// The subsection being read (`None` inside: absent or null).
    open: Option<(&'static str, Option<Section<'o>>)>,
}

impl<'s, 'o> Reader<'s, 'o> {
    pub(crate) fn new(root: &'s mut Section<'o>) -> Self {
        Reader { root, open: None }
    }

    /// The section holding `key` (`None`: its subsection is absent) and the key within it.
    pub(crate) fn at(
        &mut self,
        key: &'static str,
    ) -> Result<(Option<&mut Section<'o>>, &'static str)> {
        let Some((sub, leaf)) = key.split_once('.') else {
            self.close()?;
            return Ok((Some(&mut *self.root), key));
        };
        if self.open.as_ref().is_none_or(|(open, _)| *open != sub) {
            self.close()?;
            self.open = Some((sub, self.root.subsection(sub)?));
        }
        let section = self.open.as_mut().and_then(|(_, s)| s.as_mut());
        Ok((section, leaf))
    }

    /// Leave the open subsection: its unknown keys are refused.
    pub(crate) fn close(&mut self) -> Result<()> {
        if let Some((_, Some(mut section))) = self.open.take() {
            section.finish()?;
        }
        Ok(())
    }
}
