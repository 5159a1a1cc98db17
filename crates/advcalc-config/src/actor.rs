//! `actor_rollout_ref.actor`: the loss stage's configuration (`advcalc loss`), read as verl
//! 0.9.1's `ActorConfig` reads it (`workers/config/actor.py`; the defaults of
//! `trainer/config/_generated_ppo_trainer.yaml`), with `rollout.n`, `rollout.response_length`
//! and bypass mode's `algorithm.rollout_correction`. Keys of verl's actor section that the
//! replay does not need (`optim`, `fsdp_config`, ...) are accepted as they are; a key verl
//! does not have is refused with the nearest known one, as in `algorithm`. Settings a dump
//! cannot replay are refused (`clip_cov`'s random choice, dynamic batch sizes, shuffled
//! mini-batches) or noted (`entropy_coeff`, `ppo_epochs`).

use super::section::Section;
use super::value::Value;
use crate::error::Result;
use crate::loss::{AggMode, Bypass, KlLoss, LossMode, LossSpec, PolicyParams};
use crate::settings::{Invalid, Keys};

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
pub fn reads(key: &str) -> bool {
    READ.contains(&key)
}

/// The largest coefficient accepted where verl multiplies it into float32 tensors
/// (`kl_loss_coef`, `policy_loss.ppo_kl_coef`, `policy_loss.dro_beta`): far below float32's
/// largest value (3.4e38), so that the coefficient times a log-ratio stays finite; a larger
/// one is infinite in float32 and turns the masked tokens' 0 into NaN.
const COEF_MAX: f64 = 1e30;

/// 2^63 − 1 as a float (2^63 exactly): the bound of verl's integer-typed sizes.
const I64_MAX_F64: f64 = i64::MAX as f64;

/// sapo's `tau_pos`/`tau_neg` range: verl computes the gate σ(τ·(r − 1))·4/τ in float32, where
/// a τ below the range makes 4/τ infinite and one above it is infinite itself (τ·0 = NaN).
const TAU_RANGE: (f64, f64) = (1e-30, 1e30);

/// A value as the messages show it: Python's repr of the float (`-1.5`, `1e-320`).
fn shown(x: f64) -> String {
    format!("`{}`", super::value::py_float_repr(x))
}

/// `KEY: must be RANGE, got VALUE` (`why`: what the range follows from).
fn out_of_range(key: &'static str, range: &str, got: &str, why: &str) -> Invalid {
    Invalid::new(key, format!("must be {range}, got {got} ({why})"))
}

/// The loss stage from the actor section `s`, `rollout.n` (`n`), `rollout.response_length`
/// and bypass mode's correction (`bypass`: the loss type and its IS/RS settings).
///
/// Every number is checked here against the range in which verl's numbers mean something
/// and advcalc's stay finite (`docs/errors.md`, "Configuration"): the clip ranges, the
/// mini- and micro-batch sizes (with checked products and verl's divisibility asserts),
/// sapo's τ, the coefficients, `kl_cov_ratio` and `loss_scale_factor`, each only for the
/// loss modes that read it, as verl reads it.
pub fn read(
    s: &mut Section<'_>,
    n: Option<i64>,
    response_length: Option<i64>,
    bypass: Option<Bypass>,
    notes: &mut Vec<String>,
) -> Result<LossSpec> {
    let mini = s.int("ppo_mini_batch_size", 256)?;
    if mini <= 0 {
        return Err(s.reject(
            Invalid::new(
                "ppo_mini_batch_size",
                format!("must be a positive integer (prompts per mini-batch), got `{mini}`"),
            )
            .hint("verl's default is 256"),
        ));
    }
    let global_micro = s.opt_count("ppo_micro_batch_size")?;
    let per_gpu_micro = s.opt_count("ppo_micro_batch_size_per_gpu")?;
    if s.bool("use_dynamic_bsz", false)? {
        return Err(s.reject(
            Invalid::new(
                "use_dynamic_bsz",
                "true cuts micro-batches by a token budget after verl's own reordering, which a dump does not record",
            )
            .hint("replay with --set actor_rollout_ref.actor.use_dynamic_bsz=false (the gradient does not depend on the micro-batch split, except for geo_mean, kl_cov and bypass mode)"),
        ));
    }
    if global_micro.is_some() && per_gpu_micro.is_some() {
        // verl's ActorConfig.__post_init__ (workers/config/actor.py:204-209)
        return Err(s.reject(
            Invalid::new(
                "ppo_micro_batch_size",
                "[actor] You have set both 'actor.ppo_micro_batch_size' AND 'actor.ppo_micro_batch_size_per_gpu'. Please remove 'actor.ppo_micro_batch_size' because only '*_ppo_micro_batch_size_per_gpu' is supported (the former is deprecated).",
            )
            .hint("set only actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
        ));
    }
    let micro = per_gpu_micro.or(global_micro);
    let micro_batch_legacy = per_gpu_micro.is_none() && global_micro.is_some();
    let clip_ratio = s.finite("clip_ratio", 0.2)?;
    // null falls back to clip_ratio (core_algos.py:1321-1322): the key whose value is used
    let opt_finite =
        |s: &mut Section<'_>, key: &'static str, default: f64| -> Result<(f64, &'static str)> {
            if s.is_null(key) {
                s.float(key, 0.0).ok();
                return Ok((clip_ratio, "clip_ratio"));
            }
            Ok((s.finite(key, default)?, key))
        };
    let (clip_low, clip_low_key) = opt_finite(s, "clip_ratio_low", 0.2)?;
    let (clip_high, clip_high_key) = opt_finite(s, "clip_ratio_high", 0.2)?;
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
            // verl types it Optional[int] (workers/config/actor.py:168): a number of tokens
            // standing in for the padded width. From 1 up, the weight 1/(G·H) is at most 1/G
            // (token-sum's scale); towards 0 it overflows float32 (1e-320: inf, then NaN);
            // with G and H below 2^63 it stays a normal float32.
            Some(v) => match v.as_f64() {
                Some(x) if (1.0..=I64_MAX_F64).contains(&x) => Some(x),
                got => {
                    let got = got.map_or_else(|| super::section::describe(&v), shown);
                    return Err(s.reject(
                        out_of_range(
                            "loss_scale_factor",
                            "null or a number from 1 to 9223372036854775807 (2^63 − 1)",
                            &got,
                            "the token count seq-mean-token-sum-norm divides by; verl types it as an integer",
                        )
                        .hint("null divides by rollout.response_length, the padded width; or give the constant token count of the run, e.g. its max response length"),
                    ));
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
        return Err(s.reject(
            Invalid::new(
                "ppo_epochs",
                format!("must be a positive integer (at least 1), got `{epochs}`"),
            )
            .hint("verl's default is 1"),
        ));
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
    // verl's ActorConfig.rollout_n (an int, `${oc.select:actor_rollout_ref.rollout.n,1}` in
    // its YAML); G is rollout.n's, which the trainer reads
    match s.opt_scalar("rollout_n", None)? {
        None | Some(Value::Int(1..)) => {}
        Some(Value::Int(k)) => {
            return Err(s.reject(Invalid::new(
                "rollout_n",
                format!("must be a positive integer or null, got `{k}`"),
            )));
        }
        Some(other) => return Err(s.type_error("rollout_n", "a positive integer or null", &other)),
    }
    for key in OTHER {
        s.opt_scalar(key, None).ok();
        s.subsection(key).ok();
    }
    s.finish()?;

    if use_kl_loss && !(0.0..=COEF_MAX).contains(&kl_loss_coef) {
        return Err(s.reject(
            out_of_range(
                "kl_loss_coef",
                "a number from 0 to 1e30",
                &shown(kl_loss_coef),
                "the KL loss's coefficient, float32 in verl's loss",
            )
            .hint("verl's default is 0.001"),
        ));
    }
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
        (Some(b), _) => LossMode::bypass(b.loss),
        (None, "clip_cov") => {
            return Err(p.reject(
                Invalid::new(
                    "loss_mode",
                    "clip_cov zeroes the loss of tokens verl picks at random (torch.randperm, core_algos.py:1823), so no replay can give its numbers",
                )
                .hint("replay another loss_mode (vanilla is clip_cov without the random choice)"),
            ));
        }
        (None, name) => match LossMode::from_name(name) {
            // bypass_mode's losses are set by algorithm.rollout_correction, not by name
            Some(mode) => match mode.info().refused {
                Some((message, hint)) => {
                    return Err(p.reject(Invalid::new("loss_mode", message).hint(hint)));
                }
                None => mode,
            },
            None => {
                let names = LossMode::names();
                let hint = match crate::nearest::nearest(name, names.iter().copied()) {
                    Some(n) => format!(
                        "did you mean `{n}`? verl 0.9.1 registers {}",
                        names.join(", ")
                    ),
                    None => format!("verl 0.9.1 registers {} (and clip_cov)", names.join(", ")),
                };
                return Err(p.reject(
                    Invalid::new("loss_mode", format!("Unsupported loss mode: {name}")).hint(hint),
                ));
            }
        },
    };
    // the clip ranges, for the losses that read them (sapo, gpg, kl_cov, dro and bypass's
    // reinforce do not; each loss's declaration says why its ratios must be ≥ 0):
    // verl's torch.clamp(ratio, 1 − low, 1 + high) refuses nothing, and with low > high it
    // gives 1 + high for every token; a negative ratio puts the ratio 1 itself outside the
    // range. advcalc's f32::clamp would panic on the inverted range.
    let clip_why = mode.info().clip_range;
    if let Some(why) = clip_why {
        for (key, value) in [(clip_low_key, clip_low), (clip_high_key, clip_high)] {
            // -0.0 is 0
            if value < 0.0 {
                let why = if key == "clip_ratio" {
                    format!(
                        "{why}; clip_ratio_low and clip_ratio_high are null and fall back to clip_ratio"
                    )
                } else {
                    why.to_string()
                };
                return Err(s.reject(
                    out_of_range(key, "a number ≥ 0", &shown(value), &why)
                        .hint("verl's default is 0.2 for each; DAPO's clip-higher is clip_ratio_low=0.2, clip_ratio_high=0.28"),
                ));
            }
        }
    }
    match mode {
        // verl's assert (core_algos.py:1331-1334), its message as it is
        LossMode::Vanilla | LossMode::BypassPpoClip if clip_c <= 1.0 => {
            return Err(s.reject(
                Invalid::new(
                    "clip_ratio_c",
                    format!("The lower bound of the clip_ratio_c for dual-clip PPO should be greater than 1.0, but get the value: {}.", super::value::py_float_repr(clip_c)),
                )
                .hint("the range is > 1; verl's default is 3.0"),
            ));
        }
        // dppo truncates the ratio at clip_ratio_c (core_algos.py:1427-1428, 1508-1509):
        // verl asserts nothing, but a cap ≤ 0 replaces every (positive) ratio by it
        LossMode::DppoTv | LossMode::DppoKl if clip_c <= 0.0 => {
            return Err(s.reject(
                out_of_range(
                    "clip_ratio_c",
                    "a number > 0",
                    &shown(clip_c),
                    "dppo truncates the ratio π/π_old, which is positive, at clip_ratio_c",
                )
                .hint("verl's default is 3.0"),
            ));
        }
        _ => {}
    }
    if mode == LossMode::Sapo {
        for (key, tau) in [("tau_pos", tau_pos), ("tau_neg", tau_neg)] {
            if !(TAU_RANGE.0..=TAU_RANGE.1).contains(&tau) {
                return Err(s.reject(
                    out_of_range(
                        key,
                        "a number from 1e-30 to 1e30",
                        &shown(tau),
                        "sapo's gate σ(τ·(r − 1))·4/τ, in float32 as verl computes it: τ ≤ 0 divides by zero or turns the gate around, a smaller τ makes 4/τ infinite, a larger one is infinite itself",
                    )
                    .hint("verl's defaults are tau_pos 1.0, tau_neg 1.05"),
                ));
            }
        }
    }
    let dro_beta = match (mode, dro_beta) {
        (LossMode::Dro, Some(b)) if b > 0.0 && b <= COEF_MAX => b,
        (LossMode::Dro, Some(b)) if b > COEF_MAX => {
            return Err(p.reject(out_of_range(
                "dro_beta",
                "a number > 0 and at most 1e30",
                &shown(b),
                "dro's penalty ½·β·(log π − log π_old)² is float32 in verl",
            )));
        }
        // verl's ValueError (core_algos.py:2028-2029)
        (LossMode::Dro, _) => {
            return Err(p.reject(
                Invalid::new(
                    "dro_beta",
                    "policy_loss.dro_beta must be a positive value when using DRO",
                )
                .hint("the range is > 0 (and at most 1e30)"),
            ));
        }
        (_, b) => b.unwrap_or(0.0),
    };
    if mode == LossMode::KlCov {
        // verl asserts > 0 (core_algos.py:1886); above 1, ⌊n·ratio⌋ > n and torch.topk
        // raises (core_algos.py:1905-1906)
        if !(kl_cov_ratio > 0.0 && kl_cov_ratio <= 1.0) {
            return Err(p.reject(
                out_of_range(
                    "kl_cov_ratio",
                    "in (0, 1]",
                    &shown(kl_cov_ratio),
                    "the fraction of each micro-batch's tokens kl_cov penalises: verl asserts kl_cov_ratio > 0, and above 1 torch.topk asks for more tokens than there are",
                )
                .hint("verl's default is 0.0002"),
            ));
        }
        if !(0.0..=COEF_MAX).contains(&ppo_kl_coef) {
            return Err(p.reject(
                out_of_range(
                    "ppo_kl_coef",
                    "a number from 0 to 1e30",
                    &shown(ppo_kl_coef),
                    "kl_cov's penalty coefficient on |log π − log π_old|, float32 in verl",
                )
                .hint("verl's default is 0.1"),
            ));
        }
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
        return Err(crate::error::Error::usage(format!(
            "actor_rollout_ref.rollout.n: must be a positive integer, got `{n}`"
        )));
    }
    let response_length = response_length.unwrap_or(512);
    if response_length <= 0 {
        return Err(crate::error::Error::usage(format!(
            "actor_rollout_ref.rollout.response_length: must be a positive integer, got `{response_length}`"
        )));
    }
    // G = ppo_mini_batch_size × rollout.n (ray_trainer.py:1327-1328), checked: a product
    // beyond 2^63 − 1 wrapped (2^62 × 4 to 0, then a division by zero)
    let Some(mini_batch_rows) = mini.checked_mul(n) else {
        return Err(s.reject(
            Invalid::new(
                "ppo_mini_batch_size",
                format!(
                    "ppo_mini_batch_size × rollout.n = {mini} × {n} overflows: the mini-batch's rows G must be at most 9223372036854775807 (2^63 − 1)"
                ),
            )
            .hint("give the run's ppo_mini_batch_size (prompts per mini-batch; verl's default 256) and rollout.n"),
        ));
    };
    if let Some(m) = micro {
        let m = m as i64;
        if micro_batch_legacy && mini % m != 0 {
            // verl's ActorConfig.validate (workers/config/actor.py:236-241), its message
            return Err(s.reject(
                Invalid::new(
                    "ppo_micro_batch_size",
                    format!("ppo_mini_batch_size ({mini}) must be divisible by ppo_micro_batch_size ({m})"),
                )
                .hint("the range is a divisor of ppo_mini_batch_size; verl 0.9.1 reads ppo_micro_batch_size_per_gpu instead (the former is deprecated)"),
            ));
        }
        // verl's engine cuts each mini-batch into micro-batches of exactly this size
        // (workers/engine/utils.py:125-127, prepare_micro_batches):
        //     assert total_data_size % (force_group_size * micro_batch_size_per_gpu) == 0, (
        //         "data size must be divisible by force_group_size * micro_batch_size_per_gpu"
        //     )
        // (before the engine workers, fsdp_workers.py asserted "normalized
        // ppo_mini_batch_size {G} should be divisible by ppo_micro_batch_size_per_gpu {m}")
        if mini_batch_rows % m != 0 {
            return Err(s.reject(
                out_of_range(
                    if micro_batch_legacy {
                        "ppo_micro_batch_size"
                    } else {
                        "ppo_micro_batch_size_per_gpu"
                    },
                    &format!(
                        "a divisor of the mini-batch's G = ppo_mini_batch_size × rollout.n = {mini} × {n} = {mini_batch_rows} rows"
                    ),
                    &format!("`{m}`"),
                    "verl's engine asserts that the micro-batches cut the mini-batch evenly: data size must be divisible by force_group_size * micro_batch_size_per_gpu",
                )
                .hint("null gives one micro-batch of the whole mini-batch (the gradient does not depend on the split, except for geo_mean, kl_cov and bypass mode)"),
            ));
        }
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
        mini_batch_rows: mini_batch_rows as usize,
        micro_batch_rows: micro,
        micro_batch_legacy,
        entropy_coeff,
        ppo_epochs: epochs as usize,
        bypass,
    })
}

/// The value of a key as YAML writes it back (for `to_yaml`).
pub fn to_map(spec: &LossSpec, n: Option<i64>) -> super::value::Map {
    use super::value::Map;
    let mut actor = Map::new();
    let p = &spec.params;
    let rows = spec.mini_batch_rows as i64 / n.unwrap_or(1).max(1);
    actor.insert("ppo_mini_batch_size", Value::Int(rows));
    let micro = spec
        .micro_batch_rows
        .map_or(Value::Null, |m| Value::Int(m as i64));
    if spec.micro_batch_legacy {
        // under the key it was read from, so that `--origins` labels it with its source
        actor.insert("ppo_micro_batch_size", micro);
        actor.insert("ppo_micro_batch_size_per_gpu", Value::Null);
    } else {
        actor.insert("ppo_micro_batch_size_per_gpu", micro);
    }
    actor.insert("clip_ratio_low", p.clip_low.into());
    actor.insert("clip_ratio_high", p.clip_high.into());
    actor.insert("clip_ratio_c", p.clip_c.into());
    actor.insert("tau_pos", p.tau_pos.into());
    actor.insert("tau_neg", p.tau_neg.into());
    let mut policy = Map::new();
    let mode = match spec.mode {
        // verl's own config keeps the YAML loss_mode; bypass comes from algorithm
        LossMode::BypassPpoClip | LossMode::BypassReinforce => "vanilla",
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
    use crate::loss::{AggMode, LossMode};
    use crate::{Config, ConfigSources};

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

    // the deprecated global key is written back under its own name (so `--origins` labels
    // it with its source, not as the per-GPU key's default) and reads back the same
    #[test]
    fn the_legacy_micro_batch_key_is_written_back_as_itself() {
        let c = load(
            &[
                "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                "actor_rollout_ref.actor.ppo_micro_batch_size=4",
            ],
            None,
        );
        let yaml = c.to_yaml();
        assert!(yaml.contains("    ppo_micro_batch_size: 4\n"), "{yaml}");
        assert!(
            yaml.contains("    ppo_micro_batch_size_per_gpu: null\n"),
            "{yaml}"
        );
        let again = load(&[], Some(&yaml));
        assert_eq!(again.loss, c.loss);
        // the per-GPU key alone: as before, no legacy key written
        let c = load(
            &["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"],
            None,
        );
        assert!(!c.to_yaml().contains("ppo_micro_batch_size:"));
    }

    /// The error `sets` (actor keys, `rollout.n` 4 unless given) get, as the CLI prints it.
    fn refused(sets: &[&str]) -> crate::error::Error {
        let mut all: Vec<String> = vec!["actor_rollout_ref.rollout.n=4".into()];
        all.extend(sets.iter().map(|s| s.to_string()));
        let e = Config::load(&ConfigSources {
            actor: true,
            sets: &all,
            ..Default::default()
        })
        .expect_err("refused");
        assert_eq!(e.exit_code(), 2, "{e}");
        e
    }

    fn accepted(sets: &[&str]) -> crate::loss::LossSpec {
        let mut all = vec!["actor_rollout_ref.rollout.n=4"];
        all.extend(sets);
        load(&all, None).loss.unwrap()
    }

    fn assert_names(e: &crate::error::Error, needles: &[&str]) {
        for n in needles {
            assert!(e.message().contains(n), "`{n}` not in {e}");
        }
    }

    // The panics: an inverted clip range (f32::clamp's `min > max`), named by the
    // key whose value is used; 0 is the edge (the range [1, 1] still holds the ratio 1).
    #[test]
    fn clip_ratios_below_zero_are_refused_for_the_losses_that_read_them() {
        let e = refused(&["actor_rollout_ref.actor.clip_ratio_high=-1.5"]);
        assert_names(
            &e,
            &[
                "actor_rollout_ref.actor.clip_ratio_high (from --set)",
                "≥ 0",
                "`-1.5`",
            ],
        );
        let e = refused(&[
            "actor_rollout_ref.actor.clip_ratio=-0.5",
            "actor_rollout_ref.actor.clip_ratio_low=null",
            "actor_rollout_ref.actor.clip_ratio_high=null",
        ]);
        assert_names(
            &e,
            &[
                "actor_rollout_ref.actor.clip_ratio (",
                "`-0.5`",
                "fall back",
            ],
        );
        for mode in ["gspo", "geo_mean", "cispo", "dppo_tv", "dppo_kl"] {
            let e = refused(&[
                &format!("actor_rollout_ref.actor.policy_loss.loss_mode={mode}"),
                "actor_rollout_ref.actor.clip_ratio_low=-0.01",
            ]);
            assert_names(&e, &["actor_rollout_ref.actor.clip_ratio_low", "`-0.01`"]);
        }
        // bypass mode's ppo_clip is vanilla against the rollout
        let e = refused(&[
            "algorithm.rollout_correction.bypass_mode=true",
            "actor_rollout_ref.actor.clip_ratio_low=-2",
        ]);
        assert_names(&e, &["clip_ratio_low"]);
        let edge = accepted(&[
            "actor_rollout_ref.actor.clip_ratio_low=0",
            "actor_rollout_ref.actor.clip_ratio_high=-0.0",
        ]);
        assert_eq!((edge.params.clip_low, edge.params.clip_high), (0.0, 0.0));
        // losses without a clip range do not read it, as in verl
        for mode in ["gpg", "sapo", "dro", "kl_cov"] {
            let mut sets = vec![
                format!("actor_rollout_ref.actor.policy_loss.loss_mode={mode}"),
                "actor_rollout_ref.actor.clip_ratio_high=-1.5".into(),
            ];
            if mode == "dro" {
                sets.push("actor_rollout_ref.actor.policy_loss.dro_beta=0.1".into());
            }
            let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
            assert_eq!(accepted(&sets).params.clip_high, -1.5, "{mode}");
        }
    }

    // loss_mode through the registry: an unknown name with verl's list (and the nearest one),
    // clip_cov and bypass_mode refused with their reasons
    #[test]
    fn loss_mode_names_come_from_the_registry() {
        let set = |mode: &str| format!("actor_rollout_ref.actor.policy_loss.loss_mode={mode}");
        let verl =
            "vanilla, dppo_tv, dppo_kl, gspo, sapo, gpg, kl_cov, geo_mean, dro, cispo, bypass_mode";
        let e = refused(&[&set("vanila")]);
        assert_names(
            &e,
            &["policy_loss.loss_mode", "Unsupported loss mode: vanila"],
        );
        assert_eq!(
            e.hint(),
            Some(format!("did you mean `vanilla`? verl 0.9.1 registers {verl}").as_str())
        );
        let e = refused(&[&set("ppo")]);
        assert_eq!(
            e.hint(),
            Some(format!("verl 0.9.1 registers {verl} (and clip_cov)").as_str())
        );
        let e = refused(&[&set("bypass_mode")]);
        assert_names(&e, &["bypass_mode is set by verl itself"]);
        assert_eq!(
            e.hint(),
            Some("set algorithm.rollout_correction.bypass_mode=true instead")
        );
        let e = refused(&[&set("clip_cov")]);
        assert_names(&e, &["torch.randperm, core_algos.py:1823"]);
        for mode in LossMode::ALL {
            if mode.info().refused.is_none() {
                let mut sets = vec![set(mode.name())];
                if mode == LossMode::Dro {
                    sets.push("actor_rollout_ref.actor.policy_loss.dro_beta=0.1".into());
                }
                let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
                assert_eq!(accepted(&sets).mode, mode);
            }
        }
    }

    // every key a loss declares is one this section (or policy_loss) reads
    #[test]
    fn the_losses_declare_keys_the_section_reads() {
        let policy_loss = ["kl_cov_ratio", "ppo_kl_coef", "dro_beta"];
        for mode in LossMode::ALL {
            for key in mode.info().parameters {
                let known = match key.split_once('.') {
                    Some(("policy_loss", k)) => policy_loss.contains(&k),
                    Some(("algorithm", k)) => k.starts_with("rollout_correction."),
                    _ => super::reads(key),
                };
                assert!(known, "{}: {key}", mode.name());
            }
        }
    }

    // verl's dual-clip assert for vanilla (c > 1); dppo's cap must be positive
    #[test]
    fn clip_ratio_c_by_loss() {
        let e = refused(&["actor_rollout_ref.actor.clip_ratio_c=1"]);
        assert_names(&e, &["clip_ratio_c", "greater than 1.0", "1.0."]);
        let dppo = "actor_rollout_ref.actor.policy_loss.loss_mode=dppo_kl";
        let e = refused(&[dppo, "actor_rollout_ref.actor.clip_ratio_c=0"]);
        assert_names(
            &e,
            &["actor_rollout_ref.actor.clip_ratio_c", "> 0", "`0.0`"],
        );
        assert_eq!(
            accepted(&[dppo, "actor_rollout_ref.actor.clip_ratio_c=0.5"])
                .params
                .clip_c,
            0.5
        );
    }

    // 2^62 × 4 wrapped to 0 (a division by zero in the partition); 2^63 − 1 × 4 printed a
    // wrapped product. The largest G is 2^63 − 1.
    #[test]
    fn the_mini_batch_product_is_checked() {
        for mini in ["4611686018427387904", "9223372036854775807"] {
            let e = refused(&[&format!(
                "actor_rollout_ref.actor.ppo_mini_batch_size={mini}"
            )]);
            assert_names(
                &e,
                &[
                    "actor_rollout_ref.actor.ppo_mini_batch_size (from --set)",
                    &format!("{mini} × 4"),
                    "9223372036854775807",
                ],
            );
        }
        let l = load(
            &[
                "actor_rollout_ref.actor.ppo_mini_batch_size=9223372036854775807",
                "actor_rollout_ref.rollout.n=1",
            ],
            None,
        )
        .loss
        .unwrap();
        assert_eq!(l.mini_batch_rows, i64::MAX as usize);
        let e = refused(&["actor_rollout_ref.actor.ppo_mini_batch_size=0"]);
        assert_names(&e, &["ppo_mini_batch_size", "`0`"]);
    }

    // verl's engine asserts that micro-batches cut the mini-batch evenly; the deprecated
    // global key with verl's own ValueError; both keys at once refused as verl refuses them
    #[test]
    fn micro_batches_divide_the_mini_batch() {
        let mini = "actor_rollout_ref.actor.ppo_mini_batch_size=8";
        let e = refused(&[
            mini,
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=5",
        ]);
        assert_names(
            &e,
            &[
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (from --set)",
                "a divisor of",
                "= 32 rows",
                "`5`",
            ],
        );
        // 16 divides G = 32 though not ppo_mini_batch_size: the per-GPU size cuts G
        let l = accepted(&[
            mini,
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
        ]);
        assert_eq!(
            (l.micro_batch_rows, l.micro_batch_legacy),
            (Some(16), false)
        );
        let e = refused(&[mini, "actor_rollout_ref.actor.ppo_micro_batch_size=3"]);
        assert_names(
            &e,
            &["ppo_mini_batch_size (8) must be divisible by ppo_micro_batch_size (3)"],
        );
        let l = accepted(&[mini, "actor_rollout_ref.actor.ppo_micro_batch_size=4"]);
        assert_eq!((l.micro_batch_rows, l.micro_batch_legacy), (Some(4), true));
        let e = refused(&[
            "actor_rollout_ref.actor.ppo_micro_batch_size=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        ]);
        assert_names(&e, &["You have set both"]);
        let e = refused(&["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=0"]);
        assert_names(&e, &["ppo_micro_batch_size_per_gpu"]);
    }

    // 1e-320 gave inf/NaN grad_weights; the range is [1, 2^63 − 1], a token count
    #[test]
    fn loss_scale_factor_is_a_token_count() {
        for bad in [
            "1e-320", "0.5", "0", "-64", "1e19", ".inf", ".nan", "abc", "true",
        ] {
            let e = refused(&[&format!("actor_rollout_ref.actor.loss_scale_factor={bad}")]);
            assert_names(
                &e,
                &[
                    "actor_rollout_ref.actor.loss_scale_factor (from --set)",
                    "from 1 to 9223372036854775807",
                ],
            );
        }
        for good in ["1", "64.0", "9223372036854775807"] {
            let set = format!("actor_rollout_ref.actor.loss_scale_factor={good}");
            assert!(accepted(&[&set]).loss_scale_factor.is_some(), "{good}");
        }
    }

    // sapo's τ: 4/τ and τ itself finite in float32
    #[test]
    fn sapo_tau_range() {
        let sapo = "actor_rollout_ref.actor.policy_loss.loss_mode=sapo";
        for (key, bad) in [
            ("tau_pos", "0"),
            ("tau_neg", "-1.05"),
            ("tau_pos", "1e-320"),
            ("tau_neg", "9e-31"),
            ("tau_pos", "1.1e30"),
        ] {
            let e = refused(&[sapo, &format!("actor_rollout_ref.actor.{key}={bad}")]);
            assert_names(
                &e,
                &[&format!("actor_rollout_ref.actor.{key} ("), "1e-30 to 1e30"],
            );
        }
        let l = accepted(&[
            sapo,
            "actor_rollout_ref.actor.tau_pos=1e-30",
            "actor_rollout_ref.actor.tau_neg=1e30",
        ]);
        assert_eq!((l.params.tau_pos, l.params.tau_neg), (1e-30, 1e30));
        // only sapo reads them
        accepted(&["actor_rollout_ref.actor.tau_pos=0"]);
    }

    // kl_cov: verl asserts kl_cov_ratio > 0 and torch.topk fails above 1; the coefficients
    #[test]
    fn kl_cov_and_the_coefficients() {
        let kl_cov = "actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov";
        for bad in ["5", "0", "-0.1", "1.0000001"] {
            let e = refused(&[
                kl_cov,
                &format!("actor_rollout_ref.actor.policy_loss.kl_cov_ratio={bad}"),
            ]);
            assert_names(
                &e,
                &["actor_rollout_ref.actor.policy_loss.kl_cov_ratio", "(0, 1]"],
            );
        }
        accepted(&[kl_cov, "actor_rollout_ref.actor.policy_loss.kl_cov_ratio=1"]);
        let e = refused(&[
            kl_cov,
            "actor_rollout_ref.actor.policy_loss.ppo_kl_coef=-0.1",
        ]);
        assert_names(&e, &["policy_loss.ppo_kl_coef", "from 0 to 1e30"]);
        let kl = "actor_rollout_ref.actor.use_kl_loss=true";
        for bad in ["1e300", "-0.001", "1.1e30"] {
            let e = refused(&[kl, &format!("actor_rollout_ref.actor.kl_loss_coef={bad}")]);
            assert_names(
                &e,
                &["actor_rollout_ref.actor.kl_loss_coef", "from 0 to 1e30"],
            );
        }
        accepted(&[kl, "actor_rollout_ref.actor.kl_loss_coef=1e30"]);
        // without the KL loss verl never reads it
        accepted(&["actor_rollout_ref.actor.kl_loss_coef=-1"]);
        let dro = "actor_rollout_ref.actor.policy_loss.loss_mode=dro";
        for bad in [".inf", "1e31"] {
            let e = refused(&[
                dro,
                &format!("actor_rollout_ref.actor.policy_loss.dro_beta={bad}"),
            ]);
            assert_names(&e, &["policy_loss.dro_beta"]);
        }
    }

    // counts: epochs, rollout.n, the actor's rollout_n
    #[test]
    fn counts_are_positive_integers() {
        let e = refused(&["actor_rollout_ref.actor.ppo_epochs=0"]);
        assert_names(&e, &["actor_rollout_ref.actor.ppo_epochs", "`0`"]);
        let e = refused(&["actor_rollout_ref.actor.rollout_n=0"]);
        assert_names(&e, &["actor_rollout_ref.actor.rollout_n", "`0`"]);
        let e = refused(&["actor_rollout_ref.actor.rollout_n=four"]);
        assert_names(&e, &["actor_rollout_ref.actor.rollout_n", "\"four\""]);
        let e = refused(&["actor_rollout_ref.rollout.n=-3"]);
        assert_names(&e, &["actor_rollout_ref.rollout.n", "`-3`"]);
        // a file's non-integer rollout.n is not G's
        let e = Config::load(&ConfigSources {
            actor: true,
            text: Some(("c.yaml", "actor_rollout_ref:\n  rollout:\n    n: 4.5\n")),
            ..Default::default()
        })
        .unwrap_err();
        assert_names(&e, &["actor_rollout_ref.rollout.n", "`4.5`", "(in c.yaml)"]);
    }
}
