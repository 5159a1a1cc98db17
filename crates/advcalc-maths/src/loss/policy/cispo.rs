//! `cispo` (`core_algos.py:2047`): the policy gradient weighted by the clipped ratio, a
//! stop-gradient.
//!
//! ℓ = −sg(clip(r, 1 − ε_l, 1 + ε_h))·A·log π, dℓ/d log π = −clip(r)·A, with r =
//! exp(clamp(Δ, ±20)).
//!
//! - Inputs: A, log π, log π_old.
//! - Parameters: `clip_ratio_low`, `clip_ratio_high`.
//! - Metrics: clipped where clip(r) ≠ r; `pg_clipfrac_lower` always 0; `ppo_kl` −Δ (clamped).
//! - Edge cases: unlike vanilla, a clipped token keeps a gradient (the weight is clipped,
//!   not the loss); an inverted range gives 1 + ε_h, as torch.clamp does.

use super::torch::{ratio, torch_clamp};
use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// CISPO's clipped importance-sampling weight.
pub struct Cispo;

impl PolicyLoss for Cispo {
    const INFO: LossInfo = LossInfo {
        summary: "CISPO: −sg(clip(r))·A·log π, the clipped ratio as a weight",
        line: 2047,
        loss_type: None,
        scope: LossScope::Token,
        metrics: Metrics::ALL,
        parameters: &["clip_ratio_low", "clip_ratio_high"],
        clip_range: Some(super::vanilla::CLIP_RANGE),
        refused: None,
        notes: &["pg_clipfrac_lower is returned and always 0"],
    };
    type Stats = ();

    fn token(p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
        let (dc, r, _) = ratio(logp, old);
        let clipped = torch_clamp(r, (1.0 - p.clip_low) as f32, (1.0 + p.clip_high) as f32);
        Term {
            loss: -clipped * a * logp,
            grad: -clipped * a,
            clipped: r != clipped,
            lower: false,
            kl: -dc,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LossMode, PolicyParams, TEST_PARAMS as P};

    // An inverted clip range clamps every ratio to 1 + ε_h, as torch does, with no panic.
    #[test]
    fn an_inverted_range_clamps_to_the_upper_bound() {
        let inverted = PolicyParams {
            clip_high: -1.5,
            ..P
        };
        let t = LossMode::Cispo.token(&inverted, 1.0, 0.0, 0.0);
        assert_eq!(t.loss, 0.0); // −clip(r)·A·log π with log π = 0
        assert_eq!(t.grad, 0.5); // −(1 − 1.5)·A
    }
}
