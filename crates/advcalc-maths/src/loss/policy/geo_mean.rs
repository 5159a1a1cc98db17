//! `geo_mean` (`core_algos.py:1928`): GMPO, the loss of a row through the geometric mean of
//! its sign-clipped ratios.
//!
//! Per row i of L valid tokens: ℓ_i = −Ā_i·exp(Σ_t m_t·sgn(A_t)·min(sgn(A_t)·Δ_t,
//! sgn(A_t)·clip(Δ_t, −ε_l, ε_h)) / (L + 1e-8)), Ā_i the row's mean advantage; with IS
//! weights, times their geometric mean exp(Σ m_t·ln(w_t + 1e-10)/(L + 1e-8)). Each token's
//! dℓ_i/d log π flows through the row's mean; the micro-batch's loss is the mean of ℓ_i
//! over its rows.
//!
//! - Inputs: the row's A, log π, log π_old, loss mask and IS weights.
//! - Parameters: `clip_ratio_low`, `clip_ratio_high` (the range of Δ, which must contain 0).
//! - Metrics: clipped where Δ was clipped and A > 0, dual-clipped ("lower") where A < 0;
//!   `ppo_kl` −Δ.
//! - Edge cases: A = 0 takes neither side (sgn 0); a fully masked row has loss
//!   −0·exp(0) = 0 and no gradient; the gradient depends on the micro-batch's row count.

use super::torch::{clamp_grad, min_grad};
use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// GMPO, per row ([`row`]).
pub struct GeoMean;

impl PolicyLoss for GeoMean {
    const INFO: LossInfo = LossInfo {
        summary: "GMPO: per row −Ā·exp(mean of the sign-clipped Δ), the geometric-mean ratio",
        line: 1928,
        loss_type: None,
        scope: LossScope::Row,
        metrics: Metrics::ALL,
        parameters: &["clip_ratio_low", "clip_ratio_high"],
        clip_range: Some(
            "geo_mean clips log π − log π_old to [−clip_ratio_low, clip_ratio_high], which must contain 0",
        ),
        refused: None,
        notes: &[
            "a loss per row, averaged over the micro-batch's rows: the gradient depends on the split",
        ],
    };
    type Stats = ();
}

/// `geo_mean` over one row: the row's loss −Ā·exp(mean_t of the sign-clipped Δ) (before
/// the mean over the micro-batch's rows), and each token's d(row loss)/d log π, clip flags
/// and `ppo_kl` term in `out` (their `loss` is the row's). `weights`: the IS weights, which
/// enter as their geometric mean over the row.
pub fn row(
    p: &PolicyParams,
    a: &[f32],
    logp: &[f32],
    old: &[f32],
    mask: &[f32],
    weights: Option<&[f32]>,
    out: &mut [Term],
) -> f32 {
    let count: f32 = mask.iter().sum();
    let denom = count + 1e-8;
    let lo = -(p.clip_low as f32);
    let hi = p.clip_high as f32;
    let mut sum = 0.0f32;
    let mut adv = 0.0f32;
    for t in 0..out.len() {
        let d = logp[t] - old[t];
        let sgn = a[t].signum() * if a[t] == 0.0 { 0.0 } else { 1.0 };
        let (dc, gc) = clamp_grad(d, lo, hi);
        // sgn·min(sgn·Δ, sgn·Δc): its gradient by log π is sgn·(the chosen side's)
        let (m, dm) = min_grad(sgn * d, sgn, sgn * dc, sgn * gc);
        let value = sgn * m;
        out[t].grad = sgn * dm; // d(value)/d log π, scaled below
        out[t].clipped = d != dc && a[t] > 0.0;
        out[t].lower = d != dc && a[t] < 0.0;
        out[t].kl = -d;
        sum += value * mask[t];
        adv += a[t] * mask[t];
    }
    let ratio = (sum / denom).exp();
    let adv = adv / denom;
    let mut loss = -adv * ratio;
    if let Some(w) = weights {
        let log_w: f32 = w
            .iter()
            .zip(mask)
            .map(|(&x, &m)| (x + 1e-10).ln() * m)
            .sum();
        loss *= (log_w / denom).exp();
    }
    let scale = if ratio == 0.0 { 0.0 } else { loss / ratio };
    for (t, term) in out.iter_mut().enumerate() {
        // d(−Ā·ratio·w̄)/d log π_t = −Ā·w̄·ratio·g_t·m_t/(L + 1e-8)
        term.grad = scale * ratio * term.grad * mask[t] / denom;
        term.loss = loss;
    }
    loss
}

#[cfg(test)]
mod tests {
    use super::super::{TEST_PARAMS as P, Term};
    use super::row;
    use crate::test_support::assert_close;

    // geo_mean by hand: one row, A = [1, 1], Δ = [0.1, 0.5] → clipped Δ [0.1, 0.28]:
    // ratio = exp(0.19), loss = −exp(0.19) = −1.2092496; gradient only on the unclipped
    // token: −exp(0.19)/2.
    #[test]
    fn geo_mean_by_hand() {
        let mut out = [Term::default(); 2];
        let loss = row(
            &P,
            &[1.0, 1.0],
            &[0.1, 0.5],
            &[0.0, 0.0],
            &[1.0, 1.0],
            None,
            &mut out,
        );
        assert_close("loss", &[loss], &[-(0.19f32.exp())], 1e-6, 0.0);
        let grads = [out[0].grad, out[1].grad];
        assert_close("grad", &grads, &[-(0.19f32.exp()) / 2.0, 0.0], 1e-6, 0.0);
        assert!(out[1].clipped && !out[0].clipped);
    }
}
