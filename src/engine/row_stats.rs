//! Pass 1 for one row group: reduce the shaped rows to the per-row scalars and partial sums
//! the batch-level statistics need (design §5).

use crate::data::RowGroup;
use crate::data::TokenRole;
use crate::engine::pipeline::{Pipeline, Shaped};
use crate::engine::plan::RowStats;
use crate::error::{Error, Result};
use crate::estimators::moments::Moments;
use crate::estimators::optimal_token_baseline::{self, ColumnSums};
use crate::estimators::tir_optimal_token_baseline::compact_index;
use crate::estimators::{Estimator, gae, reinforce_plus_plus};

// Rows index several parallel columns through their spans.
#[allow(clippy::needless_range_loop)]
pub fn row_stats(
    pipeline: &Pipeline,
    group: RowGroup,
    shaped: &Shaped,
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
    let missing = |what: &str| {
        Error::data(format!(
            "{file}: {} needs {what}",
            pipeline.estimator.name()
        ))
    };
    match pipeline.estimator {
        // gae without whitening needs no batch statistics
        Estimator::Gae if !pipeline.whiten_advantages => {}
        Estimator::Gae | Estimator::ReinforcePlusPlus => {
            let values = group.token(TokenRole::Values);
            let mut buf = Vec::new();
            for i in 0..rows {
                let s = group.span(i);
                buf.resize(s.len(), 0.0f32);
                let (r, m) = (&shaped.rewards[s.clone()], &shaped.mask[s.clone()]);
                if pipeline.estimator == Estimator::Gae {
                    let v = values.ok_or_else(|| missing("values"))?;
                    gae::gae_row(r, &v[s], m, pipeline.gamma, pipeline.lam, &mut buf);
                } else {
                    reinforce_plus_plus::returns_row(
                        pipeline.mask_mode,
                        r,
                        m,
                        pipeline.gamma,
                        &mut buf,
                    );
                }
                let mut moments = Moments::default();
                for (&x, &mk) in buf.iter().zip(m) {
                    if mk != 0.0 {
                        moments.push(x as f64);
                    }
                }
                stats.moments.push(moments);
            }
        }
        Estimator::OptimalTokenBaseline | Estimator::TirOptimalTokenBaseline => {
            let tir = pipeline.estimator == Estimator::TirOptimalTokenBaseline;
            let old = pipeline
                .old_log_probs(&group)
                .ok_or_else(|| missing("old_log_probs"))?;
            let spi = group
                .token(TokenRole::SumPiSquared)
                .ok_or_else(|| missing("sum_pi_squared"))?;
            let uid = group.uid.as_ref().ok_or_else(|| missing("uid"))?;
            let (mut g, mut w) = (Vec::new(), Vec::new());
            for i in 0..rows {
                let s = group.span(i);
                g.resize(s.len(), 0.0f32);
                w.resize(s.len(), 0.0f32);
                let m = &shaped.mask[s.clone()];
                optimal_token_baseline::row_terms(
                    &shaped.rewards[s.clone()],
                    m,
                    &old[s.clone()],
                    &spi[s.clone()],
                    shaped.is_weights.as_ref().map(|w| &w[s.clone()]),
                    &mut g,
                    &mut w,
                );
                let sums: &mut ColumnSums = stats
                    .columns
                    .entry((group.step_of(i), uid[i].clone()))
                    .or_default();
                if tir {
                    let k = compact_index(m);
                    sums.add(&g, &w, m, |t| k[t].unwrap_or(0));
                } else {
                    sums.add(&g, &w, m, |t| t);
                }
            }
        }
        _ => {}
    }
    stats.uid = group.uid.unwrap_or_default();
    stats.step = group.step;
    stats.session = group.session;
    Ok(stats)
}
