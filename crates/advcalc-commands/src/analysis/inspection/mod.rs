//! The inspect checks (docs/inspect.md), bound to one input: what they read, each row
//! group's tallies (`scan`, `tally`), and the findings per step (`findings`, `report`) from
//! the merged tallies. `inspect` reads the dump once for them; `report` runs them on the row
//! groups its output pass reads anyway.

mod checks;
mod distribution;
mod findings;
mod report;
mod scan;
mod spans;
mod tally;
mod thresholds;

use std::collections::BTreeMap;

use arrow_array::RecordBatch;

pub use report::{
    Groups, Kl, KlShaping, Mismatch, Rejection, Report, ScoreSums, StepReport, ToolSpans,
};
pub use tally::ColumnCounts;

use crate::analysis::tokens::TokenStats;
use crate::data::TokenRole;
use crate::engine::pipeline::{self, Constants, StepConstants};
use crate::error::Result;
use crate::io::dataset::Dataset;
use crate::io::decode::{DecodeOptions, decode};
use crate::io::schema::{InputColumns, Needs};
use crate::provenance::PROVENANCE_PREFIX;
use crate::shaping::scores::{self, Layout};
use advcalc_config::Config;

use checks::Checks;
use findings::step_report;
use scan::scan;
use tally::StepTally;

/// One row group's tallies, by step.
pub type Tallies = BTreeMap<Option<i64>, StepTally>;

/// The inspect checks bound to one input: what to read, each row group's tallies, and the
/// report from the merged tallies. `inspect` reads the dump once for them; `report` runs
/// them on the row groups its output pass reads anyway.
pub struct Inspection {
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

    /// The score's NaNs are the trainer's own under the configuration's convention
    /// (`Opened::own_nan_scores`): its reader's note says what they become, no warning.
    pub fn with_own_nan_scores(mut self, own: bool) -> Self {
        self.checks.own_nan_scores = own;
        self
    }

    /// Check for the estimators and columns of `others` too (the report's other variants):
    /// a reward on a tool token matters when any of them drops it.
    pub fn with_variants<'a>(mut self, others: impl Iterator<Item = &'a Config>) -> Self {
        for config in others {
            self.checks.add_variant(config, &self.columns);
        }
        self
    }

    /// The configured estimators, in order, each once.
    pub fn estimators(&self) -> &[advcalc_maths::estimators::Estimator] {
        &self.checks.estimators
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
            // every column present is counted
            skip_metrics_only: false,
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

/// Put one estimator's per-step advantage statistics (and the warnings `run` would print)
/// into the report, with the advantage warnings of each step (what `inspect -e` shows).
pub fn add_advantages(
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
