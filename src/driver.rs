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
use crate::dispatch::{self, RowStats};
use crate::error::{Error, Result};
use crate::estimators::broadcast_outcome;
use crate::io::assemble::{TokenOutputs, assemble};
use crate::io::decode::{DecodeKeys, RowGroup, decode};
use crate::io::read::ParquetInput;
use crate::io::schema::{InputColumns, Needs};
use crate::io::write::{ParquetOutput, check_destination, same_file};
use crate::progress::Progress;
use crate::scores::Layout;

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
    let input = ParquetInput::open(&opts.input)?;
    let estimator = config.algorithm.adv_estimator;
    let columns = InputColumns::resolve(
        input.schema(),
        Needs {
            uid: estimator.needs_uid(),
            estimator: estimator.name(),
        },
        input.name(),
    )?;
    check_destination(&opts.output, opts.force)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.unwrap_or(0))
        .build()
        .map_err(|e| Error::usage("cannot start the worker threads").with_source(e))?;
    pool.install(|| {
        Passes {
            config,
            opts,
            input: &input,
            columns: &columns,
        }
        .run()
    })
}

struct Passes<'a> {
    config: &'a Config,
    opts: &'a RunOptions,
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

        progress.pass("statistics");
        let stats = self.statistics(&starts, &progress, &mut summary)?;
        summary.batches = dispatch::training_batches(stats.step.as_deref(), rows).len();
        let advantages =
            dispatch::row_advantages(&self.config.algorithm, &stats, self.input.name())?;
        drop(stats);

        progress.pass("writing");
        let mut output = ParquetOutput::create(
            &self.opts.output,
            self.columns.output_schema(),
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
                    let group = self.decode(&batch, starts[rg], false)?;
                    let outputs = token_outputs(&group, &advantages[starts[rg]..starts[rg + 1]]);
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
        labels: bool,
    ) -> Result<RowGroup> {
        decode(
            batch,
            self.columns,
            self.opts.layout,
            DecodeKeys { labels },
            self.input.name(),
            first_row,
        )
    }

    /// Pass 1: per-row scalars of every row group, merged in row-group order.
    fn statistics(
        &self,
        starts: &[usize],
        progress: &Progress,
        summary: &mut RunSummary,
    ) -> Result<RowStats> {
        let projection = self.columns.statistics_projection();
        let parts = (0..self.input.num_row_groups())
            .into_par_iter()
            .map(|rg| {
                let batch = self.input.read_row_group(rg, Some(&projection))?;
                let group = self.decode(&batch, starts[rg], true)?;
                progress.inc(group.rows());
                let dropped = group.dropped_scores;
                Ok((row_stats(group), dropped))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut stats = RowStats::default();
        let mut dropped = 0;
        for (part, d) in parts {
            stats.append(part);
            dropped += d;
        }
        if dropped > 0 {
            summary.warnings.push(format!(
                "{dropped} rows have a non-zero `score` but no position to hold it (an empty response, or no mask-1 token under --layout padded); their score is dropped"
            ));
        }
        Ok(stats)
    }
}

/// Reduce a row group to the per-row scalars the estimators need.
fn row_stats(group: RowGroup) -> RowStats {
    let rows = group.rows();
    let offsets = &group.mask.offsets;
    let score = (0..rows)
        .map(|i| {
            group.scores[offsets[i]..offsets[i + 1]]
                .iter()
                .map(|&v| v as f64)
                .sum()
        })
        .collect();
    let has_valid = (0..rows)
        .map(|i| group.mask.row(i).contains(&1.0))
        .collect();
    RowStats {
        uid: group.uid.unwrap_or_default(),
        step: group.step,
        session: group.session,
        score,
        has_valid,
    }
}

/// Pass 2 maths for one row group: the outcome scalar broadcast onto each row's mask.
fn token_outputs(group: &RowGroup, row_advantages: &[f32]) -> TokenOutputs {
    let mut advantages = vec![0.0f32; group.mask.values.len()];
    let offsets = &group.mask.offsets;
    for (i, &a) in row_advantages.iter().enumerate() {
        let span = offsets[i]..offsets[i + 1];
        broadcast_outcome(a, &group.mask.values[span.clone()], &mut advantages[span]);
    }
    TokenOutputs {
        token_level_rewards: group.scores.clone(),
        advantages,
        returns: None,
    }
}
