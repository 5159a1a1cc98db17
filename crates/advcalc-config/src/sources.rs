//! Where the configuration comes from: the `--config` file, then `--set` overrides, then the
//! short flags, written into one tree (the whole file, as OmegaConf holds it) before anything
//! is read from it; then the `algorithm` section and `actor_rollout_ref.rollout.n` are
//! resolved (interpolations, after every override, as OmegaConf resolves them lazily). Every
//! write is recorded in [`Origins`], so an error can say which source to fix and `advcalc
//! config --origins` where each value came from.

use std::path::Path;

use super::hydra::{self, FileKind};
use super::interpolation::{self, Failure};
use super::value::{Map, Value};
use super::yaml11;
use crate::error::{Error, Result};
use crate::estimators::Estimator;
use crate::estimators::conventions::Convention;

/// Where the configuration comes from, in increasing priority.
#[derive(Debug, Default, Clone)]
pub struct ConfigSources<'a> {
    /// `--config FILE`: a verl trainer YAML (its `algorithm:` section and
    /// `actor_rollout_ref.rollout.n`), a local file; `None`: verl's defaults. (An object
    /// URL's text comes as `text`: the command line reads it through the I/O layer.)
    pub file: Option<&'a Path>,
    /// The same as `file`, given as text, with the name messages call it by (the Python
    /// package's `config=` as a YAML string or a dict serialised as JSON, which is YAML).
    /// Only one of `file` and `text`.
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
    /// Read `actor_rollout_ref.actor` and `rollout.response_length` too: the loss stage's
    /// configuration (`advcalc loss`).
    pub actor: bool,
    /// What IN suggests for `adv_estimator` and `convention` where no source sets them
    /// (another trainer's dump: its algorithm and convention; the caller decides).
    pub input_defaults: Option<InputDefaults>,
}

/// What IN itself suggests for keys no source sets: another trainer's dump, its trainer's
/// algorithm and convention. Written below every source, as [`Origin::Input`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputDefaults {
    /// Who suggests them, as messages name it (the trainer: `TRL`, `NeMo-RL`, ...).
    pub source: &'static str,
    /// `adv_estimator`.
    pub adv_estimator: Estimator,
    /// `convention`.
    pub convention: Convention,
}

/// The sources merged: the resolved `algorithm` tree as the last source left it.
pub struct Merged {
    /// Without the keys that did not resolve.
    pub algorithm: Value,
    /// The first key that did not resolve (an interpolation error, a `???`): reported after
    /// the section's unknown keys, by `Config`.
    pub deferred: Option<Error>,
    /// `actor_rollout_ref.rollout.n`, from the file or `--set`.
    pub rollout_n: Option<i64>,
    pub rollout_n_origin: Option<Origin>,
    pub origins: Origins,
    /// The interpolations of the `algorithm` section as written: (dotted path below
    /// `algorithm`, text).
    pub interpolations: Vec<(String, String)>,
    /// Notes for stderr about the file's shape.
    pub notes: Vec<String>,
    /// With `ConfigSources::actor`: the resolved `actor_rollout_ref.actor` section (the keys
    /// advcalc reads resolved, the others as written), its writes' origins (paths below
    /// it), and `actor_rollout_ref.rollout.response_length`.
    pub actor: Option<Value>,
    pub actor_origins: Origins,
    pub response_length: Option<i64>,
    pub response_length_origin: Option<Origin>,
}

/// Which source wrote a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The config file (or text), by the name messages use.
    File(String),
    /// `--set`.
    Set,
    /// A short flag (`-e`, `--gamma`, ...).
    Flag(&'static str),
    /// Chosen for IN ([`InputDefaults`]: another trainer's dump, by the trainer's name).
    Input(&'static str),
}

/// The writes to the `algorithm` tree in order: (dotted path below `algorithm`, source).
#[derive(Debug, Default)]
pub struct Origins {
    writes: Vec<(String, Origin)>,
}

impl Origins {
    fn push(&mut self, path: &str, origin: Origin) {
        self.writes.push((path.to_string(), origin));
    }

    /// The last source that wrote `path`, a section holding it or a key inside it.
    pub fn last(&self, path: &str) -> Option<&Origin> {
        let related = |written: &str| {
            written == path
                || path.starts_with(&format!("{written}."))
                || written.starts_with(&format!("{path}."))
        };
        self.writes
            .iter()
            .rev()
            .find(|(p, _)| related(p))
            .map(|(_, o)| o)
    }

    /// " (in FILE)", " (from --set)" or " (from -e)": the last source that wrote `path`, a
    /// section holding it or a key inside it; empty for a default nobody wrote.
    pub fn note(&self, path: &str) -> String {
        match self.last(path) {
            Some(Origin::File(file)) => format!(" (in {file})"),
            Some(Origin::Set) => " (from --set)".to_string(),
            Some(Origin::Flag(flag)) => format!(" (from {flag})"),
            Some(Origin::Input(trainer)) => format!(" (chosen for IN, a {trainer} dump)"),
            None => String::new(),
        }
    }

    /// Whether any source wrote anything.
    pub fn any(&self) -> bool {
        !self.writes.is_empty()
    }

    /// Whether any source wrote `path` (or a key inside it).
    pub fn written(&self, path: &str) -> bool {
        !self.note(path).is_empty()
    }
}

/// Read the file, apply `--set`, then the flags; resolve what advcalc reads.
pub fn merge(sources: &ConfigSources<'_>) -> Result<Merged> {
    merge_with_env(sources, &|key| std::env::var(key).ok())
}

pub fn merge_with_env(sources: &ConfigSources<'_>, env: interpolation::Env<'_>) -> Result<Merged> {
    let mut root = Map::new();
    let mut origins = Origins::default();
    let mut rollout_n_origin = None;
    let mut response_length_origin = None;
    let mut notes = Vec::new();
    let mut defaults_list = false;
    let file = match (sources.file, sources.text) {
        (Some(path), _) => {
            let name = path.display().to_string();
            // a local file: the command line reads an object URL's text through the I/O
            // layer and passes it as `text`
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::usage(format!("cannot read config file {name}")).with_source(e)
            })?;
            Some((name, text))
        }
        (None, Some((name, text))) => Some((name.to_string(), text.to_string())),
        (None, None) => None,
    };
    if let Some((name, text)) = &file {
        let doc = yaml11::parse(text)
            .map_err(|e| Error::usage(format!("{name}: not valid YAML")).with_source(e))?;
        root = file_root(doc, name, &mut notes)?;
        defaults_list = root.contains_key("defaults");
        if let Some(Value::Map(section)) = root.get("algorithm") {
            origins.push("", Origin::File(name.clone())); // the section itself
            for key in section.keys() {
                origins.push(key, Origin::File(name.clone()));
            }
        }
        if root
            .get("actor_rollout_ref")
            .and_then(|v| v.at(&["rollout", "n"]))
            .is_some()
        {
            rollout_n_origin = Some(Origin::File(name.clone()));
        }
        if root
            .get("actor_rollout_ref")
            .and_then(|v| v.at(&["rollout", "response_length"]))
            .is_some()
        {
            response_length_origin = Some(Origin::File(name.clone()));
        }
    }
    let mut actor_origins = Origins::default();
    if let Some((name, _)) = &file
        && let Some(Value::Map(section)) =
            root.get("actor_rollout_ref").and_then(|v| v.at(&["actor"]))
    {
        actor_origins.push("", Origin::File(name.clone()));
        for key in section.keys() {
            actor_origins.push(key, Origin::File(name.clone()));
        }
    }
    let mut set_n = None;
    for set in sources.sets {
        let (key, raw) = set.split_once('=').ok_or_else(|| {
            Error::usage(format!("--set {set}: expected KEY=VALUE"))
                .with_hint("write it as --set algorithm.lam=0.95")
        })?;
        // the value as a YAML scalar or flow collection, as in a file; else the text itself
        let value = yaml11::parse(raw).unwrap_or_else(|_| Value::Str(raw.into()));
        let key = key.trim();
        if key == "actor_rollout_ref.rollout.n" {
            set_n = Some(set.clone());
            insert_path(&mut root, key, value)
                .map_err(|msg| Error::usage(format!("--set {set}: {msg}")))?;
            rollout_n_origin = Some(Origin::Set);
            continue;
        }
        if let Some(path) = key.strip_prefix("actor_rollout_ref.actor.") {
            insert_path(&mut root, key, value)
                .map_err(|msg| Error::usage(format!("--set {set}: {msg}")))?;
            actor_origins.push(path, Origin::Set);
            continue;
        }
        if key == "actor_rollout_ref.rollout.response_length" {
            insert_path(&mut root, key, value)
                .map_err(|msg| Error::usage(format!("--set {set}: {msg}")))?;
            response_length_origin = Some(Origin::Set);
            continue;
        }
        let path = key.strip_prefix("algorithm.").unwrap_or(key);
        if path.is_empty() || path == "algorithm" {
            return Err(Error::usage(format!("--set {set}: empty key")));
        }
        insert_path(&mut root, &format!("algorithm.{path}"), value)
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
            insert_path(&mut root, &format!("algorithm.{path}"), value)
                .map_err(|msg| Error::usage(format!("{flag}: {msg}")))?;
            origins.push(path, Origin::Flag(flag));
        }
    }
    // what IN suggests (another trainer's dump: its algorithm and convention), where no
    // source chose
    if let Some(d) = sources.input_defaults {
        for (path, value) in [
            ("adv_estimator", d.adv_estimator.name()),
            ("convention", d.convention.name()),
        ] {
            if origins.last(path).is_none() {
                insert_path(&mut root, &format!("algorithm.{path}"), Value::from(value))
                    .map_err(Error::usage)?;
                origins.push(path, Origin::Input(d.source));
            }
        }
    }

    let root = Value::Map(root);
    let interpolations = interpolations_in(root.at(&["algorithm"]));
    let resolve = |path: &[&str]| -> Result<Option<Value>> {
        if root.at(path).is_none() {
            return Ok(None);
        }
        let owned: Vec<String> = path.iter().map(|p| p.to_string()).collect();
        interpolation::resolve(&root, &owned, env)
            .map(Some)
            .map_err(|e| interpolation_error(&e, &origins, defaults_list))
    };
    // Key by key, so that a key which does not resolve is left out and reported after the
    // section's unknown keys (a component file passed by mistake says "unknown key" first).
    let mut deferred = None;
    let algorithm = match root.at(&["algorithm"]) {
        Some(Value::Map(section)) => {
            let mut out = Map::new();
            for key in section.keys() {
                let value = match resolve(&["algorithm", key]) {
                    Ok(v) => v.unwrap_or(Value::Null),
                    Err(e) => {
                        deferred.get_or_insert(e);
                        continue;
                    }
                };
                if let Some(path) = mandatory_missing(&value, key) {
                    deferred.get_or_insert(
                        Error::usage(format!(
                            "algorithm.{path}{}: a mandatory value (`???`) that was never set",
                            origins.note(&path)
                        ))
                        .with_hint(format!("give it a value: --set algorithm.{path}=VALUE")),
                    );
                    continue;
                }
                out.insert(key.clone(), value);
            }
            Value::Map(out)
        }
        Some(_) => resolve(&["algorithm"])?.unwrap_or(Value::Null),
        None => Value::Map(Map::new()),
    };
    let rollout_n = match resolve(&["actor_rollout_ref", "rollout", "n"])? {
        None => None,
        Some(Value::Int(n)) => Some(n),
        Some(_) if set_n.is_some() => {
            return Err(Error::usage(format!(
                "--set {}: expected an integer",
                set_n.unwrap_or_default()
            )));
        }
        // the loss stage's G = ppo_mini_batch_size × rollout.n: not a value to guess
        Some(other) if sources.actor => {
            return Err(Error::usage(format!(
                "actor_rollout_ref.rollout.n: expected a positive integer, found {}{}",
                super::section::describe(&other),
                match &rollout_n_origin {
                    Some(Origin::File(file)) => format!(" (in {file})"),
                    _ => String::new(),
                }
            )));
        }
        Some(_) => None,
    };
    let (actor, response_length) = if sources.actor {
        let actor = match root.at(&["actor_rollout_ref", "actor"]) {
            Some(Value::Map(section)) => {
                let mut out = Map::new();
                for key in section.keys() {
                    // a key advcalc does not read keeps its text (an interpolation that
                    // cannot resolve offline, `${oc.env:...}` of the training job, is no fault)
                    let value = if super::actor::reads(key) {
                        resolve(&["actor_rollout_ref", "actor", key])?.unwrap_or(Value::Null)
                    } else {
                        section.get(key).cloned().unwrap_or(Value::Null)
                    };
                    out.insert(key.clone(), value);
                }
                Value::Map(out)
            }
            Some(_) => resolve(&["actor_rollout_ref", "actor"])?.unwrap_or(Value::Null),
            None => Value::Map(Map::new()),
        };
        let response_length = match resolve(&["actor_rollout_ref", "rollout", "response_length"])? {
            None => None,
            Some(Value::Int(n)) => Some(n),
            Some(other) => {
                return Err(Error::usage(format!(
                    "actor_rollout_ref.rollout.response_length: expected an integer, found {}",
                    super::section::describe(&other)
                )));
            }
        };
        (Some(actor), response_length)
    } else {
        (None, None)
    };
    Ok(Merged {
        algorithm,
        deferred,
        rollout_n,
        rollout_n_origin,
        origins,
        interpolations,
        notes,
        actor,
        actor_origins,
        response_length,
        response_length_origin,
    })
}

/// The file as a tree with the `algorithm` section at `algorithm`, whatever its shape.
fn file_root(doc: Value, name: &str, notes: &mut Vec<String>) -> Result<Map> {
    let top = match doc {
        Value::Null => return Ok(Map::new()),
        Value::Map(m) => m,
        _ => return Err(Error::usage(format!("{name}: expected a YAML mapping"))),
    };
    match hydra::file_kind(&top) {
        FileKind::Trainer => {
            if let Some(defaults) = top.get("defaults") {
                notes.push(hydra::defaults_note(name, defaults));
            }
            Ok(top)
        }
        FileKind::TrainerWithoutAlgorithm => {
            notes.push(format!(
                "{name} has no algorithm: section: verl's defaults apply to every algorithm setting"
            ));
            Ok(top)
        }
        FileKind::Composition { defaults } => Err(hydra::composition_error(name, &defaults)),
        // the section alone: `${algorithm.x}` and `${.x}` both reach its keys
        FileKind::Section => {
            let mut root = Map::new();
            root.insert("algorithm", Value::Map(top));
            Ok(root)
        }
    }
}

/// The interpolations written in the section (before resolution), for `--origins`.
fn interpolations_in(section: Option<&Value>) -> Vec<(String, String)> {
    fn walk(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
        let join = |k: &str| {
            if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            }
        };
        match v {
            Value::Str(s) if interpolation::has_interpolation(s) => {
                out.push((path.to_string(), s.clone()))
            }
            Value::Map(m) => m.iter().for_each(|(k, v)| walk(v, &join(k), out)),
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, v)| walk(v, &join(&i.to_string()), out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(v) = section {
        walk(v, "", &mut out);
    }
    out
}

/// The first `???` (OmegaConf's missing value) left in the resolved section.
fn mandatory_missing(v: &Value, path: &str) -> Option<String> {
    match v {
        Value::Str(s) if s == "???" => Some(path.to_string()),
        Value::Map(m) => m.iter().find_map(|(k, v)| {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            mandatory_missing(v, &p)
        }),
        _ => None,
    }
}

/// `algorithm.gamma (in FILE): interpolation key `algorithm.lamb` not found`, the chain of
/// keys followed when there is one, and what to do.
fn interpolation_error(
    e: &interpolation::InterpolationError,
    origins: &Origins,
    defaults_list: bool,
) -> Error {
    let at = e.at();
    let note = at
        .strip_prefix("algorithm.")
        .map(|p| origins.note(p))
        .unwrap_or_default();
    let via = if e.chain.len() > 8 {
        let (head, tail) = (&e.chain[..3], &e.chain[e.chain.len() - 2..]);
        format!(
            " (via {} -> ... -> {})",
            head.join(" -> "),
            tail.join(" -> ")
        )
    } else if e.chain.len() > 1 {
        format!(" (via {})", e.chain.join(" -> "))
    } else {
        String::new()
    };
    let error = Error::usage(format!(
        "{at}{note}: cannot resolve the interpolation: {}{via}",
        e.message
    ));
    match (e.failure, defaults_list) {
        (Failure::MissingKey | Failure::MissingVariable, true) => error.with_hint(
            "the file has a Hydra defaults list, whose files advcalc does not compose: pass the composed config (the run's .hydra/config.yaml)",
        ),
        (Failure::UnsupportedResolver, _) => error
            .with_hint("replace the interpolation with its value, or override the key with --set"),
        (Failure::MissingVariable, false) => {
            error.with_hint("set the variable, or give a default: ${oc.env:NAME,default}")
        }
        (Failure::MissingKey | Failure::Other, _) => error,
    }
}

/// Set `a.b.c = value` inside nested mappings, creating them as needed.
fn insert_path(root: &mut Map, path: &str, value: Value) -> std::result::Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    let (last, parents) = parts.split_last().ok_or("empty key")?;
    let mut node = root;
    for (i, part) in parents.iter().enumerate() {
        let slot = node.entry_or_null(part);
        if slot.is_null() {
            *slot = Value::Map(Map::new());
        }
        node = match slot {
            Value::Map(m) => m,
            _ => {
                let shown = parts[..=i].join(".");
                let shown = shown.strip_prefix("algorithm.").unwrap_or(&shown);
                return Err(format!("`{shown}` is not a section"));
            }
        };
    }
    node.insert(*last, value);
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
