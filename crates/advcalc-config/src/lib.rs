//! The validated configuration: verl's `algorithm:` section (keys and defaults as verl 0.9.1's
//! `AlgoConfig`), read from `--config`, overridden by `--set` and then by the short flags, and
//! parsed once, here, into typed values: nothing outside this module reads YAML or interprets
//! a setting's string (the second floor of the workspace, on the maths: `docs/architecture.md`). Every error names the key and the source of its value. The result is
//! never changed afterwards; [`Config::to_yaml`] writes it back out.
//!
//! - `crate::settings::value`: the tree's values, as OmegaConf holds them (Python's types and
//!   `str()`)
//! - `yaml11.rs`: YAML text → values as `OmegaConf.load` reads it (YAML 1.1 scalars)
//! - `interpolation.rs`: OmegaConf's `${...}` interpolations and resolvers
//! - `hydra.rs`: Hydra's files and keys recognised as such (`defaults:`, `_target_`)
//! - `sources.rs`: the file, `--set` and the flags merged into one tree, with each write's origin
//! - `section.rs`: typed keys out of that tree, unknown keys refused
//! - `resolved.rs`: the resolved tree with verl's defaults and each value's origin (`advcalc config`)
//! - `kl.rs`: `use_kl_in_reward`, `kl_penalty`, `kl_ctrl`
//! - `rollout_correction.rs`: `rollout_correction` with verl's threshold parsing
//! - `extensions.rs`: advcalc's own keys (`convention`, `group_size`, ...; declared with the
//!   estimators) read, and the combinations that cannot work
//! - `key_walk.rs`: the walk over a `settings!` list's keys (`crate::settings`) over the sections
//! - `to_yaml.rs`: the resolved configuration as verl YAML

#![warn(missing_docs)]

pub mod actor;
pub mod extensions;
mod hydra;
pub mod interpolation;
mod key_walk;
pub mod kl;
pub mod resolved;
pub mod rollout_correction;
mod section;
mod sources;
pub mod to_yaml;
pub use crate::settings::value;
pub mod yaml11;

// The maths' modules under their own names (not re-exported).
use advcalc_maths::{error, estimators, loss, nearest, settings, shaping};

use crate::error::{Error, Reason, Result};
use crate::estimators::{Column, Estimator};
use crate::settings::{Invalid, Keys};
use section::Section;

pub use crate::estimators::Extensions;
pub use kl::KlInReward;
pub use resolved::Resolved;
pub use rollout_correction::RolloutCorrection;
pub use sources::{ConfigSources, InputDefaults, Origin};
pub use value::Value;

/// verl's `algorithm` section after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct AlgoConfig {
    /// `gamma`: the per-token discount of the return-based estimators (gae, reinforce, ...;
    /// verl's default 1.0). `advcalc estimators` lists the settings each estimator reads.
    pub gamma: f64,
    /// `lam`: GAE's λ (verl's default 1.0).
    pub lam: f64,
    /// `adv_estimator` (verl's default `gae`).
    pub adv_estimator: Estimator,
    /// `norm_adv_by_std_in_grpo`: divide GRPO's group-centred scores by the group's std
    /// (verl's default true).
    pub norm_adv_by_std_in_grpo: bool,
    /// `use_kl_in_reward` with its `kl_penalty` and `kl_ctrl`; `None`: no KL in the reward
    /// (verl then checks neither name, and neither does advcalc).
    pub kl_in_reward: Option<KlInReward>,
    /// `filter_groups.enable` (ignored, with a note: a dump holds the groups trained on).
    pub filter_groups_enable: bool,
    /// `rollout_correction`.
    pub rollout_correction: RolloutCorrection,
    /// `gdpo_reward_keys`: under gdpo, the reward component columns (at least one).
    pub gdpo_reward_keys: Vec<String>,
    /// `gdpo_reward_weights`: under gdpo, one weight per key (verl's default 1.0 each; extra
    /// weights dropped, as verl ignores them).
    pub gdpo_reward_weights: Vec<f64>,
    /// advcalc extensions beyond verl's AlgoConfig (`docs/conventions.md`).
    pub ext: Extensions,
}

/// Everything advcalc reads from a verl configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// verl's `algorithm:` section: everything the computation reads.
    pub algorithm: AlgoConfig,
    /// `actor_rollout_ref.rollout.n`: the configured group size, when the file gives it.
    pub rollout_n: Option<i64>,
    /// Notes for stderr: settings verl itself ignores or that do not apply offline.
    pub notes: Vec<String>,
    /// The estimator was named (`-e`, the config file or `--set`), not verl's default.
    pub estimator_configured: bool,
    /// `advcalc loss`'s stage (`ConfigSources::actor`): `actor_rollout_ref.actor` with
    /// `rollout.n`, `rollout.response_length` and bypass mode's correction; `None` for the
    /// other commands, which never read the actor section.
    pub loss: Option<crate::loss::LossSpec>,
    /// A source wrote the actor section (the file has `actor_rollout_ref.actor`, or `--set`
    /// sets one of its keys): the loss configuration is the run's, not verl's defaults.
    pub actor_given: bool,
}

impl Config {
    /// Merge the sources (file, then `--set`, then the flags) and validate the result; errors
    /// are usage errors naming the key and where its value came from.
    ///
    /// ```
    /// use advcalc_config::{Config, ConfigSources};
    ///
    /// let sets = ["algorithm.lam=0.95".to_string()];
    /// let config = Config::load(&ConfigSources {
    ///     estimator: Some("grpo"),
    ///     sets: &sets,
    ///     ..Default::default()
    /// })?;
    /// let algo = &config.algorithm;
    /// assert_eq!(algo.adv_estimator.name(), "grpo");
    /// assert_eq!((algo.gamma, algo.lam), (1.0, 0.95)); // verl's default γ, λ from --set
    /// assert!(algo.norm_adv_by_std_in_grpo);
    /// assert!(algo.kl_in_reward.is_none());
    /// assert!(config.estimator_configured);
    ///
    /// // a key verl does not know is refused, naming its source
    /// let sets = ["algorithm.lamda=0.95".to_string()];
    /// let e = Config::load(&ConfigSources { sets: &sets, ..Default::default() }).unwrap_err();
    /// assert_eq!(e.kind(), advcalc_maths::ErrorKind::Usage);
    /// assert!(e.message().contains("--set"), "{e}");
    /// # Ok::<(), advcalc_maths::Error>(())
    /// ```
    pub fn load(sources: &ConfigSources<'_>) -> Result<Self> {
        Self::from_merged(&mut sources::merge(sources)?)
    }

    /// Validate merged sources (`resolved.rs` keeps the tree as well).
    fn from_merged(merged: &mut sources::Merged) -> Result<Self> {
        let estimator_configured = merged.origins.written("adv_estimator");
        let mut notes = merged.notes.clone();
        let mut s = Section::root(&merged.origins, merged.algorithm.clone())?;
        let algorithm = read_algorithm(&mut s, &mut notes, merged.actor.is_some());
        let algorithm = match (merged.deferred.take(), algorithm) {
            // an unknown key first (the same order as for a bad value), else the key that did
            // not resolve, which was left out of the section
            (Some(_), Err(e)) if e.reason() == Reason::UnknownKey => return Err(e),
            (Some(deferred), _) => return Err(deferred),
            (None, result) => result?,
        };
        let loss = match merged.actor.take() {
            None => None,
            Some(section) => {
                let bypass = match &algorithm.rollout_correction {
                    RolloutCorrection::Bypass { loss_type, in_loss } => Some(crate::loss::Bypass {
                        loss: match loss_type.as_str() {
                            "ppo_clip" => crate::loss::BypassLoss::PpoClip,
                            "reinforce" => crate::loss::BypassLoss::Reinforce,
                            other => {
                                return Err(Error::usage(format!(
                                    "algorithm.rollout_correction.loss_type{}: Invalid loss_type: {other}",
                                    merged.origins.note("rollout_correction.loss_type")
                                ))
                                .with_hint("bypass mode's loss is ppo_clip or reinforce"));
                            }
                        },
                        correction: in_loss.clone().unwrap_or_default(),
                    }),
                    _ => None,
                };
                let mut a =
                    Section::named("actor_rollout_ref.actor", &merged.actor_origins, section)?;
                Some(actor::read(
                    &mut a,
                    merged.rollout_n,
                    merged.response_length,
                    bypass,
                    &mut notes,
                )?)
            }
        };
        Ok(Config {
            algorithm,
            rollout_n: merged.rollout_n,
            notes,
            estimator_configured,
            loss,
            actor_given: merged.actor_origins.any(),
        })
    }

    /// The full resolved configuration as a verl trainer YAML (`algorithm:` with every key
    /// advcalc reads, defaults included, and `actor_rollout_ref.rollout.n` when known), from
    /// which `Config::load` gives this configuration again. Deterministic: provenance for
    /// output files.
    ///
    /// ```
    /// use std::io::Write;
    /// use advcalc_config::{Config, ConfigSources};
    ///
    /// let sets = ["algorithm.gamma=0.99".to_string()];
    /// let config = Config::load(&ConfigSources {
    ///     estimator: Some("rloo"),
    ///     sets: &sets,
    ///     ..Default::default()
    /// })?;
    /// let yaml = config.to_yaml();
    /// assert!(yaml.contains("\n  adv_estimator: rloo\n"), "{yaml}");
    ///
    /// // the YAML loads back to the same configuration
    /// let mut file = tempfile::NamedTempFile::new().unwrap();
    /// file.write_all(yaml.as_bytes()).unwrap();
    /// let again = Config::load(&ConfigSources { file: Some(file.path()), ..Default::default() })?;
    /// assert_eq!(again.algorithm, config.algorithm);
    /// # Ok::<(), advcalc_maths::Error>(())
    /// ```
    pub fn to_yaml(&self) -> String {
        to_yaml::to_yaml(self)
    }
}

/// Read and check the whole algorithm section.
fn read_algorithm(s: &mut Section<'_>, notes: &mut Vec<String>, loss: bool) -> Result<AlgoConfig> {
    let estimator_name = s.string("adv_estimator", "gae")?;
    let adv_estimator = Estimator::from_name(&estimator_name).map_err(|e| {
        let error = Error::usage(format!("{}{}", e.message(), s.note("adv_estimator")));
        match e.hint() {
            Some(hint) => error.with_hint(hint),
            None => error,
        }
    })?;
    let gamma = s.finite("gamma", 1.0)?;
    let lam = s.finite("lam", 1.0)?;
    let norm_adv_by_std_in_grpo = s.bool("norm_adv_by_std_in_grpo", true)?;
    let use_kl_in_reward = s.bool("use_kl_in_reward", false)?;
    // The sections' own errors wait until the unknown keys of this one are reported.
    let kl_in_reward = kl::read(s, use_kl_in_reward);
    let use_pf_ppo = s.bool("use_pf_ppo", false)?;
    if let Some(mut p) = s.subsection("pf_ppo")? {
        p.string("reweight_method", "pow")?;
        p.float("weight_pow", 2.0)?;
        p.finish()?;
    }
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
    let rollout_correction = rollout_correction::read(s, loss);
    let gdpo_reward_keys = s.opt_string_list("gdpo_reward_keys")?;
    let gdpo_reward_weights = s.opt_float_list("gdpo_reward_weights")?;
    let ext = extensions::read(s);
    s.finish()?;
    let (kl_in_reward, rollout_correction, ext) = (kl_in_reward?, rollout_correction?, ext?);

    // Settings that cannot be reproduced from a dump are refused rather than ignored.
    if use_pf_ppo {
        return Err(s.reject(
            Invalid::new(
                "use_pf_ppo",
                "verl resamples rows at random when it is true, which cannot be reproduced from a dump",
            )
            .hint("set algorithm.use_pf_ppo=false"),
        ));
    }
    let (gdpo_reward_keys, gdpo_reward_weights) =
        gdpo_rewards(s, adv_estimator, gdpo_reward_keys, gdpo_reward_weights)?;
    let verl = extensions::VerlKeys {
        gamma,
        lam,
        norm_adv_by_std_in_grpo,
        use_kl_in_reward,
    };
    extensions::check(s, adv_estimator, &ext, &verl, notes)?;
    if filter_groups_enable {
        notes.push(
            "algorithm.filter_groups.enable is ignored: DAPO filtering chooses which groups are generated, and a dump holds the groups that were trained on".into(),
        );
    }
    extensions::ignored_notes(adv_estimator, &verl, notes);
    Ok(AlgoConfig {
        gamma,
        lam,
        adv_estimator,
        norm_adv_by_std_in_grpo,
        kl_in_reward,
        filter_groups_enable,
        rollout_correction,
        gdpo_reward_keys,
        gdpo_reward_weights,
        ext,
    })
}

/// gdpo's reward components: at least one key, a weight for each (verl's default 1.0).
/// Other estimators keep the keys as written, unused.
fn gdpo_rewards(
    s: &Section<'_>,
    estimator: Estimator,
    keys: Option<Vec<String>>,
    weights: Option<Vec<f64>>,
) -> Result<(Vec<String>, Vec<f64>)> {
    let keys = keys.unwrap_or_default();
    // only an estimator that reads the reward components (gdpo) needs them
    if !estimator.info().reads(Column::RewardComponents) {
        return Ok((keys, weights.unwrap_or_default()));
    }
    if keys.is_empty() {
        let key = if s.note("gdpo_reward_keys").is_empty() {
            "adv_estimator"
        } else {
            "gdpo_reward_keys"
        };
        return Err(Error::usage(format!(
            "GDPO requires 'algorithm.gdpo_reward_keys' listing the individual reward component keys{}",
            s.note(key)
        ))
        .with_hint(
            "list the input's scalar reward columns, e.g. --set algorithm.gdpo_reward_keys=[format_reward,accuracy_reward]",
        ));
    }
    let weights = match weights {
        Some(w) if w.len() < keys.len() => {
            return Err(s.reject(Invalid::new(
                "gdpo_reward_weights",
                format!(
                    "{} entries for {} gdpo_reward_keys (verl fails with IndexError)",
                    w.len(),
                    keys.len()
                ),
            )));
        }
        Some(w) => w[..keys.len()].to_vec(),
        None => vec![1.0; keys.len()],
    };
    Ok((keys, weights))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::conventions::Convention;
    use crate::estimators::reinforce_plus_plus::MaskMode;
    use crate::shaping::correction::IsLevel;
    use crate::shaping::kl::{KlController, KlEstimator};

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
        assert_eq!(c.algorithm.kl_in_reward, None);
        assert_eq!(c.algorithm.rollout_correction, RolloutCorrection::default());
        assert_eq!(c.rollout_n, None);
        let c = load_yaml("use_kl_in_reward: true\n", &[]).unwrap();
        let kl = c.algorithm.kl_in_reward.unwrap();
        assert_eq!(kl.estimator, KlEstimator::K1);
        assert_eq!(kl.controller, KlController::Fixed { value: 0.001 });
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
            e.message()
                .contains("algorithm.gamma: expected a finite number"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn non_finite_numbers_are_refused() {
        for (yaml, sets, want) in [
            (
                "adv_estimator: gae\nlam: .inf\n",
                &[][..],
                "algorithm.lam: expected a finite number, found `inf`",
            ),
            (
                "adv_estimator: gae\n",
                &["algorithm.gamma=.nan"][..],
                "algorithm.gamma",
            ),
            // a TRL reward weight of NaN would zero every advantage of the dump
            (
                "adv_estimator: grpo\ntrl:\n  reward_weights: [1, .nan]\n",
                &[][..],
                "expected a list of finite numbers, found `nan` (item 1, counted from 0)",
            ),
            (
                "adv_estimator: grpo\n",
                &["algorithm.trl.reward_weights=[.inf,1]"][..],
                "algorithm.trl.reward_weights (from --set): expected a list of finite numbers, found `inf` (item 0",
            ),
        ] {
            let e = load_yaml(yaml, sets).unwrap_err();
            assert!(e.message().contains(want), "{}", e.message());
            assert_eq!(e.exit_code(), 2);
        }
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
        assert!(!x.nemo_normalize_rewards && x.nemo_use_leave_one_out_baseline);
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
        assert_eq!(e.hint(), Some("did you mean `reinforce`?"));
        // the flag's note is added, the hint kept
        let e = load_yaml("adv_estimator: gpro\n", &[]).unwrap_err();
        assert_eq!(e.hint(), Some("did you mean `grpo`?"));
        let e = load_yaml("adv_estimator: grpo,rloo\n", &[]).unwrap_err();
        assert!(
            e.hint()
                .unwrap()
                .contains("`advcalc compare -e grpo,rloo IN`"),
            "{e:?}"
        );
    }

    /// The error of loading `yaml` with `sets`: its message must hold every needle.
    fn fails(yaml: &str, sets: &[&str], needles: &[&str]) -> Error {
        let e = load_yaml(yaml, sets).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{}", e.message());
        for n in needles {
            assert!(e.message().contains(n), "`{n}` not in: {}", e.message());
        }
        e
    }

    #[test]
    fn kl_is_typed_once_and_checked_only_when_used() {
        let c = load_yaml(
            "use_kl_in_reward: true\nkl_penalty: k3+\nkl_ctrl:\n  type: adaptive\n  kl_coef: 0.2\n  target_kl: 0.05\n  horizon: 100\n",
            &[],
        )
        .unwrap();
        let kl = c.algorithm.kl_in_reward.unwrap();
        assert_eq!(kl.estimator, KlEstimator::K3);
        assert_eq!(
            kl.controller,
            KlController::Adaptive {
                value: 0.2,
                target: 0.05,
                horizon: 100.0
            }
        );
        // verl checks neither name without KL in the reward; their types still are
        let c = load_yaml(
            "kl_penalty: full\nkl_ctrl:\n  type: pid\n  horizon: 0\n",
            &[],
        )
        .unwrap();
        assert_eq!(c.algorithm.kl_in_reward, None);
        fails(
            "kl_penalty: 3\n",
            &[],
            &["algorithm.kl_penalty: expected a string"],
        );
    }

    #[test]
    fn kl_errors_name_their_source() {
        let on = "use_kl_in_reward: true\n";
        let e = fails(
            &format!("{on}kl_penalty: full\n"),
            &[],
            &["algorithm.kl_penalty (in ", "c.yaml)", "`full`", "logits"],
        );
        assert!(e.hint().is_some());
        let e = fails(
            on,
            &["kl_penalty=k4"],
            &["algorithm.kl_penalty (from --set): unknown estimator `k4`"],
        );
        assert!(e.hint().unwrap().contains("low_var_kl"), "{:?}", e.hint());
        assert!(!e.message().contains("low_var_kl"), "{}", e.message());
        fails(
            &format!("{on}kl_ctrl:\n  type: pid\n"),
            &[],
            &["algorithm.kl_ctrl.type (in ", "unknown controller `pid`"],
        );
        fails(
            &format!("{on}kl_ctrl:\n  horizon: 0\n"),
            &["kl_ctrl.type=adaptive"],
            &["algorithm.kl_ctrl.horizon (in ", "must be larger than 0"],
        );
        fails(
            "kl_ctrl:\n  type: adaptive\n",
            &["use_kl_in_reward=true", "kl_ctrl.horizon=-1"],
            &["algorithm.kl_ctrl.horizon (from --set)"],
        );
    }

    #[test]
    fn rollout_correction_is_typed_once() {
        let c = load_yaml(
            "rollout_correction:\n  rollout_is: sequence\n  rollout_is_threshold: \"0.5_3\"\n  rollout_is_batch_normalize: true\n  rollout_rs: token_k1,seq_max_k2\n  rollout_rs_threshold: 2,0.1\n",
            &[],
        )
        .unwrap();
        let RolloutCorrection::Decoupled(corr) = &c.algorithm.rollout_correction else {
            panic!("{:?}", c.algorithm.rollout_correction)
        };
        let is = corr.is.as_ref().unwrap();
        assert_eq!(
            (is.level, is.upper, is.lower),
            (IsLevel::Sequence, 3.0, Some(0.5))
        );
        assert!(is.batch_normalize);
        assert_eq!(corr.rs.len(), 2);
        assert_eq!(corr.rs[1].upper, 0.1);
        let c = load_yaml("rollout_correction: null\n", &[]).unwrap();
        assert_eq!(c.algorithm.rollout_correction, RolloutCorrection::Off);
        // bypass mode leaves the thresholds to the loss: verl does not parse them here
        let c = load_yaml(
            "rollout_correction:\n  bypass_mode: true\n  rollout_is: token\n  rollout_is_threshold: -1\n",
            &[],
        )
        .unwrap();
        assert!(c.algorithm.rollout_correction.bypass());
    }

    #[test]
    fn rollout_correction_errors_name_their_source() {
        fails(
            "rollout_correction:\n  rollout_is: token\n  rollout_is_threshold: \"2_1\"\n",
            &[],
            &[
                "algorithm.rollout_correction.rollout_is_threshold (in ",
                "lower bound must be <= upper bound",
            ],
        );
        fails(
            "adv_estimator: grpo\n",
            &[
                "rollout_correction.rollout_is=token",
                "rollout_correction.rollout_is_threshold=-1",
            ],
            &[
                "rollout_is_threshold (from --set)",
                "upper bound must be positive, got -1",
            ],
        );
        fails(
            "adv_estimator: grpo\n",
            &["rollout_correction={rollout_rs: token_k2, rollout_rs_threshold: 0.1_0.2}"],
            &["rollout_rs_threshold (from --set)", "without '_'"],
        );
        fails(
            "rollout_correction:\n  rollout_rs: token_k1\n",
            &[],
            &[
                "algorithm.rollout_correction.rollout_rs (in ",
                "rollout_rs_threshold must be explicitly provided",
            ],
        );
        fails(
            "rollout_correction:\n  rollout_rs: token_k9\n  rollout_rs_threshold: 2\n",
            &[],
            &["rollout_rs (in ", "Invalid rollout_rs option: token_k9"],
        );
        fails(
            "rollout_correction:\n  rollout_is: tokens\n",
            &[],
            &["rollout_is (in ", "Invalid rollout_is: tokens"],
        );
        // an unknown key comes first
        fails(
            "rollout_correction:\n  rollout_rs: token_k1\n  rollout_rs_treshold: 2\n",
            &[],
            &["unknown key `algorithm.rollout_correction.rollout_rs_treshold`"],
        );
    }

    #[test]
    fn flags_are_named_as_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, "adv_estimator: grpo\n").unwrap();
        let load = |estimator, convention| {
            Config::load(&ConfigSources {
                file: Some(&path),
                estimator,
                convention,
                ..Default::default()
            })
        };
        let e = load(Some("ppo"), None).unwrap_err();
        assert!(
            e.message().contains("unknown estimator `ppo`"),
            "{}",
            e.message()
        );
        assert!(e.message().ends_with("(from -e)"), "{}", e.message());
        let e = load(None, Some("nemo")).unwrap_err();
        assert!(
            e.message()
                .contains("algorithm.convention (from --convention): unknown convention `nemo`"),
            "{}",
            e.message()
        );
        assert!(e.hint().unwrap().contains("nemo-rl"));
        let e = load(Some("maxrl"), Some("trl")).unwrap_err();
        assert!(
            e.message().ends_with("(from --convention)"),
            "{}",
            e.message()
        );
        let e = load(Some("gdpo"), None).unwrap_err();
        assert!(e.message().contains("gdpo_reward_keys"), "{}", e.message());
        assert!(e.message().ends_with("(from -e)"), "{}", e.message());
        assert!(e.hint().unwrap().contains("--set"));
    }

    #[test]
    fn other_cross_key_errors_name_their_source() {
        fails(
            "adv_estimator: gdpo\ngdpo_reward_keys: [a, b]\ngdpo_reward_weights: [1]\n",
            &[],
            &["algorithm.gdpo_reward_weights (in ", "1 entries for 2"],
        );
        let e = fails(
            "adv_estimator: openrlhf_group_norm\n",
            &["use_kl_in_reward=true"],
            &[
                "algorithm.use_kl_in_reward (from --set)",
                "openrlhf_group_norm",
            ],
        );
        assert!(e.hint().unwrap().contains("use_kl_in_reward=false"));
        assert!(!e.message().contains("turn it off"));
        fails("use_pf_ppo: true\n", &[], &["algorithm.use_pf_ppo (in "]);
        let e = fails(
            "adv_estimator: grpo\nlamda: 0.9\n",
            &[],
            &["`algorithm.lamda` (in "],
        );
        assert_eq!(e.hint(), Some("did you mean `algorithm.lam`?"));
        let e = fails(
            "adv_estimator: grpo\n",
            &["gamma"],
            &["--set gamma: expected KEY=VALUE"],
        );
        assert!(e.hint().unwrap().contains("algorithm.lam=0.95"));
    }

    #[test]
    fn gdpo_weights_are_resolved() {
        let c = load_yaml("adv_estimator: gdpo\ngdpo_reward_keys: [a, b]\n", &[]).unwrap();
        assert_eq!(c.algorithm.gdpo_reward_weights, vec![1.0, 1.0]);
        let c = load_yaml(
            "adv_estimator: gdpo\ngdpo_reward_keys: [a]\ngdpo_reward_weights: [0.5, 2]\n",
            &[],
        )
        .unwrap();
        assert_eq!(c.algorithm.gdpo_reward_weights, vec![0.5]);
    }

    /// load → to_yaml → load gives the same configuration, and the same text again.
    fn round_trip(c: &Config) {
        let yaml = c.to_yaml();
        let again = load_yaml(&yaml, &[]).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        assert_eq!(&again, c, "{yaml}");
        assert_eq!(again.to_yaml(), yaml);
    }

    #[test]
    fn to_yaml_round_trips() {
        round_trip(&Config::load(&ConfigSources::default()).unwrap());
        round_trip(&load_yaml("adv_estimator: grpo\n", &[]).unwrap());
        round_trip(
            &load_yaml(
                "actor_rollout_ref:\n  rollout:\n    n: 8\nalgorithm:\n  adv_estimator: gae\n  gamma: 0.99\n  lam: 0.95\n  use_kl_in_reward: true\n  kl_penalty: low_var_kl\n  kl_ctrl:\n    type: adaptive\n    kl_coef: 0.002\n    target_kl: 0.01\n    horizon: 500\n  filter_groups:\n    enable: true\n  rollout_correction:\n    rollout_is: token\n    rollout_is_threshold: 0.5_2.5\n    rollout_is_batch_normalize: true\n    rollout_rs: token_k1, seq_mean_k3,seq_max_k2\n    rollout_rs_threshold: 1.5,0.01,0.3\n  whiten_advantages: false\n",
                &[],
            )
            .unwrap(),
        );
        round_trip(
            &load_yaml(
                "adv_estimator: rloo\nconvention: trl\ntrl:\n  normalize_advantages: true\ngroup_size: 4\nuse_kl_in_reward: true\nkl_penalty: mse\nkl_ctrl:\n  kl_coef: 0.1\nrollout_correction:\n  rollout_rs: seq_sum_k1\n  rollout_rs_threshold: 3\n",
                &["actor_rollout_ref.rollout.n=4", "nemo.normalize_rewards=false"],
            )
            .unwrap(),
        );
        round_trip(
            &load_yaml(
                "adv_estimator: gdpo\ngdpo_reward_keys: [format_reward, accuracy_reward]\ngdpo_reward_weights: [0.3, 1.0, 9]\nnorm_adv_by_std_in_grpo: false\nrollout_correction: null\n",
                &[],
            )
            .unwrap(),
        );
        round_trip(
            &load_yaml(
                "adv_estimator: openrlhf_group_norm\ngamma: 0.9\nmask_mode: reset\nopenrlhf:\n  reward_clip: [-1, 2.5]\n  no_std_norm: true\nrollout_correction:\n  bypass_mode: true\n  loss_type: reinforce\n",
                &[],
            )
            .unwrap(),
        );
        round_trip(
            &load_yaml(
                "adv_estimator: grpo\nconvention: nemo-rl\nrollout_correction:\n  rollout_is: sequence\n  rollout_is_threshold: 1.0e-3\n",
                &[],
            )
            .unwrap(),
        );
    }

    #[test]
    fn to_yaml_is_verls_layout() {
        let c = load_yaml(
            "actor_rollout_ref:\n  rollout:\n    n: 8\nalgorithm:\n  adv_estimator: grpo\n",
            &[],
        )
        .unwrap();
        let yaml = c.to_yaml();
        let doc = yaml11::parse(&yaml).unwrap();
        let at = |path: &[&str]| doc.at(path).cloned().unwrap();
        assert_eq!(at(&["algorithm", "adv_estimator"]), Value::from("grpo"));
        assert_eq!(at(&["algorithm", "kl_ctrl", "horizon"]), Value::Int(10000));
        assert_eq!(
            at(&["algorithm", "rollout_correction", "rollout_is_threshold"]),
            Value::Float(2.0)
        );
        assert_eq!(
            at(&["algorithm", "rollout_correction", "loss_type"]),
            Value::from("ppo_clip")
        );
        assert_eq!(at(&["algorithm", "convention"]), Value::from("verl"));
        assert_eq!(at(&["actor_rollout_ref", "rollout", "n"]), Value::Int(8));
        assert_eq!(yaml, c.clone().to_yaml());
        // without a named estimator the key is left out, so the text still means "not named"
        let d = Config::load(&ConfigSources::default()).unwrap();
        assert!(!d.to_yaml().contains("adv_estimator:"), "{}", d.to_yaml());
    }

    /// The three failures of issue 18, as a new user met them.
    #[test]
    fn verl_configs_as_omegaconf_reads_them() {
        // an interpolation (resolved after the overrides, as OmegaConf resolves lazily)
        let c = load_yaml("algorithm:\n  gamma: ${algorithm.lam}\n  lam: 0.95\n", &[]).unwrap();
        assert_eq!((c.algorithm.gamma, c.algorithm.lam), (0.95, 0.95));
        let c = load_yaml("algorithm:\n  gamma: ${.lam}\n", &["lam=0.5"]).unwrap();
        assert_eq!(c.algorithm.gamma, 0.5);
        // YAML 1.1 booleans and numbers
        let c = load_yaml(
            "use_kl_in_reward: yes\nnorm_adv_by_std_in_grpo: off\nkl_ctrl:\n  kl_coef: 1e-3\n  horizon: 10_000\n",
            &[],
        )
        .unwrap();
        let kl = c.algorithm.kl_in_reward.unwrap();
        assert_eq!(kl.controller, KlController::Fixed { value: 0.001 });
        assert!(!c.algorithm.norm_adv_by_std_in_grpo);
        // a plain 0.5_3 is the float 0.53 to PyYAML, so to verl
        let c = load_yaml(
            "rollout_correction:\n  rollout_is: token\n  rollout_is_threshold: 0.5_3\n",
            &[],
        )
        .unwrap();
        let RolloutCorrection::Decoupled(corr) = &c.algorithm.rollout_correction else {
            panic!()
        };
        assert_eq!(
            corr.is.as_ref().map(|i| (i.upper, i.lower)),
            Some((0.53, None))
        );
        // a Hydra composition is named as such, with the file to pass
        let e = fails(
            "defaults:\n  - ppo_trainer\n  - override model_engine: megatron\n  - _self_\n",
            &[],
            &["Hydra composition", "ppo_trainer"],
        );
        assert!(e.hint().unwrap().contains(".hydra/config.yaml"));
        // Hydra's keys are not settings
        load_yaml(
            "algorithm:\n  _target_: x\n  _recursive_: false\n  kl_ctrl:\n    _target_: y\n",
            &[],
        )
        .unwrap();
        // errors name the key, the file and the chain
        fails(
            "algorithm:\n  gamma: ${algorithm.lam}\n  lam: ${.gamma}\n",
            &[],
            &["algorithm.gamma (in ", "recursive interpolation"],
        );
        fails(
            "gamma: ${oc.create:1}\n",
            &[],
            &["unsupported interpolation resolver `oc.create`"],
        );
        // an unknown key is still reported before a key that does not resolve
        fails(
            "gamma: ${nope}\nlamda: 1\n",
            &[],
            &["unknown key `algorithm.lamda`"],
        );
    }

    #[test]
    fn an_interpolation_error_has_the_hint_of_its_failure() {
        let hint = |text: &str| load_yaml(text, &[]).unwrap_err().hint().map(str::to_string);
        let hydra = "the file has a Hydra defaults list, whose files advcalc does not compose: pass the composed config (the run's .hydra/config.yaml)";
        let variable = "set the variable, or give a default: ${oc.env:NAME,default}";
        let resolver = "replace the interpolation with its value, or override the key with --set";
        let unset = "${oc.env:ADVCALC_TEST_SURELY_UNSET_VARIABLE}";
        let defaults = "defaults:\n  - _self_\nalgorithm:\n  gamma: ";
        assert_eq!(hint("gamma: ${nope}\n"), None);
        assert_eq!(
            hint(&format!("gamma: {unset}\n")).as_deref(),
            Some(variable)
        );
        assert_eq!(hint("gamma: ${oc.create:1}\n").as_deref(), Some(resolver));
        assert_eq!(hint("gamma: ${lam}\nlam: ${gamma}\n"), None);
        // with a Hydra defaults list, a key or a variable not found may be in its files
        assert_eq!(
            hint(&format!("{defaults}${{nope}}\n")).as_deref(),
            Some(hydra)
        );
        assert_eq!(
            hint(&format!("{defaults}{unset}\n")).as_deref(),
            Some(hydra)
        );
        assert_eq!(
            hint(&format!("{defaults}${{oc.create:1}}\n")).as_deref(),
            Some(resolver)
        );
    }

    #[test]
    fn an_unknown_key_is_reported_before_a_bad_value() {
        fails(
            "use_kl_in_reward: true\nkl_penalty: k4\nrollout_correction:\n  rollout_is: tokens\nlamda: 1\n",
            &[],
            &["unknown key `algorithm.lamda`"],
        );
    }
}
