//! `tir_optimal_token_baseline`: the optimal token baseline aligned by the k-th *generated*
//! token instead of the absolute column (docs/reference/verl-0.9.1.md §5.14, verl
//! `compute_multi_turn_optimal_token_baseline_advantage`).
//!
//! **Computes** G, w, W as [`optimal_token_baseline`], then
//! compacts each row to its valid tokens (index k = 0, 1, ... over mask-1 positions):
//! `b_k = Σ_{i∈g} G_ik·W_ik / (Σ_{i∈g} W_ik + 1e-8)`, zero-tail on the compacted index, and
//! scatters `G − b` back to the valid positions; `returns = G`. **Edge cases**: rows with no
//! valid token are left out of their group (and get 0); a group of one has b = 0. Without
//! holes in the mask this equals `optimal_token_baseline`.

use crate::error::Result;
use crate::estimators::optimal_token_baseline::{self, GroupColumns, OtbPlan};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL,
};

/// Compacted index of each valid position of a row (`None` for mask-0 positions).
pub fn compact_index(mask: &[f32]) -> Vec<Option<usize>> {
    let mut k = 0;
    mask.iter()
        .map(|&m| {
            (m != 0.0).then(|| {
                k += 1;
                k - 1
            })
        })
        .collect()
}

/// `-e tir_optimal_token_baseline` ([`Kind::Token`]).
pub struct TirOptimalTokenBaseline;

impl Estimate for TirOptimalTokenBaseline {
    const INFO: Info = Info {
        source: VERL,
        summary: "optimal token baseline aligned by the k-th generated token",
        kind: Kind::Token,
        columns: &[Column::Uid, Column::OldLogProbs, Column::SumPiSquared],
        settings: &[],
        weights_in_pass1: true,
        needs_tokens: Some("per-token log-probabilities (old_log_probs, sum_pi_squared)"),
        rewards_under_mask: true,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: None,
            needs: None,
            returns: "G (unmasked)",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "G·m",
            variants: &[],
        },
    };
    type Stats = GroupColumns;
    type Plan = OtbPlan;
    type Options = ();

    fn row_stats(rows: &Rows<'_>, stats: &mut GroupColumns) -> Result<()> {
        optimal_token_baseline::column_sums(rows, stats, true)
    }

    fn batch(
        batch: &TrainingBatch<'_, GroupColumns>,
        plan: &mut EstimatorPlan<OtbPlan>,
    ) -> Result<()> {
        optimal_token_baseline::baselines(batch, plan, true);
        Ok(())
    }

    fn keep(stats: GroupColumns, plan: &mut OtbPlan) {
        plan.columns = stats;
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<OtbPlan>) -> Result<Tokens> {
        optimal_token_baseline::advantages(rows, plan, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::optimal_token_baseline::ColumnSums;

    #[test]
    fn compacted_positions_skip_holes() {
        assert_eq!(
            compact_index(&[1.0, 0.0, 1.0, 1.0, 0.0]),
            vec![Some(0), None, Some(1), Some(2), None]
        );
    }

    // Hand computation: with a hole, row a = valid at columns 0, 2 and row b at 0, 1. TIR aligns
    // a's second generated token (column 2) with b's (column 1); the absolute alignment would not.
    #[test]
    fn aligns_by_generated_token() {
        let (ga, wa, ma) = ([3.0f32, 3.0, 1.0], [1.0f32, 1.0, 2.0], [1.0f32, 0.0, 1.0]);
        let (gb, wb, mb) = ([5.0f32, 2.0], [1.0f32, 2.0], [1.0f32, 1.0]);
        let mut sums = ColumnSums::default();
        let ka = compact_index(&ma);
        sums.add(&ga, &wa, &ma, |t| ka[t].unwrap_or(0));
        let kb = compact_index(&mb);
        sums.add(&gb, &wb, &mb, |t| kb[t].unwrap_or(0));
        // k = 0: (3·1 + 5·1)/(1 + 1) = 4; k = 1: (1·2 + 2·2)/(2 + 2) = 1.5
        assert!((sums.baseline(0) - 4.0).abs() < 1e-6);
        assert!((sums.baseline(1) - 1.5).abs() < 1e-6);
    }
}
