//! `maxrl`: MaxRL's mean-normalised group advantage `(s − μ_g)/μ_g`
//! (`docs/conventions.md` B3).
//!
//! **Computes**, per group, and writes `advantages = returns = a_i · m`:
//! - [`MaxrlRule::PrimeRl`] (the `verl` convention; verl has no MaxRL, advcalc choice):
//!   prime-rl `src/prime_rl/orchestrator/algo/max_rl.py`: `μ = mean(s_g)`; the whole group
//!   gets 0 if `μ ≤ 0`, else `a_i = (s_i − μ)/μ`. No ε; a singleton with `s > 0` gives 0.
//! - [`MaxrlRule::Skyrl`] (`--convention skyrl`): SkyRL
//!   `skyrl/backends/skyrl_train/utils/ppo_utils.py` `compute_maxrl_advantage`: n > 1:
//!   `(s − μ)/(μ + 1e-6)` with no guard (an all-zero group gives 0, a negative mean flips the
//!   sign); n = 1: the raw score `s`.
//!
//! **Inputs**: outcome scores, `uid` groups. **Parameters**: none. **Edge cases**: above.

use crate::estimators::groups::Grouping;

use super::grpo::per_row_from_group;
use crate::error::Result;
use crate::estimators::{
    Column, Estimate, Info, Kind, Plan, Rows, Tokens, TrainingBatch, broadcast_scalars, conventions,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxrlRule {
    PrimeRl,
    Skyrl,
}

pub fn maxrl(scores: &[f64], grouping: &Grouping, rule: MaxrlRule) -> Vec<f64> {
    per_row_from_group(scores, grouping, |s, count, sum| {
        let mean = sum / count as f64;
        match rule {
            MaxrlRule::PrimeRl if mean <= 0.0 => 0.0,
            MaxrlRule::PrimeRl => (s - mean) / mean,
            MaxrlRule::Skyrl if count == 1 => s,
            MaxrlRule::Skyrl => (s - mean) / (mean + 1e-6),
        }
    })
}

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
    };

    fn batch(batch: &TrainingBatch<'_>, plan: &mut Plan) -> Result<()> {
        conventions::family_batch(batch, plan)
    }

    fn token_outputs(rows: &Rows<'_>, plan: &Plan) -> Result<Tokens> {
        Ok(broadcast_scalars(rows, plan))
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
        let a = maxrl(&s, &g, MaxrlRule::PrimeRl);
        assert_close(&a[..2], &[7.0, -1.0]);
        let a = maxrl(&s, &g, MaxrlRule::Skyrl);
        assert_close(&a[..2], &[6.999944, -0.999992]);
    }

    // conventions.md T1: singleton mean .7 → 0 (prime-rl), raw .7 (SkyRL).
    #[test]
    fn singletons() {
        let g = grouping(&["a", "a", "a", "b"]);
        let s = [1.0, 0.0, 0.5, 0.7];
        assert_close(&maxrl(&s, &g, MaxrlRule::PrimeRl), &[1.0, -1.0, 0.0, 0.0]);
        assert_close(
            &maxrl(&s, &g, MaxrlRule::Skyrl),
            &[0.999998, -0.999998, 0.0, 0.7],
        );
    }

    // conventions.md: s = [−1, 0] — prime-rl 0 (mean ≤ 0); SkyRL divides by −.5 + 1e-6.
    #[test]
    fn negative_mean() {
        let g = grouping(&["a", "a"]);
        assert_eq!(maxrl(&[-1.0, 0.0], &g, MaxrlRule::PrimeRl), vec![0.0, 0.0]);
        assert_close(
            &maxrl(&[-1.0, 0.0], &g, MaxrlRule::Skyrl),
            &[1.000002, -1.000002],
        );
    }

    // conventions.md T3: s = [1,0,0,.5], μ = .375.
    #[test]
    fn group_of_four() {
        let g = grouping(&["a"; 4]);
        let s = [1.0, 0.0, 0.0, 0.5];
        assert_close(
            &maxrl(&s, &g, MaxrlRule::PrimeRl),
            &[1.666667, -1.0, -1.0, 0.333333],
        );
        assert_close(
            &maxrl(&s, &g, MaxrlRule::Skyrl),
            &[1.666662, -0.999997, -0.999997, 0.333332],
        );
    }
}
