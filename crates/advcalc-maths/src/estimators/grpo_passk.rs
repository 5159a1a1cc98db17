//! `grpo_passk`: pass@k advantages (docs/reference/verl-0.9.1.md §5.5, verl `compute_grpo_passk_outcome_advantage`).
//!
//! **Computes**, per group, the top two scores r1 ≥ r2: the top-1 row gets `r1 − r2`, divided
//! by `std_g + ε` (unbiased) when `norm_adv_by_std_in_grpo` — which this estimator, unlike the
//! others, reads from the config — and every other row gets 0; `advantages = returns = a·m`.
//! **Edge cases**: a tie at the top gives all zeros; a group with fewer than 2 rows is an
//! error, as in verl ("Pass@k requires at least 2 samples per group").

use crate::estimators::groups::Grouping;

use super::grpo::{EPSILON, group_mean_std};
use crate::error::{Error, Result};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL, broadcast_scalars,
};

/// `Err(group)` names a group with a single row.
pub fn grpo_passk(
    scores: &[f64],
    grouping: &Grouping,
    norm_adv_by_std_in_grpo: bool,
) -> Result<Vec<f64>, usize> {
    let (_, std) = group_mean_std(scores, grouping);
    let mut a = vec![0.0; scores.len()];
    for (g, members) in grouping.members().iter().enumerate() {
        if members.len() < 2 {
            return Err(g);
        }
        // torch.topk keeps the first of equal maxima; the value is the same either way.
        let mut top = members[0];
        for &i in &members[1..] {
            if scores[i] > scores[top] {
                top = i;
            }
        }
        let second = members
            .iter()
            .filter(|&&i| i != top)
            .map(|&i| scores[i])
            .fold(f64::NEG_INFINITY, f64::max);
        let diff = scores[top] - second;
        a[top] = if norm_adv_by_std_in_grpo {
            diff / (std[g] + EPSILON)
        } else {
            diff
        };
    }
    Ok(a)
}

/// `-e grpo_passk`: one scalar per row ([`Kind::Outcome`]).
pub struct GrpoPassk;

impl Estimate for GrpoPassk {
    const INFO: Info = Info {
        source: VERL,
        summary: "pass@k: only each group's best row gets r1 − r2 (over std + 1e-6)",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &["norm_adv_by_std_in_grpo"],
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
            singleton: "**error**",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = ();
    type Options = ();

    fn batch(batch: &TrainingBatch<'_>, plan: &mut EstimatorPlan) -> Result<()> {
        let g = batch.grouping();
        let scalars =
            grpo_passk(&batch.scores(), &g, batch.settings.norm_adv_by_std_in_grpo).map_err(|group| {
                let row = g.group_of_row.iter().position(|&x| x == group).unwrap_or(0);
                Error::data(format!(
                    "{}: column `uid` row {}: group {} has 1 row, and Pass@k requires at least 2 samples per group (verl raises ValueError)",
                    batch.file, batch.rows[row], batch.stats.uid[batch.rows[row]]
                ))
            })?;
        batch.set_scalars(plan, scalars);
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan) -> Result<Tokens> {
        Ok(broadcast_scalars(rows, plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::test_support::grouping;

    // Reference §5.5: groups [1, 0, .25] and [.5, 1] → [1.44115055, 0, 0, 0, 1.41420949].
    #[test]
    fn worked_example() {
        let a = grpo_passk(
            &[1.0, 0.0, 0.25, 0.5, 1.0],
            &grouping(&["x", "x", "x", "y", "y"]),
            true,
        )
        .unwrap();
        let e = [1.44115055, 0.0, 0.0, 0.0, 1.41420949];
        crate::test_support::assert_close("grpo_passk", &a, &e, 1e-6, 0.0);
    }

    #[test]
    fn singleton_group_is_an_error() {
        assert_eq!(
            grpo_passk(&[1.0, 0.0, 2.0], &grouping(&["x", "x", "y"]), true),
            Err(1)
        );
    }

    #[test]
    fn tie_at_the_top_gives_zeros() {
        let a = grpo_passk(&[1.0, 1.0, 0.0], &grouping(&["x", "x", "x"]), false).unwrap();
        assert_eq!(a, vec![0.0, 0.0, 0.0]);
    }
}
