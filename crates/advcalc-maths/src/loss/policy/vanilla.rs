//! `vanilla` (`core_algos.py:1285`): PPO's clipped surrogate with the dual clip.
//!
//! With r = exp(clamp(Δ, ±20)), Δ = log π − log π_old:
//! ℓ = max(−A·r, −A·clip(r, 1 − ε_l, 1 + ε_h)), and where A < 0, min(that, −A·c).
//! dℓ/d log π = −A·r on the branch taken: 0 when clipped, ties split as torch splits them.
//!
//! - Inputs: the token's advantage A, log π and log π_old.
//! - Parameters: `clip_ratio_low` (ε_l), `clip_ratio_high` (ε_h), both falling back to
//!   `clip_ratio`; `clip_ratio_c` (c, > 1 as verl asserts).
//! - Metrics: a token counts as clipped when the clipped side wins (−A·clip(r) > −A·r), as
//!   dual-clipped when A < 0 and the dual clip's bound is below the PPO loss; `ppo_kl` is
//!   −Δ (clamped).
//! - Edge cases: A = 0 gives ℓ = 0 and no gradient; an inverted clip range (refused by the
//!   configuration) would clamp every r to 1 + ε_h, as torch does.

use super::torch::{clamp_grad, max_grad, min_grad, ratio};
use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// PPO's clipped surrogate.
pub struct Vanilla;

impl PolicyLoss for Vanilla {
    const INFO: LossInfo = LossInfo {
        summary: "PPO's clipped surrogate, dual-clipped where A < 0",
        line: 1285,
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
        term(p, a, logp, old)
    }
}

/// Why the PPO clip's range must contain the ratio 1 (shared with gspo, cispo and bypass's
/// `ppo_clip`).
pub const CLIP_RANGE: &str =
    "the clip range [1 − clip_ratio_low, 1 + clip_ratio_high] must contain the ratio 1";

/// The PPO clip of vanilla (and bypass's `ppo_clip`): ℓ, dℓ, clipped, dual-clipped.
pub fn term(p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
    let (dc, r, dr) = ratio(logp, old);
    let lo = (1.0 - p.clip_low) as f32;
    let hi = (1.0 + p.clip_high) as f32;
    let l1 = -a * r;
    let (rc, gc) = clamp_grad(r, lo, hi);
    let l2 = -a * rc;
    let (lc, dlc) = max_grad(l1, -a * dr, l2, -a * dr * gc);
    let l3 = -a * p.clip_c as f32;
    let (loss, grad) = if a < 0.0 {
        min_grad(l3, 0.0, lc, dlc)
    } else {
        (lc, dlc)
    };
    Term {
        loss,
        grad,
        clipped: l2 > l1,
        lower: lc > l3 && a < 0.0,
        kl: -dc,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LossMode, TEST_PARAMS as P};
    use crate::test_support::assert_close;

    // Vanilla by hand: A = 1, Δ = ln 1.5 → r = 1.5 > 1.28: ℓ = max(−1.5, −1.28) = −1.28,
    // clipped, gradient 0. A = −1, Δ = ln 4 → r = 4: ℓ1 = 4, ℓ2 = 1.28... max 4, then the dual
    // clip min(3, 4) = 3: gradient 0, lower.
    #[test]
    fn vanilla_clips_and_dual_clips() {
        let t = LossMode::Vanilla.token(&P, 1.0, 1.5f32.ln(), 0.0);
        assert_close("loss", &[t.loss], &[-1.28], 1e-6, 0.0);
        assert_eq!((t.grad, t.clipped, t.lower), (0.0, true, false));
        let t = LossMode::Vanilla.token(&P, -1.0, 4.0f32.ln(), 0.0);
        assert_close("loss", &[t.loss], &[3.0], 1e-6, 0.0);
        assert_eq!((t.grad, t.clipped, t.lower), (0.0, false, true));
        // inside the clip range: ℓ = −A·r, gradient −A·r
        let t = LossMode::Vanilla.token(&P, 2.0, 1.1f32.ln(), 0.0);
        assert_close("loss", &[t.loss, t.grad], &[-2.2, -2.2], 1e-6, 0.0);
    }
}
