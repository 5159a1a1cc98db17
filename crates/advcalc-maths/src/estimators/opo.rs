//! `opo`: length-weighted group baseline (docs/reference/verl-0.9.1.md §5.9, verl `compute_opo_outcome_advantage`).
//!
//! **Computes** `b_g = Σ_{j∈g} ℓ_j s_j / Σ_{j∈g} ℓ_j` with `ℓ_j` the row's valid-token count
//! (after rejection), `a_i = s_i − b_g` (a singleton has b = 0); `advantages = returns = a·m`.
//! **Edge case / deviation**: when every row of a group has ℓ = 0, verl divides 0 by 0 and
//! writes NaN over the whole rows (quirk §9.9); advcalc writes 0 there and counts the rows.

use std::hash::Hasher;

use crate::error::Result;
use crate::estimators::fingerprint::V1;
use crate::estimators::groups::Grouping;
use crate::estimators::state::{OwnPlan, Reading, Written, malformed};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL, broadcast_scalars,
};

/// Returns the per-row scalars and the number of rows whose group had no valid token.
pub fn opo(scores: &[f64], lengths: &[f64], grouping: &Grouping) -> (Vec<f64>, usize) {
    let n = grouping.n_groups;
    let mut count = vec![0usize; n];
    let mut weighted = vec![0.0f64; n];
    let mut total = vec![0.0f64; n];
    for ((&s, &l), &g) in scores.iter().zip(lengths).zip(&grouping.group_of_row) {
        count[g] += 1;
        weighted[g] += l * s;
        total[g] += l;
    }
    let mut empty_rows = 0;
    let a = scores
        .iter()
        .zip(&grouping.group_of_row)
        .map(|(&s, &g)| {
            if count[g] <= 1 {
                s
            } else if total[g] == 0.0 {
                empty_rows += 1;
                0.0
            } else {
                s - weighted[g] / total[g]
            }
        })
        .collect();
    (a, empty_rows)
}

/// opo's part of the plan: how many rows it set to 0 where verl writes NaN (a warning of the
/// whole input; a shard holds none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NanRows(pub usize);

impl OwnPlan for NanRows {
    fn new(_: usize) -> Self {
        NanRows(0)
    }

    fn restrict(&self, _: &[usize], _: &[Option<i64>]) -> Self {
        NanRows(0)
    }

    fn write(&self, out: &mut Written) {
        out.value("nan_rows", self.0.into());
    }

    fn read(input: &Reading) -> Result<Self> {
        let n = input.value("nan_rows").as_u64();
        Ok(NanRows(n.ok_or_else(|| malformed("nan_rows"))? as usize))
    }

    fn fingerprint<H: Hasher>(&self, rows: usize, h: &mut H) {
        V1 {
            nan_rows: self.0,
            ..V1::default()
        }
        .encode(rows, h);
    }

    fn nan_rows(&self) -> usize {
        self.0
    }
}

/// `-e opo`: one scalar per row ([`Kind::Outcome`]).
pub struct Opo;

impl Estimate for Opo {
    const INFO: Info = Info {
        source: VERL,
        summary: "length-weighted group baseline (valid-token counts after rejection)",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &[],
        weights_in_pass1: false,
        needs_tokens: Some("each row's valid-token count (its baseline is length-weighted)"),
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
            singleton: "s",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = NanRows;
    type Options = ();

    fn batch(batch: &TrainingBatch<'_>, plan: &mut EstimatorPlan<NanRows>) -> Result<()> {
        let (scalars, nan_rows) = opo(&batch.scores(), &batch.valid(), &batch.grouping());
        plan.own.0 += nan_rows;
        batch.set_scalars(plan, scalars);
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<NanRows>) -> Result<Tokens> {
        Ok(broadcast_scalars(rows, plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::test_support::{f32_scores, grouping};

    // Reference §11: three-token rows, row 1's last token masked (ℓ = [3,2,3,3,3,3]):
    // b_a = (3 + 3)/8 = 0.75 → [0.25, −0.75, 0.25, 0.7, 0, 0].
    #[test]
    fn worked_example() {
        let (a, empty) = opo(
            &f32_scores(&[1.0, 0.0, 1.0, 0.7, 0.1, 0.1]),
            &[3.0, 2.0, 3.0, 3.0, 3.0, 3.0],
            &grouping(&["a", "a", "a", "b", "c", "c"]),
        );
        let e = [0.25, -0.75, 0.25, 0.699999988, 0.0, 0.0];
        crate::test_support::assert_close("opo", &a, &e, 1e-7, 0.0);
        assert_eq!(empty, 0);
    }

    // Hand computation: lengths [1, 3] for scores [1, 0]: b = 1/4 → [0.75, −0.25].
    #[test]
    fn length_weighted() {
        let (a, _) = opo(&[1.0, 0.0], &[1.0, 3.0], &grouping(&["g", "g"]));
        assert_eq!(a, vec![0.75, -0.25]);
    }

    #[test]
    fn all_empty_group_gives_zero_not_nan() {
        let (a, empty) = opo(&[1.0, 0.0], &[0.0, 0.0], &grouping(&["g", "g"]));
        assert_eq!(a, vec![0.0, 0.0]);
        assert_eq!(empty, 2);
    }
}
