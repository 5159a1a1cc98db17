//! Per training batch, turn the per-row statistics of the statistics pass into what the
//! output pass needs — the counterpart of verl's `compute_advantage` dispatcher, V1's
//! multi-output folding and the trainer's KL controller / IS normalisation (reference §6).

use std::collections::{BTreeMap, HashMap};

use crate::data::GroupKey;
use crate::engine::pipeline::{Constants, Pipeline, StepConstants, is_norm_factor};
use crate::error::{Error, Result};
use crate::estimators::conventions::{self, Convention};
use crate::estimators::groups::Grouping;
use crate::estimators::moments::{Moments, Whitening};
use crate::estimators::optimal_token_baseline::{ColumnSums, zero_tail};
use crate::estimators::sessions::{OutputRow, fold_sessions};
use crate::estimators::{
    Estimator, gdpo, gpg, grpo, grpo_passk, grpo_vectorized, openrlhf, openrlhf_dr_grpo,
    openrlhf_group_norm, openrlhf_reinforce_baseline, openrlhf_rloo, opo,
    reinforce_plus_plus_baseline, rloo, rloo_loo_std, rloo_vectorized,
};

/// What the statistics pass keeps per row, for the whole input in file order.
#[derive(Debug, Clone, Default)]
pub struct RowStats {
    /// Group label per row (empty when the estimator does not group).
    pub uid: Vec<GroupKey>,
    pub step: Option<Vec<i64>>,
    /// `(session_id, output_index)` per row, for multi-output sessions.
    pub session: Option<(Vec<GroupKey>, Vec<i64>)>,
    /// Outcome score: Σ of `token_level_rewards` over all positions of the row.
    pub score: Vec<f64>,
    /// Valid tokens after rejection.
    pub valid: Vec<f64>,
    /// Valid tokens before rejection.
    pub orig_valid: Vec<f64>,
    /// Σ_t kld·m (KL in reward).
    pub kl_sum: Vec<f64>,
    /// Partial sums of the IS batch-normalisation mean.
    pub is_norm_parts: Vec<(f64, f64)>,
    /// Per-row moments of the values gae / reinforce_plus_plus whiten.
    pub moments: Vec<Moments>,
    /// gdpo reward components, `components[k][row]`.
    pub components: Vec<Vec<f64>>,
    /// OTB column sums per (step, uid), merged in row-group order.
    pub columns: BTreeMap<(Option<i64>, GroupKey), ColumnSums>,
    /// Rows whose scalar score had no position.
    pub dropped_scores: usize,
    /// Positive values in log-probability columns (a warning).
    pub positive_log_probs: Option<crate::data::PositiveLogProbs>,
}

impl RowStats {
    pub fn rows(&self) -> usize {
        self.score.len()
    }

    pub fn append(&mut self, other: RowStats) {
        self.uid.extend(other.uid);
        if let Some(step) = other.step {
            self.step.get_or_insert_with(Vec::new).extend(step);
        }
        if let Some((s, o)) = other.session {
            let (ss, oo) = self.session.get_or_insert_with(Default::default);
            ss.extend(s);
            oo.extend(o);
        }
        self.score.extend(other.score);
        self.valid.extend(other.valid);
        self.orig_valid.extend(other.orig_valid);
        self.kl_sum.extend(other.kl_sum);
        self.is_norm_parts.extend(other.is_norm_parts);
        self.moments.extend(other.moments);
        if self.components.len() < other.components.len() {
            self.components.resize(other.components.len(), Vec::new());
        }
        for (mine, theirs) in self.components.iter_mut().zip(other.components) {
            mine.extend(theirs);
        }
        for (key, sums) in other.columns {
            self.columns.entry(key).or_default().merge(&sums);
        }
        self.dropped_scores += other.dropped_scores;
        self.positive_log_probs = crate::data::PositiveLogProbs::merge(
            self.positive_log_probs.take(),
            other.positive_log_probs,
        );
    }
}

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

/// What the output pass needs for the estimator.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Outcome estimators: each row's advantage scalar (already whitened where the estimator
    /// whitens), broadcast onto its mask.
    pub row_scalar: Vec<f32>,
    /// gae / reinforce_plus_plus: the batch whitening of each step.
    pub whitening: BTreeMap<Option<i64>, Whitening>,
    /// OTB: per row, whether its baseline is 0 (singleton group, or left out) and the
    /// position from which the zero-tail rule zeroes it.
    pub otb_singleton: Vec<bool>,
    pub otb_zero_tail: Vec<Option<usize>>,
    /// OPO rows set to 0 where verl writes NaN.
    pub nan_rows: usize,
    /// Things the user should know about the grouping (consecutive-n blocks that disagree
    /// with the `uid`s), one per batch at most.
    pub warnings: Vec<String>,
}

fn whitening_error(
    file: &str,
    step: Option<i64>,
    e: &Estimator,
    err: crate::estimators::moments::WhitenError,
    n: f64,
) -> Error {
    let at = step.map(|s| format!(" step {s}:")).unwrap_or_default();
    Error::data(format!(
        "{file}:{at} {} whitens over the batch's valid tokens and needs at least 2 valid tokens, found {n} (verl raises ValueError: {})",
        e.name(),
        err.verl_message()
    ))
}

/// Per training batch, the estimator's batch-level work.
pub fn plan(pipeline: &Pipeline, stats: &RowStats, file: &str) -> Result<Plan> {
    let rows = stats.rows();
    let e = pipeline.estimator;
    let mut plan = Plan {
        row_scalar: vec![0.0; rows],
        otb_singleton: vec![false; rows],
        otb_zero_tail: vec![None; rows],
        ..Default::default()
    };
    for (step, batch) in training_batches(stats.step.as_deref(), rows) {
        let scores: Vec<f64> = batch.iter().map(|&r| stats.score[r]).collect();
        let labels: Vec<GroupKey> = if e.needs_uid() {
            batch.iter().map(|&r| stats.uid[r].clone()).collect()
        } else {
            Vec::new()
        };
        let grouping = || Grouping::by_key(labels.iter());
        let at = step.map(|s| format!(" step {s}:")).unwrap_or_default();
        let convention = pipeline.family.convention;
        // the groups of the convention (family) or of OpenRLHF's pipeline
        let family_grouping = |plan: &mut Plan| -> Result<Grouping> {
            if !(e.is_openrlhf() || convention.consecutive()) {
                return Ok(grouping());
            }
            let (g, warning) =
                conventions::consecutive_grouping(&labels, pipeline.family.group_size)
                    .map_err(|msg| Error::data(format!("{file}:{at} {}: {msg}", e.name())))?;
            if let Some(w) = warning {
                plan.warnings.push(format!("{file}:{at} {w}"));
            }
            Ok(g)
        };
        let singleton_error = |g: &Grouping, row: usize| {
            let size = g
                .group_of_row
                .iter()
                .filter(|&&x| x == g.group_of_row[row])
                .count();
            Error::data(format!(
                "{file}:{at} row {}: its group has {size} row, and OpenRLHF asserts n_samples_per_prompt > 1 for {} (set group_size, or use another estimator)",
                batch[row],
                e.name()
            ))
        };
        let scalars: Option<Vec<f64>> = match e {
            Estimator::Grpo | Estimator::Drgrpo if convention == Convention::Verl => {
                let norm_by_std = pipeline.norm_by_std && e == Estimator::Grpo;
                Some(match &stats.session {
                    // verl V1 folds multi-output sessions for exact grpo only (§6.3)
                    Some((sessions, index)) => {
                        let outputs: Vec<OutputRow> = batch
                            .iter()
                            .map(|&r| OutputRow {
                                uid: &stats.uid[r],
                                session: &sessions[r],
                                output_index: index[r],
                                score: stats.score[r],
                                has_valid: stats.valid[r] > 0.0,
                            })
                            .collect();
                        fold_sessions(&outputs, norm_by_std)
                    }
                    None => grpo::grpo(&scores, &grouping(), norm_by_std),
                })
            }
            Estimator::Rloo if convention == Convention::Verl => {
                Some(rloo::rloo(&scores, &grouping()))
            }
            Estimator::Grpo
            | Estimator::Drgrpo
            | Estimator::GrpoBatchStd
            | Estimator::Rloo
            | Estimator::Maxrl => {
                let g = family_grouping(&mut plan)?;
                Some(
                    conventions::family_scalars(
                        e,
                        &pipeline.family,
                        pipeline.norm_by_std,
                        &scores,
                        &g,
                    )
                    .map_err(|row| singleton_error(&g, row))?,
                )
            }
            Estimator::RlooLooStd => Some(rloo_loo_std::rloo_loo_std(
                &scores,
                &grouping(),
                Default::default(),
            )),
            Estimator::OpenrlhfReinforceBaseline
            | Estimator::OpenrlhfGroupNorm
            | Estimator::OpenrlhfDrGrpo
            | Estimator::OpenrlhfRloo => {
                let g = family_grouping(&mut plan)?;
                let shaped = match e {
                    Estimator::OpenrlhfRloo => openrlhf_rloo::openrlhf_rloo(&scores, &g),
                    Estimator::OpenrlhfGroupNorm => {
                        openrlhf_group_norm::openrlhf_group_norm(&scores, &g)
                    }
                    Estimator::OpenrlhfDrGrpo => openrlhf_dr_grpo::openrlhf_dr_grpo(&scores, &g),
                    _ => openrlhf_reinforce_baseline::openrlhf_reinforce_baseline(&scores, &g),
                }
                .map_err(|row| singleton_error(&g, row))?;
                let clipped: Vec<f64> = shaped
                    .iter()
                    .map(|&a| openrlhf::clip(a, pipeline.openrlhf_reward_clip))
                    .collect();
                if e == Estimator::OpenrlhfReinforceBaseline {
                    // every valid token holds the row's scalar (γ = 1, no KL)
                    let mut m = Moments::default();
                    for (&a, &r) in clipped.iter().zip(&batch) {
                        m.push_repeated(a as f32 as f64, stats.valid[r]);
                    }
                    let w = openrlhf::whitening(&m, pipeline.openrlhf_no_std_norm).ok_or_else(
                        || {
                            Error::data(format!(
                                "{file}:{at} {} whitens over the batch's valid tokens and found none (OpenRLHF divides 0 by 0)",
                                e.name()
                            ))
                        },
                    )?;
                    plan.whitening.insert(step, w);
                }
                Some(clipped)
            }
            Estimator::GrpoVectorized => {
                let g = grpo_vectorized::canonical_grouping(&labels).map_err(|i| {
                    Error::data(format!(
                        "{file}: column `uid` row {}: label {} is a negative integer, and verl 0.9.1's grpo_vectorized fails on negative group labels (index_add_ with a negative index); use -e grpo or non-negative uids",
                        batch[i], labels[i]
                    ))
                })?;
                Some(grpo_vectorized::grpo_vectorized(&scores, &g))
            }
            Estimator::RlooVectorized => {
                Some(rloo_vectorized::rloo_vectorized(&scores, &grouping()))
            }
            Estimator::Opo => {
                let lengths: Vec<f64> = batch.iter().map(|&r| stats.valid[r]).collect();
                let (a, nan_rows) = opo::opo(&scores, &lengths, &grouping());
                plan.nan_rows += nan_rows;
                Some(a)
            }
            Estimator::Gpg => Some(gpg::gpg(&scores, &grouping())),
            Estimator::GrpoPassk => {
                let g = grouping();
                Some(grpo_passk::grpo_passk(&scores, &g, pipeline.norm_by_std).map_err(|group| {
                    let row = g.group_of_row.iter().position(|&x| x == group).unwrap_or(0);
                    Error::data(format!(
                        "{file}: column `uid` row {}: group {} has 1 row, and Pass@k requires at least 2 samples per group (verl raises ValueError)",
                        batch[row], labels[row]
                    ))
                })?)
            }
            Estimator::ReinforcePlusPlusBaseline | Estimator::Gdpo => {
                let centred = if e == Estimator::Gdpo {
                    let components: Vec<Vec<f64>> = stats
                        .components
                        .iter()
                        .map(|c| batch.iter().map(|&r| c[r]).collect())
                        .collect();
                    gdpo::gdpo(&components, &pipeline.gdpo_weights, &grouping())
                } else {
                    reinforce_plus_plus_baseline::reinforce_plus_plus_baseline(&scores, &grouping())
                };
                // each row's value counts once per valid token, as the tiled tensor does
                let mut m = Moments::default();
                for (&c, &r) in centred.iter().zip(&batch) {
                    m.push_repeated(c as f32 as f64, stats.valid[r]);
                }
                let w = Whitening::from_moments(&m)
                    .map_err(|err| whitening_error(file, step, &e, err, m.n))?;
                Some(
                    centred
                        .iter()
                        .map(|&c| (c as f32 as f64 - w.mean) * w.inv_std)
                        .collect(),
                )
            }
            Estimator::Gae if !pipeline.whiten_advantages => None,
            Estimator::Gae | Estimator::ReinforcePlusPlus => {
                let mut m = Moments::default();
                for &r in &batch {
                    m.merge(&stats.moments[r]);
                }
                let w = Whitening::from_moments(&m)
                    .map_err(|err| whitening_error(file, step, &e, err, m.n))?;
                plan.whitening.insert(step, w);
                None
            }
            Estimator::Remax | Estimator::Reinforce | Estimator::TurnGae => None,
            Estimator::OptimalTokenBaseline | Estimator::TirOptimalTokenBaseline => {
                let tir = e == Estimator::TirOptimalTokenBaseline;
                let mut members: HashMap<&GroupKey, Vec<usize>> = HashMap::new();
                for (&r, label) in batch.iter().zip(&labels) {
                    // TIR leaves rows without valid tokens out of their group
                    if !tir || stats.valid[r] > 0.0 {
                        members.entry(label).or_default().push(r);
                    } else {
                        plan.otb_singleton[r] = true;
                    }
                }
                for rows in members.values() {
                    if rows.len() == 1 {
                        plan.otb_singleton[rows[0]] = true;
                        continue;
                    }
                    let lengths: Vec<usize> =
                        rows.iter().map(|&r| stats.valid[r] as usize).collect();
                    if let Some((member, from)) = zero_tail(&lengths) {
                        plan.otb_zero_tail[rows[member]] = Some(from);
                    }
                }
                None
            }
        };
        if let Some(scalars) = scalars {
            for (&r, a) in batch.iter().zip(scalars) {
                plan.row_scalar[r] = a as f32;
            }
        }
    }
    Ok(plan)
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
