//! The validated configuration: verl's `algorithm:` section (keys and defaults as verl 0.9.1's
//! `AlgoConfig`), read from `--config`, overridden by `--set` and then by the short flags.
//! Everything after this module trusts it.

use std::collections::BTreeSet;
use std::path::Path;

use serde_yaml::{Mapping, Value};

use crate::error::{Error, Result};
use crate::estimators::Estimator;
use crate::estimators::conventions::{self, Convention};
use crate::estimators::reinforce_plus_plus::MaskMode;
use crate::estimators::rloo_loo_std::NemoOptions;

/// verl's `algorithm.kl_ctrl` (reference §2.3).
#[derive(Debug, Clone, PartialEq)]
pub struct KlCtrlConfig {
    pub kind: String,
    pub kl_coef: f64,
    pub horizon: i64,
    pub target_kl: f64,
}

/// verl's `algorithm.rollout_correction` (reference §3.1), as written; the thresholds keep
/// their YAML form (number or string) because verl parses them itself.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutCorrectionConfig {
    pub rollout_is: Option<String>,
    pub rollout_is_threshold: Option<Value>,
    pub rollout_is_batch_normalize: bool,
    pub rollout_rs: Option<String>,
    pub rollout_rs_threshold: Option<Value>,
    pub bypass_mode: bool,
    pub loss_type: String,
}

impl Default for RolloutCorrectionConfig {
    /// verl's `algorithm/rollout_correction.yaml`.
    fn default() -> Self {
        RolloutCorrectionConfig {
            rollout_is: None,
            rollout_is_threshold: Some(Value::from(2.0)),
            rollout_is_batch_normalize: false,
            rollout_rs: None,
            rollout_rs_threshold: None,
            bypass_mode: false,
            loss_type: "ppo_clip".into(),
        }
    }
}

/// verl's `algorithm` section after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct AlgoConfig {
    pub gamma: f64,
    pub lam: f64,
    pub adv_estimator: Estimator,
    pub norm_adv_by_std_in_grpo: bool,
    pub use_kl_in_reward: bool,
    pub kl_penalty: String,
    pub kl_ctrl: KlCtrlConfig,
    pub use_pf_ppo: bool,
    pub filter_groups_enable: bool,
    pub rollout_correction: Option<RolloutCorrectionConfig>,
    pub gdpo_reward_keys: Option<Vec<String>>,
    pub gdpo_reward_weights: Option<Vec<f64>>,
    /// advcalc extensions beyond verl's AlgoConfig (`docs/conventions.md`).
    pub ext: Extensions,
}

/// advcalc's keys beside verl's in the `algorithm` section (`docs/conventions.md`, "Option
/// keys"); verl 0.9.1 has none of them, and their defaults give verl's numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Extensions {
    /// `convention` (or `--convention`): whose numbers the GRPO/RLOO family gives.
    pub convention: Convention,
    /// `whiten_advantages` (gae only): false writes A_raw·m instead of the whitened values.
    pub whiten_advantages: bool,
    /// `mask_mode` (reinforce_plus_plus only): `carry` (verl ≥ 0.9) or `reset` (verl < 0.9).
    pub mask_mode: MaskMode,
    /// `group_size`: consecutive-n groups (trl, openrlhf, open-instruct conventions and the
    /// openrlhf_* estimators); null: the first run of equal uids.
    pub group_size: Option<usize>,
    /// `openrlhf.reward_clip`: OpenRLHF's `--reward.clip_range`.
    pub openrlhf_reward_clip: (f64, f64),
    /// `openrlhf.no_std_norm`: OpenRLHF's `--algo.advantage.no_std_norm`.
    pub openrlhf_no_std_norm: bool,
    /// `trl.normalize_advantages`: TRL RLOOTrainer's flag.
    pub trl_normalize_advantages: bool,
    /// `nemo.use_leave_one_out_baseline`, `nemo.normalize_rewards` (read under nemo-rl only).
    pub nemo: NemoOptions,
}

impl Default for Extensions {
    fn default() -> Self {
        Extensions {
            convention: Convention::Verl,
            whiten_advantages: true,
            mask_mode: MaskMode::Carry,
            group_size: None,
            openrlhf_reward_clip: (-10.0, 10.0),
            openrlhf_no_std_norm: false,
            trl_normalize_advantages: false,
            nemo: NemoOptions::default(),
        }
    }
}

/// Everything advcalc reads from a verl configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub algorithm: AlgoConfig,
    /// `actor_rollout_ref.rollout.n`: the configured group size, when the file gives it.
    pub rollout_n: Option<i64>,
    /// Notes for stderr: settings verl itself ignores or that do not apply offline.
    pub notes: Vec<String>,
    /// The estimator was named (`-e`, the config file or `--set`), not verl's default.
    pub estimator_configured: bool,
}

/// Where the configuration comes from, in increasing priority.
#[derive(Debug, Default, Clone)]
pub struct ConfigSources<'a> {
    pub file: Option<&'a Path>,
    /// `--set key=value`, in command-line order.
    pub sets: &'a [String],
    pub estimator: Option<&'a str>,
    pub gamma: Option<f64>,
    pub lam: Option<f64>,
    pub no_norm_adv_by_std: bool,
    /// `--convention NAME`.
    pub convention: Option<&'a str>,
}

impl Config {
    /// Merge the sources and validate the result; errors are usage errors naming the key.
    pub fn load(sources: &ConfigSources<'_>) -> Result<Self> {
        let mut algorithm = Value::Mapping(Mapping::new());
        let mut rollout_n = None;
        let origin = sources
            .file
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if let Some(path) = sources.file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::usage(format!("cannot read config file {}", path.display())).with_source(e)
            })?;
            let doc: Value = serde_yaml::from_str(&text).map_err(|e| {
                Error::usage(format!("{}: not valid YAML", path.display())).with_source(e)
            })?;
            let (section, n) = split_trainer_yaml(doc, &origin)?;
            algorithm = section;
            rollout_n = n;
        }
        let mut from_set = BTreeSet::new();
        for set in sources.sets {
            let (key, raw) = set.split_once('=').ok_or_else(|| {
                Error::usage(format!(
                    "--set {set}: expected KEY=VALUE, e.g. algorithm.lam=0.95"
                ))
            })?;
            let value: Value = serde_yaml::from_str(raw).unwrap_or(Value::String(raw.into()));
            let key = key.trim();
            if key == "actor_rollout_ref.rollout.n" {
                rollout_n =
                    Some(value.as_i64().ok_or_else(|| {
                        Error::usage(format!("--set {set}: expected an integer"))
                    })?);
                continue;
            }
            let path = key.strip_prefix("algorithm.").unwrap_or(key);
            if path.is_empty() {
                return Err(Error::usage(format!("--set {set}: empty key")));
            }
            insert_path(&mut algorithm, path, value)
                .map_err(|msg| Error::usage(format!("--set {set}: {msg}")))?;
            from_set.insert(path.to_string());
        }
        let estimator_configured =
            sources.estimator.is_some() || algorithm.get("adv_estimator").is_some();
        let mut notes = Vec::new();
        let reader = Reader {
            origin: &origin,
            from_set: &from_set,
        };
        let mut algo = reader.algorithm(algorithm, &mut notes)?;
        if let Some(name) = sources.estimator {
            algo.adv_estimator = Estimator::from_name(name)?;
        }
        if let Some(g) = sources.gamma {
            algo.gamma = g;
        }
        if let Some(l) = sources.lam {
            algo.lam = l;
        }
        if sources.no_norm_adv_by_std {
            algo.norm_adv_by_std_in_grpo = false;
        }
        if let Some(name) = sources.convention {
            algo.ext.convention = parse_convention(name, "--convention")?;
        }
        extension_checks(&algo, &mut notes)?;
        if matches!(
            algo.adv_estimator,
            Estimator::GrpoVectorized | Estimator::Gdpo
        ) && !algo.norm_adv_by_std_in_grpo
        {
            notes.push(format!(
                "{} divides by the group std whatever norm_adv_by_std_in_grpo says: verl 0.9.1's trainer never passes the setting to it, and advcalc does the same; use -e grpo for Dr. GRPO (no std)",
                algo.adv_estimator.name()
            ));
        }
        let config = Config {
            algorithm: algo,
            rollout_n,
            notes,
            estimator_configured,
        };
        config.check_supported()?;
        Ok(config)
    }

    /// Refuse settings that cannot be reproduced from a dump, rather than ignoring them.
    fn check_supported(&self) -> Result<()> {
        if self.algorithm.use_pf_ppo {
            return Err(Error::usage(
                "algorithm.use_pf_ppo=true: verl resamples rows at random there, which cannot be reproduced from a dump",
            ));
        }
        Ok(())
    }
}

fn parse_convention(name: &str, origin: &str) -> Result<Convention> {
    Convention::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = Convention::ALL.iter().map(|c| c.name()).collect();
        Error::usage(format!(
            "{origin}: unknown convention `{name}` (known: {})",
            known.join(", ")
        ))
    })
}

/// Combinations of the estimator, the convention and advcalc's keys that cannot work, and
/// notes for the ones that do nothing.
fn extension_checks(algo: &AlgoConfig, notes: &mut Vec<String>) -> Result<()> {
    let e = algo.adv_estimator;
    let x = &algo.ext;
    let c = x.convention;
    conventions::check(e, c).map_err(Error::usage)?;
    if c != Convention::Verl && !conventions::in_family(e) {
        notes.push(format!(
            "--convention {} changes only grpo, drgrpo, grpo_batch_std, rloo and maxrl; {} gives the same numbers under every convention",
            c.name(),
            e.name()
        ));
    }
    if e.is_openrlhf() {
        if algo.use_kl_in_reward {
            return Err(Error::usage(format!(
                "{}: algorithm.use_kl_in_reward=true would put verl's KL inside the group statistics, which OpenRLHF never does; turn it off",
                e.name()
            )));
        }
        if algo.gamma != 1.0 {
            notes.push(format!(
                "{} uses γ = 1 whatever algorithm.gamma says, as OpenRLHF forces it",
                e.name()
            ));
        }
    }
    if c != Convention::NemoRl && x.nemo != NemoOptions::default() {
        notes.push("algorithm.nemo.* is read under --convention nemo-rl only".into());
    }
    if x.trl_normalize_advantages && !(c == Convention::Trl && e == Estimator::Rloo) {
        notes.push(
            "algorithm.trl.normalize_advantages is read by rloo under --convention trl only".into(),
        );
    }
    if !x.whiten_advantages && e != Estimator::Gae {
        notes.push("algorithm.whiten_advantages is read by gae only".into());
    }
    if x.mask_mode != MaskMode::Carry && e != Estimator::ReinforcePlusPlus {
        notes.push("algorithm.mask_mode is read by reinforce_plus_plus only".into());
    }
    Ok(())
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

/// Reads typed keys out of a YAML mapping and rejects the keys it was not asked for.
struct Reader<'a> {
    origin: &'a str,
    from_set: &'a BTreeSet<String>,
}

/// One mapping being read; `prefix` is its dotted path below `algorithm`.
struct Section<'r> {
    reader: &'r Reader<'r>,
    prefix: String,
    map: Mapping,
}

impl Reader<'_> {
    fn algorithm(&self, value: Value, notes: &mut Vec<String>) -> Result<AlgoConfig> {
        let mut s = self.section("", value)?;
        let kl_ctrl = {
            let mut k = s
                .subsection("kl_ctrl")?
                .unwrap_or_else(|| self.empty("kl_ctrl"));
            let cfg = KlCtrlConfig {
                kind: k.string("type", "fixed")?,
                kl_coef: k.float("kl_coef", 0.001)?,
                horizon: k.int("horizon", 10000)?,
                target_kl: k.float("target_kl", 0.1)?,
            };
            k.finish()?;
            cfg
        };
        let filter_groups_enable = match s.subsection("filter_groups")? {
            Some(mut f) => {
                let enable = f.bool("enable", false)?;
                f.opt_string("metric")?;
                f.int("max_num_gen_batches", 0)?;
                f.int("max_inflight_gen_batches", 1)?;
                f.finish()?;
                enable
            }
            None => false,
        };
        if filter_groups_enable {
            notes.push(
                "algorithm.filter_groups.enable is ignored: DAPO filtering chooses which groups are generated, and a dump holds the groups that were trained on".into(),
            );
        }
        if let Some(mut p) = s.subsection("pf_ppo")? {
            p.string("reweight_method", "pow")?;
            p.float("weight_pow", 2.0)?;
            p.finish()?;
        }
        // verl's trainer YAML always carries this section (rollout_is and rollout_rs null): an
        // absent key means those defaults; an explicit null disables correction entirely.
        let explicit_null = matches!(s.map.get("rollout_correction"), Some(Value::Null));
        let rollout_correction = match s.subsection("rollout_correction")? {
            None if !explicit_null => Some(RolloutCorrectionConfig::default()),
            Some(mut r) => {
                let cfg = RolloutCorrectionConfig {
                    rollout_is: r.opt_string("rollout_is")?,
                    rollout_is_threshold: r.opt_scalar("rollout_is_threshold", Some(2.0.into()))?,
                    rollout_is_batch_normalize: r.bool("rollout_is_batch_normalize", false)?,
                    rollout_rs: r.opt_string("rollout_rs")?,
                    rollout_rs_threshold: r.opt_scalar("rollout_rs_threshold", None)?,
                    bypass_mode: r.bool("bypass_mode", false)?,
                    loss_type: r.string("loss_type", "ppo_clip")?,
                };
                r.finish()?;
                Some(cfg)
            }
            None => None,
        };
        let estimator_name = s.string("adv_estimator", "gae")?;
        let adv_estimator = Estimator::from_name(&estimator_name).map_err(|e| {
            Error::usage(format!(
                "{}{}",
                e.message(),
                self.origin_note("adv_estimator")
            ))
        })?;
        let algo = AlgoConfig {
            gamma: s.float("gamma", 1.0)?,
            lam: s.float("lam", 1.0)?,
            adv_estimator,
            norm_adv_by_std_in_grpo: s.bool("norm_adv_by_std_in_grpo", true)?,
            use_kl_in_reward: s.bool("use_kl_in_reward", false)?,
            kl_penalty: s.string("kl_penalty", "kl")?,
            kl_ctrl,
            use_pf_ppo: s.bool("use_pf_ppo", false)?,
            filter_groups_enable,
            rollout_correction,
            gdpo_reward_keys: s.opt_string_list("gdpo_reward_keys")?,
            gdpo_reward_weights: s.opt_float_list("gdpo_reward_weights")?,
            ext: self.extensions(&mut s)?,
        };
        s.finish()?;
        Ok(algo)
    }

    /// advcalc's own keys (see [`Extensions`]).
    fn extensions(&self, s: &mut Section<'_>) -> Result<Extensions> {
        let d = Extensions::default();
        let convention = match s.opt_string("convention")? {
            None => d.convention,
            Some(name) => parse_convention(
                &name,
                &format!("algorithm.convention{}", self.origin_note("convention")),
            )?,
        };
        let mask_mode = match s.opt_string("mask_mode")? {
            None => d.mask_mode,
            Some(name) => MaskMode::from_name(&name).ok_or_else(|| {
                Error::usage(format!(
                    "algorithm.mask_mode{}: expected carry or reset, found \"{name}\"",
                    self.origin_note("mask_mode")
                ))
            })?,
        };
        let group_size = match s.take("group_size") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => {
                n.as_u64().map(|n| n as usize)
            }
            Some(other) => {
                return Err(s.type_error("group_size", "a positive integer or null", &other));
            }
        };
        let whiten_advantages = s.bool("whiten_advantages", d.whiten_advantages)?;
        let (mut openrlhf_reward_clip, mut openrlhf_no_std_norm) =
            (d.openrlhf_reward_clip, d.openrlhf_no_std_norm);
        if let Some(mut o) = s.subsection("openrlhf")? {
            if let Some(range) = o.opt_float_list("reward_clip")? {
                match range[..] {
                    [lo, hi] if lo <= hi => openrlhf_reward_clip = (lo, hi),
                    _ => {
                        let v = Value::Sequence(range.iter().map(|&x| Value::from(x)).collect());
                        return Err(o.type_error("reward_clip", "[low, high] with low ≤ high", &v));
                    }
                }
            }
            openrlhf_no_std_norm = o.bool("no_std_norm", false)?;
            o.finish()?;
        }
        let mut trl_normalize_advantages = d.trl_normalize_advantages;
        if let Some(mut t) = s.subsection("trl")? {
            trl_normalize_advantages = t.bool("normalize_advantages", false)?;
            t.finish()?;
        }
        let mut nemo = d.nemo;
        if let Some(mut n) = s.subsection("nemo")? {
            nemo.use_leave_one_out_baseline = n.bool("use_leave_one_out_baseline", true)?;
            nemo.normalize_rewards = n.bool("normalize_rewards", true)?;
            n.finish()?;
        }
        Ok(Extensions {
            convention,
            whiten_advantages,
            mask_mode,
            group_size,
            openrlhf_reward_clip,
            openrlhf_no_std_norm,
            trl_normalize_advantages,
            nemo,
        })
    }

    fn section(&self, prefix: &str, value: Value) -> Result<Section<'_>> {
        match value {
            Value::Mapping(map) => Ok(Section {
                reader: self,
                prefix: prefix.to_string(),
                map,
            }),
            Value::Null => Ok(self.empty(prefix)),
            other => Err(Error::usage(format!(
                "algorithm{}: expected a section (mapping), found {}{}",
                dotted(prefix),
                describe(&other),
                self.origin_note(prefix)
            ))),
        }
    }

    fn empty(&self, prefix: &str) -> Section<'_> {
        Section {
            reader: self,
            prefix: prefix.to_string(),
            map: Mapping::new(),
        }
    }

    /// " (from --set)" or " (in FILE)", so the user knows which source to fix.
    fn origin_note(&self, path: &str) -> String {
        if self
            .from_set
            .iter()
            .any(|p| p == path || p.starts_with(&format!("{path}.")))
        {
            " (from --set)".to_string()
        } else if !self.origin.is_empty() {
            format!(" (in {})", self.origin)
        } else {
            String::new()
        }
    }
}

fn dotted(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        format!(".{prefix}")
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("`{b}`"),
        Value::Number(n) => format!("`{n}`"),
        Value::String(s) => format!("\"{s}\""),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(_) => "a tagged value".into(),
    }
}

impl Section<'_> {
    fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key)
    }

    fn type_error(&self, key: &str, want: &str, got: &Value) -> Error {
        let path = self.path(key);
        Error::usage(format!(
            "algorithm.{path}: expected {want}, found {}{}",
            describe(got),
            self.reader.origin_note(&path)
        ))
    }

    fn float(&mut self, key: &str, default: f64) -> Result<f64> {
        match self.take(key) {
            None => Ok(default),
            Some(Value::Number(n)) if n.as_f64().is_some() => Ok(n.as_f64().unwrap_or(default)),
            Some(other) => Err(self.type_error(key, "a number", &other)),
        }
    }

    fn int(&mut self, key: &str, default: i64) -> Result<i64> {
        match self.take(key) {
            None => Ok(default),
            Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64().unwrap_or(default)),
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
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.type_error(key, "a string", &other)),
        }
    }

    fn opt_string(&mut self, key: &str) -> Result<Option<String>> {
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.type_error(key, "a string or null", &other)),
        }
    }

    /// A number or string kept as written (verl's threshold specs), or null.
    fn opt_scalar(&mut self, key: &str, default: Option<Value>) -> Result<Option<Value>> {
        match self.take(key) {
            None => Ok(default),
            Some(Value::Null) => Ok(None),
            Some(v @ (Value::Number(_) | Value::String(_) | Value::Bool(_))) => Ok(Some(v)),
            Some(other) => Err(self.type_error(key, "a number, a string or null", &other)),
        }
    }

    fn opt_string_list(&mut self, key: &str) -> Result<Option<Vec<String>>> {
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Sequence(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
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
            Some(Value::Sequence(items)) => items
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

    /// A nested section; `None` when absent or null.
    fn subsection(&mut self, key: &str) -> Result<Option<Section<'_>>> {
        let path = self.path(key);
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.reader.section(&path, v).map(Some),
        }
    }

    /// Every key must have been read: an unknown key is an error naming it.
    fn finish(mut self) -> Result<()> {
        self.map.remove("_target_"); // Hydra's class marker, meaningless here
        if let Some((key, _)) = self.map.iter().next() {
            let key = match key {
                Value::String(s) => s.clone(),
                other => describe(other),
            };
            let path = self.path(&key);
            return Err(Error::usage(format!(
                "unknown key `algorithm.{path}`{}: verl 0.9.1 has no such setting",
                self.reader.origin_note(&path)
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_yaml(text: &str, sets: &[&str]) -> Result<Config> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, text).unwrap();
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        Config::load(&ConfigSources {
            file: Some(&path),
            sets: &sets,
            ..Default::default()
        })
    }

    #[test]
    fn defaults_are_verls() {
        let c = load_yaml("adv_estimator: grpo\n", &[]).unwrap();
        assert_eq!(c.algorithm.gamma, 1.0);
        assert_eq!(c.algorithm.lam, 1.0);
        assert!(c.algorithm.norm_adv_by_std_in_grpo);
        assert_eq!(c.algorithm.kl_ctrl.kl_coef, 0.001);
        assert_eq!(c.algorithm.kl_ctrl.horizon, 10000);
        assert_eq!(c.rollout_n, None);
    }

    #[test]
    fn reads_the_algorithm_section_of_a_trainer_yaml() {
        let text = "trainer:\n  foo: 1\nactor_rollout_ref:\n  rollout:\n    n: 8\nalgorithm:\n  _target_: verl.trainer.config.AlgoConfig\n  adv_estimator: grpo\n  norm_adv_by_std_in_grpo: false\n  kl_ctrl:\n    _target_: x\n    type: fixed\n    kl_coef: 0.001\n    horizon: 10000\n    target_kl: 0.1\n  rollout_correction:\n    rollout_is: null\n    rollout_is_threshold: 2.0\n    rollout_rs: null\n    rollout_rs_threshold: null\n    bypass_mode: false\n    loss_type: ppo_clip\n    rollout_is_batch_normalize: false\n";
        let c = load_yaml(text, &[]).unwrap();
        assert_eq!(c.algorithm.adv_estimator, Estimator::Grpo);
        assert!(!c.algorithm.norm_adv_by_std_in_grpo);
        assert_eq!(c.rollout_n, Some(8));
    }

    #[test]
    fn set_overrides_the_file() {
        let c = load_yaml(
            "adv_estimator: grpo\nlam: 0.9\n",
            &["algorithm.lam=0.95", "gamma=0.5"],
        )
        .unwrap();
        assert_eq!(c.algorithm.lam, 0.95);
        assert_eq!(c.algorithm.gamma, 0.5);
    }

    #[test]
    fn unknown_key_is_named() {
        let e = load_yaml("adv_estimator: grpo\nlamda: 0.9\n", &[]).unwrap_err();
        assert!(e.message().contains("`algorithm.lamda`"), "{}", e.message());
        assert_eq!(e.exit_code(), 2);
        let e = load_yaml("adv_estimator: grpo\n", &["algorithm.kl_ctrl.coef=1"]).unwrap_err();
        assert!(
            e.message()
                .contains("`algorithm.kl_ctrl.coef` (from --set)"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn wrong_type_is_named() {
        let e = load_yaml("adv_estimator: grpo\ngamma: fast\n", &[]).unwrap_err();
        assert!(
            e.message().contains("algorithm.gamma: expected a number"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn unknown_estimator_is_a_usage_error() {
        let e = load_yaml("adv_estimator: grpoo\n", &[]).unwrap_err();
        assert!(e.message().contains("grpoo"), "{}", e.message());
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn advcalc_extensions_default_to_verl() {
        let c = load_yaml("adv_estimator: grpo\n", &[]).unwrap();
        assert_eq!(c.algorithm.ext, Extensions::default());
        assert_eq!(c.algorithm.ext.convention, Convention::Verl);
    }

    #[test]
    fn advcalc_extension_keys() {
        let c = load_yaml(
            "adv_estimator: reinforce_plus_plus\nmask_mode: reset\ngroup_size: 4\nconvention: trl\nwhiten_advantages: false\nopenrlhf:\n  reward_clip: [-5, 5]\n  no_std_norm: true\ntrl:\n  normalize_advantages: true\nnemo:\n  normalize_rewards: false\n",
            &[],
        )
        .unwrap();
        let x = &c.algorithm.ext;
        assert_eq!(x.mask_mode, MaskMode::Reset);
        assert_eq!(x.group_size, Some(4));
        assert_eq!(x.convention, Convention::Trl);
        assert!(!x.whiten_advantages && x.openrlhf_no_std_norm && x.trl_normalize_advantages);
        assert_eq!(x.openrlhf_reward_clip, (-5.0, 5.0));
        assert!(!x.nemo.normalize_rewards && x.nemo.use_leave_one_out_baseline);
        // keys that do nothing here are noted
        assert!(c.notes.iter().any(|n| n.contains("whiten_advantages")));
    }

    #[test]
    fn advcalc_extension_errors() {
        let e = load_yaml("adv_estimator: grpo\n", &["mask_mode=forward"]).unwrap_err();
        assert!(
            e.message().contains("mask_mode (from --set)"),
            "{}",
            e.message()
        );
        let e = load_yaml("adv_estimator: grpo\ngroup_size: 0\n", &[]).unwrap_err();
        assert!(e.message().contains("group_size"), "{}", e.message());
        let e = load_yaml("adv_estimator: grpo\n", &["openrlhf.clip=1"]).unwrap_err();
        assert!(
            e.message().contains("`algorithm.openrlhf.clip`"),
            "{}",
            e.message()
        );
        let e = load_yaml("adv_estimator: grpo\nconvention: nemo\n", &[]).unwrap_err();
        assert!(
            e.message().contains("unknown convention `nemo`"),
            "{}",
            e.message()
        );
        let e = load_yaml("adv_estimator: maxrl\nconvention: trl\n", &[]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = load_yaml(
            "adv_estimator: openrlhf_group_norm\nuse_kl_in_reward: true\n",
            &[],
        )
        .unwrap_err();
        assert!(e.message().contains("use_kl_in_reward"), "{}", e.message());
    }

    #[test]
    fn convention_flag_overrides_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, "adv_estimator: grpo\nconvention: trl\n").unwrap();
        let c = Config::load(&ConfigSources {
            file: Some(&path),
            convention: Some("skyrl"),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.algorithm.ext.convention, Convention::Skyrl);
    }

    #[test]
    fn every_estimator_name_round_trips() {
        for e in Estimator::ALL {
            assert_eq!(Estimator::from_name(e.name()).unwrap(), e);
        }
        let e = Estimator::from_name("reinforcee").unwrap_err();
        assert!(e.message().contains("turn_gae"), "{}", e.message());
    }
}
