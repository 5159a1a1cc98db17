//! `actor_rollout_ref.actor`: the loss stage's configuration (`advcalc loss`), read as verl
//! 0.9.1's `ActorConfig` reads it (`workers/config/actor.py`; the defaults of
//! `trainer/config/_generated_ppo_trainer.yaml`), with `rollout.n`, `rollout.response_length`
//! and bypass mode's `algorithm.rollout_correction`. Keys of verl's actor section that the
//! replay does not need (`optim`, `fsdp_config`, ...) are accepted as they are; a key verl
//! does not have is refused with the nearest known one, as in `algorithm`. Settings a dump
//! cannot replay are refused (`clip_cov`'s random choice, dynamic batch sizes, shuffled
//! mini-batches) or noted (`entropy_coeff`, `ppo_epochs`).

use super::section::{Invalid, Section};
use super::value::Value;
use crate::error::Result;
use crate::loss::{AggMode, Bypass, BypassLoss, KlLoss, LossMode, LossSpec, PolicyParams};

/// The keys of verl 0.9.1's actor section that the replay reads.
const READ: [&str; 20] = [
    "ppo_mini_batch_size",
    "ppo_micro_batch_size",
    "ppo_micro_batch_size_per_gpu",
    "use_dynamic_bsz",
    "clip_ratio",
    "clip_ratio_low",
    "clip_ratio_high",
    "tau_pos",
    "tau_neg",
    "policy_loss",
    "clip_ratio_c",
    "loss_agg_mode",
    "loss_scale_factor",
    "entropy_coeff",
    "use_kl_loss",
    "kl_loss_coef",
    "kl_loss_type",
    "ppo_epochs",
    "shuffle",
    "rollout_n",
];

/// The other keys of verl 0.9.1's actor section: accepted, not read.
const OTHER: [&str; 25] = [
    "optim",
    "fsdp_config",
    "_target_",
    "strategy",
    "ppo_max_token_len_per_gpu",
    "freeze_vision_tower",
    "calculate_entropy",
    "calculate_sum_pi_squared",
    "use_prefix_grouper",
    "use_torch_compile",
    "data_loader_seed",
    "checkpoint",
    "use_fused_kernels",
    "profiler",
    "qat",
    "grad_clip",
    "ulysses_sequence_parallel_size",
    "entropy_from_logits_with_chunking",
    "entropy_from_logits_chunk_size",
    "entropy_checkpointing",
    "pad_to_length",
    "use_remove_padding",
    "megatron",
    "load_weight",
    "nccl_timeout",
];

/// Whether the replay reads `key` of the actor section (its value is resolved).
pub(crate) fn reads(key: &str) -> bool {
    READ.contains(&key)
}

/// The loss stage from the actor section `s`, `rollout.n` (`n`), `rollout.response_length`
/// and bypass mode's correction (`bypass`: the loss type and its IS/RS settings).
pub(crate) fn read(
    s: &mut Section<'_>,
    n: Option<i64>,
    response_length: Option<i64>,
    bypass: Option<Bypass>,
    notes: &mut Vec<String>,
) -> Result<LossSpec> {
    let mini = s.int("ppo_mini_batch_size", 256)?;
    if mini <= 0 {
        return Err(s.reject(Invalid::new(
            "ppo_mini_batch_size",
            "must be a positive integer",
        )));
    }
    let global_micro = s.opt_count("ppo_micro_batch_size")?;
    let micro = s
        .opt_count("ppo_micro_batch_size_per_gpu")?
        .or(global_micro);
    if s.bool("use_dynamic_bsz", false)? {
        return Err(s.reject(
            Invalid::new(
                "use_dynamic_bsz",
                "true cuts micro-batches by a token budget after verl's own reordering, which a dump does not record",
            )
            .hint("replay with --set actor_rollout_ref.actor.use_dynamic_bsz=false (the gradient does not depend on the micro-batch split, except for geo_mean, kl_cov and bypass mode)"),
        ));
    }
    let clip_ratio = s.finite("clip_ratio", 0.2)?;
    let opt_finite = |s: &mut Section<'_>, key: &str, default: f64| -> Result<f64> {
        if s.is_null(key) {
            s.float(key, 0.0).ok();
            return Ok(clip_ratio);
        }
        s.finite(key, default)
    };
    let clip_low = opt_finite(s, "clip_ratio_low", 0.2)?;
    let clip_high = opt_finite(s, "clip_ratio_high", 0.2)?;
    let tau_pos = s.finite("tau_pos", 1.0)?;
    let tau_neg = s.finite("tau_neg", 1.05)?;
    let mut p = s.subsection_or_empty("policy_loss")?;
    let mode_name = p.string("loss_mode", "vanilla")?;
    p.finite("clip_cov_ratio", 0.0002)?;
    p.finite("clip_cov_lb", 1.0)?;
    p.finite("clip_cov_ub", 5.0)?;
    let kl_cov_ratio = p.finite("kl_cov_ratio", 0.0002)?;
    let ppo_kl_coef = p.finite("ppo_kl_coef", 0.1)?;
    let dro_beta = if p.is_null("dro_beta") {
        p.float("dro_beta", 0.0).ok();
        None
    } else {
        p.opt_scalar("dro_beta", None)?.and_then(|v| v.as_f64())
    };
    // verl's apply_bypass_mode writes this subsection in the trainer; a file may carry it
    p.subsection("rollout_correction")?;
    p.finish()?;
    let clip_c = s.finite("clip_ratio_c", 3.0)?;
    let agg_name = s.string("loss_agg_mode", "token-mean")?;
    let agg = AggMode::from_name(&agg_name).ok_or_else(|| {
        s.reject(
            Invalid::new(
                "loss_agg_mode",
                format!("Invalid loss_agg_mode: {agg_name}"),
            )
            .hint(format!(
                "one of {}",
                AggMode::ALL.map(AggMode::name).join(", ")
            )),
        )
    })?;
    let loss_scale_factor = if s.is_null("loss_scale_factor") {
        s.float("loss_scale_factor", 0.0).ok();
        None
    } else {
        match s.opt_scalar("loss_scale_factor", None)? {
            None => None,
            Some(v) => match v.as_f64() {
                Some(x) if x > 0.0 && x.is_finite() => Some(x),
                _ => {
                    return Err(s.reject(Invalid::new(
                        "loss_scale_factor",
                        "must be a positive number or null",
                    )));
                }
            },
        }
    };
    let entropy_coeff = s.finite("entropy_coeff", 0.0)?;
    let use_kl_loss = s.bool("use_kl_loss", false)?;
    let kl_loss_coef = s.finite("kl_loss_coef", 0.001)?;
    let kl_type = s.string("kl_loss_type", "low_var_kl")?;
    let epochs = s.int("ppo_epochs", 1)?;
    if epochs < 1 {
        return Err(s.reject(Invalid::new("ppo_epochs", "must be at least 1")));
    }
    if s.bool("shuffle", false)? {
        return Err(s.reject(
            Invalid::new(
                "shuffle",
                "true shuffles the rows of each epoch's mini-batches at random, which a replay cannot follow",
            )
            .hint("set actor_rollout_ref.actor.shuffle=false"),
        ));
    }
    s.opt_scalar("rollout_n", None)?;
    for key in OTHER {
        s.opt_scalar(key, None).ok();
        s.subsection(key).ok();
    }
    s.finish()?;

    let kl = if use_kl_loss {
        let estimator = super::kl::estimator(&kl_type).map_err(|e| {
            s.reject(Invalid {
                key: "kl_loss_type",
                ..e
            })
        })?;
        Some(KlLoss {
            estimator,
            straight_through: kl_type.ends_with('+') && !matches!(kl_type.as_str(), "k2" | "mse"),
            coef: kl_loss_coef,
        })
    } else {
        None
    };
    let mode = match (&bypass, mode_name.as_str()) {
        (Some(b), _) => LossMode::Bypass(b.loss),
        (None, "clip_cov") => {
            return Err(p.reject(
                Invalid::new(
                    "loss_mode",
                    "clip_cov zeroes the loss of tokens verl picks at random (torch.randperm, core_algos.py:1823), so no replay can give its numbers",
                )
                .hint("replay another loss_mode (vanilla is clip_cov without the random choice)"),
            ));
        }
        (None, name) => match name {
            "vanilla" => LossMode::Vanilla,
            "dppo_tv" => LossMode::DppoTv,
            "dppo_kl" => LossMode::DppoKl,
            "gspo" => LossMode::Gspo,
            "sapo" => LossMode::Sapo,
            "gpg" => LossMode::Gpg,
            "kl_cov" => LossMode::KlCov,
            "geo_mean" => LossMode::GeoMean,
            "dro" => LossMode::Dro,
            "cispo" => LossMode::Cispo,
            "bypass_mode" => {
                return Err(p.reject(
                    Invalid::new(
                        "loss_mode",
                        "bypass_mode is set by verl itself when algorithm.rollout_correction.bypass_mode is true",
                    )
                    .hint("set algorithm.rollout_correction.bypass_mode=true instead"),
                ));
            }
            other => {
                let hint = match crate::nearest::nearest(other, LossMode::NAMES) {
                    Some(n) => format!(
                        "did you mean `{n}`? verl 0.9.1 registers {}",
                        LossMode::NAMES.join(", ")
                    ),
                    None => format!(
                        "verl 0.9.1 registers {} (and clip_cov)",
                        LossMode::NAMES.join(", ")
                    ),
                };
                return Err(p.reject(
                    Invalid::new("loss_mode", format!("Unsupported loss mode: {other}")).hint(hint),
                ));
            }
        },
    };
    if matches!(
        mode,
        LossMode::Vanilla | LossMode::Bypass(BypassLoss::PpoClip)
    ) && clip_c <= 1.0
    {
        return Err(s.reject(Invalid::new(
            "clip_ratio_c",
            format!("The lower bound of the clip_ratio_c for dual-clip PPO should be greater than 1.0, but get the value: {}.", super::value::py_float_repr(clip_c)),
        )));
    }
    let dro_beta = match (mode, dro_beta) {
        (LossMode::Dro, Some(b)) if b > 0.0 => b,
        (LossMode::Dro, _) => {
            return Err(p.reject(Invalid::new(
                "dro_beta",
                "policy_loss.dro_beta must be a positive value when using DRO",
            )));
        }
        (_, b) => b.unwrap_or(0.0),
    };
    if mode == LossMode::KlCov && kl_cov_ratio <= 0.0 {
        return Err(p.reject(Invalid::new(
            "kl_cov_ratio",
            "kl_cov_ratio should be larger than 0.",
        )));
    }
    if let Some(b) = &bypass
        && b.correction.is.as_ref().is_some_and(|i| i.batch_normalize)
    {
        return Err(crate::error::Error::usage(
            "algorithm.rollout_correction.rollout_is_batch_normalize: bypass mode normalises the IS weights per micro-batch inside the loss, which advcalc loss does not replay yet",
        )
        .with_hint("replay with --set algorithm.rollout_correction.rollout_is_batch_normalize=false"));
    }
    if entropy_coeff != 0.0 {
        notes.push(format!(
            "actor_rollout_ref.actor.entropy_coeff is {entropy_coeff}: the entropy term needs the logits, which a dump does not hold; the replayed loss and gradient weights leave it out"
        ));
    }
    if epochs > 1 {
        notes.push(format!(
            "actor_rollout_ref.actor.ppo_epochs is {epochs}: the replay is the first epoch (later epochs see log-probs a dump does not hold)"
        ));
    }
    let n = n.unwrap_or(1);
    if n <= 0 {
        return Err(crate::error::Error::usage(
            "actor_rollout_ref.rollout.n: must be a positive integer",
        ));
    }
    let response_length = response_length.unwrap_or(512);
    if response_length <= 0 {
        return Err(crate::error::Error::usage(
            "actor_rollout_ref.rollout.response_length: must be a positive integer",
        ));
    }
    Ok(LossSpec {
        mode,
        agg,
        params: PolicyParams {
            clip_low,
            clip_high,
            clip_c,
            tau_pos,
            tau_neg,
            kl_cov_ratio,
            ppo_kl_coef,
            dro_beta,
        },
        kl,
        loss_scale_factor,
        response_length: response_length as usize,
        mini_batch_rows: (mini * n) as usize,
        micro_batch_rows: micro,
        entropy_coeff,
        ppo_epochs: epochs as usize,
        bypass,
    })
}

/// The value of a key as YAML writes it back (for `to_yaml`).
pub(crate) fn to_map(spec: &LossSpec, n: Option<i64>) -> super::value::Map {
    use super::value::Map;
    let mut actor = Map::new();
    let p = &spec.params;
    let rows = spec.mini_batch_rows as i64 / n.unwrap_or(1).max(1);
    actor.insert("ppo_mini_batch_size", Value::Int(rows));
    actor.insert(
        "ppo_micro_batch_size_per_gpu",
        spec.micro_batch_rows
            .map_or(Value::Null, |m| Value::Int(m as i64)),
    );
    actor.insert("clip_ratio_low", p.clip_low.into());
    actor.insert("clip_ratio_high", p.clip_high.into());
    actor.insert("clip_ratio_c", p.clip_c.into());
    actor.insert("tau_pos", p.tau_pos.into());
    actor.insert("tau_neg", p.tau_neg.into());
    let mut policy = Map::new();
    let mode = match spec.mode {
        // verl's own config keeps the YAML loss_mode; bypass comes from algorithm
        LossMode::Bypass(_) => "vanilla",
        m => m.name(),
    };
    policy.insert("loss_mode", mode.into());
    policy.insert("kl_cov_ratio", p.kl_cov_ratio.into());
    policy.insert("ppo_kl_coef", p.ppo_kl_coef.into());
    policy.insert(
        "dro_beta",
        if spec.mode == LossMode::Dro {
            p.dro_beta.into()
        } else {
            Value::Null
        },
    );
    actor.insert("policy_loss", Value::Map(policy));
    actor.insert("loss_agg_mode", spec.agg.name().into());
    actor.insert(
        "loss_scale_factor",
        spec.loss_scale_factor.map_or(Value::Null, Value::from),
    );
    actor.insert("entropy_coeff", spec.entropy_coeff.into());
    actor.insert("use_kl_loss", spec.kl.is_some().into());
    if let Some(kl) = &spec.kl {
        actor.insert("kl_loss_coef", kl.coef.into());
        let name = kl.estimator.name();
        actor.insert(
            "kl_loss_type",
            if kl.straight_through {
                format!("{name}+").into()
            } else {
                name.into()
            },
        );
    }
    actor.insert("ppo_epochs", Value::Int(spec.ppo_epochs as i64));
    actor
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigSources};
    use crate::loss::{AggMode, LossMode};

    fn load(sets: &[&str], text: Option<&str>) -> Config {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        Config::load(&ConfigSources {
            actor: true,
            sets: &sets,
            text: text.map(|t| ("config", t)),
            ..Default::default()
        })
        .unwrap()
    }

    // verl 0.9.1's defaults: vanilla, token-mean, clip 0.2/0.2, c = 3, 256 × n = 1 rows,
    // response length 512, no KL loss
    #[test]
    fn verls_defaults() {
        let l = load(&[], None).loss.unwrap();
        assert_eq!((l.mode, l.agg), (LossMode::Vanilla, AggMode::TokenMean));
        assert_eq!(
            (l.params.clip_low, l.params.clip_high, l.params.clip_c),
            (0.2, 0.2, 3.0)
        );
        assert_eq!(
            (l.mini_batch_rows, l.micro_batch_rows, l.response_length),
            (256, None, 512)
        );
        assert!(l.kl.is_none() && l.bypass.is_none());
        // run never reads the section
        assert!(
            Config::load(&ConfigSources::default())
                .unwrap()
                .loss
                .is_none()
        );
    }

    // every setting away from its default: written by to_yaml, read back to the same spec
    #[test]
    fn the_yaml_reads_back_to_the_same_loss() {
        let c = load(
            &[
                "actor_rollout_ref.actor.policy_loss.loss_mode=gspo",
                "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm",
                "actor_rollout_ref.actor.loss_scale_factor=64",
                "actor_rollout_ref.actor.clip_ratio_low=0.1",
                "actor_rollout_ref.actor.clip_ratio_high=0.3",
                "actor_rollout_ref.actor.use_kl_loss=true",
                "actor_rollout_ref.actor.kl_loss_type=k3+",
                "actor_rollout_ref.actor.kl_loss_coef=0.05",
                "actor_rollout_ref.actor.ppo_mini_batch_size=4",
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                "actor_rollout_ref.rollout.n=8",
                "actor_rollout_ref.rollout.response_length=1024",
            ],
            None,
        );
        let l = c.loss.clone().unwrap();
        assert_eq!((l.mini_batch_rows, l.micro_batch_rows), (32, Some(2)));
        assert!(l.kl.is_some_and(|k| k.straight_through && k.coef == 0.05));
        let again = load(&[], Some(&c.to_yaml()));
        assert_eq!(again.loss, c.loss);
    }
}
