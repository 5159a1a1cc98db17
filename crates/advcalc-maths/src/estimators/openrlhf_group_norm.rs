//! `openrlhf_group_norm`: OpenRLHF's `group_norm` advantage — group mean/std shaping,
//! written through OpenRLHF's token pipeline, not whitened (`docs/conventions.md` B5).
//!
//! **Computes** `a_i = clip((s_i − μ_g)/(σ_g + 1e-9))` (sample std, consecutive-n groups),
//! and `advantages = returns = a_i` at every position up to the row's last mask-1 token (tool
//! tokens included), 0 after it. **Inputs**: outcome scores, the mask, `group_size`.
//! **Parameters**: `openrlhf.reward_clip` (default `[-10, 10]`); γ is forced to 1.
//! **Edge cases**: a group of one row is an error (OpenRLHF asserts n > 1); an all-equal
//! group gives `0/(0 + 1e-9) = 0`. **Source**: OpenRLHF
//! `openrlhf/trainer/ppo_utils/experience_maker.py` `compute_advantages_and_returns`
//! (see [`super::openrlhf`]).

use crate::estimators::groups::Grouping;

use super::openrlhf::{Shaping, group_scalar};
use crate::error::Result;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    openrlhf,
};

pub fn openrlhf_group_norm(scores: &[f64], grouping: &Grouping) -> Result<Vec<f64>, usize> {
    group_scalar(scores, grouping, Shaping::GroupNorm)
}

/// `-e openrlhf_group_norm`: OpenRLHF's token pipeline ([`Kind::Token`], `estimators::openrlhf`).
pub struct OpenrlhfGroupNorm;

impl Estimate for OpenrlhfGroupNorm {
    const INFO: Info = Info {
        source: openrlhf::SOURCE,
        summary: "group mean/std normalised score on the last token, γ = 1 returns",
        kind: Kind::Token,
        columns: &[Column::Uid],
        settings: &[
            "group_size",
            "openrlhf.reward_clip",
            "openrlhf.kl_coef",
            "openrlhf.kl_estimator",
        ],
        weights_in_pass1: false,
        needs_tokens: None,
        rewards_under_mask: false,
        family: Family::Openrlhf,
        ignores: &[],
        overview: Overview {
            section: Some("B5"),
            needs: Some(
                "`uid` (blocks of `group_size`); `old_log_probs`, `ref_log_prob` with `openrlhf.kl_coef > 0`",
            ),
            returns: "= advantages",
            whitening: "no",
            masked: false,
            masked_note: Some("held up to the last valid token"),
            singleton: "**error**",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = ();
    type Options = ();

    fn batch(batch: &TrainingBatch<'_>, plan: &mut EstimatorPlan) -> Result<()> {
        openrlhf::batch(batch, plan, openrlhf_group_norm)
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan) -> Result<Tokens> {
        openrlhf::token_outputs(rows, plan, None)
    }
}

#[cfg(test)]
#[allow(clippy::approx_constant)] // hand-worked numbers, written as computed
mod tests {
    use crate::estimators::openrlhf::{Shaping, tests::t4};
    use crate::estimators::test_support::assert_close;

    // conventions.md T4: the tool token at (0,1) holds .707107.
    #[test]
    fn token_pipeline() {
        let x = 0.707107;
        let out = t4(Shaping::GroupNorm);
        assert_close(&out[0], &[x, x, x]);
        assert_close(&out[1], &[-x, 0.0, 0.0]);
        assert_close(&out[2], &[0.0; 3]);
        assert_close(&out[3], &[0.0; 3]);
    }

    // conventions.md, group of 8 with one success: 2.474874 / −.353553 (+1e-9).
    #[test]
    fn group_of_eight() {
        let mut s = vec![0.0; 8];
        s[0] = 1.0;
        let g = crate::estimators::test_support::grouping(&["g"; 8]);
        let a = super::openrlhf_group_norm(&s, &g).unwrap();
        assert_close(&a[..2], &[2.474874, -0.353553]);
    }
}
