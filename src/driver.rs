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
use crate::io::decode::{DecodeOptions, RowGroup, decode};
use crate::io::format::{Format, is_stdio};
use crate::io::ipc;
use crate::io::read::ParquetInput;
use crate::io::schema::{InputColumns, TokenRole};
use crate::io::write::{EncodedRowGroup, ParquetOutput, check_destination, same_file};
use crate::metrics;
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
    /// Let NaN and ±inf through instead of refusing them.
    pub allow_nonfinite: bool,
    /// `--input-format` / `--output-format`; `None`: by extension (`-` is an Arrow stream).
    pub input_format: Option<Format>,
    pub output_format: Option<Format>,
    /// Where to write the metrics as JSON (`--metrics`).
    pub metrics: Option<PathBuf>,
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
    let in_format = Format::of(&opts.input, opts.input_format);
    let out_format = Format::of(&opts.output, opts.output_format);
    let in_name = if is_stdio(&opts.input) {
        "<stdin>".to_string()
    } else {
        opts.input.display().to_string()
    };
    if !is_stdio(&opts.input) && !is_stdio(&opts.output) && same_file(&opts.input, &opts.output) {
        return Err(Error::usage(format!(
            "{}: OUT is the same file as IN; write to another file",
            opts.output.display()
        )));
    }
    let pipeline = Pipeline::new(&config.algorithm)?;
    if !is_stdio(&opts.output) {
        check_destination(&opts.output, opts.force)?;
    }
    // Arrow IPC input is spooled into a temporary Parquet file, which both passes read.
    let spool = match in_format {
        Format::Parquet => None,
        format => Some(ipc::spool_to_parquet(
            &opts.input,
            format,
            &in_name,
            &std::env::temp_dir(),
        )?),
    };
    let in_path = spool.as_ref().map_or(opts.input.as_path(), |s| s.path());
    let input = ParquetInput::open_named(in_path, &in_name)?;
    let columns = InputColumns::resolve(input.schema(), &pipeline.needs(), input.name())?;
    // Arrow IPC output is written from a finished Parquet result.
    let result = match out_format {
        Format::Parquet => None,
        _ => Some(
            tempfile::Builder::new()
                .prefix(".advcalc-result-")
                .suffix(".parquet")
                .tempfile_in(std::env::temp_dir())
                .map_err(|e| Error::data("cannot create a temporary result file").with_source(e))?,
        ),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.unwrap_or(0))
        .build()
        .map_err(|e| Error::usage("cannot start the worker threads").with_source(e))?;
    let summary = pool.install(|| {
        Passes {
            opts,
            pipeline: &pipeline,
            input: &input,
            columns: &columns,
            output: result.as_ref().map_or(opts.output.as_path(), |r| r.path()),
            force: opts.force || result.is_some(),
        }
        .run()
    })?;
    if let Some(result) = &result {
        ipc::export_parquet(result.path(), &opts.output, out_format, opts.force)?;
    }
    Ok(summary)
}

struct Passes<'a> {
    opts: &'a RunOptions,
    /// Where the Parquet result goes (OUT, or a temporary file for IPC output).
    output: &'a std::path::Path,
    force: bool,
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
            let (pre, _) = self.statistics(&starts, &progress, &constants, false)?;
            constants = step_constants(self.pipeline, &pre).0;
        }

        progress.pass("statistics");
        let (stats, mut metric_parts) = self.statistics(&starts, &progress, &constants, true)?;
        if stats.dropped_scores > 0 {
            summary.warnings.push(format!(
                "{} rows have a non-zero `score` but no position to hold it (an empty response, or no mask-1 token under --layout padded); their score is dropped",
                stats.dropped_scores
            ));
        }
        if let Some(p) = &stats.positive_log_probs {
            summary.warnings.push(format!(
                "{}: {} positive values in log-probability columns (first: `{}` row {} token {}); log-probabilities are ≤ 0 — check that these columns hold log π",
                self.input.name(),
                p.count,
                p.column,
                p.row,
                p.token
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
        let (final_constants, kl_metrics) = step_constants(self.pipeline, &stats);
        let plan = dispatch::plan(self.pipeline, &stats, self.input.name())?;
        summary.warnings.extend(plan.warnings.iter().cloned());
        if plan.nan_rows > 0 {
            summary.warnings.push(format!(
                "{} rows belong to opo groups with no valid token, where verl writes NaN; advcalc writes 0 there",
                plan.nan_rows
            ));
        }

        progress.pass("writing");
        let is_weights = self.pipeline.is_weights(has_rollout);
        let rewards_unchanged = self.pipeline.kl.is_none();
        let output_schema = self.columns.output_schema(is_weights, rewards_unchanged);
        let mask_rewritten = self.pipeline.correction_runs(has_rollout).is_some();
        let sources = self.columns.output_sources(
            &output_schema,
            is_weights,
            mask_rewritten,
            rewards_unchanged,
        );
        let mut output = ParquetOutput::create(
            self.output,
            output_schema,
            sources,
            self.input.copy_source(),
            self.force,
        )?;
        // Only what the maths needs is decoded; every other column is copied unchanged.
        let projection = self.columns.statistics_projection();
        // A window of row groups is encoded in parallel while the previous window is appended
        // in order; memory is bounded by two windows.
        let window = rayon::current_num_threads().max(1);
        let indices: Vec<usize> = (0..row_groups).collect();
        let (encoder, sink) = output.split();
        let mut pending: Vec<(usize, EncodedRowGroup)> = Vec::new();
        let mut append = |pending: Vec<(usize, EncodedRowGroup)>| -> Result<()> {
            for (rg, e) in pending {
                sink.append(rg, e)?;
            }
            Ok(())
        };
        for chunk in indices.chunks(window) {
            let to_append = std::mem::take(&mut pending);
            let (encoded, appended) = rayon::join(
                || {
                    chunk
                        .par_iter()
                        .map(|&rg| {
                            let batch = self.input.read_row_group(rg, Some(&projection))?;
                            let group = self.decode(&batch, starts[rg], false)?;
                            let shaped = pipeline::shape(
                                self.pipeline,
                                &group,
                                &final_constants,
                                self.input.name(),
                            )?;
                            let new_mask = self.opts.metrics.as_ref().map(|_| shaped.mask.clone());
                            let outputs = token_outputs(
                                self.pipeline,
                                &group,
                                shaped,
                                &plan,
                                &stats,
                                self.input.name(),
                            )?;
                            let parts = match &new_mask {
                                Some(mask) => {
                                    metrics::advantage_parts(&group, mask, &outputs.advantages)
                                }
                                None => metrics::Parts::new(),
                            };
                            let out = assemble(
                                &batch,
                                self.columns,
                                encoder.computed_schema(),
                                &group.mask.offsets,
                                outputs,
                                self.input.name(),
                            )?;
                            let encoded = encoder.encode(rg, &out)?;
                            progress.inc(group.rows());
                            Ok((rg, encoded, parts))
                        })
                        .collect::<Result<Vec<_>>>()
                },
                || append(to_append),
            );
            appended?;
            for (rg, e, parts) in encoded? {
                pending.push((rg, e));
                metrics::merge(&mut metric_parts, parts);
            }
        }
        append(pending)?;
        if let Some(path) = &self.opts.metrics {
            let json =
                self.metrics_json(&stats, &metric_parts, &kl_metrics, &final_constants, &plan);
            let text = serde_json::to_string_pretty(&json).unwrap_or_default();
            std::fs::write(path, text + "\n").map_err(|e| {
                Error::data(format!("{}: cannot write the metrics", path.display())).with_source(e)
            })?;
        }
        output.finish()?;
        progress.finish();
        Ok(summary)
    }

    /// One JSON object of metrics per training batch (a single object without a step column).
    fn metrics_json(
        &self,
        stats: &RowStats,
        parts: &metrics::Parts,
        kl_metrics: &std::collections::BTreeMap<Option<i64>, (f64, f64)>,
        constants: &Constants,
        plan: &dispatch::Plan,
    ) -> serde_json::Value {
        use serde_json::{Map, Value};
        let has_rollout = self.columns.token(TokenRole::RolloutLogProbs).is_some();
        let empty = metrics::StepParts::default();
        let mut steps = Vec::new();
        for (step, rows) in training_batches(stats.step.as_deref(), stats.rows()) {
            let mut m = Map::new();
            if let Some(s) = step {
                m.insert("step".into(), Value::from(s));
            }
            if let Some(&(current, beta)) = kl_metrics.get(&step) {
                m.insert("actor/reward_kl_penalty".into(), Value::from(current));
                m.insert("actor/reward_kl_penalty_coeff".into(), Value::from(beta));
            }
            let p = parts.get(&step).unwrap_or(&empty);
            if let Some(c) = self.pipeline.correction_runs(has_rollout) {
                metrics::correction_metrics(c, p, constants.get(step).is_norm, &mut m);
            }
            m.insert("advcalc/rows".into(), Value::from(rows.len()));
            let valid: f64 = rows.iter().map(|&r| stats.valid[r]).sum();
            m.insert("advcalc/valid_tokens".into(), Value::from(valid));
            m.insert(
                "advcalc/rows_without_valid_token".into(),
                Value::from(rows.iter().filter(|&&r| stats.valid[r] == 0.0).count()),
            );
            if !stats.uid.is_empty() {
                let grouping = crate::groups::Grouping::by_key(rows.iter().map(|&r| &stats.uid[r]));
                let members = grouping.members();
                let mut histogram = std::collections::BTreeMap::new();
                for g in &members {
                    *histogram.entry(g.len()).or_insert(0usize) += 1;
                }
                let flat = members
                    .iter()
                    .filter(|g| {
                        g.iter()
                            .all(|&i| stats.score[rows[i]] == stats.score[rows[g[0]]])
                    })
                    .count();
                m.insert("advcalc/groups".into(), Value::from(members.len()));
                m.insert(
                    "advcalc/group_size_histogram".into(),
                    Value::Object(
                        histogram
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), Value::from(v)))
                            .collect(),
                    ),
                );
                m.insert(
                    "advcalc/zero_variance_group_fraction".into(),
                    Value::from(flat as f64 / members.len().max(1) as f64),
                );
            }
            m.insert("advcalc/nan_rows_zeroed".into(), Value::from(plan.nan_rows));
            metrics::advantage_metrics(p, &mut m);
            steps.push(Value::Object(m));
        }
        if stats.step.is_some() {
            Value::Array(steps)
        } else {
            steps.pop().unwrap_or(Value::Object(Map::new()))
        }
    }

    fn decode(
        &self,
        batch: &arrow::record_batch::RecordBatch,
        first_row: usize,
        first_pass: bool,
    ) -> Result<RowGroup> {
        decode(
            batch,
            self.columns,
            &DecodeOptions {
                layout: self.opts.layout,
                check_values: first_pass,
                allow_nonfinite: self.opts.allow_nonfinite,
            },
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
    ) -> Result<(RowStats, metrics::Parts)> {
        let projection = self.columns.statistics_projection();
        let parts = (0..self.input.num_row_groups())
            .into_par_iter()
            .map(|rg| {
                let batch = self.input.read_row_group(rg, Some(&projection))?;
                let group = self.decode(&batch, starts[rg], true)?;
                progress.inc(group.rows());
                let shaped = pipeline::shape(self.pipeline, &group, constants, self.input.name())?;
                let has_rollout = group.token(TokenRole::RolloutLogProbs).is_some();
                let parts = match self.pipeline.correction_runs(has_rollout) {
                    Some(c) if estimator_stats && self.opts.metrics.is_some() => {
                        metrics::correction_parts(self.pipeline, c, &group)
                    }
                    _ => metrics::Parts::new(),
                };
                let stats = if estimator_stats {
                    row_stats(self.pipeline, group, &shaped, self.input.name())?
                } else {
                    let mut plain = self.pipeline.clone();
                    plain.estimator = Estimator::Grpo;
                    row_stats(&plain, group, &shaped, self.input.name())?
                };
                Ok((stats, parts))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut stats = RowStats::default();
        let mut metric_parts = metrics::Parts::new();
        for (part, m) in parts {
            stats.append(part);
            metrics::merge(&mut metric_parts, m);
        }
        Ok((stats, metric_parts))
    }
}
