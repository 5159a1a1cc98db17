//! `openrlhf_dr_grpo`: OpenRLHF's `dr_grpo` advantage — group-mean shaping through
//! OpenRLHF's token pipeline, not whitened (`docs/conventions.md` B5).
//!
//! **Computes** `a_i = clip(s_i − μ_g)` (consecutive-n groups), and
//! `advantages = returns = a_i` at every position up to the row's last mask-1 token (tool
//! tokens included), 0 after it. **Inputs**: outcome scores, the mask, `group_size`.
//! **Parameters**: `openrlhf.reward_clip` (default `[-10, 10]`); γ is forced to 1.
//! **Edge cases**: a group of one row is an error (OpenRLHF asserts n > 1). **Source**:
//! OpenRLHF `openrlhf/trainer/ppo_utils/experience_maker.py`
//! `compute_advantages_and_returns` (see [`super::openrlhf`]).

use crate::estimators::groups::Grouping;

use super::openrlhf::{Shaping, group_scalar};
use crate::error::Result;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    openrlhf,
};

pub fn openrlhf_dr_grpo(scores: &[f64], grouping: &Grouping) -> Result<Vec<f64>, usize> {
    group_scalar(scores, grouping, Shaping::Mean)
}

/// `-e openrlhf_dr_grpo`: OpenRLHF's token pipeline ([`Kind::Token`], `estimators::openrlhf`).
pub struct OpenrlhfDrGrpo;

impl Estimate for OpenrlhfDrGrpo {
    const INFO: Info = Info {
        source: openrlhf::SOURCE,
        summary: "score minus group mean on the last token, γ = 1 returns",
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
        openrlhf::batch(batch, plan, openrlhf_dr_grpo)
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan) -> Result<Tokens> {
        openrlhf::token_outputs(rows, plan, None)
    }
}

#[cfg(test)]
mod tests {
    use crate::estimators::openrlhf::{Shaping, tests::t4};
    use crate::estimators::test_support::assert_close;

    // conventions.md T4.
    #[test]
    fn token_pipeline() {
        let out = t4(Shaping::Mean);
        assert_close(&out[0], &[0.5, 0.5, 0.5]);
        assert_close(&out[1], &[-0.5, 0.0, 0.0]);
        assert_close(&out[2], &[0.0; 3]);
    }

    #[test]
    fn scalar() {
        let g = crate::estimators::test_support::grouping(&["a", "a"]);
        assert_eq!(
            super::openrlhf_dr_grpo(&[1.0, 0.0], &g),
            Ok(vec![0.5, -0.5])
        );
    }
}
