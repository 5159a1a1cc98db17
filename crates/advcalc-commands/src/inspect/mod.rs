//! `advcalc inspect`: the checklist an engineer runs on a dump before blaming the optimiser
//! (docs/inspect.md). One parallel pass over the row groups tallies each step's rows —
//! counts, plus a few scalars per row, never the tokens — and the merged tallies become the
//! per-step findings, with a warning for each finding that is likely a mistake.
//!
//! Unlike `run`, inspect reads what a bare dump has: only `response_mask` and the scores are
//! required; `uid`, `step` and the log-prob columns are checked when present. NaN, ±inf and
//! positive log-probabilities are counted, not refused.
//!
//! This file is the command only: the checks, tallies and findings are the shared analysis
//! layer (`analysis::inspection`), which `report` runs too.

use std::path::PathBuf;

use rayon::prelude::*;

pub use crate::analysis::Warning;
pub use crate::analysis::fragile::{
    Departure, Fragile, FragileRule, RULES, TIGHT_SPREAD_DEPARTURE,
};
pub use crate::analysis::inspection::{
    ColumnCounts, Groups, Kl, KlShaping, Mismatch, Rejection, Report, ScoreSums, StepReport,
    ToolSpans,
};

use crate::analysis::collect::CompareOptions;
use crate::analysis::inspection::{Inspection, add_advantages};
use crate::analysis::logged;
use crate::analysis::steps::{StepAdvantages, advantages_by_step};
use crate::engine::passes::thread_pool;
use crate::engine::progress::Progress;
use crate::error::Result;
use crate::io::dataset::Dataset;
use crate::io::format::Format;
use crate::io::input;
use crate::io::input_source::InputSource;
use crate::shaping::scores::Layout;
use advcalc_config::Config;

/// How to inspect, beyond the algorithm configuration.
#[derive(Debug, Clone)]
pub struct InspectOptions {
    /// The dump: Parquet, an Arrow IPC file or stream, or `-` for an Arrow IPC stream on
    /// stdin.
    pub input: PathBuf,
    /// `--input-format`; `None`: by extension (`-` is an Arrow stream).
    pub input_format: Option<Format>,
    /// How token lists are laid out (`--layout`): where a scalar `score` goes, and whether a
    /// trailing mask-0 token is a tool token (ragged) or padding (padded, not checked).
    pub layout: Layout,
    /// Worker threads; `None` means one per core.
    pub threads: Option<usize>,
    /// Draw a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
    /// An estimator was asked for (`-e`, or a config naming one): check its advantages too.
    pub estimator_given: bool,
}

/// Check a dump and report the findings per step, with their warnings (docs/inspect.md).
/// `config` supplies the checks' settings (`rollout.n`, KL in the reward, rejection); a
/// check whose columns are missing is skipped with a note, and NaN, ±inf and positive
/// log-probabilities are counted, not refused. An error means the dump could not be read,
/// or lacks `response_mask` or a score column; warnings are part of the report.
///
/// ```
/// use std::path::Path;
/// use advcalc_commands::inspect::{InspectOptions, inspect};
/// use advcalc_config::{Config, ConfigSources};
/// use advcalc_maths::shaping::scores::Layout;
///
/// let sets = ["actor_rollout_ref.rollout.n=8".to_string()];
/// let config = Config::load(&ConfigSources { sets: &sets, ..Default::default() })?;
/// let opts = InspectOptions {
///     input: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo.parquet"),
///     input_format: None,
///     layout: Layout::Ragged,
///     threads: Some(1),
///     progress: false,
///     estimator_given: false,
/// };
/// let report = inspect(&config, &opts)?;
/// // no `step` column: one section for the whole file
/// let all = &report.steps[0];
/// assert_eq!((report.steps.len(), all.step, all.rows), (1, None, 256));
/// // 32 prompts, 8 samples each
/// let groups = all.groups.as_ref().unwrap();
/// assert_eq!((groups.count, groups.expected_size), (32, Some(8)));
/// assert_eq!(report.to_json()["steps"][0]["groups"]["count"], 32);
/// # Ok::<(), advcalc_maths::Error>(())
/// ```
pub fn inspect(config: &Config, opts: &InspectOptions) -> Result<Report> {
    let pool = thread_pool(opts.threads)?;
    // within the pool: a trainer dump's reader parses on its threads
    let opened = pool.install(|| {
        input::open(
            &InputSource::resolve(&opts.input, opts.input_format)?,
            true,
            &crate::io::trainers::DumpOptions::of(config),
        )
    })?;
    let input = &opened.dataset;
    let inspection = Inspection::new(config, input, opts.layout)?
        .with_own_nan_scores(opened.own_nan_scores(std::iter::once(config)));
    let projection = inspection.projection();
    let units = input.units();
    let progress = Progress::new(input.rows() as u64, opts.progress);
    progress.pass("inspecting");
    let partials = pool.install(|| {
        (0..units.len())
            .into_par_iter()
            .map(|u| {
                let batch = input.read_unit(u, Some(&projection))?;
                progress.inc(batch.num_rows());
                inspection.scan_unit(input, u, &batch)
            })
            .collect::<Result<Vec<_>>>()
    })?;
    progress.finish();
    let mut report = inspection.finish(input, partials);
    // how a dataset IN was read (paths its walk skipped)
    report.notes.splice(0..0, input.notes.iter().cloned());
    if let Some(dump) = opened.file.as_ref().and_then(|f| f.trainer.as_ref()) {
        // what the reader assumed, then the check of the logged advantages
        report.notes.splice(0..0, dump.notes.iter().cloned());
        match logged::check(config, dump.trainer, input, &opts.input, opts.layout) {
            Ok(check) => report.logged = Some(check),
            Err(e) => report.notes.push(format!(
                "the check of the logged advantages was skipped: {e}"
            )),
        }
    }
    if opts.estimator_given {
        // a trainer's own NaN (TRL's unscorable rows) is its convention's to handle
        let dump = opened.file.as_ref().is_some_and(|f| f.trainer.is_some());
        advantages(config, input, opts, dump, &mut report);
    }
    Ok(report)
}

/// The configured estimator's advantage statistics per step (the whole `run` pipeline, as
/// `compare` runs it); a failure (a column the estimator needs, a refused value) becomes a
/// note, since the other findings stand without it.
fn advantages(
    config: &Config,
    input: &Dataset,
    opts: &InspectOptions,
    allow_nonfinite: bool,
    report: &mut Report,
) {
    let name = config.algorithm.adv_estimator.name();
    let compare_options = CompareOptions {
        input: opts.input.clone(),
        input_format: opts.input_format,
        layout: opts.layout,
        threads: opts.threads,
        progress: opts.progress,
        allow_nonfinite,
        correct_above: 0.0,
    };
    // the advantages only: the actor section (read for the loss checks) adds no stage here
    let advantages_only = Config {
        loss: None,
        ..config.clone()
    };
    let StepAdvantages { by_step, warnings } =
        match advantages_by_step(&advantages_only, input, &compare_options) {
            Ok(found) => found,
            Err(e) => {
                report
                    .notes
                    .push(format!("advantage statistics of {name} skipped: {e}"));
                return;
            }
        };
    add_advantages(report, name, by_step, warnings);
}
