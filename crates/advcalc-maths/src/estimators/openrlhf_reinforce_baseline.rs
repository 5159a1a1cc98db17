//! `openrlhf_reinforce_baseline`: OpenRLHF's `reinforce_baseline` — group-mean shaping
//! through OpenRLHF's token pipeline, then whitened over the batch with the population
//! variance (`docs/conventions.md` B5).
//!
//! **Computes** `a_i = clip(s_i − μ_g)` (consecutive-n groups); `returns = a_i` at every
//! position up to the row's last mask-1 token, 0 after it; then
//! `advantages = (returns − μ)·rsqrt(max(var, 1e-8))` with μ and the population var over the
//! batch's valid tokens, at EVERY position (mask-0 positions are not re-masked and hold
//! `−μ·rstd` past the last valid token). **Inputs**: outcome scores, the mask, `group_size`.
//! **Parameters**: `openrlhf.reward_clip` (default `[-10, 10]`), `openrlhf.no_std_norm`
//! (default false: with it, `returns − μ`); γ is forced to 1. **Edge cases**: a group of one
//! row is an error; a batch without a valid token is an error (OpenRLHF divides 0 by 0).
//! **Source**: OpenRLHF `openrlhf/trainer/ppo_utils/experience_maker.py`
//! `compute_advantages_and_returns` (see [`super::openrlhf`]).

use crate::estimators::groups::Grouping;

use super::openrlhf::{Shaping, group_scalar};
use crate::error::Result;
use crate::estimators::moments::{RowMoments, StepWhitening};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    openrlhf,
};

pub fn openrlhf_reinforce_baseline(scores: &[f64], grouping: &Grouping) -> Result<Vec<f64>, usize> {
    group_scalar(scores, grouping, Shaping::Mean)
}

/// `-e openrlhf_reinforce_baseline`: OpenRLHF's token pipeline ([`Kind::Token`], `estimators::openrlhf`).
pub struct OpenrlhfReinforceBaseline;

impl Estimate for OpenrlhfReinforceBaseline {
    const INFO: Info = Info {
        source: openrlhf::SOURCE,
        summary: "score minus group mean on the last token, γ = 1 returns, whitened over the batch",
        kind: Kind::Token,
        columns: &[Column::Uid],
        settings: &[
            "group_size",
            "openrlhf.reward_clip",
            "openrlhf.kl_coef",
            "openrlhf.kl_estimator",
            "openrlhf.no_std_norm",
        ],
        weights_in_pass1: false,
        needs_tokens: Some(
            "each row's valid-token count (it whitens over the batch's valid tokens)",
        ),
        rewards_under_mask: false,
        family: Family::Openrlhf,
        ignores: &[],
        overview: Overview {
            section: Some("B5"),
            needs: Some(
                "`uid` (blocks of `group_size`); `old_log_probs`, `ref_log_prob` with `openrlhf.kl_coef > 0`",
            ),
            returns: "un-whitened G",
            whitening: "batch (population var)",
            masked: false,
            masked_note: None,
            singleton: "**error**",
            variants: &[],
        },
    };
    type Stats = RowMoments;
    type Plan = StepWhitening;
    type Options = ();

    fn row_stats(rows: &Rows<'_>, stats: &mut RowMoments) -> Result<()> {
        openrlhf::row_stats(rows, stats)
    }

    fn batch(
        batch: &TrainingBatch<'_, RowMoments>,
        plan: &mut EstimatorPlan<StepWhitening>,
    ) -> Result<()> {
        openrlhf::whitened_batch(batch, plan, openrlhf_reinforce_baseline)
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<StepWhitening>) -> Result<Tokens> {
        openrlhf::token_outputs(rows, plan, Some(&plan.own))
    }
}

#[cfg(test)]
mod tests {
    use crate::estimators::moments::Moments;
    use crate::estimators::openrlhf::tests::{MASKS, t4};
    use crate::estimators::openrlhf::{Shaping, whitening};
    use crate::estimators::test_support::assert_close;

    fn whitened(no_std_norm: bool) -> Vec<Vec<f32>> {
        let ret = t4(Shaping::Mean);
        let mut m = Moments::default();
        for (r, mask) in ret.iter().zip(MASKS) {
            for (&x, &mk) in r.iter().zip(&mask) {
                if mk != 0.0 {
                    m.push(x as f64);
                }
            }
        }
        let w = whitening(&m, no_std_norm).unwrap();
        ret.iter()
            .map(|r| r.iter().map(|&x| w.apply(x)).collect())
            .collect()
    }

    // conventions.md T4: μ = .0625, population var = .08984375, rstd = 3.336231.
    #[test]
    fn token_pipeline_whitened() {
        let out = whitened(false);
        let (hi, lo, z) = (1.459601, -1.87663, -0.208514);
        assert_close(&out[0], &[hi, hi, hi]);
        assert_close(&out[1], &[lo, z, z]);
        assert_close(&out[2], &[z, z, z]);
        assert_close(&out[3], &[z, z, z]);
    }

    #[test]
    fn no_std_norm_only_centres() {
        let out = whitened(true);
        assert_close(&out[0], &[0.4375; 3]);
        assert_close(&out[1], &[-0.5625, -0.0625, -0.0625]);
        assert_close(&out[3], &[-0.0625; 3]);
    }
}
