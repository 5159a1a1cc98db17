//! `advcalc compare`: several estimators (or configs) on one dump, side by side — "what
//! would my update have looked like under X".
//!
//! Every variant is a full `run` pipeline (KL shaping, rollout correction, estimator), so its
//! advantages are exactly those `advcalc run` writes. The dump is read as often as by one
//! `run` (a statistics pass and an output pass, plus the constants pre-pass when a variant
//! needs it), whatever the number of variants: each row group is read once per pass with
//! the union of the variants' columns, and every variant works on it in turn.
//!
//! Statistics are over valid tokens (response mask after rejection = 1). Token sums are
//! kept per row and added in file order, and pair counts are integers, so the numbers do not
//! depend on the thread count or the row-group layout.
//!
//! This file holds the options and the pass over the row groups; `sums` reduces each row
//! group to per-row sums, `summary` (with `buckets` and `spearman`) turns them into the
//! summaries, and `report` renders the `Comparison`.

mod report;
mod spearman;
mod summary;

use std::path::PathBuf;

use rayon::prelude::*;

pub(crate) use crate::commands::analysis::buckets::BUCKETS;
pub use crate::commands::analysis::buckets::BucketSummary;
pub use crate::commands::analysis::tokens::TokenStats;
pub use report::Comparison;
pub use summary::{PairSummary, VariantSummary};

use crate::config::Config;
use crate::engine::Engine;
use crate::engine::job::{Job, Plan};
use crate::engine::passes::{prepare_jobs, thread_pool};
use crate::engine::plan::training_batches;
use crate::engine::progress::Progress;
use crate::error::{Error, Result};
use crate::io::dataset::Dataset;
use crate::io::format::Format;
use crate::io::input;
use crate::shaping::scores::Layout;

use crate::commands::analysis::sums::Sums;
pub(crate) use summary::summarise;

/// One column of the comparison: a label and the configuration it runs.
#[derive(Debug, Clone)]
pub struct Variant {
    /// The column's heading (an estimator's name, a config's stem, or `stem:estimator`).
    pub label: String,
    /// The validated configuration this variant runs.
    pub config: Config,
}

/// How to compare, beyond the variants.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The dump to read.
    pub input: PathBuf,
    /// The input's format; `None`: from the extension.
    pub input_format: Option<Format>,
    /// How scalar scores are placed on the tokens.
    pub layout: Layout,
    /// Worker threads; `None` means one per core.
    pub threads: Option<usize>,
    /// Show a progress bar (on a terminal only).
    pub progress: bool,
    /// Let NaN and ±inf in rewards, log-probs and values through instead of refusing them.
    pub allow_nonfinite: bool,
    /// A row is correct when its score (Σ of its token scores) is above this.
    pub correct_above: f64,
}

/// Run every variant over `opts.input` and summarise their advantages side by side.
pub fn compare(variants: &[Variant], opts: &CompareOptions) -> Result<Comparison> {
    let dump = variants
        .first()
        .map(|v| crate::DumpOptions::of(&v.config))
        .unwrap_or_default();
    // within a pool of --threads: a trainer dump's reader parses on its threads
    let opened = thread_pool(opts.threads)?
        .install(|| input::open(&opts.input, opts.input_format, opts.allow_nonfinite, &dump))?;
    let input = &opened.dataset;
    // a trainer's own NaN scores, under its convention, are not a fault
    let own = opened.own_nan_scores(variants.iter().map(|v| &v.config));
    let opts = &CompareOptions {
        allow_nonfinite: opts.allow_nonfinite || own,
        ..opts.clone()
    };
    // an error on a row of a trainer's dump names the user's file and line too
    let collected = collect(variants, input, opts).map_err(|e| opened.locate_error(e))?;
    let mut comparison = summarise(variants, collected, &input.name, opts.correct_above);
    if let (Some(trainer), Some(first)) = (
        opened.file.as_ref().and_then(|f| f.trainer.as_ref()),
        variants.first(),
    ) {
        comparison.logged = Some(crate::commands::analysis::logged::check(
            &first.config,
            trainer.trainer,
            input,
            &opts.input,
            opts.layout,
        )?);
    }
    Ok(comparison)
}

/// One configuration's advantage statistics per training batch, and the data warnings
/// `run` would print.
pub(crate) struct StepAdvantages {
    /// Per training batch (its `step`, `None` without a step column): the token statistics.
    pub by_step: Vec<(Option<i64>, TokenStats)>,
    /// The data warnings `run` would print for this configuration.
    pub warnings: Vec<String>,
}

/// The advantage statistics of one configuration, per training batch (for `inspect`).
pub(crate) fn advantages_by_step(
    config: &Config,
    input: &Dataset,
    opts: &CompareOptions,
) -> Result<StepAdvantages> {
    let variant = Variant {
        label: config.algorithm.adv_estimator.name().to_string(),
        config: config.clone(),
    };
    let mut collected = collect(std::slice::from_ref(&variant), input, opts)?;
    let prepared = collected.prepared.pop().expect("one variant");
    let rows = collected.sums.rows.pop().expect("one variant");
    let by_step = training_batches(prepared.stats.step.as_deref(), rows.len())
        .into_iter()
        .map(|(step, batch)| (step, TokenStats::of(batch.iter().map(|&r| &rows[r]))))
        .collect();
    Ok(StepAdvantages {
        by_step,
        warnings: prepared.warnings,
    })
}

/// What the passes leave for the summaries.
pub(crate) struct Collected {
    /// Each variant's statistics pass and plan (its steps, uids and warnings).
    pub(crate) prepared: Vec<Plan>,
    /// Every row's sums, in file order.
    pub(crate) sums: Sums,
}

/// Run every variant's passes over `input`, each row group read once per pass.
fn collect(variants: &[Variant], input: &Dataset, opts: &CompareOptions) -> Result<Collected> {
    if variants.is_empty() {
        return Err(Error::usage("compare needs at least one estimator"));
    }
    let engines = variants
        .iter()
        .map(|v| {
            Ok(Engine::new(&v.config, input.schema(), &input.name)?
                .with_layout(opts.layout)
                .allow_nonfinite(opts.allow_nonfinite))
        })
        .collect::<Result<Vec<_>>>()?;
    let jobs: Vec<Job<'_>> = engines.iter().map(Engine::job).collect();
    let mut projection: Vec<usize> = jobs
        .iter()
        .flat_map(|j| j.columns.projection(false))
        .collect();
    projection.sort_unstable();
    projection.dedup();
    let rows = input.rows();
    let units = input.units();
    let progress = Progress::new(rows as u64, opts.progress);
    thread_pool(opts.threads)?.install(|| {
        let prepared = prepare_jobs(input, &jobs, &projection, &progress)?;
        progress.pass("comparing");
        let partials = (0..units.len())
            .into_par_iter()
            .map(|u| {
                let batch = input.read_unit(u, Some(&projection))?;
                let part = input.part(u);
                let outputs = jobs
                    .iter()
                    .zip(&prepared)
                    .map(|(job, p)| job.at(part).row_group_outputs(&batch, units[u].start, p))
                    .collect::<Result<Vec<_>>>()?;
                progress.inc(batch.num_rows());
                Ok(Sums::of_row_group(&outputs))
            })
            .collect::<Result<Vec<_>>>()?;
        progress.finish();
        let mut sums = Sums::with_capacity(variants.len(), rows);
        for p in partials {
            sums.append(p);
        }
        Ok(Collected { prepared, sums })
    })
}
