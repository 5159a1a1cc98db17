//! Per training batch, run the configured estimator on the per-row statistics of the
//! statistics pass — the counterpart of verl's `compute_advantage` dispatcher and V1's
//! multi-output folding (reference §6).

use std::collections::BTreeMap;

use crate::config::AlgoConfig;
use crate::error::{Error, Result};
use crate::estimators::{Estimator, grpo, grpo_vectorized};
use crate::groups::{GroupKey, Grouping};
use crate::sessions::{OutputRow, fold_sessions};

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
    /// Whether the row has a mask-1 token.
    pub has_valid: Vec<bool>,
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
        self.has_valid.extend(other.has_valid);
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

/// Advantage scalar of every row (to be broadcast onto its mask), batch by batch.
pub fn row_advantages(algo: &AlgoConfig, stats: &RowStats, file: &str) -> Result<Vec<f32>> {
    let mut out = vec![0.0f32; stats.rows()];
    for (_, rows) in training_batches(stats.step.as_deref(), stats.rows()) {
        let scores: Vec<f64> = rows.iter().map(|&r| stats.score[r]).collect();
        let labels: Vec<GroupKey> = rows.iter().map(|&r| stats.uid[r].clone()).collect();
        let advantages = match algo.adv_estimator {
            Estimator::Grpo => match &stats.session {
                // verl V1 folds multi-output sessions for exact grpo only (§6.3)
                Some((sessions, index)) => {
                    let outputs: Vec<OutputRow> = rows
                        .iter()
                        .map(|&r| OutputRow {
                            uid: &stats.uid[r],
                            session: &sessions[r],
                            output_index: index[r],
                            score: stats.score[r],
                            has_valid: stats.has_valid[r],
                        })
                        .collect();
                    fold_sessions(&outputs, algo.norm_adv_by_std_in_grpo)
                }
                None => grpo::grpo(
                    &scores,
                    &Grouping::by_key(labels.iter()),
                    algo.norm_adv_by_std_in_grpo,
                ),
            },
            Estimator::GrpoVectorized => {
                let grouping = grpo_vectorized::canonical_grouping(&labels).map_err(|i| {
                    Error::data(format!(
                        "{file}: column `uid` row {}: label {} is a negative integer, and verl 0.9.1's grpo_vectorized fails on negative group labels (index_add_ with a negative index); use -e grpo or non-negative uids",
                        rows[i], labels[i]
                    ))
                })?;
                grpo_vectorized::grpo_vectorized(&scores, &grouping)
            }
            other => {
                return Err(other.check_implemented().err().unwrap_or_else(|| {
                    Error::usage(format!(
                        "estimator `{}` has no batch dispatch",
                        other.name()
                    ))
                }));
            }
        };
        for (&row, a) in rows.iter().zip(advantages) {
            out[row] = a as f32;
        }
    }
    Ok(out)
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
