//! `dppo_kl` (`core_algos.py:1460`): the DPPO loss with a binary-KL trust region.
//!
//! ℓ = −A·sg(min(r, c))·log π·valid and dℓ/d log π = −A·min(r, c)·valid, as `dppo_tv`
//! ([`super::dppo_tv`]), where a token is valid when the binary KL
//! π_old·(log π_old − log π) + (1 − π_old)·ln((1 − π_old + 1e-8)/(1 − π + 1e-8)) is ≤ ε_h
//! or π ≤ π_old for A > 0, ≤ ε_l or π ≥ π_old otherwise.
//!
//! - Inputs: A, log π, log π_old.
//! - Parameters: `clip_ratio_low`/`clip_ratio_high` (ε_l, ε_h: KL bounds, ≥ 0),
//!   `clip_ratio_c` (the ratio cap, > 0).
//! - Metrics: as `dppo_tv`'s.
//! - Edge cases: the 1e-8 terms keep the KL finite at π = 1; an invalid token has ℓ = 0.

use super::dppo_tv::{CLIP_RANGE, term};
use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// DPPO with a binary-KL trust region.
pub struct DppoKl;

impl PolicyLoss for DppoKl {
    const INFO: LossInfo = LossInfo {
        summary: "DPPO: −A·sg(min(r, c))·log π on tokens whose binary KL to π_old is in the trust region",
        line: 1460,
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
            let binary_kl = old_prob * (old - logp)
                + (1.0 - old_prob) * ((1.0 - old_prob + 1e-8) / (1.0 - prob + 1e-8)).ln();
            if a > 0.0 {
                binary_kl <= p.clip_high as f32 || prob <= old_prob
            } else {
                binary_kl <= p.clip_low as f32 || prob >= old_prob
            }
        })
    }
}
