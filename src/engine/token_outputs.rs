//! Pass 2 for one row group: the token outputs of every row, from the shaped rows and the
//! batch-level plan.

use crate::data::RowGroup;
use crate::data::TokenOutputs;
use crate::data::TokenRole;
use crate::engine::pipeline::{Pipeline, Shaped};
use crate::engine::plan::{Plan, RowStats};
use crate::error::{Error, Result};
use crate::estimators::optimal_token_baseline::{self, ColumnSums};
use crate::estimators::tir_optimal_token_baseline::compact_index;
use crate::estimators::{
    Estimator, broadcast_outcome, gae, openrlhf, reinforce, reinforce_plus_plus, remax, turn_gae,
};

// Rows index several parallel columns through their spans.
#[allow(clippy::needless_range_loop)]
pub fn token_outputs(
    pipeline: &Pipeline,
    group: &RowGroup,
    shaped: Shaped,
    plan: &Plan,
    stats: &RowStats,
    file: &str,
) -> Result<TokenOutputs> {
    let n = shaped.rewards.len();
    let rows = group.rows();
    let first = group.first_row;
    let mut adv = vec![0.0f32; n];
    let mut ret: Option<Vec<f32>> = None;
    let missing = |what: &str| {
        Error::data(format!(
            "{file}: {} needs {what}",
            pipeline.estimator.name()
        ))
    };
    let (r, m) = (&shaped.rewards, &shaped.mask);
    match pipeline.estimator {
        Estimator::Gae => {
            let values = group
                .token(TokenRole::Values)
                .ok_or_else(|| missing("values"))?;
            let mut returns = vec![0.0f32; n];
            let mut a_raw = Vec::new();
            for i in 0..rows {
                let s = group.span(i);
                a_raw.resize(s.len(), 0.0f32);
                gae::gae_row(
                    &r[s.clone()],
                    &values[s.clone()],
                    &m[s.clone()],
                    pipeline.gamma,
                    pipeline.lam,
                    &mut a_raw,
                );
                for (j, t) in s.clone().enumerate() {
                    returns[t] = a_raw[j] + values[t];
                }
                if pipeline.whiten_advantages {
                    let w = plan.whitening[&group.step_of(i)];
                    for (j, t) in s.enumerate() {
                        adv[t] = w.apply(a_raw[j]);
                    }
                } else {
                    gae::unwhitened(&a_raw, &m[s.clone()], &mut adv[s]);
                }
            }
            ret = Some(returns);
        }
        Estimator::ReinforcePlusPlus => {
            let mut returns = vec![0.0f32; n];
            for i in 0..rows {
                let s = group.span(i);
                let w = plan.whitening[&group.step_of(i)];
                reinforce_plus_plus::returns_row(
                    pipeline.mask_mode,
                    &r[s.clone()],
                    &m[s.clone()],
                    pipeline.gamma,
                    &mut returns[s.clone()],
                );
                for t in s {
                    adv[t] = w.apply(returns[t]) * m[t];
                }
            }
            ret = Some(returns);
        }
        Estimator::Reinforce => {
            for i in 0..rows {
                let s = group.span(i);
                reinforce::reinforce(&r[s.clone()], &m[s.clone()], pipeline.gamma, &mut adv[s]);
            }
        }
        Estimator::TurnGae => {
            let values = group
                .token(TokenRole::Values)
                .ok_or_else(|| missing("values"))?;
            let mut returns = vec![0.0f32; n];
            for i in 0..rows {
                let s = group.span(i);
                turn_gae::turn_gae(
                    &r[s.clone()],
                    &values[s.clone()],
                    &m[s.clone()],
                    pipeline.gamma,
                    pipeline.lam,
                    &mut adv[s.clone()],
                    &mut returns[s],
                );
            }
            ret = Some(returns);
        }
        Estimator::OpenrlhfReinforceBaseline
        | Estimator::OpenrlhfGroupNorm
        | Estimator::OpenrlhfDrGrpo
        | Estimator::OpenrlhfRloo => {
            let mut returns = vec![0.0f32; n];
            for i in 0..rows {
                let s = group.span(i);
                openrlhf::token_returns(
                    plan.row_scalar[first + i],
                    &m[s.clone()],
                    &mut returns[s.clone()],
                );
                match plan.whitening.get(&group.step_of(i)) {
                    Some(w) => s.for_each(|t| adv[t] = w.apply(returns[t])),
                    None => adv[s.clone()].copy_from_slice(&returns[s]),
                }
            }
            if pipeline.estimator == Estimator::OpenrlhfReinforceBaseline {
                ret = Some(returns);
            } else {
                adv = returns;
            }
        }
        Estimator::Remax => {
            let baselines = group
                .reward_baselines
                .as_ref()
                .ok_or_else(|| missing("reward_baselines"))?;
            let mut returns = vec![0.0f32; n];
            for i in 0..rows {
                let s = group.span(i);
                remax::remax_row(
                    &r[s.clone()],
                    &m[s.clone()],
                    baselines[i],
                    &mut adv[s.clone()],
                    &mut returns[s],
                );
            }
            ret = Some(returns);
        }
        Estimator::OptimalTokenBaseline | Estimator::TirOptimalTokenBaseline => {
            let tir = pipeline.estimator == Estimator::TirOptimalTokenBaseline;
            let old = pipeline
                .old_log_probs(group)
                .ok_or_else(|| missing("old_log_probs"))?;
            let spi = group
                .token(TokenRole::SumPiSquared)
                .ok_or_else(|| missing("sum_pi_squared"))?;
            let uid = group.uid.as_ref().ok_or_else(|| missing("uid"))?;
            let mut returns = vec![0.0f32; n];
            let mut w = Vec::new();
            let empty = ColumnSums::default();
            for i in 0..rows {
                let s = group.span(i);
                w.resize(s.len(), 0.0f32);
                let mk = &m[s.clone()];
                optimal_token_baseline::row_terms(
                    &r[s.clone()],
                    mk,
                    &old[s.clone()],
                    &spi[s.clone()],
                    shaped.is_weights.as_ref().map(|x| &x[s.clone()]),
                    &mut returns[s.clone()],
                    &mut w,
                );
                let row = first + i;
                let sums = if plan.otb_singleton[row] {
                    &empty
                } else {
                    stats
                        .columns
                        .get(&(group.step_of(i), uid[i].clone()))
                        .unwrap_or(&empty)
                };
                let tail = plan.otb_zero_tail[row];
                let k_of = if tir { compact_index(mk) } else { Vec::new() };
                for (j, t) in s.enumerate() {
                    let k = if tir { k_of[j].unwrap_or(0) } else { j };
                    let b = if tail.is_some_and(|from| k >= from) {
                        0.0
                    } else {
                        sums.baseline(k)
                    };
                    adv[t] = (returns[t] - b) * m[t];
                }
            }
            ret = Some(returns);
        }
        _ => {
            for i in 0..rows {
                let s = group.span(i);
                broadcast_outcome(plan.row_scalar[first + i], &m[s.clone()], &mut adv[s]);
            }
        }
    }
    let rewritten = pipeline
        .correction_runs(group.token(TokenRole::RolloutLogProbs).is_some())
        .is_some();
    Ok(TokenOutputs {
        token_level_rewards: shaped.rewards,
        advantages: adv,
        returns: ret,
        response_mask: rewritten.then_some(shaped.mask),
        rollout_is_weights: shaped.is_weights,
    })
}
