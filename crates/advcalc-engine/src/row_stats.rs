//! Pass 1 for one row group: reduce the shaped rows to the per-row scalars and partial sums
//! the batch-level statistics need (design §5), then the estimator's own statistics.

use crate::data::{RowGroup, TokenRole};
use crate::error::Result;
use crate::estimators::RowStats;
use crate::loss::LossMode;
use crate::pipeline::{Pipeline, Shaped};

/// Which statistics a pass keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsScope {
    /// The common per-row scalars only (the constants pre-pass: KL sums, IS parts).
    Common,
    /// Those and the estimator's own (pass 1).
    WithEstimator,
}

pub fn row_stats(
    pipeline: &Pipeline,
    group: RowGroup,
    shaped: &Shaped,
    scope: StatsScope,
    file: &str,
) -> Result<RowStats> {
    let rows = group.rows();
    let sum = |v: &[f32]| v.iter().map(|&x| x as f64).sum::<f64>();
    let mut stats = RowStats {
        score: (0..rows)
            .map(|i| sum(&shaped.rewards[group.span(i)]))
            .collect(),
        valid: (0..rows)
            .map(|i| sum(&shaped.mask[group.span(i)]))
            .collect(),
        orig_valid: (0..rows).map(|i| sum(group.mask.row(i))).collect(),
        kl_sum: shaped.kl_sum.clone(),
        is_norm_parts: shaped.is_norm_parts.clone(),
        components: group
            .components
            .iter()
            .map(|c| c.iter().map(|&x| x as f64).collect())
            .collect(),
        dropped_scores: group.dropped_scores,
        positive_log_probs: group.positive_log_probs.clone(),
        ..Default::default()
    };
    if scope == StatsScope::WithEstimator && pipeline.advantages_given() {
        stats.loss_tokens = kl_cov_tokens(pipeline, &group, shaped);
    } else if scope == StatsScope::WithEstimator {
        let settings = pipeline.settings();
        let view = shaped.rows(pipeline, &settings, &group, file);
        stats.own = Some(pipeline.estimator.row_stats(&view)?);
    }
    stats.uid = group.uid.unwrap_or_default();
    stats.step = group.step;
    stats.session = group.session;
    Ok(stats)
}

/// kl_cov on IN's advantages: each row's mask-1 tokens as (A, log π, index), from which the
/// plan makes each micro-batch's choice.
fn kl_cov_tokens(
    pipeline: &Pipeline,
    group: &RowGroup,
    shaped: &Shaped,
) -> Option<Vec<crate::loss::row::KlCovTokens>> {
    let stage = pipeline.loss.as_ref()?;
    if stage.spec.mode != LossMode::KlCov {
        return None;
    }
    let a = group.token(TokenRole::Advantages)?;
    let logp = group
        .token(TokenRole::LogProbs)
        .or(group.token(TokenRole::OldLogProbs))?;
    // the slice once, not a look-up of the shared buffer per token
    let mask: &[f32] = &shaped.mask;
    Some(
        (0..group.rows())
            .map(|i| {
                let s = group.span(i);
                s.clone()
                    .enumerate()
                    .filter(|&(_, t)| mask[t] > 0.0)
                    .map(|(k, t)| (a[t], logp[t], k))
                    .collect()
            })
            .collect(),
    )
}
