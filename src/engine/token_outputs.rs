//! Pass 2 for one row group: the estimator's token outputs from the shaped rows and the plan,
//! with the shaped rewards, rewritten mask and IS weights beside them.

use crate::data::{RowGroup, TokenOutputs, TokenRole};
use crate::engine::pipeline::{Pipeline, Shaped};
use crate::error::Result;
use crate::estimators::AnyEstimatorPlan;

pub fn token_outputs(
    pipeline: &Pipeline,
    group: &RowGroup,
    shaped: Shaped,
    plan: &AnyEstimatorPlan,
    file: &str,
) -> Result<TokenOutputs> {
    let settings = pipeline.settings();
    let tokens = plan.token_outputs(&shaped.rows(pipeline, &settings, group, file))?;
    let rewritten = pipeline
        .correction_runs(group.token(TokenRole::RolloutLogProbs).is_some())
        .is_some();
    Ok(TokenOutputs {
        token_level_rewards: shaped.rewards,
        advantages: tokens.advantages,
        returns: tokens.returns,
        response_mask: rewritten.then_some(shaped.mask),
        rollout_is_weights: shaped.is_weights,
    })
}
