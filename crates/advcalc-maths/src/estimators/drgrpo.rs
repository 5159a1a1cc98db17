//! `drgrpo`: Dr. GRPO — the group-mean baseline without the std division; a named alias of
//! `grpo` with `norm_adv_by_std_in_grpo: false` (`docs/conventions.md` B1).
//!
//! **Computes** `a_i = s_i − μ_g`, `advantages = returns = a_i · m`.
//! **Inputs**: outcome scores `s_i = Σ_t token_level_rewards`, the convention's groups.
//! **Parameters**: none (`norm_adv_by_std_in_grpo` is ignored: the name says "no std").
//! **Edge cases** (verl): a singleton has μ = 0, so `a = s`; multi-output sessions are folded
//! as for `grpo` (§6.3). Under another `--convention`, the framework's "mean only" mode
//! (`estimators::conventions`, C5). Dr. GRPO's other half, a constant loss divisor, belongs
//! to the loss and does not change advantages.
//! **Source**: verl `verl/trainer/ppo/core_algos.py` `compute_grpo_outcome_advantage`
//! (`norm_adv_by_std_in_grpo=False`).

use crate::error::Result;
use crate::estimators::conventions::{self, Convention, Member, Rule, Scale, Under};
use crate::estimators::groups::Grouping;
use crate::estimators::moments::{RowMoments, StepWhitening};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
};

/// Per-row Dr. GRPO scalars for one batch (verl's rule).
pub fn drgrpo(scores: &[f64], grouping: &Grouping) -> Vec<f64> {
    super::grpo::grpo(scores, grouping, false)
}

/// `drgrpo` under each convention (`docs/conventions.md` C5): the framework's "mean only"
/// mode. Under `verl` its own batch work runs ([`Drgrpo`]: multi-output sessions folded).
pub const MEMBER: Member = Member {
    reads: &[],
    under: |c| {
        let scale = Scale::MeanOnly;
        Some(match c {
            Convention::Verl | Convention::Skyrl => Under::rule(Rule::Grpo(scale)),
            Convention::Trl => Under::rule(Rule::MeanStd(scale, conventions::TRL_STD)),
            Convention::OpenInstruct => {
                Under::rule(Rule::MeanStd(scale, conventions::OPEN_INSTRUCT_STD))
            }
            Convention::Openrlhf => Under::rule(Rule::OpenrlhfMean(scale)),
            Convention::NemoRl => Under {
                rule: Rule::Nemo(scale),
                reads: &["nemo.use_leave_one_out_baseline"],
            },
            // prime-rl's GRPO is already the mean baseline without the std
            Convention::PrimeRl => Under::rule(Rule::PrimeRlMean),
        })
    },
};

/// `-e drgrpo`: one scalar per row ([`Kind::Outcome`]).
pub struct Drgrpo;

impl Estimate for Drgrpo {
    const INFO: Info = Info {
        source: "Dr. GRPO",
        summary: "group mean baseline without the std (alias of grpo --no-norm-adv-by-std)",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &["convention"],
        weights_in_pass1: false,
        needs_tokens: None,
        rewards_under_mask: false,
        family: Family::Convention(MEMBER),
        ignores: &[],
        overview: Overview {
            section: Some("B1"),
            needs: None,
            returns: "= advantages",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "s (verl)",
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
        let scalars = match batch.folded_sessions(false) {
            Some(folded) => folded,
            None => drgrpo(&batch.scores(), &batch.grouping()),
        };
        batch.set_scalars(plan, scalars);
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
    use crate::estimators::test_support::{assert_close, grouping};

    // The issue: a group of 8 with one success → [0.875, −0.125 …] (exact).
    #[test]
    fn group_of_eight_one_success() {
        let mut s = vec![0.0; 8];
        s[0] = 1.0;
        let a = drgrpo(&s, &grouping(&["g"; 8]));
        assert_eq!(a[0], 0.875);
        assert!(a[1..].iter().all(|&x| x == -0.125));
    }

    // conventions.md T1: uid [a,a,a,b], s = [1,0,.5,.7] → [.5,−.5,0,.7] (singleton: raw s).
    #[test]
    fn singleton_keeps_its_score() {
        let a = drgrpo(&[1.0, 0.0, 0.5, 0.7], &grouping(&["a", "a", "a", "b"]));
        assert_close(&a, &[0.5, -0.5, 0.0, 0.7]);
    }
}
