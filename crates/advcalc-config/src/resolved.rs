//! The configuration advcalc will run with, as a tree (`advcalc config`): the resolved
//! `algorithm` section (interpolations resolved, YAML 1.1 scalars typed, `--set` and flags
//! applied) over verl's defaults, with where each value came from. The values are the ones
//! verl would see, as OmegaConf resolves them (`0.5_2.0` stays the string verl parses, an
//! integer stays an integer), which is what the conformance corpus compares with OmegaConf;
//! the typed, validated form is [`Config`].

use serde_json::json;

use super::Config;
use super::sources::{self, ConfigSources, Origin};
use super::to_yaml;
use super::value::{Map, Value, yaml_float};
use crate::error::Result;

/// Where one value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// verl's default (or advcalc's, for its own keys): no source wrote it.
    Default,
    /// A source: the file, `--set` or a flag.
    Written(Origin),
}

/// One leaf of the tree: its dotted path from the top (`algorithm.kl_ctrl.type`), its source,
/// and the interpolation it was resolved from, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    /// `algorithm.kl_ctrl.type`, `actor_rollout_ref.rollout.n`.
    pub path: String,
    /// Who wrote the value.
    pub source: Source,
    /// The `${...}` text the value was resolved from.
    pub interpolation: Option<String>,
}

/// The resolved tree and each leaf's origin.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// `{algorithm: {...}}`, plus `actor_rollout_ref: {rollout: {n}}` when a source gave it.
    pub tree: Value,
    /// Every leaf, in the tree's order.
    pub leaves: Vec<Leaf>,
}

impl Resolved {
    /// Merge and validate the sources (as [`Config::load`], with the same errors); the
    /// validated configuration and the tree.
    ///
    /// ```
    /// use advcalc_config::{ConfigSources, Resolved};
    ///
    /// let sets = ["algorithm.lam=${algorithm.gamma}".to_string(), "gamma=0.9".to_string()];
    /// let (config, resolved) = Resolved::load(&ConfigSources { sets: &sets, ..Default::default() })?;
    /// assert_eq!(config.algorithm.lam, 0.9);
    /// assert!(resolved.to_yaml(false).contains("\n  lam: 0.9\n"));
    /// # Ok::<(), advcalc_maths::Error>(())
    /// ```
    pub fn load(sources: &ConfigSources<'_>) -> Result<(Config, Resolved)> {
        let mut merged = sources::merge(sources)?;
        let config = Config::from_merged(&mut merged)?;
        let mut defaults = Config::load(&ConfigSources::default())?;
        defaults.estimator_configured = true; // show verl's default estimator by name
        let mut algorithm = to_yaml::algorithm(&defaults);
        if let Value::Map(user) = &merged.algorithm {
            overlay(&mut algorithm, user);
        }
        let mut top = Map::new();
        top.insert("algorithm", Value::Map(algorithm));
        let mut arr = Map::new();
        if let Some(loss) = &config.loss {
            // `advcalc config --actor`: the actor section advcalc loss reads
            arr.insert(
                "actor",
                Value::Map(super::actor::to_map(loss, merged.rollout_n)),
            );
        }
        let mut rollout = Map::new();
        if let Some(n) = merged.rollout_n {
            rollout.insert("n", Value::Int(n));
        }
        if let Some(loss) = &config.loss {
            rollout.insert("response_length", Value::Int(loss.response_length as i64));
        }
        if !rollout.is_empty() {
            arr.insert("rollout", Value::Map(rollout));
        }
        if !arr.is_empty() {
            top.insert("actor_rollout_ref", Value::Map(arr));
        }
        let tree = Value::Map(top);
        let mut leaves = Vec::new();
        collect(&tree, "", &mut leaves);
        for leaf in &mut leaves {
            if let Some(below) = leaf.path.strip_prefix("algorithm.") {
                let parts: Vec<&str> = below.split('.').collect();
                if merged.algorithm.at(&parts).is_some()
                    && let Some(origin) = merged.origins.last(below)
                {
                    leaf.source = Source::Written(origin.clone());
                }
                leaf.interpolation = merged
                    .interpolations
                    .iter()
                    .find(|(p, _)| p == below)
                    .map(|(_, text)| text.clone());
            } else if leaf.path == "actor_rollout_ref.rollout.n"
                && let Some(origin) = &merged.rollout_n_origin
            {
                leaf.source = Source::Written(origin.clone());
            } else if let Some(below) = leaf.path.strip_prefix("actor_rollout_ref.actor.")
                && let Some(origin) = merged.actor_origins.last(below)
            {
                leaf.source = Source::Written(origin.clone());
            } else if leaf.path == "actor_rollout_ref.rollout.response_length"
                && let Some(origin) = &merged.response_length_origin
            {
                leaf.source = Source::Written(origin.clone());
            }
        }
        Ok((config, Resolved { tree, leaves }))
    }

    fn leaf(&self, path: &str) -> Option<&Leaf> {
        self.leaves.iter().find(|l| l.path == path)
    }

    /// The tree as YAML that OmegaConf (and advcalc) reads back to the same values; with
    /// `origins`, each value's source as a comment at the end of its line.
    pub fn to_yaml(&self, origins: bool) -> String {
        let mut out = String::new();
        if let Value::Map(top) = &self.tree {
            let comment = |path: &str| -> Option<String> {
                if !origins {
                    return None;
                }
                let leaf = self.leaf(path)?;
                let mut text = describe(&leaf.source);
                if let Some(i) = &leaf.interpolation {
                    text += &format!(", from {i}");
                }
                Some(text)
            };
            to_yaml::emit(&mut out, 0, top, "", &comment);
        }
        out
    }

    /// The tree as JSON (non-finite floats as `.inf`, `-.inf`, `.nan`); with `origins`, an
    /// `"origins"` object: each leaf's dotted path → `{"source": "default" | "file" | "set" |
    /// "flag", "file": NAME, "flag": "-e", "interpolation": TEXT}` (the last three when they
    /// apply).
    pub fn to_json(&self, origins: bool) -> serde_json::Value {
        let mut out = value_json(&self.tree);
        if origins && let serde_json::Value::Object(top) = &mut out {
            let mut o = serde_json::Map::new();
            for leaf in &self.leaves {
                let mut entry = match &leaf.source {
                    Source::Default => json!({"source": "default"}),
                    Source::Written(Origin::File(name)) => json!({"source": "file", "file": name}),
                    Source::Written(Origin::Set) => json!({"source": "set"}),
                    Source::Written(Origin::Flag(flag)) => json!({"source": "flag", "flag": flag}),
                    Source::Written(Origin::Input(trainer)) => {
                        json!({"source": "input", "trainer": trainer})
                    }
                };
                if let Some(i) = &leaf.interpolation {
                    entry["interpolation"] = json!(i);
                }
                o.insert(leaf.path.clone(), entry);
            }
            top.insert("origins".into(), serde_json::Value::Object(o));
        }
        out
    }
}

fn describe(source: &Source) -> String {
    match source {
        Source::Default => "default".into(),
        Source::Written(Origin::File(name)) => format!("file {name}"),
        Source::Written(Origin::Set) => "--set".into(),
        Source::Written(Origin::Flag(flag)) => (*flag).into(),
        Source::Written(Origin::Input(trainer)) => format!("IN ({trainer} dump)"),
    }
}

/// `user` over `base`: mappings merged key by key, anything else replaced (a null replaces a
/// section, as `rollout_correction: null` turns the correction off).
fn overlay(base: &mut Map, user: &Map) {
    for (key, value) in user.iter() {
        match (base.get_mut(key), value) {
            (Some(Value::Map(b)), Value::Map(u)) => overlay(b, u),
            _ => base.insert(key.clone(), value.clone()),
        }
    }
}

/// Every leaf (scalars, lists, empty mappings) with its dotted path.
fn collect(v: &Value, path: &str, out: &mut Vec<Leaf>) {
    match v {
        Value::Map(m) if !m.is_empty() => {
            for (k, v) in m.iter() {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                collect(v, &p, out);
            }
        }
        _ => out.push(Leaf {
            path: path.to_string(),
            source: Source::Default,
            interpolation: None,
        }),
    }
}

/// A value as JSON: non-finite floats, which JSON lacks, as the strings `.inf`, `-.inf` and
/// `.nan` (their YAML spelling).
fn value_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(n) => J::from(*n),
        Value::Float(x) if x.is_finite() => J::from(*x),
        Value::Float(x) => J::String(yaml_float(*x)),
        Value::Str(s) => J::String(s.clone()),
        Value::Seq(items) => J::Array(items.iter().map(value_json).collect()),
        Value::Map(m) => J::Object(m.iter().map(|(k, v)| (k.clone(), value_json(v))).collect()),
    }
}
