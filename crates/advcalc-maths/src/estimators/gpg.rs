//! `gpg`: group policy gradient (docs/reference/verl-0.9.1.md §5.10, verl `compute_gpg_outcome_advantage`).
//!
//! **Computes** `α = B / max(#{i : s_i ≠ 0}, 1)` over the whole batch (B counts every row,
//! quirk §9.10) and `a_i = α·(s_i − μ_g)` (a singleton has μ = 0, f_norm = 1);
//! `advantages = returns = a·m`. ε and the group std are unused, as in verl.

use crate::estimators::groups::Grouping;

use super::groups::group_means;
use crate::error::Result;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL, broadcast_scalars,
};

pub fn gpg(scores: &[f64], grouping: &Grouping) -> Vec<f64> {
    let nonzero = scores.iter().filter(|&&s| s != 0.0).count().max(1);
    let alpha = (scores.len() as f32 / nonzero as f32) as f64; // an f32 tensor in verl
    let mean = group_means(scores, grouping);
    scores
        .iter()
        .zip(&grouping.group_of_row)
        .map(|(&s, &g)| alpha * (s - mean[g]))
        .collect()
}

/// `-e gpg`: one scalar per row ([`Kind::Outcome`]).
pub struct Gpg;

impl Estimate for Gpg {
    const INFO: Info = Info {
        source: VERL,
        summary: "group mean baseline scaled by B / #nonzero scores",
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
            singleton: "α·s",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = ();
    type Options = ();

    fn batch(batch: &TrainingBatch<'_>, plan: &mut EstimatorPlan) -> Result<()> {
        batch.set_scalars(plan, gpg(&batch.scores(), &batch.grouping()));
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

    // Reference §5.10: α = 6/5 = 1.2 → [0.4, −0.8, 0.4, 0.84, 0, 0].
    #[test]
    fn worked_example() {
        let a = gpg(
            &f32_scores(&[1.0, 0.0, 1.0, 0.7, 0.1, 0.1]),
            &grouping(&["a", "a", "a", "b", "c", "c"]),
        );
        let e = [
            0.400000006,
            -0.800000072,
            0.400000006,
            0.840000033,
            0.0,
            0.0,
        ];
        crate::test_support::assert_close("gpg", &a, &e, 1e-6, 0.0);
    }
}
