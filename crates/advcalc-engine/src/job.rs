//! One pipeline's work on one input: the per-row-group steps of the two passes and the
//! checks between them. `driver` runs one job and writes its outputs; `compare` runs several
//! jobs over the same row groups, each read once.

use std::collections::BTreeMap;

use arrow_array::RecordBatch;

use crate::data::{FloatBuffer, RowGroup, TokenOutputs, TokenRole};
use crate::error::{Error, Result};
use crate::estimators::{AnyEstimatorPlan, RowStats};
use crate::interrupt;
use crate::io::assemble::assemble;
use crate::io::decode::{DecodeOptions, decode};
use crate::io::schema::InputColumns;
use crate::io::write::ColumnSource;
use crate::loss::plan::LossPlan;
use crate::loss::row::RowSums;
use crate::metrics;
use crate::pipeline::{self, Constants, Pipeline, StepConstants};
use crate::plan::{self, step_constants, training_batches};
use crate::row_stats::{StatsScope, row_stats};
use crate::shaping::kl::KlController;
use crate::shaping::scores::{self, Layout};
use crate::token_outputs::token_outputs;

/// A pipeline bound to the columns of one input.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    pub pipeline: &'a Pipeline,
    pub columns: &'a InputColumns,
    /// The input's name in messages (in a dataset: the file's, see [`Job::at`]).
    pub file: &'a str,
    /// In a dataset: the dataset index of the file's first row (messages count rows within
    /// the file), and the step its path names (`step=N`), which fills a missing `step`
    /// column or must agree with the one there.
    pub row_base: usize,
    pub path_step: Option<i64>,
    pub layout: Layout,
    pub allow_nonfinite: bool,
    /// Collect `--metrics` parts.
    pub metrics: bool,
}

/// What a statistics pass over one row group is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsPass {
    /// The constants pre-pass: per-row scalars only, without the estimator's statistics.
    Constants,
    /// Pass 1: everything the estimator's batch work needs.
    Statistics,
}

/// Everything pass 2 needs, worked out from the merged pass-1 statistics.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The merged pass-1 statistics of every row, in input order.
    pub stats: RowStats,
    /// The estimator's batch work for every row and step.
    pub plan: AnyEstimatorPlan,
    /// Per step: the KL coefficient used and the IS normalisation factor.
    pub constants: Constants,
    /// Per step: the KL controller's (current KL, β) for the metrics.
    pub kl_metrics: BTreeMap<Option<i64>, (f64, f64)>,
    /// `--metrics` parts of pass 1 (rollout correction).
    pub metric_parts: metrics::Parts,
    /// The training batches: each step's global row indices (steps ascending).
    pub training_batches: Vec<(Option<i64>, Vec<usize>)>,
    /// Things the user should know about the data.
    pub warnings: Vec<String>,
    /// Things the user should know about the run (the loss stage's assumptions).
    pub notes: Vec<String>,
    /// Fingerprint of the configuration the plan was made for (0 inside the commands, which
    /// never mix them up); its shards carry it.
    pub config: u64,
    /// The loss stage's part (`advcalc loss`).
    pub loss: Option<LossPlan>,
}

impl Plan {
    /// Things the user should know about the data (what `run` prints as warnings).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// One row group's token outputs, with the mask they apply to.
pub struct GroupOutputs {
    pub group: RowGroup,
    /// The response mask after rejection.
    pub mask: FloatBuffer,
    pub outputs: TokenOutputs,
    /// The loss stage's per-row metric sums (empty without it).
    pub loss_sums: Vec<RowSums>,
}

impl<'a> Job<'a> {
    /// This job on one file of a dataset: its name, first row and path step.
    pub fn at<'b>(&self, part: &'b crate::io::dataset::Part) -> Job<'b>
    where
        'a: 'b,
    {
        Job {
            file: &part.name,
            row_base: part.first_row,
            path_step: part.path_step,
            ..*self
        }
    }

    /// Pass 2's output: its schema, and where each column comes from (copied from IN
    /// byte for byte, or computed). Only rejection changes the mask; otherwise it is copied.
    pub fn output_layout(&self) -> (arrow_schema::SchemaRef, Vec<ColumnSource>) {
        let has_rollout = self.has_rollout();
        let rewards_unchanged = self.pipeline.kl.is_none();
        let computed = self.pipeline.computed_columns(has_rollout);
        let schema = self.columns.output_schema(&computed, rewards_unchanged);
        let mask_rewritten = self
            .pipeline
            .correction_runs(has_rollout)
            .is_some_and(|c| !c.rs.is_empty());
        let sources =
            self.columns
                .output_sources(&schema, &computed, mask_rewritten, rewards_unchanged);
        (schema, sources)
    }

    /// Pass 2's record batch (in `schema`) from a row group's outputs, and its `--metrics`
    /// parts when `with_metrics`.
    pub fn assembled(
        &self,
        batch: &RecordBatch,
        done: GroupOutputs,
        schema: &arrow_schema::SchemaRef,
        with_metrics: bool,
    ) -> Result<(RecordBatch, metrics::Parts)> {
        let GroupOutputs {
            group,
            mask,
            outputs,
            loss_sums,
        } = done;
        let mut parts = if with_metrics {
            metrics::advantage_parts(&group, &mask, &outputs.advantages)
        } else {
            metrics::Parts::new()
        };
        // the loss stage's sums make its findings and view, asked for or not
        {
            for (i, sums) in loss_sums.into_iter().enumerate() {
                let p = parts.entry(group.step_of(i)).or_default();
                p.loss_rows.push((group.first_row + i, sums));
            }
        }
        drop(mask);
        let out = assemble(
            batch,
            self.columns,
            schema,
            &group.mask.offsets,
            outputs,
            self.file,
        )?;
        Ok((out, parts))
    }

    /// The loss stage's findings and length-bias view (JSON, table) from pass 2's parts;
    /// `None` without the stage.
    pub fn loss_report(
        &self,
        prepared: &Plan,
        parts: &metrics::Parts,
    ) -> Option<(Vec<String>, serde_json::Value, String)> {
        let (stage, plan) = (self.pipeline.loss.as_ref()?, prepared.loss.as_ref()?);
        let stats = &prepared.stats;
        let rows = metrics::loss_rows(parts, stats.rows());
        let warnings = crate::loss::findings::findings(&stage.spec, plan, &rows, &stats.valid);
        // correct rows by score when IN has scores, else by the side of the advantage
        let (correct, split): (Vec<bool>, &'static str) = if stage.given {
            (
                rows.iter().map(|r| r.advantage > 0.0).collect(),
                "advantage",
            )
        } else {
            (stats.score.iter().map(|&s| s > 0.0).collect(), "score")
        };
        let view =
            crate::loss::length_bias::length_bias(plan, &rows, &stats.valid, &correct, split)?;
        Some((
            warnings,
            metrics::length_bias_json(&view, stage.spec.agg),
            view.to_table(stage.spec.agg),
        ))
    }

    pub fn has_rollout(&self) -> bool {
        self.columns.token(TokenRole::RolloutLogProbs).is_some()
    }

    /// Refuse a configuration the input cannot serve before reading any data.
    pub fn check_columns(&self) -> Result<()> {
        if let Some(c) = &self.pipeline.correction
            && c.is_some_active()
            && !self.has_rollout()
        {
            return Err(Error::data(format!(
                "{}: missing column rollout_log_probs — rollout correction (rollout_is / rollout_rs) needs it (verl would silently skip the correction)",
                self.file
            )));
        }
        Ok(())
    }

    /// Whether the shaping needs constants before pass 1: β per step for an adaptive KL
    /// controller, or the IS normalisation when OTB consumes the weights in pass 1.
    pub fn needs_prepass(&self) -> bool {
        let p = self.pipeline;
        (p.kl.is_some() && matches!(p.controller, KlController::Adaptive { .. }))
            || (p
                .correction
                .as_ref()
                .and_then(|c| c.is.as_ref())
                .is_some_and(|s| s.batch_normalize)
                && p.estimator.info().weights_in_pass1)
    }

    /// The constants before any pass: the configured β, no IS normalisation.
    pub fn initial_constants(&self) -> Constants {
        Constants::uniform(StepConstants {
            beta: self.pipeline.controller.value(),
            is_norm: None,
        })
    }

    /// The constants found by the pre-pass.
    pub fn prepass_constants(&self, pre: &RowStats) -> Constants {
        step_constants(self.pipeline, pre).0
    }

    /// Decode one row group and run stage 1 (scalar scores placed on the tokens).
    pub fn decode(&self, batch: &RecordBatch, first_row: usize, check: bool) -> Result<RowGroup> {
        let mut group = decode(
            batch,
            self.columns,
            &DecodeOptions {
                check_values: check,
                allow_nonfinite: self.allow_nonfinite,
                row_base: self.row_base,
                path_step: self.path_step,
                skip_metrics_only: !self.metrics,
            },
            self.file,
            first_row,
        )?;
        scores::place(&mut group, self.layout);
        Ok(group)
    }

    /// A statistics pass over one row group: its per-row scalars (and metric parts).
    pub fn row_group_stats(
        &self,
        batch: &RecordBatch,
        first_row: usize,
        constants: &Constants,
        pass: StatsPass,
    ) -> Result<(RowStats, metrics::Parts)> {
        let group = self.decode(batch, first_row, true)?;
        interrupt::check()?;
        let shaped = pipeline::shape(self.pipeline, &group, constants, self.file)?;
        let parts = match self.pipeline.correction_runs(self.has_rollout()) {
            Some(c) if pass == StatsPass::Statistics && self.metrics => {
                metrics::correction_parts(self.pipeline, c, &group)
            }
            _ => metrics::Parts::new(),
        };
        let scope = match pass {
            StatsPass::Statistics => StatsScope::WithEstimator,
            StatsPass::Constants => StatsScope::Common,
        };
        let stats = row_stats(self.pipeline, group, &shaped, scope, self.file)?;
        Ok((stats, parts))
    }

    /// Between the passes: check the merged statistics and run the estimator's batch work.
    pub fn prepare(&self, stats: RowStats, metric_parts: metrics::Parts) -> Result<Plan> {
        let rows = stats.rows();
        let mut warnings = Vec::new();
        if stats.dropped_scores > 0 {
            warnings.push(format!(
                "{} rows have a non-zero `score` but no position to hold it (an empty response, or no mask-1 token under --layout padded); their score is dropped",
                stats.dropped_scores
            ));
        }
        if let Some(p) = &stats.positive_log_probs {
            warnings.push(format!(
                "{}: {} positive values in log-probability columns (first: `{}` row {} token {}); log-probabilities are ≤ 0 — check that these columns hold log π",
                self.file, p.count, p.column, p.row, p.token
            ));
        }
        let training_batches = training_batches(stats.step.as_deref(), rows);
        if rows == 0 {
            warnings.push(format!(
                "{}: the input has no rows: OUT has none",
                self.file
            ));
        }
        let correction = self.pipeline.correction_runs(self.has_rollout());
        // with no rows and only the mismatch metrics (no IS or RS configured), there is
        // nothing to correct: the run writes its empty output
        if let Some(correction) = correction.filter(|c| rows > 0 || c.is_some_active()) {
            if rows == 0 {
                // say what is wrong with the input before what verl would raise on it
                return Err(Error::data(format!(
                    "{}: the input has no rows, and rollout correction ({}) needs at least one valid token in the batch",
                    self.file,
                    if correction.is.is_some() {
                        "rollout_is"
                    } else {
                        "rollout_rs"
                    }
                )));
            }
            for (step, batch) in &training_batches {
                if batch.iter().all(|&r| stats.orig_valid[r] == 0.0) {
                    let at = step.map(|s| format!(" step {s}:")).unwrap_or_default();
                    return Err(Error::data(format!(
                        "{}:{at} rollout correction needs at least one valid token in the batch (verl raises ValueError: response_mask must contain at least one valid token (1).)",
                        self.file
                    )));
                }
            }
        }
        let (constants, kl_metrics) = step_constants(self.pipeline, &stats);
        let loss = match &self.pipeline.loss {
            None => None,
            Some(stage) => Some(
                LossPlan::new(
                    &stage.spec,
                    &training_batches,
                    &stats.valid,
                    stats.loss.as_ref(),
                )
                .map_err(|u| {
                    let at = u.step.map(|s| format!(" step {s}:")).unwrap_or_default();
                    Error::data(format!(
                        "{}:{at} {} rows do not cut into mini-batches of {} rows (ppo_mini_batch_size × rollout.n); verl asserts that they do",
                        self.file, u.rows, u.mini_batch_rows
                    ))
                    .with_hint("give the run's actor_rollout_ref.actor.ppo_mini_batch_size and actor_rollout_ref.rollout.n (-c trainer.yaml, or --set)")
                })?,
            ),
        };
        let mut stats = stats;
        // the estimator's own statistics move into the plan (pass 2 reads OTB's column sums)
        let plan = plan::plan(self.pipeline, &mut stats, self.file).map_err(|e| {
            // an estimator's refusal of an empty batch: the empty input is the cause
            if rows == 0 {
                e.context(format!("{}: the input has no rows", self.file))
            } else {
                e
            }
        })?;
        warnings.extend(plan.warnings().iter().cloned());
        if plan.nan_rows() > 0 {
            warnings.push(format!(
                "{} rows belong to opo groups with no valid token, where verl writes NaN; advcalc writes 0 there",
                plan.nan_rows()
            ));
        }
        let mut notes = Vec::new();
        if let Some(stage) = &self.pipeline.loss {
            if self.columns.token(TokenRole::LogProbs).is_none() {
                notes.push(format!(
                    "{}: no log_probs column: the replay is on-policy (log π = old_log_probs, ratio 1), as verl's first mini-batch of the first epoch sees it",
                    self.file
                ));
            }
            notes.push(if stage.given {
                format!("{}: the loss replays IN's advantages (and its response_mask and rollout_is_weights as they are)", self.file)
            } else {
                format!(
                    "{}: no advantages column: they are computed first ({}), as `advcalc run` computes them",
                    self.file,
                    self.pipeline.estimator.name()
                )
            });
        }
        Ok(Plan {
            loss,
            notes,
            config: 0,
            training_batches,
            stats,
            plan,
            constants,
            kl_metrics,
            metric_parts,
            warnings,
        })
    }

    /// Pass 2 over one row group: the token outputs.
    pub fn row_group_outputs(
        &self,
        batch: &RecordBatch,
        first_row: usize,
        prepared: &Plan,
    ) -> Result<GroupOutputs> {
        self.row_group_outputs_with(
            batch,
            first_row,
            &prepared.constants,
            &prepared.plan,
            None,
            prepared.loss.as_ref(),
        )
    }

    /// Pass 2 over one row group with a plan (the whole one, or a shard covering its rows).
    pub fn row_group_outputs_with(
        &self,
        batch: &RecordBatch,
        first_row: usize,
        constants: &Constants,
        plan: &AnyEstimatorPlan,
        steps: Option<&[Option<i64>]>,
        loss: Option<&LossPlan>,
    ) -> Result<GroupOutputs> {
        let group = self.decode(batch, first_row, false)?;
        let held = |i: usize| {
            plan.position(first_row + i).is_some()
                && steps.is_none_or(|s| s.contains(&group.step_of(i)))
        };
        if let Some(i) = (0..group.rows()).find(|&i| !held(i)) {
            let step = group
                .step_of(i)
                .map_or("no step".to_string(), |s| format!("step {s}"));
            return Err(Error::usage(format!(
                "{}: row {} ({step}) is not in the plan shard given for pass 2",
                self.file,
                first_row + i
            ))
            .with_hint("pass the shard of every step the record batch holds"));
        }
        interrupt::check()?;
        let shaped = pipeline::shape(self.pipeline, &group, constants, self.file)?;
        interrupt::check()?;
        let mask = shaped.mask.clone();
        let (outputs, loss_sums) =
            token_outputs(self.pipeline, &group, shaped, plan, loss, self.file)?;
        Ok(GroupOutputs {
            group,
            mask,
            outputs,
            loss_sums,
        })
    }
}
