//! Where the configuration comes from: the `--config` file, then `--set` overrides, then the
//! short flags, merged into one `algorithm` YAML tree before anything is read from it. Every
//! write is recorded in [`Origins`], so an error can say which source to fix.

use std::path::Path;

use serde_yaml::{Mapping, Value};

use crate::error::{Error, Result};

/// Where the configuration comes from, in increasing priority.
#[derive(Debug, Default, Clone)]
pub struct ConfigSources<'a> {
    /// `--config FILE`: a verl trainer YAML (its `algorithm:` section and
    /// `actor_rollout_ref.rollout.n`); `None`: verl's defaults.
    pub file: Option<&'a Path>,
    /// The same as `file`, given as text, with the name messages call it by (the Python
    /// package's `config=` as a YAML string or a dict). Only one of `file` and `text`.
    pub text: Option<(&'a str, &'a str)>,
    /// `--set key=value`, in command-line order.
    pub sets: &'a [String],
    /// `-e NAME` (`algorithm.adv_estimator`).
    pub estimator: Option<&'a str>,
    /// `--gamma X`.
    pub gamma: Option<f64>,
    /// `--lam X`.
    pub lam: Option<f64>,
    /// `--no-norm-adv-by-std` (`algorithm.norm_adv_by_std_in_grpo=false`).
    pub no_norm_adv_by_std: bool,
    /// `--convention NAME`.
    pub convention: Option<&'a str>,
}

/// The sources merged: the `algorithm` tree as the last source left it.
pub(crate) struct Merged {
    pub algorithm: Value,
    /// `actor_rollout_ref.rollout.n`, from the file or `--set`.
    pub rollout_n: Option<i64>,
    pub origins: Origins,
}

/// Which source wrote a value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    File(String),
    Set,
    Flag(&'static str),
}

/// The writes to the `algorithm` tree in order: (dotted path below `algorithm`, source).
#[derive(Debug, Default)]
pub(crate) struct Origins {
    writes: Vec<(String, Origin)>,
}

impl Origins {
    fn push(&mut self, path: &str, origin: Origin) {
        self.writes.push((path.to_string(), origin));
    }

    /// " (in FILE)", " (from --set)" or " (from -e)": the last source that wrote `path`, a
    /// section holding it or a key inside it; empty for a default nobody wrote.
    pub(crate) fn note(&self, path: &str) -> String {
        let related = |written: &str| {
            written == path
                || path.starts_with(&format!("{written}."))
                || written.starts_with(&format!("{path}."))
        };
        match self.writes.iter().rev().find(|(p, _)| related(p)) {
            Some((_, Origin::File(file))) => format!(" (in {file})"),
            Some((_, Origin::Set)) => " (from --set)".to_string(),
            Some((_, Origin::Flag(flag))) => format!(" (from {flag})"),
            None => String::new(),
        }
    }

    /// Whether any source wrote `path` (or a key inside it).
    pub(crate) fn written(&self, path: &str) -> bool {
        !self.note(path).is_empty()
    }
}

/// Read the file, apply `--set`, then the flags.
pub(crate) fn merge(sources: &ConfigSources<'_>) -> Result<Merged> {
    let mut algorithm = Value::Mapping(Mapping::new());
    let mut rollout_n = None;
    let mut origins = Origins::default();
    let file = match (sources.file, sources.text) {
        (Some(path), _) => {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::usage(format!("cannot read config file {name}")).with_source(e)
            })?;
            Some((name, text))
        }
        (None, Some((name, text))) => Some((name.to_string(), text.to_string())),
        (None, None) => None,
    };
    if let Some((name, text)) = file {
        let doc: Value = serde_yaml::from_str(&text)
            .map_err(|e| Error::usage(format!("{name}: not valid YAML")).with_source(e))?;
        let (section, n) = split_trainer_yaml(doc, &name)?;
        origins.push("", Origin::File(name.clone())); // the section itself
        if let Value::Mapping(map) = &section {
            for key in map.keys() {
                if let Value::String(key) = key {
                    origins.push(key, Origin::File(name.clone()));
                }
            }
        }
        algorithm = section;
        rollout_n = n;
    }
    for set in sources.sets {
        let (key, raw) = set.split_once('=').ok_or_else(|| {
            Error::usage(format!("--set {set}: expected KEY=VALUE"))
                .with_hint("write it as --set algorithm.lam=0.95")
        })?;
        let value: Value = serde_yaml::from_str(raw).unwrap_or(Value::String(raw.into()));
        let key = key.trim();
        if key == "actor_rollout_ref.rollout.n" {
            rollout_n = Some(
                value
                    .as_i64()
                    .ok_or_else(|| Error::usage(format!("--set {set}: expected an integer")))?,
            );
            continue;
        }
        let path = key.strip_prefix("algorithm.").unwrap_or(key);
        if path.is_empty() {
            return Err(Error::usage(format!("--set {set}: empty key")));
        }
        insert_path(&mut algorithm, path, value)
            .map_err(|msg| Error::usage(format!("--set {set}: {msg}")))?;
        origins.push(path, Origin::Set);
    }
    let flags = [
        ("adv_estimator", "-e", sources.estimator.map(Value::from)),
        ("gamma", "--gamma", sources.gamma.map(Value::from)),
        ("lam", "--lam", sources.lam.map(Value::from)),
        (
            "norm_adv_by_std_in_grpo",
            "--no-norm-adv-by-std",
            sources.no_norm_adv_by_std.then_some(Value::Bool(false)),
        ),
        (
            "convention",
            "--convention",
            sources.convention.map(Value::from),
        ),
    ];
    for (path, flag, value) in flags {
        if let Some(value) = value {
            insert_path(&mut algorithm, path, value)
                .map_err(|msg| Error::usage(format!("{flag}: {msg}")))?;
            origins.push(path, Origin::Flag(flag));
        }
    }
    Ok(Merged {
        algorithm,
        rollout_n,
        origins,
    })
}

/// A trainer YAML has an `algorithm:` section; a file without one is the section itself.
fn split_trainer_yaml(doc: Value, origin: &str) -> Result<(Value, Option<i64>)> {
    let Value::Mapping(mut top) = doc else {
        if doc.is_null() {
            return Ok((Value::Mapping(Mapping::new()), None));
        }
        return Err(Error::usage(format!("{origin}: expected a YAML mapping")));
    };
    let Some(section) = top.remove("algorithm") else {
        return Ok((Value::Mapping(top), None));
    };
    let n = top
        .get("actor_rollout_ref")
        .and_then(|v| v.get("rollout"))
        .and_then(|v| v.get("n"))
        .and_then(Value::as_i64);
    Ok((section, n))
}

/// Set `a.b.c = value` inside nested mappings, creating them as needed.
fn insert_path(root: &mut Value, path: &str, value: Value) -> std::result::Result<(), String> {
    let mut node = root;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if node.is_null() {
            *node = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(map) = node else {
            return Err(format!("`{}` is not a section", parts[..i].join(".")));
        };
        let key = Value::String((*part).to_string());
        if i + 1 == parts.len() {
            map.insert(key, value);
            return Ok(());
        }
        node = map.entry(key).or_insert(Value::Null);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_writer_of_a_key_or_its_section_is_named() {
        let mut o = Origins::default();
        o.push("kl_ctrl", Origin::File("c.yaml".into()));
        o.push("kl_ctrl.type", Origin::Set);
        o.push("adv_estimator", Origin::Flag("-e"));
        assert_eq!(o.note("kl_ctrl.type"), " (from --set)");
        assert_eq!(o.note("kl_ctrl.horizon"), " (in c.yaml)");
        assert_eq!(o.note("kl_ctrl"), " (from --set)");
        assert_eq!(o.note("adv_estimator"), " (from -e)");
        assert_eq!(o.note("gamma"), "");
        assert!(!o.written("gamma") && o.written("kl_ctrl"));
    }
}
