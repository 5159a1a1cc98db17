//! `reinforce_plus_plus_baseline`: group-mean baseline, then batch whitening (docs/reference/verl-0.9.1.md §5.6,
//! verl `compute_reinforce_plus_plus_baseline_outcome_advantage`).
//!
//! **Computes** `a_i = s_i − μ_g` (a singleton has μ = 0), tiled over the row and masked, then
//! `masked_whiten` over every valid token of the batch and masked again:
//! `advantages = returns = (a_i − μ)·rsqrt(var + 1e-8) · m` with μ, var (unbiased) over the
//! batch's valid tokens — each row's `a_i` counted once per valid token. ε is unused.
//! **Edge case**: a batch with ≤ 1 valid token is an error, as in verl.

use crate::estimators::groups::Grouping;

use super::groups::group_means;
use crate::error::Result;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL, broadcast_scalars,
};

/// The per-row centred scores, before whitening.
pub fn reinforce_plus_plus_baseline(scores: &[f64], grouping: &Grouping) -> Vec<f64> {
    let mean = group_means(scores, grouping);
    scores
        .iter()
        .zip(&grouping.group_of_row)
        .map(|(&s, &g)| s - mean[g])
        .collect()
}

/// `-e reinforce_plus_plus_baseline`: one scalar per row ([`Kind::Outcome`]).
pub struct ReinforcePlusPlusBaseline;

impl Estimate for ReinforcePlusPlusBaseline {
    const INFO: Info = Info {
        source: VERL,
        summary: "score minus group mean, tiled and whitened over the batch",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &[],
        weights_in_pass1: false,
        needs_tokens: Some(
            "each row's valid-token count (it whitens over the batch's valid tokens)",
        ),
        rewards_under_mask: false,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: None,
            needs: None,
            returns: "= advantages",
            whitening: "batch",
            masked: true,
            masked_note: None,
            singleton: "s, then whitened",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = ();
    type Options = ();

    fn batch(batch: &TrainingBatch<'_>, plan: &mut EstimatorPlan) -> Result<()> {
        let centred = reinforce_plus_plus_baseline(&batch.scores(), &batch.grouping());
        batch.set_scalars(plan, whitened(batch, &centred)?);
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan) -> Result<Tokens> {
        Ok(broadcast_scalars(rows, plan))
    }
}

/// Whiten one centred scalar per row over the batch's valid tokens (each row's value counts
/// once per valid token, as verl's tiled tensor does).
pub fn whitened(batch: &TrainingBatch<'_>, centred: &[f64]) -> Result<Vec<f64>> {
    let w = batch.whiten(&batch.token_moments(centred))?;
    Ok(centred
        .iter()
        .map(|&c| (c as f32 as f64 - w.mean) * w.inv_std)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::moments::{Moments, Whitening};
    use crate::estimators::test_support::{f32_scores, grouping};

    // Reference §11: three-token rows, row 1's last token masked; whitened row values
    // 0.42520234 / −2.06736302 / 0.42520234 / 1.33914304 / −0.405652732 ×2.
    #[test]
    fn worked_example() {
        let c = reinforce_plus_plus_baseline(
            &f32_scores(&[1.0, 0.0, 1.0, 0.7, 0.1, 0.1]),
            &grouping(&["a", "a", "a", "b", "c", "c"]),
        );
        let valid = [3.0, 2.0, 3.0, 3.0, 3.0, 3.0];
        let mut m = Moments::default();
        for (&x, &n) in c.iter().zip(&valid) {
            m.push_repeated(x as f32 as f64, n);
        }
        let w = Whitening::from_moments(&m).unwrap();
        let a: Vec<f32> = c.iter().map(|&x| w.apply(x as f32)).collect();
        let e: [f32; 6] = [
            0.42520234,
            -2.06736302,
            0.42520234,
            1.33914304,
            -0.405652732,
            -0.405652732,
        ];
        crate::test_support::assert_close("reinforce_plus_plus_baseline", &a, &e, 2e-6, 0.0);
    }
}
