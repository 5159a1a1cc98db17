//! What an estimator sees: its settings, one row group after shaping (passes 1 and 2), one
//! training batch of per-row statistics (between the passes), and what it leaves for pass 2.
//! Plain slices and scalars only; the engine fills these from the decoded row groups.

use std::ops::Range;

use crate::data::{GroupKey, PositiveLogProbs, RowGroup, TokenRole};
use crate::error::{Error, Result};
use crate::estimators::Extensions;
use crate::estimators::conventions;
use crate::estimators::groups::Grouping;
use crate::estimators::moments::{Moments, RowMoments, WhitenError, Whitening};
use crate::estimators::sessions::{OutputRow, fold_sessions};
use crate::estimators::state::OwnPlan;
use crate::estimators::{AnyEstimatorStats, Estimator};

/// The validated settings an estimator may read (verl's `algorithm` keys and advcalc's).
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    pub estimator: Estimator,
    pub gamma: f64,
    pub lam: f64,
    /// `norm_adv_by_std_in_grpo`.
    pub norm_adv_by_std_in_grpo: bool,
    /// `gdpo_reward_weights`, one per `gdpo_reward_keys` column.
    pub gdpo_weights: &'a [f64],
    /// advcalc's settings, each declared once (`config/extensions.rs`): `--convention`,
    /// `whiten_advantages`, `mask_mode`, the frameworks' switches.
    pub ext: &'a Extensions,
}

/// One row group after stages 1–3: the shaped rewards, the mask after rejection and the IS
/// weights, flat and aligned with the group's row offsets.
pub struct Rows<'a> {
    pub settings: &'a Settings<'a>,
    pub group: &'a RowGroup,
    pub rewards: &'a [f32],
    pub mask: &'a [f32],
    pub is_weights: Option<&'a [f32]>,
    /// verl's `old_log_probs`: `rollout_log_probs` in bypass mode.
    pub old_log_probs: Option<&'a [f32]>,
    /// The input's name in messages.
    pub file: &'a str,
}

impl Rows<'_> {
    pub fn rows(&self) -> usize {
        self.group.rows()
    }

    pub fn span(&self, i: usize) -> Range<usize> {
        self.group.span(i)
    }

    /// A column the estimator declared; missing only if the engine failed to decode it.
    pub fn token(&self, role: TokenRole) -> Result<&[f32]> {
        self.group
            .token(role)
            .ok_or_else(|| self.missing(role.column()))
    }

    pub fn old_log_probs(&self) -> Result<&[f32]> {
        self.old_log_probs
            .ok_or_else(|| self.missing("old_log_probs"))
    }

    pub fn uid(&self) -> Result<&[GroupKey]> {
        self.group.uid.as_deref().ok_or_else(|| self.missing("uid"))
    }

    pub fn missing(&self, what: &str) -> Error {
        Error::data(format!(
            "{}: {} needs {what}",
            self.file,
            self.settings.estimator.name()
        ))
    }
}

/// What the statistics pass keeps per row, for the whole input in file order.
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// gdpo reward components, `components[k][row]`.
    pub components: Vec<Vec<f64>>,
    /// The estimator's own statistics ([`Estimate::Stats`](super::Estimate::Stats)); `None`
    /// from the constants pre-pass, and in an empty value nothing was appended to yet.
    pub own: Option<AnyEstimatorStats>,
    /// Rows whose scalar score had no position.
    pub dropped_scores: usize,
    /// Positive values in log-probability columns (a warning).
    pub positive_log_probs: Option<PositiveLogProbs>,
    /// Which pass made these statistics, so the plan can refuse the wrong ones; `None` for
    /// an empty value that nothing was appended to yet.
    pub stamp: Option<Stamp>,
    /// The loss stage's own statistics on IN's advantages ([`PolicyLoss::Stats`]: kl_cov's
    /// tokens, for its per-micro-batch choice), `advcalc loss` only; not in the exchange bytes.
    ///
    /// [`PolicyLoss::Stats`]: crate::loss::policy::PolicyLoss::Stats
    pub loss: Option<crate::loss::policy::AnyLossStats>,
}

/// What made a [`RowStats`] (or a plan shard): fingerprints of the resolved configuration
/// and of the step constants used, and whether the estimator's own statistics are in it.
/// Appending statistics of different stamps marks the result `mixed`. The fingerprints are
/// FNV-1a 64 over bytes the engine specifies (`engine::fingerprint`), the same on every build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Fingerprint of the resolved configuration.
    pub config: u64,
    /// Fingerprint of the step constants pass 1 ran with.
    pub constants: u64,
    /// Pass 1 proper (the estimator's statistics kept), not the constants pre-pass.
    pub with_estimator: bool,
    /// Appended from statistics of different stamps.
    pub mixed: bool,
}

impl RowStats {
    /// The rows these statistics describe.
    pub fn rows(&self) -> usize {
        self.score.len()
    }

    /// The steps of these rows, ascending (`[None]` without a step column): the plan shards
    /// a pass-2 task over the same rows needs.
    pub fn steps(&self) -> Vec<Option<i64>> {
        match &self.step {
            None => vec![None],
            Some(steps) => {
                let distinct: std::collections::BTreeSet<i64> = steps.iter().copied().collect();
                distinct.into_iter().map(Some).collect()
            }
        }
    }

    /// Append the next row group's statistics (row-group order keeps results independent of
    /// the thread count).
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
        if self.components.len() < other.components.len() {
            self.components.resize(other.components.len(), Vec::new());
        }
        for (mine, theirs) in self.components.iter_mut().zip(other.components) {
            mine.extend(theirs);
        }
        let mut mixed = false;
        self.own = match (self.own.take(), other.own) {
            (Some(mut mine), Some(theirs)) => {
                // statistics of two estimators: refused as mixed
                mixed = !mine.append(theirs);
                Some(mine)
            }
            (mine, theirs) => mine.or(theirs),
        };
        self.loss = match (self.loss.take(), other.loss) {
            (Some(mut mine), Some(theirs)) => {
                // two losses' statistics: refused as mixed
                mixed |= !mine.append(theirs);
                Some(mine)
            }
            (mine, theirs) => mine.or(theirs),
        };
        self.dropped_scores += other.dropped_scores;
        self.positive_log_probs =
            PositiveLogProbs::merge(self.positive_log_probs.take(), other.positive_log_probs);
        self.stamp = match (self.stamp, other.stamp) {
            (Some(mut a), Some(b)) if a != b || mixed => {
                a.mixed = true;
                Some(a)
            }
            (a, b) => a.or(b),
        };
    }
}

/// What the output pass needs from the estimator's batch work: per row (every row of the
/// input, or the rows of a shard's steps) the outcome scalar, and the estimator's own part
/// ([`Estimate::Plan`](super::Estimate::Plan): `()` for most).
#[derive(Debug, Clone, PartialEq)]
pub struct EstimatorPlan<P = ()> {
    /// The global row index of each entry of the per-row vectors, ascending; `None`: every
    /// row of the input, in order (the whole plan; a shard lists its rows).
    pub rows: Option<Vec<usize>>,
    /// Outcome estimators: each row's advantage scalar (already whitened where the estimator
    /// whitens), broadcast onto its mask.
    pub row_scalar: Vec<f32>,
    /// The estimator's own part: group or batch statistics pass 2 reads (whitening, OTB's
    /// baselines), per row in the order of `row_scalar` where it has per-row entries.
    pub own: P,
    /// Things the user should know about the grouping (consecutive-n blocks that disagree
    /// with the `uid`s), one per batch at most.
    pub warnings: Vec<String>,
}

impl<P: OwnPlan> EstimatorPlan<P> {
    /// An empty plan for `rows` rows.
    pub fn new(rows: usize) -> Self {
        EstimatorPlan {
            rows: None,
            row_scalar: vec![0.0; rows],
            own: P::new(rows),
            warnings: Vec::new(),
        }
    }

    /// The part of the plan for the given rows (global indices, ascending) of the given
    /// steps: their per-row entries, and the steps' part of the estimator's own.
    pub fn restrict(&self, rows: &[usize], steps: &[Option<i64>]) -> Self {
        let positions: Vec<usize> = rows.iter().map(|&r| self.at(r)).collect();
        EstimatorPlan {
            rows: Some(rows.to_vec()),
            row_scalar: positions.iter().map(|&p| self.row_scalar[p]).collect(),
            own: self.own.restrict(&positions, steps),
            warnings: Vec::new(),
        }
    }
}

impl<P> EstimatorPlan<P> {
    /// The plan with `own` as the estimator's part.
    pub fn with_own<Q>(self, own: Q) -> EstimatorPlan<Q> {
        EstimatorPlan {
            rows: self.rows,
            row_scalar: self.row_scalar,
            own,
            warnings: self.warnings,
        }
    }

    /// Where global row `row` sits in the per-row vectors; `None` when the plan does not
    /// hold it (a shard of other steps).
    pub fn position(&self, row: usize) -> Option<usize> {
        match &self.rows {
            None => (row < self.row_scalar.len()).then_some(row),
            Some(rows) => rows.binary_search(&row).ok(),
        }
    }

    /// Where global row `row` sits in the per-row vectors (of `row_scalar`, and of the
    /// estimator's own part).
    pub fn at(&self, row: usize) -> usize {
        // the engine checks that a shard covers a record batch's rows before pass 2
        self.position(row)
            .expect("the plan covers every row of the record batch")
    }

    /// Row `row`'s outcome scalar.
    pub fn scalar(&self, row: usize) -> f32 {
        self.row_scalar[self.at(row)]
    }
}

/// One training batch between the passes: the per-row statistics of its rows, the common
/// ones and the estimator's own ([`Estimate::Stats`](super::Estimate::Stats)).
pub struct TrainingBatch<'a, S = ()> {
    pub settings: &'a Settings<'a>,
    pub stats: &'a RowStats,
    /// The estimator's own pass-1 statistics of the whole input (index per-row ones by the
    /// global rows of `rows`).
    pub own: &'a S,
    pub step: Option<i64>,
    /// Global row indices, in file order.
    pub rows: &'a [usize],
    pub file: &'a str,
}

impl<S> TrainingBatch<'_, S> {
    /// The rows' outcome scores.
    pub fn scores(&self) -> Vec<f64> {
        self.rows.iter().map(|&r| self.stats.score[r]).collect()
    }

    /// The rows' valid-token counts (after rejection).
    pub fn valid(&self) -> Vec<f64> {
        self.rows.iter().map(|&r| self.stats.valid[r]).collect()
    }

    /// The rows' `uid` labels.
    pub fn labels(&self) -> Vec<GroupKey> {
        self.rows
            .iter()
            .map(|&r| self.stats.uid[r].clone())
            .collect()
    }

    /// Groups by `uid` equality (verl's rule).
    pub fn grouping(&self) -> Grouping {
        Grouping::by_key(self.rows.iter().map(|&r| &self.stats.uid[r]))
    }

    /// `FILE: step S:` (or `FILE:`) to start a message about this batch.
    pub fn at(&self) -> String {
        let step = self.step.map(|s| format!(" step {s}:")).unwrap_or_default();
        format!("{}:{step}", self.file)
    }

    /// The groups of the convention (consecutive blocks for trl, openrlhf and open-instruct,
    /// and for the openrlhf_* estimators), with a warning when blocks and uids disagree.
    pub fn family_grouping<P>(
        &self,
        plan: &mut EstimatorPlan<P>,
        consecutive: bool,
    ) -> Result<Grouping> {
        if !consecutive {
            return Ok(self.grouping());
        }
        let (g, warning) =
            conventions::consecutive_grouping(&self.labels(), self.settings.ext.group_size)
                .map_err(|msg| {
                    Error::data(format!(
                        "{} {}: {msg}",
                        self.at(),
                        self.settings.estimator.name()
                    ))
                })?;
        if let Some(w) = warning {
            plan.warnings.push(format!("{} {w}", self.at()));
        }
        Ok(g)
    }

    /// The error for a singleton group where OpenRLHF asserts `n_samples_per_prompt > 1`.
    pub fn singleton_error(&self, g: &Grouping, row: usize) -> Error {
        let size = g
            .group_of_row
            .iter()
            .filter(|&&x| x == g.group_of_row[row])
            .count();
        Error::data(format!(
            "{} row {}: its group has {size} row, and OpenRLHF asserts n_samples_per_prompt > 1 for {}",
            self.at(),
            self.rows[row],
            self.settings.estimator.name()
        ))
        .with_hint("set algorithm.group_size, or use another estimator")
    }

    /// verl's whitening over the batch's valid tokens, or its error for ≤ 1 valid token.
    pub fn whiten(&self, m: &Moments) -> Result<Whitening> {
        Whitening::from_moments(m).map_err(|err| self.whitening_error(err, m.n))
    }

    fn whitening_error(&self, err: WhitenError, n: f64) -> Error {
        Error::data(format!(
            "{} {} whitens over the batch's valid tokens and needs at least 2 valid tokens, found {n} (verl raises ValueError: {})",
            self.at(),
            self.settings.estimator.name(),
            err.verl_message()
        ))
    }

    /// Moments of a per-row value counted once per valid token (as verl's tiled tensor).
    pub fn token_moments(&self, per_row: &[f64]) -> Moments {
        let mut m = Moments::default();
        for (&a, &r) in per_row.iter().zip(self.rows) {
            m.push_repeated(a as f32 as f64, self.stats.valid[r]);
        }
        m
    }

    /// verl V1 folds multi-output sessions (each scored by its last output) for exact
    /// grpo only (§6.3): the folded scalars, or `None` without session columns.
    pub fn folded_sessions(&self, norm_adv_by_std_in_grpo: bool) -> Option<Vec<f64>> {
        let (sessions, index) = self.stats.session.as_ref()?;
        let s = self.stats;
        let outputs: Vec<OutputRow> = self
            .rows
            .iter()
            .map(|&r| OutputRow {
                uid: &s.uid[r],
                session: &sessions[r],
                output_index: index[r],
                score: s.score[r],
                has_valid: s.valid[r] > 0.0,
            })
            .collect();
        Some(fold_sessions(&outputs, norm_adv_by_std_in_grpo))
    }

    /// Store one scalar per row of the batch for pass 2 to broadcast.
    pub fn set_scalars<P>(&self, plan: &mut EstimatorPlan<P>, scalars: Vec<f64>) {
        for (&r, a) in self.rows.iter().zip(scalars) {
            plan.row_scalar[r] = a as f32;
        }
    }
}

impl TrainingBatch<'_, RowMoments> {
    /// Moments of every row's pass-1 moments (gae, reinforce_plus_plus), merged in row order.
    pub fn merged_moments(&self) -> Moments {
        let mut m = Moments::default();
        for &r in self.rows {
            m.merge(&self.own.0[r]);
        }
        m
    }
}

/// The token outputs an estimator writes for one row group (flat, aligned with the mask).
#[derive(Debug, Clone)]
pub struct Tokens {
    pub advantages: Vec<f32>,
    /// `None` when returns equal advantages.
    pub returns: Option<Vec<f32>>,
}
