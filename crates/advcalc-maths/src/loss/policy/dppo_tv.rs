//! `dppo_tv` (`core_algos.py:1379`): the DPPO loss with a total-variation trust region.
//!
//! ℓ = −A·sg(min(r, c))·log π·valid, dℓ/d log π = −A·min(r, c)·valid, where r =
//! exp(clamp(Δ, ±20)) and a token is valid when π − π_old ≤ ε_h for A > 0, ≥ −ε_l otherwise
//! (π, π_old the probabilities, e^{log π}).
//!
//! - Inputs: A, log π, log π_old.
//! - Parameters: `clip_ratio_low`/`clip_ratio_high` (ε_l, ε_h: a divergence bound, ≥ 0),
//!   `clip_ratio_c` (c, the ratio cap, > 0).
//! - Metrics: an invalid token counts as clipped; a valid one whose ratio exceeds c as
//!   dual-clipped; `ppo_kl` is −Δ (clamped).
//! - Edge cases: an invalid token has ℓ = 0 and no gradient; the cap is a stop-gradient, so
//!   the gradient never flows through r.

use super::torch::ratio;
use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// DPPO with a total-variation trust region.
pub struct DppoTv;

impl PolicyLoss for DppoTv {
    const INFO: LossInfo = LossInfo {
        summary: "DPPO: −A·sg(min(r, c))·log π on tokens whose |π − π_old| is in the trust region",
        line: 1379,
        loss_type: None,
        scope: LossScope::Token,
        metrics: Metrics::ALL,
        parameters: &["clip_ratio_low", "clip_ratio_high", "clip_ratio_c"],
        clip_range: Some(CLIP_RANGE),
        refused: None,
        notes: &[],
    };
    type Stats = ();

    fn token(p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
        term(p, a, logp, old, |prob, old_prob| {
            if a > 0.0 {
                prob - old_prob <= p.clip_high as f32
            } else {
                prob - old_prob >= -(p.clip_low as f32)
            }
        })
    }
}

/// Why dppo's clip ratios must be ≥ 0 (shared with dppo_kl).
pub const CLIP_RANGE: &str =
    "dppo's clip_ratio_low/high bound a divergence between π and π_old, which is ≥ 0 at π = π_old";

/// The DPPO term shared with `dppo_kl`, which differ only in `valid(π, π_old)`: whether the
/// token is inside the trust region.
pub fn term(
    p: &PolicyParams,
    a: f32,
    logp: f32,
    old: f32,
    valid: impl FnOnce(f32, f32) -> bool,
) -> Term {
    let (dc, r, _) = ratio(logp, old);
    let c = p.clip_c as f32;
    let truncated = r.min(c);
    let prob = logp.exp();
    let old_prob = old.exp();
    let valid = valid(prob, old_prob);
    let v = if valid { 1.0 } else { 0.0 };
    Term {
        loss: -a * truncated * logp * v,
        grad: -a * truncated * v,
        clipped: !valid,
        lower: r > c && valid,
        kl: -dc,
    }
}
