//! `reinforce_plus_plus_baseline`: group-mean baseline, then batch whitening (reference §5.6,
//! verl `compute_reinforce_plus_plus_baseline_outcome_advantage`).
//!
//! **Computes** `a_i = s_i − μ_g` (a singleton has μ = 0), tiled over the row and masked, then
//! `masked_whiten` over every valid token of the batch and masked again:
//! `advantages = returns = (a_i − μ)·rsqrt(var + 1e-8) · m` with μ, var (unbiased) over the
//! batch's valid tokens — each row's `a_i` counted once per valid token. ε is unused.
//! **Edge case**: a batch with ≤ 1 valid token is an error, as in verl.

use crate::groups::Grouping;

use super::grpo::group_sums;

/// The per-row centred scores, before whitening.
pub fn reinforce_plus_plus_baseline(scores: &[f64], grouping: &Grouping) -> Vec<f64> {
    let (count, sum) = group_sums(scores, grouping);
    scores
        .iter()
        .zip(&grouping.group_of_row)
        .map(|(&s, &g)| {
            if count[g] > 1 {
                s - sum[g] / count[g] as f64
            } else {
                s
            }
        })
        .collect()
}
