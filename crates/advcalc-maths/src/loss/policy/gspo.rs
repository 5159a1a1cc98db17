//! `gspo` (`core_algos.py:1545`): PPO's clip on a sequence-level ratio.
//!
//! With s̄_i the row's mean Δ over its loss mask and s = exp(min(sg(s̄_i) + log π −
//! sg(log π), 10)) (its value e^{s̄_i} on every token of the row, its gradient by log π that
//! of log π): ℓ = max(−A·s, −A·clip(s, 1 − ε_l, 1 + ε_h)), dℓ/d log π = −A·s on the branch
//! taken.
//!
//! - Inputs: the row's A, log π, log π_old and loss mask (rejected tokens excluded).
//! - Parameters: `clip_ratio_low`, `clip_ratio_high`; no dual clip (verl's gspo has none).
//! - Metrics: clipped where the clipped side wins; `pg_clipfrac_lower` is always 0;
//!   `ppo_kl` is the token's −Δ.
//! - Edge cases: a fully masked row divides by max(0, 1) = 1, so s = 1; log s above 10 is
//!   capped there, with no gradient.

use super::torch::{clamp_grad, max_grad};
use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// GSPO, per row ([`row`]).
pub struct Gspo;

impl PolicyLoss for Gspo {
    const INFO: LossInfo = LossInfo {
        summary: "GSPO: PPO's clip on the row's geometric-mean ratio exp(mean Δ)",
        line: 1545,
        loss_type: None,
        scope: LossScope::Row,
        metrics: Metrics::ALL,
        parameters: &["clip_ratio_low", "clip_ratio_high"],
        clip_range: Some(super::vanilla::CLIP_RANGE),
        refused: None,
        notes: &["pg_clipfrac_lower is returned and always 0 (no dual clip)"],
    };
    type Stats = ();
}

/// `gspo` over one row (`mask` its loss mask): every token's term.
pub fn row(p: &PolicyParams, a: &[f32], logp: &[f32], old: &[f32], mask: &[f32], out: &mut [Term]) {
    let len: f32 = mask.iter().sum::<f32>().max(1.0);
    let sum: f32 = logp
        .iter()
        .zip(old)
        .zip(mask)
        .map(|((&l, &o), &m)| (l - o) * m)
        .sum();
    let mean = sum / len;
    let lo = (1.0 - p.clip_low) as f32;
    let hi = (1.0 + p.clip_high) as f32;
    for t in 0..out.len() {
        // log s = log π − sg(log π) + sg(s̄): the value s̄ (x − x is exactly 0), gradient 1
        let (log_s, g) = clamp_grad(mean, f32::NEG_INFINITY, 10.0);
        let s = log_s.exp();
        let ds = s * g;
        let l1 = -a[t] * s;
        let (sc, gc) = clamp_grad(s, lo, hi);
        let l2 = -a[t] * sc;
        let (loss, grad) = max_grad(l1, -a[t] * ds, l2, -a[t] * ds * gc);
        out[t] = Term {
            loss,
            grad,
            clipped: l2 > l1,
            lower: false,
            kl: -(logp[t] - old[t]),
        };
    }
}
