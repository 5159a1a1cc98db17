//! `advcalc inspect`: the checklist an engineer runs on a dump before blaming the optimiser
//! (docs/inspect.md). One parallel pass over the row groups tallies each step's rows —
//! counts, plus a few scalars per row, never the tokens — and the merged tallies become the
//! per-step findings, with a warning for each finding that is likely a mistake.
//!
//! Unlike `run`, inspect reads what a bare dump has: only `response_mask` and the scores are
//! required; `uid`, `step` and the log-prob columns are checked when present. NaN, ±inf and
//! positive log-probabilities are counted, not refused.

mod checks;
mod distribution;
pub(crate) mod findings;
mod report;
mod scan;
mod spans;
mod tally;
mod thresholds;

use std::collections::BTreeMap;
use std::path::PathBuf;

use rayon::prelude::*;

pub use crate::commands::analysis::Warning;
pub use crate::commands::analysis::fragile::{
    Departure, Fragile, FragileRule, RULES, TIGHT_SPREAD_DEPARTURE,
};
pub use report::{
    Groups, Kl, KlShaping, Mismatch, Rejection, Report, ScoreSums, StepReport, ToolSpans,
};
pub use tally::ColumnCounts;

use arrow_array::RecordBatch;

use crate::commands::analysis::logged;
use crate::commands::analysis::tokens::TokenStats;
use crate::commands::compare::{CompareOptions, StepAdvantages, advantages_by_step};
use crate::config::Config;
use crate::data::TokenRole;
use crate::engine::passes::thread_pool;
use crate::engine::pipeline::{self, Constants, StepConstants};
use crate::engine::progress::Progress;
use crate::error::Result;
use crate::io::dataset::Dataset;
use crate::io::decode::{DecodeOptions, decode};
use crate::io::format::Format;
use crate::io::input;
use crate::io::schema::{InputColumns, Needs};
use crate::shaping::scores::{self, Layout};

use checks::Checks;
use findings::step_report;
use scan::scan;
use tally::StepTally;

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

/// The prefix of the key-value metadata `advcalc run` writes into its output (provenance).
pub(crate) const PROVENANCE_PREFIX: &str = "advcalc.";

/// Check a dump and report the findings per step, with their warnings (docs/inspect.md).
/// `config` supplies the checks' settings (`rollout.n`, KL in the reward, rejection); a
/// check whose columns are missing is skipped with a note, and NaN, ±inf and positive
/// log-probabilities are counted, not refused. An error means the dump could not be read,
/// or lacks `response_mask` or a score column; warnings are part of the report.
///
/// ```
/// use std::path::Path;
/// use advcalc::{Config, ConfigSources, Layout};
/// use advcalc::commands::inspect::{InspectOptions, inspect};
///
/// let sets = ["actor_rollout_ref.rollout.n=8".to_string()];
/// let config = Config::load(&ConfigSources { sets: &sets, ..Default::default() })?;
/// let opts = InspectOptions {
///     input: Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet"),
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
/// # Ok::<(), advcalc::Error>(())
/// ```
pub fn inspect(config: &Config, opts: &InspectOptions) -> Result<Report> {
    let pool = thread_pool(opts.threads)?;
    // within the pool: a trainer dump's reader parses on its threads
    let opened = pool.install(|| {
        input::open(
            &opts.input,
            opts.input_format,
            true,
            &crate::DumpOptions::of(config),
        )
    })?;
    let input = &opened.dataset;
    let inspection = Inspection::new(config, input, opts.layout)?;
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

/// One row group's tallies, by step.
pub(crate) type Tallies = BTreeMap<Option<i64>, StepTally>;

/// The inspect checks bound to one input: what to read, each row group's tallies, and the
/// report from the merged tallies. `inspect` reads the dump once for them; `report` runs
/// them on the row groups its output pass reads anyway.
pub(crate) struct Inspection {
    columns: InputColumns,
    checks: Checks,
    constants: Constants,
    layout: Layout,
}

impl Inspection {
    /// The checks `config` and the input's columns allow (only `response_mask` and a score
    /// column are required).
    pub fn new(config: &Config, input: &Dataset, layout: Layout) -> Result<Self> {
        let schema = input.schema();
        let has = |name: &str| schema.index_of(name).is_ok();
        // Only the mask and the scores are required; the rest is used when present.
        let needs = Needs {
            uid: has("uid"),
            prompt_ids: false,
            tokens: Vec::new(),
            optional: TokenRole::PIPELINE.to_vec(),
            if_present: Vec::new(),
            no_scores: false,
            reward_baselines: has("reward_baselines"),
            components: Vec::new(),
            purpose: "advcalc inspect".into(),
            token_data: Vec::new(),
            loss: false,
        };
        let columns = InputColumns::resolve(schema, &needs, &input.name)?;
        let checks = Checks::new(config, &columns, layout)?;
        let constants = Constants::uniform(StepConstants {
            beta: checks.beta().unwrap_or(0.0),
            is_norm: None,
        });
        Ok(Inspection {
            columns,
            checks,
            constants,
            layout,
        })
    }

    /// The input's columns the checks read.
    pub fn projection(&self) -> Vec<usize> {
        self.columns.projection(true)
    }

    /// Tally one unit's row group (`batch`, read with at least `projection`) by step.
    pub fn scan_unit(&self, input: &Dataset, unit: usize, batch: &RecordBatch) -> Result<Tallies> {
        let part = input.part(unit);
        // Values are counted, not refused.
        let options = DecodeOptions {
            check_values: false,
            allow_nonfinite: true,
            row_base: part.first_row,
            path_step: part.path_step,
        };
        let start = input.units()[unit].start;
        let mut group = decode(batch, &self.columns, &options, &part.name, start)?;
        scores::place(&mut group, self.layout);
        let shaped = match &self.checks.shaper {
            Some(p) => Some(pipeline::shape(p, &group, &self.constants, &input.name)?),
            None => None,
        };
        Ok(scan(&group, shaped.as_ref(), &self.checks))
    }

    /// The report from every unit's tallies, in unit order (merged in that order, so
    /// nothing depends on the thread count).
    pub fn finish(mut self, input: &Dataset, partials: Vec<Tallies>) -> Report {
        let mut steps: BTreeMap<Option<i64>, StepTally> = BTreeMap::new();
        for partial in partials {
            for (step, tally) in partial {
                steps.entry(step).or_default().merge(tally);
            }
        }
        if self.columns.step.is_none() && !input.has_path_steps() && steps.is_empty() {
            steps.insert(None, StepTally::default());
        }
        Report {
            file: input.name.clone(),
            layout: self.layout,
            notes: std::mem::take(&mut self.checks.notes),
            steps: steps
                .into_iter()
                .map(|(step, tally)| step_report(step, tally, &self.checks))
                .collect(),
            // a dataset's files each have their own (`run` writes one per file)
            provenance: (if input.is_dataset {
                Vec::new()
            } else {
                input.parts[0].input.key_value_metadata()
            })
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(PROVENANCE_PREFIX)?.to_string(), v)))
            .collect(),
            logged: None,
        }
    }
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

/// Put one estimator's per-step advantage statistics (and the warnings `run` would print)
/// into the report, with the advantage warnings of each step (what `inspect -e` shows).
pub(crate) fn add_advantages(
    report: &mut Report,
    name: &str,
    by_step: Vec<(Option<i64>, TokenStats)>,
    warnings: Vec<String>,
) {
    report
        .notes
        .extend(warnings.into_iter().map(|w| format!("{name}: {w}")));
    for (step, stats) in by_step {
        let Some(section) = report.steps.iter_mut().find(|s| s.step == step) else {
            continue;
        };
        let mut json = stats.to_json();
        json.insert("estimator".into(), name.into());
        section.advantages = Some(json.into());
        section
            .warnings
            .extend(findings::advantage_warnings(name, &stats));
    }
}
