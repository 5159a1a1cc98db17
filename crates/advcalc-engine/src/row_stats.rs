//! Pass 1 for one row group: reduce the shaped rows to the per-row scalars and partial sums
//! the batch-level statistics need (docs/architecture.md's data flow), then the estimator's own statistics.

use crate::data::{RowGroup, TokenRole};
use crate::error::Result;
use crate::estimators::RowStats;
use crate::loss::policy::LossRows;
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
        stats.loss = loss_stats(pipeline, &group, shaped);
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

/// The loss's own pass-1 statistics on IN's advantages (`PolicyLoss::row_stats`: kl_cov's
/// tokens); `None` without a loss stage or without the columns it reads.
fn loss_stats(
    pipeline: &Pipeline,
    group: &RowGroup,
    shaped: &Shaped,
) -> Option<crate::loss::policy::AnyLossStats> {
    let stage = pipeline.loss.as_ref()?;
    let rows = LossRows {
        group,
        advantages: group.token(TokenRole::Advantages)?,
        log_probs: group
            .token(TokenRole::LogProbs)
            .or(group.token(TokenRole::OldLogProbs))?,
        // the slice once, not a look-up of the shared buffer per token
        mask: &shaped.mask,
    };
    Some(stage.spec.mode.row_stats(&rows))
}
