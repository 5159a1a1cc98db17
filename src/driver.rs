//! The two passes over the input (design §5), each parallel over row groups:
//!
//! 1. **Statistics**: decode the few columns cross-row statistics need (labels, step, mask,
//!    scores), reduce each row to its scalars, merge in row-group order, and run the
//!    estimator per training batch to get every row's advantage scalar.
//! 2. **Output**: decode each row group again, compute the token outputs, encode them on the
//!    worker thread, and append row groups in input order to a temporary file that is
//!    renamed onto OUT at the end.
//!
//! Results never depend on the thread count: merging and appending follow row-group order.

use std::path::PathBuf;

use rayon::prelude::*;

use crate::config::Config;
use crate::dispatch::{self, RowStats, step_constants, training_batches};
use crate::error::{Error, Result};
use crate::estimators::Estimator;
use crate::io::assemble::assemble;
use crate::io::decode::{RowGroup, decode};
use crate::io::read::ParquetInput;
use crate::io::schema::{InputColumns, TokenRole};
use crate::io::write::{ParquetOutput, check_destination, same_file};
use crate::outputs::token_outputs;
use crate::pipeline::{self, Constants, Pipeline, StepConstants};
use crate::progress::Progress;
use crate::scores::Layout;
use crate::shaping::kl::KlController;
use crate::statistics::row_stats;

/// How to run, beyond the algorithm configuration.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub input: PathBuf,
    pub output: PathBuf,
    pub force: bool,
    /// Worker threads; `None` means one per core.
    pub threads: Option<usize>,
    pub progress: bool,
    pub layout: Layout,
}

/// What a run did, for the user.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    pub rows: usize,
    pub row_groups: usize,
    pub batches: usize,
    /// Things the user should know about the data (printed by `main`).
    pub warnings: Vec<String>,
}

pub fn run(config: &Config, opts: &RunOptions) -> Result<RunSummary> {
    if same_file(&opts.input, &opts.output) {
        return Err(Error::usage(format!(
            "{}: OUT is the same file as IN; write to another file",
            opts.output.display()
        )));
    }
    let pipeline = Pipeline::new(&config.algorithm)?;
    let input = ParquetInput::open(&opts.input)?;
    let columns = InputColumns::resolve(input.schema(), &pipeline.needs(), input.name())?;
    check_destination(&opts.output, opts.force)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.unwrap_or(0))
        .build()
        .map_err(|e| Error::usage("cannot start the worker threads").with_source(e))?;
    pool.install(|| {
        Passes {
            opts,
            pipeline: &pipeline,
            input: &input,
            columns: &columns,
        }
        .run()
    })
}

struct Passes<'a> {
    opts: &'a RunOptions,
    pipeline: &'a Pipeline,
    input: &'a ParquetInput,
    columns: &'a InputColumns,
}

impl Passes<'_> {
    fn run(&self) -> Result<RunSummary> {
        let starts = self.input.row_group_starts();
        let row_groups = self.input.num_row_groups();
        let rows = starts[row_groups];
        let progress = Progress::new(rows as u64, self.opts.progress);
        let mut summary = RunSummary {
            rows,
            row_groups,
            ..Default::default()
        };
        let has_rollout = self.columns.token(TokenRole::RolloutLogProbs).is_some();
        if let Some(c) = &self.pipeline.correction
            && c.is_some_active()
            && !has_rollout
        {
            return Err(Error::data(format!(
                "{}: missing column rollout_log_probs — rollout correction (rollout_is / rollout_rs) needs it (verl would silently skip the correction)",
                self.input.name()
            )));
        }

        // Constants the shaping needs before pass 1: β per step for an adaptive KL controller,
        // and the IS normalisation when OTB consumes the weights in pass 1.
        let needs_prepass = (self.pipeline.kl.is_some()
            && matches!(self.pipeline.controller, KlController::Adaptive { .. }))
            || (self
                .pipeline
                .correction
                .as_ref()
                .and_then(|c| c.is.as_ref())
                .is_some_and(|s| s.batch_normalize)
                && matches!(
                    self.pipeline.estimator,
                    Estimator::OptimalTokenBaseline | Estimator::TirOptimalTokenBaseline
                ));
        let mut constants = Constants::uniform(StepConstants {
            beta: self.pipeline.controller.value(),
            is_norm: None,
        });
        if needs_prepass {
            progress.pass("constants");
            let pre = self.statistics(&starts, &progress, &constants, false)?;
            constants = step_constants(self.pipeline, &pre).0;
        }

        progress.pass("statistics");
        let stats = self.statistics(&starts, &progress, &constants, true)?;
        if stats.dropped_scores > 0 {
            summary.warnings.push(format!(
                "{} rows have a non-zero `score` but no position to hold it (an empty response, or no mask-1 token under --layout padded); their score is dropped",
                stats.dropped_scores
            ));
        }
        summary.batches = training_batches(stats.step.as_deref(), rows).len();
        if self.pipeline.correction_runs(has_rollout).is_some() {
            for (step, batch) in training_batches(stats.step.as_deref(), rows) {
                if batch.iter().all(|&r| stats.orig_valid[r] == 0.0) {
                    let at = step.map(|s| format!(" step {s}:")).unwrap_or_default();
                    return Err(Error::data(format!(
                        "{}:{at} rollout correction needs at least one valid token in the batch (verl raises ValueError: response_mask must contain at least one valid token (1).)",
                        self.input.name()
                    )));
                }
            }
        }
        let (final_constants, _kl_metrics) = step_constants(self.pipeline, &stats);
        let plan = dispatch::plan(self.pipeline, &stats, self.input.name())?;
        if plan.nan_rows > 0 {
            summary.warnings.push(format!(
                "{} rows belong to opo groups with no valid token, where verl writes NaN; advcalc writes 0 there",
                plan.nan_rows
            ));
        }

        progress.pass("writing");
        let is_weights = self.pipeline.is_weights(has_rollout);
        let mut output = ParquetOutput::create(
            &self.opts.output,
            self.columns.output_schema(is_weights),
            self.opts.force,
        )?;
        // A window of row groups in flight bounds memory; order is kept by appending in turn.
        let window = rayon::current_num_threads().max(1) * 2;
        let indices: Vec<usize> = (0..row_groups).collect();
        for chunk in indices.chunks(window) {
            let encoded = chunk
                .par_iter()
                .map(|&rg| {
                    let batch = self.input.read_row_group(rg, None)?;
                    let group = self.decode(&batch, starts[rg])?;
                    let shaped = pipeline::shape(
                        self.pipeline,
                        &group,
                        &final_constants,
                        self.input.name(),
                    )?;
                    let outputs = token_outputs(
                        self.pipeline,
                        &group,
                        shaped,
                        &plan,
                        &stats,
                        self.input.name(),
                    )?;
                    let out = assemble(
                        &batch,
                        self.columns,
                        output.schema(),
                        &group.mask.offsets,
                        outputs,
                        self.input.name(),
                    )?;
                    let encoded = output.encode(rg, &out)?;
                    progress.inc(group.rows());
                    Ok(encoded)
                })
                .collect::<Result<Vec<_>>>()?;
            for e in encoded {
                output.append(e)?;
            }
        }
        output.finish()?;
        progress.finish();
        Ok(summary)
    }

    fn decode(
        &self,
        batch: &arrow::record_batch::RecordBatch,
        first_row: usize,
    ) -> Result<RowGroup> {
        decode(
            batch,
            self.columns,
            self.opts.layout,
            self.input.name(),
            first_row,
        )
    }

    /// Pass 1 (or the constants pre-pass, without the estimator's statistics): per-row
    /// scalars of every row group, merged in row-group order.
    fn statistics(
        &self,
        starts: &[usize],
        progress: &Progress,
        constants: &Constants,
        estimator_stats: bool,
    ) -> Result<RowStats> {
        let projection = self.columns.statistics_projection();
        let parts = (0..self.input.num_row_groups())
            .into_par_iter()
            .map(|rg| {
                let batch = self.input.read_row_group(rg, Some(&projection))?;
                let group = self.decode(&batch, starts[rg])?;
                progress.inc(group.rows());
                let shaped = pipeline::shape(self.pipeline, &group, constants, self.input.name())?;
                if estimator_stats {
                    row_stats(self.pipeline, group, &shaped, self.input.name())
                } else {
                    let mut plain = self.pipeline.clone();
                    plain.estimator = Estimator::Grpo;
                    row_stats(&plain, group, &shaped, self.input.name())
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let mut stats = RowStats::default();
        for part in parts {
            stats.append(part);
        }
        Ok(stats)
    }
}
