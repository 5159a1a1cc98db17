//! `maxrl`: MaxRL's mean-normalised group advantage `(s − μ_g)/μ_g`
//! (`docs/conventions.md` B3).
//!
//! **Computes**, per group, and writes `advantages = returns = a_i · m`:
//! - [`MaxrlRule::PrimeRl`] (the `verl` convention; verl has no MaxRL, advcalc choice):
//!   prime-rl `src/prime_rl/orchestrator/algo/max_rl.py`: `μ = mean(s_g)`; the whole group
//!   gets 0 if `μ ≤ 0`, else `a_i = (s_i − μ)/μ`. No ε; a singleton with `s > 0` gives 0.
//!   Rows with no policy token (no valid token after rejection) are left out of μ and get 0:
//!   prime-rl's `score_group` iterates `iter_trainable_traces` (`algo/base.py`), which drops
//!   traces whose nodes hold no sampled token before the mean is taken.
//! - [`MaxrlRule::Skyrl`] (`--convention skyrl`): SkyRL
//!   `skyrl/backends/skyrl_train/utils/ppo_utils.py` `compute_maxrl_advantage`: n > 1:
//!   `(s − μ)/(μ + 1e-6)` with no guard (an all-zero group gives 0, a negative mean flips the
//!   sign); n = 1: the raw score `s`.
//!
//! **Inputs**: outcome scores, whether each row has a valid token, `uid` groups.
//! **Parameters**: none. **Edge cases**: above; a group whose rows all lack tokens gets 0.

use crate::estimators::groups::Grouping;

use super::groups::per_row_from_group;
use crate::error::Result;
use crate::estimators::conventions::{Convention, Member, Rule, Under};
use crate::estimators::moments::{RowMoments, StepWhitening};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    conventions,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxrlRule {
    PrimeRl,
    Skyrl,
}

/// `has_tokens[i]`: row `i` has at least one valid token (read by the prime-rl rule only;
/// SkyRL's `compute_maxrl_advantage` counts every row of the `uid`).
pub fn maxrl(
    scores: &[f64],
    has_tokens: &[bool],
    grouping: &Grouping,
    rule: MaxrlRule,
) -> Vec<f64> {
    match rule {
        MaxrlRule::Skyrl => per_row_from_group(scores, grouping, |s, count, sum| {
            if count == 1 {
                s
            } else {
                (s - sum / count as f64) / (sum / count as f64 + 1e-6)
            }
        }),
        MaxrlRule::PrimeRl => {
            let (mut count, mut sum) = (
                vec![0usize; grouping.n_groups],
                vec![0.0; grouping.n_groups],
            );
            for ((&s, &g), &t) in scores.iter().zip(&grouping.group_of_row).zip(has_tokens) {
                if t {
                    count[g] += 1;
                    sum[g] += s;
                }
            }
            scores
                .iter()
                .zip(&grouping.group_of_row)
                .zip(has_tokens)
                .map(|((&s, &g), &t)| {
                    let mean = sum[g] / count[g] as f64;
                    if !t || count[g] == 0 || mean <= 0.0 {
                        0.0
                    } else {
                        (s - mean) / mean
                    }
                })
                .collect()
        }
    }
}

/// `maxrl` under each convention (`docs/conventions.md` C5): prime-rl's rule under `verl` and
/// `prime-rl`, SkyRL's under `skyrl`; the other frameworks have none.
pub const MEMBER: Member = Member {
    reads: &[],
    under: |c| match c {
        Convention::Verl | Convention::PrimeRl => {
            Some(Under::rule(Rule::Maxrl(MaxrlRule::PrimeRl)))
        }
        Convention::Skyrl => Some(Under::rule(Rule::Maxrl(MaxrlRule::Skyrl))),
        Convention::Trl | Convention::Openrlhf | Convention::NemoRl | Convention::OpenInstruct => {
            None
        }
    },
};

/// `-e maxrl`: one scalar per row ([`Kind::Outcome`]); its rule depends on the convention.
pub struct Maxrl;

impl Estimate for Maxrl {
    const INFO: Info = Info {
        source: "prime-rl; SkyRL",
        summary: "(s − mean_g)/mean_g, 0 for groups with mean ≤ 0 (prime-rl rule)",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &["convention"],
        weights_in_pass1: false,
        needs_tokens: None,
        rewards_under_mask: false,
        family: Family::Convention(MEMBER),
        ignores: &[],
        overview: Overview {
            section: Some("B3"),
            needs: None,
            returns: "= advantages",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "0 (prime-rl rule; rows without a valid token leave the group mean)",
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

    // conventions.md: group of 8 with one success → prime-rl [7, −1 …]; SkyRL [6.999944, −.999992].
    #[test]
    fn group_of_eight_one_success() {
        let mut s = vec![0.0; 8];
        s[0] = 1.0;
        let g = grouping(&["g"; 8]);
        let a = maxrl(&s, &[true; 8][..s.len()], &g, MaxrlRule::PrimeRl);
        assert_close(&a[..2], &[7.0, -1.0]);
        let a = maxrl(&s, &[true; 8][..s.len()], &g, MaxrlRule::Skyrl);
        assert_close(&a[..2], &[6.999944, -0.999992]);
    }

    // conventions.md T1: singleton mean .7 → 0 (prime-rl), raw .7 (SkyRL).
    #[test]
    fn singletons() {
        let g = grouping(&["a", "a", "a", "b"]);
        let s = [1.0, 0.0, 0.5, 0.7];
        assert_close(
            &maxrl(&s, &[true; 8][..s.len()], &g, MaxrlRule::PrimeRl),
            &[1.0, -1.0, 0.0, 0.0],
        );
        assert_close(
            &maxrl(&s, &[true; 8][..s.len()], &g, MaxrlRule::Skyrl),
            &[0.999998, -0.999998, 0.0, 0.7],
        );
    }

    // conventions.md: s = [−1, 0] — prime-rl 0 (mean ≤ 0); SkyRL divides by −.5 + 1e-6.
    #[test]
    fn negative_mean() {
        let g = grouping(&["a", "a"]);
        assert_eq!(
            maxrl(&[-1.0, 0.0], &[true; 2], &g, MaxrlRule::PrimeRl),
            vec![0.0, 0.0]
        );
        assert_close(
            &maxrl(&[-1.0, 0.0], &[true; 2], &g, MaxrlRule::Skyrl),
            &[1.000002, -1.000002],
        );
    }

    // conventions.md T3: s = [1,0,0,.5], μ = .375.
    #[test]
    fn group_of_four() {
        let g = grouping(&["a"; 4]);
        let s = [1.0, 0.0, 0.0, 0.5];
        assert_close(
            &maxrl(&s, &[true; 8][..s.len()], &g, MaxrlRule::PrimeRl),
            &[1.666667, -1.0, -1.0, 0.333333],
        );
        assert_close(
            &maxrl(&s, &[true; 8][..s.len()], &g, MaxrlRule::Skyrl),
            &[1.666662, -0.999997, -0.999997, 0.333332],
        );
    }

    // prime-rl drops traces with no sampled token before the mean: s = [1, 0, 1] with the
    // last row tokenless → μ = .5 over the first two → [1, −1, 0]; counting it, μ = 2/3 would
    // give [.5, −1, .5]. SkyRL counts every row: (s − 2/3)/(2/3 + 1e-6).
    #[test]
    fn rows_without_tokens_leave_the_prime_rl_mean() {
        let g = grouping(&["a"; 3]);
        let s = [1.0, 0.0, 1.0];
        let t = [true, true, false];
        assert_close(&maxrl(&s, &t, &g, MaxrlRule::PrimeRl), &[1.0, -1.0, 0.0]);
        assert_close(
            &maxrl(&s, &t, &g, MaxrlRule::Skyrl),
            &[0.499999, -0.999999, 0.499999],
        );
        // a group with no tokens at all: nothing to train, 0
        assert_eq!(maxrl(&s, &[false; 3], &g, MaxrlRule::PrimeRl), vec![0.0; 3]);
    }
}
