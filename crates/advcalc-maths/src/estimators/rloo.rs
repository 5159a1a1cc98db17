//! `rloo`: leave-one-out baseline (docs/reference/verl-0.9.1.md §5.7, verl `compute_rloo_outcome_advantage`).
//!
//! **Computes** `a_i = s_i·n/(n−1) − μ_g·n/(n−1)` = `s_i − mean(s_j, j ≠ i)` for a group of
//! n > 1, and `a_i = s_i` (the raw score) for a singleton; `advantages = returns = a_i · m`.
//! **Inputs**: outcome scores `s_i = Σ_t token_level_rewards` (all positions), `uid` groups.
//! **Parameters**: none. **Edge case**: singleton → `s` (unlike `rloo_vectorized`, §9.5).

use crate::estimators::groups::Grouping;

use super::groups::per_row_from_group;
use crate::error::Result;
use crate::estimators::conventions::{self, Convention, Member, Rule, Under};
use crate::estimators::moments::{RowMoments, StepWhitening};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL,
};

pub fn rloo(scores: &[f64], grouping: &Grouping) -> Vec<f64> {
    per_row_from_group(scores, grouping, |s, count, sum| {
        let n = count as f64;
        if count > 1 {
            // verl's operation order, for its rounding
            let mean = sum / n;
            s * n / (n - 1.0) - mean * n / (n - 1.0)
        } else {
            s
        }
    })
}

/// `rloo` under each convention (`docs/conventions.md` C5); open-instruct has none. Under
/// `verl` its own batch work runs ([`Rloo`]).
pub const MEMBER: Member = Member {
    reads: &[],
    under: |c| match c {
        Convention::Verl => Some(Under::rule(Rule::VerlRloo)),
        Convention::Skyrl => Some(Under::rule(Rule::SkyrlRloo)),
        Convention::Trl => Some(Under {
            rule: Rule::TrlRloo,
            reads: &["trl.normalize_advantages"],
        }),
        Convention::Openrlhf => Some(Under::rule(Rule::OpenrlhfRloo)),
        Convention::NemoRl => Some(Under::rule(Rule::NemoRloo)),
        // prime-rl has no leave-one-out algorithm
        Convention::OpenInstruct | Convention::PrimeRl => None,
    },
};

/// `-e rloo`: one scalar per row ([`Kind::Outcome`]).
pub struct Rloo;

impl Estimate for Rloo {
    const INFO: Info = Info {
        source: VERL,
        summary: "leave-one-out baseline; a singleton keeps its raw score",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &["convention"],
        weights_in_pass1: false,
        needs_tokens: None,
        rewards_under_mask: false,
        family: Family::Convention(MEMBER),
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
    type Stats = RowMoments;
    type Plan = StepWhitening;
    type Options = ();

    fn batch(
        batch: &TrainingBatch<'_, RowMoments>,
        plan: &mut EstimatorPlan<StepWhitening>,
    ) -> Result<()> {
        if batch.settings.ext.convention != Convention::Verl {
            return conventions::family_batch(batch, plan);
        }
        batch.set_scalars(plan, rloo(&batch.scores(), &batch.grouping()));
        Ok(())
    }

    fn row_stats(rows: &Rows<'_>, stats: &mut RowMoments) -> Result<()> {
        conventions::family_row_stats(rows, stats)
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<StepWhitening>) -> Result<Tokens> {
        Ok(conventions::family_token_outputs(rows, plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::test_support::{f32_scores, grouping};

    // Reference §11: s = [1,0,1,.7,.1,.1] over [a,a,a,b,c,c] → [0.5, −1, 0.5, 0.7, 0, 0].
    #[test]
    fn worked_example() {
        let a = rloo(
            &f32_scores(&[1.0, 0.0, 1.0, 0.7, 0.1, 0.1]),
            &grouping(&["a", "a", "a", "b", "c", "c"]),
        );
        let e = [0.5, -1.0, 0.5, 0.699999988, 0.0, 0.0];
        crate::test_support::assert_close("rloo", &a, &e, 1e-7, 0.0);
    }
}
