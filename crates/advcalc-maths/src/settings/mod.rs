//! Settings as the maths declares them: each struct of settings is a `settings!` list (key,
//! type, default, doc) in the file of what reads it: [`Extensions`](crate::estimators::Extensions)
//! for the keys several estimators share, an estimator's own `Estimate::Options` in its file.
//! The list generates the struct, its reading ([`SettingList`]), its YAML and the keys set
//! away from their defaults. Reading goes through two traits the configuration layer
//! implements over its merged tree: [`Keys`] (one section's keys, read by type, with the
//! key's errors) and [`Walk`] (the list's dotted keys, each subsection opened once). A new
//! setting of a type already here is one entry of a list; a new type implements
//! [`SettingValue`] beside its definition ([`Named`] for an enum written as one of its names).

pub mod value;

pub use value::{Map, Value};

use crate::error::{Error, Result};

/// A value its key does not accept: what is wrong and, maybe, what to do. [`Keys::reject`]
/// adds the key's place and where its value came from.
#[derive(Debug)]
pub struct Invalid {
    /// The key, relative to the section being read.
    pub key: &'static str,
    /// What is wrong, in one line.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Invalid {
    /// `key`'s value is wrong: `message`.
    pub fn new(key: &'static str, message: impl Into<String>) -> Self {
        Invalid {
            key,
            message: message.into(),
            hint: None,
        }
    }

    /// With what to do about it.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// One section's keys, read by type: each key taken once (an absent key gives the default),
/// and a wrong type a usage error naming the key and where its value came from. The
/// configuration layer implements the three required methods over its tree.
pub trait Keys {
    /// The value of `key`, taken out of the section (`None`: absent).
    fn take(&mut self, key: &str) -> Option<Value>;
    /// The error for a value its key refuses: the key's full path and origin, the message,
    /// the hint.
    fn reject(&self, invalid: Invalid) -> Error;
    /// The error for a value of the wrong type: `expected WANT, found GOT`.
    fn type_error(&self, key: &str, want: &str, got: &Value) -> Error;

    fn float(&mut self, key: &str, default: f64) -> Result<f64> {
        match self.take(key) {
            None => Ok(default),
            Some(Value::Int(n)) => Ok(n as f64),
            Some(Value::Float(x)) => Ok(x),
            Some(other) => Err(self.type_error(key, "a number", &other)),
        }
    }

    /// A number the maths uses: inf or NaN would turn every advantage into NaN without a word.
    fn finite(&mut self, key: &str, default: f64) -> Result<f64> {
        match self.take(key) {
            None => Ok(default),
            Some(Value::Int(n)) => Ok(n as f64),
            Some(Value::Float(x)) if x.is_finite() => Ok(x),
            Some(other) => Err(self.type_error(key, "a finite number", &other)),
        }
    }

    fn int(&mut self, key: &str, default: i64) -> Result<i64> {
        match self.take(key) {
            None => Ok(default),
            Some(Value::Int(n)) => Ok(n),
            Some(other) => Err(self.type_error(key, "an integer", &other)),
        }
    }

    fn bool(&mut self, key: &str, default: bool) -> Result<bool> {
        match self.take(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(b),
            Some(other) => Err(self.type_error(key, "true or false", &other)),
        }
    }

    fn string(&mut self, key: &str, default: &str) -> Result<String> {
        match self.take(key) {
            None => Ok(default.to_string()),
            Some(Value::Str(s)) => Ok(s),
            Some(other) => Err(self.type_error(key, "a string", &other)),
        }
    }

    fn opt_string(&mut self, key: &str) -> Result<Option<String>> {
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s)),
            Some(other) => Err(self.type_error(key, "a string or null", &other)),
        }
    }

    /// A positive integer or null.
    fn opt_count(&mut self, key: &str) -> Result<Option<usize>> {
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Int(n)) if n > 0 => Ok(usize::try_from(n).ok()),
            Some(other) => Err(self.type_error(key, "a positive integer or null", &other)),
        }
    }

    /// A number or string kept as written (verl's threshold specs), or null.
    fn opt_scalar(&mut self, key: &str, default: Option<Value>) -> Result<Option<Value>> {
        match self.take(key) {
            None => Ok(default),
            Some(Value::Null) => Ok(None),
            Some(v @ (Value::Int(_) | Value::Float(_) | Value::Str(_) | Value::Bool(_))) => {
                Ok(Some(v))
            }
            Some(other) => Err(self.type_error(key, "a number, a string or null", &other)),
        }
    }

    fn opt_string_list(&mut self, key: &str) -> Result<Option<Vec<String>>> {
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Seq(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::Str(s) => Ok(s),
                    other => Err(self.type_error(key, "a list of strings", &other)),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(other) => Err(self.type_error(key, "a list of strings", &other)),
        }
    }

    fn opt_float_list(&mut self, key: &str) -> Result<Option<Vec<f64>>> {
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Seq(items)) => items
                .into_iter()
                .map(|v| {
                    v.as_f64()
                        .ok_or_else(|| self.type_error(key, "a list of numbers", &v))
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(other) => Err(self.type_error(key, "a list of numbers", &other)),
        }
    }
}

/// The walk over a [`SettingList`]'s keys in its order: `key` is read from the top section,
/// `sub.key` from the subsection `sub` (opened at its first key; its unknown keys refused
/// when the walk leaves it, so a list keeps each subsection's keys together).
pub trait Walk {
    /// The section holding `key` (`None`: its subsection is absent or null) and the key
    /// within it.
    fn at(&mut self, key: &'static str) -> Result<(Option<&mut dyn Keys>, &'static str)>;
}

/// A setting's type: read from its key of a section, `default` when absent, and written back
/// as the value that reads back to it.
pub trait SettingValue: Sized {
    /// The value of `key` in `s`, `default` when absent; the key's usage error when invalid.
    fn read(s: &mut dyn Keys, key: &'static str, default: Self) -> Result<Self>;
    /// The value in the resolved configuration (`advcalc config`).
    fn to_value(&self) -> Value;
}

impl SettingValue for bool {
    fn read(s: &mut dyn Keys, key: &'static str, default: Self) -> Result<Self> {
        s.bool(key, default)
    }
    fn to_value(&self) -> Value {
        (*self).into()
    }
}

/// A positive count, or null (`None`, which the default must be: null and absent read alike).
impl SettingValue for Option<usize> {
    fn read(s: &mut dyn Keys, key: &'static str, default: Self) -> Result<Self> {
        Ok(s.opt_count(key)?.or(default))
    }
    fn to_value(&self) -> Value {
        self.map_or(Value::Null, |n| (n as u64).into())
    }
}

/// A finite number.
impl SettingValue for f64 {
    fn read(s: &mut dyn Keys, key: &'static str, default: Self) -> Result<Self> {
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
    fn read(s: &mut dyn Keys, key: &'static str, default: Self) -> Result<Self> {
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
    fn read(s: &mut dyn Keys, key: &'static str, default: Self) -> Result<Self> {
        let Some(list) = s.opt_float_list(key)? else {
            return Ok(default);
        };
        if let Some((i, &x)) = list.iter().enumerate().find(|(_, x)| !x.is_finite()) {
            return Err(s.reject(Invalid::new(
                key,
                format!(
                    "expected a list of finite numbers, found `{}` (item {i}, counted from 0)",
                    value::py_float_repr(x)
                ),
            )));
        }
        Ok(list)
    }
    fn to_value(&self) -> Value {
        self.iter().copied().collect()
    }
}

/// An enum written as one of its names, declared beside it: a setting of that type reads
/// `expected a, b or c, found "x"` for any other string.
pub trait Named: Copy + PartialEq + 'static {
    /// Every value, in the order the error lists them.
    const ALL: &'static [Self];
    /// The value's name in the configuration.
    fn name(self) -> &'static str;
}

impl<T: Named> SettingValue for T {
    fn read(s: &mut dyn Keys, key: &'static str, default: Self) -> Result<Self> {
        let Some(given) = s.opt_string(key)? else {
            return Ok(default);
        };
        T::ALL
            .iter()
            .copied()
            .find(|&v| v.name() == given)
            .ok_or_else(|| {
                let names: Vec<&str> = T::ALL.iter().map(|&v| v.name()).collect();
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
    fn to_value(&self) -> Value {
        self.name().into()
    }
}

/// A struct of declared settings (generated by `settings!`): its keys, reading, YAML and
/// changed keys.
pub trait SettingList:
    Default + std::fmt::Debug + Clone + PartialEq + Send + Sync + 'static
{
    /// Every key, in the declaration's order (dotted below a subsection).
    fn keys() -> Vec<&'static str>;
    /// Read every key with the walk `r` (which checks each subsection's unknown keys).
    fn read(r: &mut dyn Walk) -> Result<Self>;
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
    fn read(_: &mut dyn Walk) -> Result<Self> {
        Ok(())
    }
    fn to_map(&self, _: &mut Map) {}
    fn changed(&self) -> Vec<&'static str> {
        Vec::new()
    }
}

/// `value` at the dotted `key` of `m` (one level of subsection).
pub fn insert(m: &mut Map, key: &str, value: Value) {
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

/// Generates a struct of declared settings from a list, [`Extensions`](crate::estimators::Extensions)
/// and an estimator's own [`Estimate::Options`](crate::estimators::Estimate::Options) in its file:
/// the struct (one field per setting, its doc the entry's), its defaults, and its
/// [`SettingList`](crate::settings::SettingList) impl: its keys, its reading (in the list's order), its YAML and the keys
/// set away from their defaults (the unused-key notes). Each entry is
/// `"key" => field: Type = default,` with `sub.key` for a key of the subsection `sub`; the
/// type implements [`SettingValue`](crate::settings::SettingValue). `+ field: Type` after the list adds a field
/// holding another [`SettingList`](crate::settings::SettingList), read after the list's keys (`Extensions` holds every
/// estimator's own settings that way).
#[macro_export]
macro_rules! settings {
    (
        $(#[$sdoc:meta])* $vis:vis struct $name:ident {
            $($(#[$doc:meta])* $key:literal => $field:ident: $ty:ty = $default:expr,)*
        }
        $(+ $(#[$xdoc:meta])* $extra:ident: $extra_ty:ty)?
    ) => {
        $(#[$sdoc])*
        #[derive(Debug, Clone, PartialEq)]
        $vis struct $name {
            $($(#[$doc])* pub $field: $ty,)*
            $($(#[$xdoc])* pub $extra: $extra_ty,)?
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    $($field: $default,)*
                    $($extra: <$extra_ty>::default(),)?
                }
            }
        }

        impl $crate::settings::SettingList for $name {
            fn keys() -> Vec<&'static str> {
                #[allow(unused_mut)]
                let mut keys: Vec<&'static str> = vec![$($key),*];
                $(keys.extend(<$extra_ty as $crate::settings::SettingList>::keys());)?
                keys
            }

            fn read(
                r: &mut dyn $crate::settings::Walk,
            ) -> $crate::error::Result<Self> {
                #[allow(unused_variables)]
                let d = <$name>::default();
                $(let $field = match r.at($key)? {
                    (Some(section), leaf) => {
                        $crate::settings::SettingValue::read(section, leaf, d.$field)?
                    }
                    (None, _) => d.$field,
                };)*
                $(let $extra = $crate::settings::SettingList::read(r)?;)?
                Ok($name { $($field,)* $($extra,)? })
            }

            #[allow(unused_variables)]
            fn to_map(&self, m: &mut $crate::settings::Map) {
                $($crate::settings::insert(
                    m,
                    $key,
                    $crate::settings::SettingValue::to_value(&self.$field),
                );)*
                $($crate::settings::SettingList::to_map(&self.$extra, m);)?
            }

            fn changed(&self) -> Vec<&'static str> {
                #[allow(unused_variables)]
                let d = <$name>::default();
                #[allow(unused_mut)]
                let mut keys = Vec::new();
                $(if self.$field != d.$field {
                    keys.push($key);
                })*
                $(keys.extend($crate::settings::SettingList::changed(&self.$extra));)?
                keys
            }
        }
    };
}
