//! The variants' passes over one dump, shared by `compare`, `inspect -e` and `report`: what
//! to run (a [`Variant`] each) and how to read (`CompareOptions`), and every variant's
//! statistics pass and per-row sums, each row group read once per pass with the union of the
//! variants' columns (`collect`).
//!
//! Token sums are kept per row and added in file order, and pair counts are integers, so the
//! numbers do not depend on the thread count or the row-group layout.

use std::path::PathBuf;

use rayon::prelude::*;

use crate::analysis::sums::Sums;
use crate::engine::Engine;
use crate::engine::job::{Job, Plan};
use crate::engine::passes::{prepare_jobs, thread_pool};
use crate::engine::progress::Progress;
use crate::error::{Error, Result};
use crate::io::dataset::Dataset;
use crate::io::format::Format;
use crate::shaping::scores::Layout;
use advcalc_config::Config;

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

/// Open `opts.input` as the commands read it (a trainer's dump parsed on a pool of
/// `opts.threads`), its dump read under `config`'s trainer options.
pub fn open_input(opts: &CompareOptions, config: &Config) -> Result<crate::io::input::Opened> {
    thread_pool(opts.threads)?.install(|| {
        crate::io::input::open(
            &crate::io::input_source::InputSource::resolve(&opts.input, opts.input_format)?,
            opts.allow_nonfinite,
            &crate::io::trainers::DumpOptions::of(config),
        )
    })
}

/// Every variant's engine on `input`; verl's `rollout_corr` metrics only for a variant with a
/// correction to show (they read the rollout log-probs, where a NaN would be refused).
pub fn variant_engines(
    variants: &[Variant],
    input: &Dataset,
    layout: Layout,
    allow_nonfinite: bool,
) -> Result<Vec<Engine>> {
    variants
        .iter()
        .map(|v| {
            Ok(Engine::new(&v.config, input.schema(), &input.name)?
                .with_layout(layout)
                .allow_nonfinite(allow_nonfinite)
                .with_metrics(
                    v.config
                        .algorithm
                        .rollout_correction
                        .decoupled()
                        .is_some_and(|c| c.is_some_active()),
                ))
        })
        .collect()
}

/// The columns the jobs' passes decode, as one sorted set.
pub fn jobs_projection(jobs: &[Job<'_>]) -> Vec<usize> {
    sorted_union(jobs.iter().flat_map(|j| j.columns.projection(j.metrics)))
}

/// Column indices as one sorted set without repeats (a projection).
pub fn sorted_union(columns: impl IntoIterator<Item = usize>) -> Vec<usize> {
    let mut v: Vec<usize> = columns.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Every job's pass-2 outputs of unit `u`'s row group (`batch`, read with the union of the
/// jobs' columns).
pub fn outputs_of(
    jobs: &[Job<'_>],
    plans: &[Plan],
    input: &Dataset,
    u: usize,
    batch: &arrow_array::RecordBatch,
) -> Result<Vec<crate::engine::job::GroupOutputs>> {
    let part = input.part(u);
    let start = input.units()[u].start;
    jobs.iter()
        .zip(plans)
        .map(|(job, p)| job.at(part).row_group_outputs(batch, start, p))
        .collect()
}

/// What the passes leave for the summaries.
pub struct Collected {
    /// Each variant's statistics pass and plan (its steps, uids and warnings).
    pub prepared: Vec<Plan>,
    /// Every row's sums, in file order.
    pub sums: Sums,
}

/// Run every variant's passes over `input`, each row group read once per pass.
pub fn collect(variants: &[Variant], input: &Dataset, opts: &CompareOptions) -> Result<Collected> {
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
    let projection = jobs_projection(&jobs);
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
                let outputs = outputs_of(&jobs, &prepared, input, u, &batch)?;
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
