//! Between the passes: the training batches, the KL controller and IS normalisation over the
//! steps, and per batch the estimator's batch work — the counterpart of verl's
//! `compute_advantage` dispatcher and the trainer's controller (docs/reference/verl-0.9.1.md §6).

use std::collections::BTreeMap;

use crate::error::Result;
use crate::estimators::{AnyEstimatorPlan, RowStats};
use crate::pipeline::{Constants, Pipeline, StepConstants, is_norm_factor};

/// The training batches: global row indices of each step, steps ascending, rows in file
/// order. Without a `step` column the whole input is one batch.
pub fn training_batches(step: Option<&[i64]>, rows: usize) -> Vec<(Option<i64>, Vec<usize>)> {
    match step {
        None => vec![(None, (0..rows).collect())],
        Some(step) => {
            let mut by_step: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
            for (row, &s) in step.iter().enumerate() {
                by_step.entry(s).or_default().push(row);
            }
            by_step
                .into_iter()
                .map(|(s, rows)| (Some(s), rows))
                .collect()
        }
    }
}

/// verl's KL controller and IS normalisation over the steps, from per-row statistics.
/// Also returns `(current_kl, β)` per step for the metrics.
pub fn step_constants(
    pipeline: &Pipeline,
    stats: &RowStats,
) -> (Constants, BTreeMap<Option<i64>, (f64, f64)>) {
    let mut controller = pipeline.controller.clone();
    let mut constants = Constants::uniform(StepConstants {
        beta: controller.value(),
        is_norm: None,
    });
    let mut kl_metrics = BTreeMap::new();
    let is_level = pipeline
        .correction
        .as_ref()
        .and_then(|c| c.is.as_ref())
        .filter(|s| s.batch_normalize);
    for (step, rows) in training_batches(stats.step.as_deref(), stats.rows()) {
        let beta = controller.value();
        let mut is_norm = None;
        if pipeline.kl.is_some() {
            let current: f64 = rows
                .iter()
                .map(|&r| stats.kl_sum[r] / (stats.orig_valid[r] + 1e-8))
                .sum::<f64>()
                / rows.len().max(1) as f64;
            kl_metrics.insert(step, (current, beta));
            controller.update(current, rows.len());
        }
        if let Some(spec) = is_level {
            let (sum, count) = rows.iter().fold((0.0, 0.0), |(a, b), &r| {
                (a + stats.is_norm_parts[r].0, b + stats.is_norm_parts[r].1)
            });
            is_norm = is_norm_factor(spec.level, sum, count);
        }
        constants
            .per_step
            .insert(step, StepConstants { beta, is_norm });
    }
    (constants, kl_metrics)
}

/// Per training batch, the estimator's batch work (verl's `compute_advantage`); the
/// estimator's own statistics move out of `stats` into the plan's making.
pub fn plan(pipeline: &Pipeline, stats: &mut RowStats, file: &str) -> Result<AnyEstimatorPlan> {
    let settings = pipeline.settings();
    // the loss stage on IN's advantages: no estimator work, an empty plan
    let batches = if pipeline.advantages_given() {
        Vec::new()
    } else {
        training_batches(stats.step.as_deref(), stats.rows())
    };
    pipeline.estimator.plan(&settings, stats, &batches, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_separate_batches_in_ascending_order() {
        let b = training_batches(Some(&[2, 1, 2, 1]), 4);
        assert_eq!(b, vec![(Some(1), vec![1, 3]), (Some(2), vec![0, 2])]);
        assert_eq!(training_batches(None, 2), vec![(None, vec![0, 1])]);
    }
}
