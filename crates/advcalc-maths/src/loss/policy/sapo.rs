//! `sapo` (`core_algos.py:1622`): a soft, sigmoid gate in place of the clip.
//!
//! ℓ = −A·σ(τ·(r − 1))·4/τ with τ = τ_pos where A > 0, τ_neg otherwise, and r =
//! exp(clamp(Δ, ±20)); dℓ/d log π = −A·4·σ(1 − σ)·r (within the ±20 clamp).
//!
//! - Inputs: A, log π, log π_old.
//! - Parameters: `tau_pos`, `tau_neg` (from 1e-30 to 1e30: beyond, float32's gate is not
//!   finite).
//! - Metrics: verl returns all three, `pg_clipfrac` and `pg_clipfrac_lower` always 0;
//!   `ppo_kl` is −Δ (clamped).
//! - Edge cases: sapo aggregates as `seq-mean-token-mean` whatever `loss_agg_mode` says
//!   (`loss::row`); at r = 1 the gradient is −A, not vanilla's −A·r.

use super::torch::ratio;
use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// SAPO's soft gate.
pub struct Sapo;

impl PolicyLoss for Sapo {
    const INFO: LossInfo = LossInfo {
        summary: "SAPO: −A·σ(τ(r − 1))·4/τ, a sigmoid gate instead of the clip",
        line: 1622,
        loss_type: None,
        scope: LossScope::Token,
        metrics: Metrics::ALL,
        parameters: &["tau_pos", "tau_neg"],
        clip_range: None,
        refused: None,
        notes: &[
            "aggregates as seq-mean-token-mean whatever loss_agg_mode says",
            "pg_clipfrac and pg_clipfrac_lower are returned and always 0",
        ],
    };
    type Stats = ();

    fn token(p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
        let (dc, r, dr) = ratio(logp, old);
        let tau = if a > 0.0 { p.tau_pos } else { p.tau_neg } as f32;
        let sigma = 1.0 / (1.0 + (-(tau * (r - 1.0))).exp());
        let gate = sigma * (4.0 / tau);
        Term {
            loss: -gate * a,
            // d gate / dr = 4·σ(1 − σ)
            grad: -a * 4.0 * sigma * (1.0 - sigma) * dr,
            clipped: false,
            lower: false,
            kl: -dc,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LossMode, TEST_PARAMS as P};
    use crate::test_support::assert_close;

    // sapo by hand at r = 1, A = 1: σ(0) = ½, ℓ = −½·4 = −2, gradient −4·¼·1 = −1.
    #[test]
    fn sapo_by_hand() {
        let t = LossMode::Sapo.token(&P, 1.0, -0.3, -0.3);
        assert_close("sapo", &[t.loss, t.grad], &[-2.0, -1.0], 1e-6, 0.0);
    }
}
