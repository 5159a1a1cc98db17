//! `bypass_mode` (`core_algos.py:2413`): the loss verl switches to when
//! `algorithm.rollout_correction.bypass_mode` is true, computed against the rollout's
//! log-probs (π_old is the rollout policy), with the correction computed inside the loss per
//! micro-batch (`loss::row`). `algorithm.rollout_correction.loss_type` picks one of two:
//!
//! - `ppo_clip` ([`BypassPpoClip`]): vanilla's ℓ and gradient ([`super::vanilla`]) against the
//!   rollout; rejection (`rollout_rs`) masks tokens, IS weights are not applied.
//! - `reinforce` ([`BypassReinforce`]): ℓ = −A·log π·w, dℓ/d log π = −A·w, w the truncated IS
//!   weight (`rollout_is`), applied by the caller; rejection masks tokens.
//!
//! - Inputs: A, log π, log π_old (the rollout's), the loss mask.
//! - Parameters: `ppo_clip` reads the clip ranges and `clip_ratio_c`; both read
//!   `algorithm.rollout_correction`'s `loss_type`, `rollout_rs` and `rollout_rs_threshold`,
//!   `reinforce` also `rollout_is` and `rollout_is_threshold`.
//! - Metrics: `ppo_clip` returns all three, `reinforce` `ppo_kl` alone (log π_old − log π).
//! - Edge cases: `loss_mode: bypass_mode` in the actor section is refused (verl sets it
//!   itself); `rollout_is_batch_normalize` is refused in bypass mode (not replayed yet).

use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// `algorithm.rollout_correction.loss_type` in bypass mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BypassLoss {
    PpoClip,
    Reinforce,
}

/// The refusal of `loss_mode: bypass_mode` written by hand: (message, hint).
const REFUSED: (&str, &str) = (
    "bypass_mode is set by verl itself when algorithm.rollout_correction.bypass_mode is true",
    "set algorithm.rollout_correction.bypass_mode=true instead",
);

/// How both bypass losses are chosen.
const NOTE: &str = "set by algorithm.rollout_correction.bypass_mode=true, not by loss_mode";

/// Bypass mode's `ppo_clip`: vanilla against the rollout.
pub struct BypassPpoClip;

impl PolicyLoss for BypassPpoClip {
    const INFO: LossInfo = LossInfo {
        summary: "bypass mode's ppo_clip: vanilla's clipped surrogate against the rollout's log-probs",
        line: 2413,
        loss_type: Some("ppo_clip"),
        scope: LossScope::Token,
        metrics: Metrics::ALL,
        parameters: &[
            "clip_ratio_low",
            "clip_ratio_high",
            "clip_ratio_c",
            "algorithm.rollout_correction.loss_type",
            "algorithm.rollout_correction.rollout_rs",
            "algorithm.rollout_correction.rollout_rs_threshold",
        ],
        clip_range: Some(super::vanilla::CLIP_RANGE),
        refused: Some(REFUSED),
        notes: &[
            NOTE,
            "rejection computed inside the loss per micro-batch; no IS weights",
        ],
    };
    type Stats = ();

    fn token(p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
        super::vanilla::term(p, a, logp, old)
    }
}

/// Bypass mode's `reinforce`: −A·log π, weighted by the truncated IS weight.
pub struct BypassReinforce;

impl PolicyLoss for BypassReinforce {
    const INFO: LossInfo = LossInfo {
        summary: "bypass mode's reinforce: −A·log π·w, w the truncated IS weight to the rollout",
        line: 2413,
        loss_type: Some("reinforce"),
        scope: LossScope::Token,
        metrics: Metrics::PPO_KL,
        parameters: &[
            "algorithm.rollout_correction.loss_type",
            "algorithm.rollout_correction.rollout_is",
            "algorithm.rollout_correction.rollout_is_threshold",
            "algorithm.rollout_correction.rollout_rs",
            "algorithm.rollout_correction.rollout_rs_threshold",
        ],
        clip_range: None,
        refused: Some(REFUSED),
        notes: &[
            NOTE,
            "rejection and truncated IS weights computed inside the loss per micro-batch",
        ],
    };
    type Stats = ();

    fn token(_p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
        Term {
            loss: -a * logp,
            grad: -a,
            clipped: false,
            lower: false,
            kl: old - logp,
        }
    }
}
