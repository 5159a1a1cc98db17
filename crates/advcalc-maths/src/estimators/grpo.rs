//! `grpo`: group-relative outcome advantages (docs/reference/verl-0.9.1.md §5.2, verl
//! `compute_grpo_outcome_advantage`).
//!
//! **Computes** one scalar per row, broadcast onto the row's mask:
//!
//! ```text
//! s_i   = Σ_t token_level_rewards[i, t]          (all positions: the mask is NOT applied)
//! μ_g   = mean(s_j : j ∈ g),  σ_g = std(s_j : j ∈ g)   (unbiased, n − 1)
//! a_i   = (s_i − μ_g) / (σ_g + ε)   with norm_adv_by_std_in_grpo (default)
//! a_i   =  s_i − μ_g                without it (Dr. GRPO)
//! advantages[i, t] = returns[i, t] = a_i · m[i, t]
//! ```
//!
//! **Inputs**: per-row outcome scores `s` and the `uid` grouping of one training batch.
//! **Parameters**: `norm_adv_by_std_in_grpo` (verl's key, `algorithm.norm_adv_by_std_in_grpo`); ε = 1e-6 (the trainer
//! never passes another).
//!
//! **Edge cases**, as verl:
//! - a singleton group has μ = 0, σ = 1, so it gets `s/(1 + 1e-6)` (or `s`), not 0;
//! - a row whose mask is all zero still counts in its group's statistics, and gets 0;
//! - a reward sitting on a mask-0 position (a tool token) still counts in `s`.
//!
//! **Deliberate deviation**: statistics are accumulated in f64, so a group whose scores are
//! all equal gets exactly 0. verl's f32 mean can be 1 ulp off for non-dyadic values and give
//! ≈ 0.029 instead (docs/reference/verl-0.9.1.md §4.2, §9.6); advcalc returns the exact answer.

use crate::error::Result;
use crate::estimators::conventions::{self, Convention, Member, Rule, Scale, Under};
use crate::estimators::groups::{Grouping, group_means, group_sums};
use crate::estimators::moments::{RowMoments, StepWhitening};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL,
};

/// verl's default `epsilon` for the GRPO family.
pub const EPSILON: f64 = 1e-6;

/// Per-row GRPO advantage scalars for one batch.
pub fn grpo(scores: &[f64], grouping: &Grouping, norm_adv_by_std_in_grpo: bool) -> Vec<f64> {
    debug_assert_eq!(scores.len(), grouping.group_of_row.len());
    let (mean, std) = group_mean_std(scores, grouping);
    scores
        .iter()
        .zip(&grouping.group_of_row)
        .map(|(&s, &g)| {
            if norm_adv_by_std_in_grpo {
                (s - mean[g]) / (std[g] + EPSILON)
            } else {
                s - mean[g]
            }
        })
        .collect()
}

/// Group mean and unbiased standard deviation; a singleton group gets (0, 1) as in verl.
pub fn group_mean_std(scores: &[f64], grouping: &Grouping) -> (Vec<f64>, Vec<f64>) {
    let n = grouping.n_groups;
    let (count, _) = group_sums(scores, grouping);
    let mean = group_means(scores, grouping);
    let mut sq = vec![0.0f64; n];
    for (&s, &g) in scores.iter().zip(&grouping.group_of_row) {
        let d = s - mean[g];
        sq[g] += d * d;
    }
    let std = (0..n)
        .map(|g| {
            if count[g] > 1 {
                (sq[g] / (count[g] - 1) as f64).sqrt()
            } else {
                1.0
            }
        })
        .collect();
    (mean, std)
}

/// `grpo` under each convention (`docs/conventions.md` C5): the framework's group mean and
/// std; it reads `norm_adv_by_std_in_grpo` under all of them. Under `verl` its own batch work
/// runs ([`Grpo`]: verl's rule, multi-output sessions folded).
pub const MEMBER: Member = Member {
    reads: &["norm_adv_by_std_in_grpo"],
    under: |c| {
        let scale = Scale::ByStdWhenSet;
        Some(match c {
            Convention::Verl | Convention::Skyrl => Under::rule(Rule::Grpo(scale)),
            Convention::Trl => Under::rule(Rule::MeanStd(scale, conventions::TRL_STD)),
            Convention::OpenInstruct => {
                Under::rule(Rule::MeanStd(scale, conventions::OPEN_INSTRUCT_STD))
            }
            Convention::Openrlhf => Under::rule(Rule::OpenrlhfMean(scale)),
            Convention::NemoRl => Under {
                rule: Rule::Nemo(scale),
                reads: &["nemo.use_leave_one_out_baseline", "nemo.normalize_rewards"],
            },
            // score_group: reward − group mean, no std; norm_adv_by_std_in_grpo has no say
            Convention::PrimeRl => Under::rule(Rule::PrimeRlMean),
        })
    },
};

/// `-e grpo`: one scalar per row ([`Kind::Outcome`]).
pub struct Grpo;

impl Estimate for Grpo {
    const INFO: Info = Info {
        source: VERL,
        summary: "group-relative outcome advantage (s − mean_g)/(std_g + 1e-6); multi-output sessions scored by their last output",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &["norm_adv_by_std_in_grpo", "convention"],
        weights_in_pass1: false,
        needs_tokens: None,
        rewards_under_mask: false,
        family: Family::Convention(MEMBER),
        ignores: &[],
        overview: Overview {
            section: None,
            needs: Some("`uid` (opt. `session_id` + `output_index`)"),
            returns: "= advantages",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "s/(1+1e-6), or s without std",
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
        let norm_adv_by_std_in_grpo = batch.settings.norm_adv_by_std_in_grpo;
        let scalars = match batch.folded_sessions(norm_adv_by_std_in_grpo) {
            Some(folded) => folded,
            None => grpo(&batch.scores(), &batch.grouping(), norm_adv_by_std_in_grpo),
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
    use crate::data::GroupKey;

    fn grouping(labels: &[&str]) -> Grouping {
        let keys: Vec<GroupKey> = labels.iter().map(|l| GroupKey::Str((*l).into())).collect();
        Grouping::by_key(keys.iter())
    }

    /// Scores as verl holds them: f32 values.
    fn f32_scores(s: &[f32]) -> Vec<f64> {
        s.iter().map(|&x| x as f64).collect()
    }

    fn assert_f32_eq(actual: &[f64], expected: &[f32]) {
        let actual: Vec<f32> = actual.iter().map(|&a| a as f32).collect();
        crate::test_support::assert_close("grpo", &actual, expected, 2e-7, 1e-6);
    }

    // Reference §5.2 / §11: idx [a,a,a,b,c,c], s = [1,0,1,.7,.1,.1].
    #[test]
    fn worked_example_norm_on() {
        let g = grouping(&["a", "a", "a", "b", "c", "c"]);
        let s = f32_scores(&[1.0, 0.0, 1.0, 0.7, 0.1, 0.1]);
        assert_f32_eq(
            &grpo(&s, &g, true),
            &[0.577349246, -1.15469861, 0.577349246, 0.699999332, 0.0, 0.0],
        );
    }

    #[test]
    fn worked_example_norm_off() {
        let g = grouping(&["a", "a", "a", "b", "c", "c"]);
        let s = f32_scores(&[1.0, 0.0, 1.0, 0.7, 0.1, 0.1]);
        assert_f32_eq(
            &grpo(&s, &g, false),
            &[
                0.333333313,
                -0.666666687,
                0.333333313,
                0.699999988,
                0.0,
                0.0,
            ],
        );
    }

    // Hand computation: a group {2, 4}: μ = 3, σ = √2; a = ±1/(√2 + 1e-6).
    #[test]
    fn two_member_group_by_hand() {
        let g = grouping(&["x", "x"]);
        let a = grpo(&[2.0, 4.0], &g, true);
        let expect = 1.0 / (2f64.sqrt() + 1e-6);
        assert!((a[0] + expect).abs() < 1e-12 && (a[1] - expect).abs() < 1e-12);
    }

    // Reference §11 trap: seven 0.3 give 0.028872898 in verl (an f32 artefact); advcalc
    // returns the exact answer, 0.
    #[test]
    fn equal_non_dyadic_scores_give_exactly_zero() {
        let g = grouping(&["t"; 7]);
        let s = f32_scores(&[0.3; 7]);
        assert!(grpo(&s, &g, true).iter().all(|&a| a == 0.0));
    }

    #[test]
    fn singleton_group_is_not_zero() {
        let g = grouping(&["only"]);
        assert_eq!(grpo(&[0.5], &g, true), vec![0.5 / (1.0 + 1e-6)]);
        assert_eq!(grpo(&[0.5], &g, false), vec![0.5]);
    }

    #[test]
    fn group_members_need_not_be_adjacent() {
        let g = grouping(&["a", "b", "a", "b"]);
        let a = grpo(&[1.0, 5.0, 0.0, 5.0], &g, false);
        assert_eq!(a, vec![0.5, 0.0, -0.5, 0.0]);
    }
}
