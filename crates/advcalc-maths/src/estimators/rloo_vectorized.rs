//! `rloo_vectorized`: verl's tensorised leave-one-out (docs/reference/verl-0.9.1.md §5.8,
//! `compute_rloo_vectorized_outcome_advantage`).
//!
//! **Computes** `a_i = (c·s_i − S_g)/max(c − 1, 1) · [c > 1]` with c the group size and S_g the
//! group's score sum; `advantages = returns = a_i · m`. **Edge case**: a singleton gets **0**
//! (where `rloo` gives `s`, quirk §9.5). Labels are grouped by value (`np.unique`).

use crate::estimators::groups::Grouping;

use super::groups::per_row_from_group;
use crate::error::Result;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL, broadcast_scalars,
};

pub fn rloo_vectorized(scores: &[f64], grouping: &Grouping) -> Vec<f64> {
    per_row_from_group(scores, grouping, |s, count, sum| {
        let c = count as f64;
        if count > 1 {
            (c * s - sum) / (c - 1.0)
        } else {
            0.0
        }
    })
}

/// `-e rloo_vectorized`: one scalar per row ([`Kind::Outcome`]).
pub struct RlooVectorized;

impl Estimate for RlooVectorized {
    const INFO: Info = Info {
        source: VERL,
        summary: "tensorised leave-one-out baseline; a singleton gets 0",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &[],
        weights_in_pass1: false,
        needs_tokens: None,
        rewards_under_mask: false,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: None,
            needs: None,
            returns: "= advantages",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "**0**",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = ();
    type Options = ();

    fn batch(batch: &TrainingBatch<'_>, plan: &mut EstimatorPlan) -> Result<()> {
        batch.set_scalars(plan, rloo_vectorized(&batch.scores(), &batch.grouping()));
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan) -> Result<Tokens> {
        Ok(broadcast_scalars(rows, plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::test_support::{f32_scores, grouping};

    // Reference §11: [0.5, −1, 0.5, 0, 0, 0] (the singleton b gets 0).
    #[test]
    fn worked_example() {
        let a = rloo_vectorized(
            &f32_scores(&[1.0, 0.0, 1.0, 0.7, 0.1, 0.1]),
            &grouping(&["a", "a", "a", "b", "c", "c"]),
        );
        let e = [0.5, -1.0, 0.5, 0.0, 0.0, 0.0];
        crate::test_support::assert_close("rloo_vectorized", &a, &e, 1e-7, 0.0);
    }
}
