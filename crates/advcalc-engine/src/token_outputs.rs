//! Pass 2 for one row group: the estimator's token outputs from the shaped rows and the plan,
//! with the shaped rewards, rewritten mask and IS weights beside them, then the loss stage's
//! columns when it runs.

use crate::data::{LossColumns, RowGroup, TokenOutputs, TokenRole};
use crate::error::{Error, Result};
use crate::estimators::AnyEstimatorPlan;
use crate::loss::plan::LossPlan;
use crate::loss::row::{RowInputs, RowSums, row};
use crate::pipeline::{LossStage, Pipeline, Shaped};

pub fn token_outputs(
    pipeline: &Pipeline,
    group: &RowGroup,
    shaped: Shaped,
    plan: &AnyEstimatorPlan,
    loss_plan: Option<&LossPlan>,
    file: &str,
) -> Result<(TokenOutputs, Vec<RowSums>)> {
    let settings = pipeline.settings();
    let (advantages, returns) = if pipeline.advantages_given() {
        let given = group
            .token(TokenRole::Advantages)
            .ok_or_else(|| Error::data(format!("{file}: advantages missing")))?;
        (given.to_vec(), None)
    } else {
        let tokens = plan.token_outputs(&shaped.rows(pipeline, &settings, group, file))?;
        (tokens.advantages, tokens.returns)
    };
    let rewritten = pipeline
        .correction_runs(group.token(TokenRole::RolloutLogProbs).is_some())
        .is_some();
    let (loss, sums) = match (&pipeline.loss, loss_plan) {
        (Some(stage), Some(lp)) => {
            let (columns, sums) = loss_columns(pipeline, stage, lp, group, &shaped, &advantages)?;
            (Some(columns), sums)
        }
        (Some(_), None) => {
            return Err(Error::usage(format!(
                "{file}: the loss stage runs with the whole plan (advcalc loss, advcalc.loss), not from plan shards"
            )));
        }
        _ => (None, Vec::new()),
    };
    Ok((
        TokenOutputs {
            token_level_rewards: shaped.rewards,
            advantages,
            returns,
            response_mask: rewritten.then_some(shaped.mask),
            rollout_is_weights: shaped.is_weights,
            loss,
        },
        sums,
    ))
}

/// The loss stage on one row group: each row's outputs and metric sums (`loss::row`).
fn loss_columns(
    pipeline: &Pipeline,
    stage: &LossStage,
    plan: &LossPlan,
    group: &RowGroup,
    shaped: &Shaped,
    advantages: &[f32],
) -> Result<(LossColumns, Vec<RowSums>)> {
    let n = group.mask.values.len();
    let old = pipeline
        .old_log_probs(group)
        .ok_or_else(|| Error::data("the loss needs old_log_probs"))?;
    // on-policy without a `log_probs` column: the policy that computed `old_log_probs`
    let log_probs = group
        .token(TokenRole::LogProbs)
        .or(group.token(TokenRole::OldLogProbs))
        .ok_or_else(|| Error::data("the loss needs old_log_probs"))?;
    let reference = group.token(TokenRole::RefLogProb);
    let is_weights = if stage.given {
        group.token(TokenRole::IsWeights)
    } else {
        shaped.is_weights.as_deref()
    };
    let mut out = LossColumns {
        pg_losses: vec![0.0; n],
        grad_weights: vec![0.0; n],
        kl_losses: stage.spec.kl.map(|_| vec![0.0; n]),
    };
    let mut sums = Vec::with_capacity(group.rows());
    let mut scratch = Vec::new();
    for i in 0..group.rows() {
        let s = group.span(i);
        let input = RowInputs {
            advantages: &advantages[s.clone()],
            log_probs: &log_probs[s.clone()],
            old: &old[s.clone()],
            reference: reference.map(|r| &r[s.clone()]),
            mask: &shaped.mask[s.clone()],
            is_weights: is_weights.map(|w| &w[s.clone()]),
        };
        let place = plan.place(group.first_row + i);
        sums.push(row(
            &stage.spec,
            &place,
            &mut scratch,
            &input,
            &mut out.pg_losses[s.clone()],
            &mut out.grad_weights[s.clone()],
            out.kl_losses.as_mut().map(|k| &mut k[s]),
        ));
    }
    Ok((out, sums))
}
