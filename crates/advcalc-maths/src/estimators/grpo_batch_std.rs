//! `grpo_batch_std`: group-mean baseline scaled by ONE standard deviation of the whole
//! training batch (LitePPO; TRL `scale_rewards="batch"`) (`docs/conventions.md` B2).
//!
//! **Computes**:
//! ```text
//! μ_g = mean of the row's group;   σ_B = sample std (n − 1) of every row's s in the batch
//! a_i = (s_i − μ_g) / (σ_B + ε);   advantages = returns = a_i · m
//! ```
//! The std is over rows (one reward per completion), of the rewards, not the centred ones.
//! **Inputs**: outcome scores, groups. **Parameters**: the convention's [`BatchStdRule`]:
//! - `verl` (advcalc choice, verl has no such estimator): uid groups, a singleton's mean is 0
//!   as in verl `grpo`; ε = 1e-6; a batch of one row has σ_B = 1;
//! - `trl` (`trl/trainer/grpo_trainer.py`, advantages at lines 2685–2707): consecutive-n
//!   groups, a singleton's mean is its score; ε = 1e-4; a batch of one row has σ_B = 0;
//!   NaN rewards are left out of the mean and the std and get advantage 0 (`nanmean`,
//!   `nanstd`).
//!
//! **Edge cases**: see above; other conventions refuse the name.

use crate::error::Result;
use crate::estimators::conventions::{Convention, Member, Rule, Under};
use crate::estimators::groups::Grouping;
use crate::estimators::moments::{RowMoments, StepWhitening};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    conventions,
};

/// How a framework defines the batch-std advantage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchStdRule {
    pub epsilon: f64,
    /// verl: a singleton group's mean is 0 (its score is kept); TRL: its own score.
    pub singleton_mean_zero: bool,
    /// σ_B when the batch has a single (non-NaN) row.
    pub one_row_std: f64,
}

pub const VERL: BatchStdRule = BatchStdRule {
    epsilon: 1e-6,
    singleton_mean_zero: true,
    one_row_std: 1.0,
};

pub const TRL: BatchStdRule = BatchStdRule {
    epsilon: 1e-4,
    singleton_mean_zero: false,
    one_row_std: 0.0,
};

pub fn grpo_batch_std(scores: &[f64], grouping: &Grouping, rule: BatchStdRule) -> Vec<f64> {
    let n = grouping.n_groups;
    let (mut count, mut sum) = (vec![0usize; n], vec![0.0f64; n]);
    let (mut all_n, mut all_sum) = (0usize, 0.0f64);
    for (&s, &g) in scores.iter().zip(&grouping.group_of_row) {
        if s.is_nan() {
            continue;
        }
        count[g] += 1;
        sum[g] += s;
        all_n += 1;
        all_sum += s;
    }
    let mean: Vec<f64> = (0..n)
        .map(|g| match count[g] {
            0 => 0.0,
            1 if rule.singleton_mean_zero => 0.0,
            c => sum[g] / c as f64,
        })
        .collect();
    let sigma = if all_n > 1 {
        let mu = all_sum / all_n as f64;
        let sq: f64 = scores
            .iter()
            .filter(|s| !s.is_nan())
            .map(|&s| (s - mu) * (s - mu))
            .sum();
        (sq / (all_n - 1) as f64).sqrt()
    } else {
        rule.one_row_std
    };
    scores
        .iter()
        .zip(&grouping.group_of_row)
        .map(|(&s, &g)| {
            if s.is_nan() {
                0.0
            } else {
                (s - mean[g]) / (sigma + rule.epsilon)
            }
        })
        .collect()
}

/// `grpo_batch_std` under each convention (`docs/conventions.md` C5): verl's rule (advcalc
/// choice) and TRL's `scale_rewards="batch"`; the other frameworks have none.
pub const MEMBER: Member = Member {
    reads: &[],
    under: |c| match c {
        Convention::Verl => Some(Under::rule(Rule::BatchStd(VERL))),
        Convention::Trl => Some(Under::rule(Rule::BatchStd(TRL))),
        Convention::Openrlhf
        | Convention::NemoRl
        | Convention::OpenInstruct
        | Convention::Skyrl
        | Convention::PrimeRl => None,
    },
};

/// `-e grpo_batch_std`: one scalar per row ([`Kind::Outcome`]); its rule depends on the convention.
pub struct GrpoBatchStd;

impl Estimate for GrpoBatchStd {
    const INFO: Info = Info {
        source: "LitePPO; TRL scale_rewards=batch",
        summary: "group mean baseline divided by the batch std of the scores",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &["convention"],
        weights_in_pass1: false,
        needs_tokens: None,
        rewards_under_mask: false,
        family: Family::Convention(MEMBER),
        ignores: &[],
        overview: Overview {
            section: Some("B2"),
            needs: None,
            returns: "= advantages",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "s/(σ_batch+1e-6) (verl)",
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
        conventions::family_batch(batch, plan)
    }

    fn row_stats(rows: &Rows<'_>, stats: &mut RowMoments) -> Result<()> {
        conventions::family_row_stats(rows, stats)
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<StepWhitening>) -> Result<Tokens> {
        Ok(conventions::family_token_outputs(rows, plan))
    }
}

#[cfg(test)]
#[allow(clippy::approx_constant)] // hand-worked numbers, written as computed
mod tests {
    use super::*;
    use crate::estimators::test_support::{assert_close, grouping};

    // conventions.md T1: uid [a,a,a,b], s = [1,0,.5,.7]; σ_B = .420317, singleton mean 0.
    #[test]
    fn verl_rule_with_a_singleton() {
        let a = grpo_batch_std(
            &[1.0, 0.0, 0.5, 0.7],
            &grouping(&["a", "a", "a", "b"]),
            VERL,
        );
        assert_close(&a, &[1.189575, -1.189575, 0.0, 1.665404]);
    }

    // conventions.md T2 (trl): groups {1,0},{.25,.25}; σ_B = sample std of all 4 = .433013.
    #[test]
    fn trl_rule_two_groups() {
        let a = grpo_batch_std(
            &[1.0, 0.0, 0.25, 0.25],
            &grouping(&["x", "x", "y", "y"]),
            TRL,
        );
        assert_close(&a, &[1.154434, -1.154434, 0.0, 0.0]);
    }

    #[test]
    fn one_row_batches() {
        let g = grouping(&["x"]);
        assert_close(&grpo_batch_std(&[0.5], &g, VERL), &[0.5 / (1.0 + 1e-6)]);
        assert_eq!(grpo_batch_std(&[0.5], &g, TRL), vec![0.0]);
    }

    // TRL: a NaN reward is left out and gets 0; the others' statistics ignore it.
    #[test]
    fn trl_nan_rewards_are_left_out() {
        let a = grpo_batch_std(&[1.0, 0.0, f64::NAN], &grouping(&["x", "x", "x"]), TRL);
        let sigma = 0.5f64.sqrt();
        assert_close(&a, &[0.5 / (sigma + 1e-4), -0.5 / (sigma + 1e-4), 0.0]);
    }
}
