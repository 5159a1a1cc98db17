//! `advcalc inspect`: the checklist an engineer runs on a dump before blaming the optimiser
//! (docs/inspect.md). One parallel pass over the row groups tallies each step's rows —
//! counts, plus a few scalars per row, never the tokens — and the merged tallies become the
//! per-step findings, with a warning for each finding that is likely a mistake.
//!
//! Unlike `run`, inspect reads what a bare dump has: only `response_mask` and the scores are
//! required; `uid`, `step` and the log-prob columns are checked when present. NaN, ±inf and
//! positive log-probabilities are counted, not refused.

mod distribution;
mod findings;
mod report;
mod scan;
mod spans;
mod tally;
mod thresholds;

use std::collections::BTreeMap;
use std::path::PathBuf;

use rayon::prelude::*;

pub use report::{
    Groups, Kl, KlShaping, Mismatch, Rejection, Report, ScoreSums, StepReport, ToolSpans, Warning,
};
pub use tally::ColumnCounts;

use crate::config::Config;
use crate::driver::thread_pool;
use crate::error::Result;
use crate::io::decode::{DecodeOptions, decode};
use crate::io::format::Format;
use crate::io::input::Input;
use crate::io::schema::{InputColumns, Needs, ScoreSource, TokenRole};
use crate::pipeline::{self, Constants, Pipeline, StepConstants};
use crate::progress::Progress;
use crate::scores::Layout;
use crate::shaping::kl::KlController;

use findings::{Checks, step_report};
use scan::{Scan, scan};
use tally::StepTally;

/// How to inspect, beyond the algorithm configuration.
#[derive(Debug, Clone)]
pub struct InspectOptions {
    pub input: PathBuf,
    pub input_format: Option<Format>,
    pub layout: Layout,
    /// Worker threads; `None` means one per core.
    pub threads: Option<usize>,
    pub progress: bool,
    /// An estimator was asked for (`-e`, or a config naming one): check its advantages too.
    pub estimator_given: bool,
}

pub fn inspect(config: &Config, opts: &InspectOptions) -> Result<Report> {
    let mut pipeline = Pipeline::new(&config.algorithm)?;
    let opened = Input::open(&opts.input, opts.input_format)?;
    let input = &opened.parquet;
    let file = input.name();
    let schema = input.schema();
    let has = |name: &str| schema.index_of(name).is_ok();
    let needs = Needs {
        uid: has("uid"),
        tokens: Vec::new(),
        optional: TokenRole::ALL.to_vec(),
        reward_baselines: has("reward_baselines"),
        components: Vec::new(),
        purpose: "advcalc inspect".into(),
    };
    let columns = InputColumns::resolve(schema, &needs, file)?;
    let present = |role| columns.token(role).is_some();
    let mut notes = Vec::new();
    if columns.uid.is_none() {
        notes.push("the file has no `uid` column: group checks are skipped".to_string());
    }
    if opts.layout == Layout::Padded {
        notes.push(
            "--layout padded: trailing mask-0 tokens are taken for padding, so rows ending in a tool token are not counted".to_string(),
        );
    }

    // KL shaping and rejection as the configuration has them, where the file allows.
    let old_role = if pipeline.bypass {
        TokenRole::RolloutLogProbs
    } else {
        TokenRole::OldLogProbs
    };
    if pipeline.kl.is_some() {
        let missing: Vec<&str> = [old_role, TokenRole::RefLogProb]
            .into_iter()
            .filter(|&r| !present(r))
            .map(TokenRole::column)
            .collect();
        if !missing.is_empty() {
            notes.push(format!(
                "algorithm.use_kl_in_reward is on but the file has no {}: the KL shaping check is skipped",
                missing.join(" or ")
            ));
            pipeline.kl = None;
        } else if matches!(pipeline.controller, KlController::Adaptive { .. }) {
            notes.push(
                "the adaptive KL controller changes β from step to step; the KL shaping check uses the initial algorithm.kl_ctrl.kl_coef".to_string(),
            );
        }
    }
    let rs_configured = pipeline
        .correction
        .as_ref()
        .is_some_and(|c| !c.rs.is_empty());
    let rejection =
        rs_configured && present(TokenRole::RolloutLogProbs) && present(TokenRole::OldLogProbs);
    if rs_configured && !rejection {
        notes.push(
            "rollout rejection (rollout_rs) is configured but the file lacks old_log_probs or rollout_log_probs: the rejection check is skipped".to_string(),
        );
    }
    if !rejection {
        pipeline.correction = None;
    } else if let Some(c) = &mut pipeline.correction {
        // Only the rejected mask is looked at; no IS weights are needed.
        c.is = None;
    }
    notes.extend(config.notes.iter().cloned());
    let shape = pipeline.kl.is_some() || rejection;
    let beta = pipeline.controller.value();
    let checks = Checks {
        layout: opts.layout,
        groups: columns.uid.is_some(),
        rollout_n: config.rollout_n,
        kl: present(TokenRole::OldLogProbs) && present(TokenRole::RefLogProb),
        shaping: pipeline
            .kl
            .map(|_| (config.algorithm.kl_penalty.clone(), beta)),
        mismatch: present(TokenRole::OldLogProbs) && present(TokenRole::RolloutLogProbs),
        rejection,
    };
    let score_column = match &columns.scores {
        ScoreSource::Tokens { name, .. } => name.as_str(),
        ScoreSource::Scalar { .. } => "score",
    };
    let spec = Scan {
        layout: opts.layout,
        score_column,
        beta: pipeline.kl.map(|_| beta),
        rejection,
    };
    let constants = Constants::uniform(StepConstants {
        beta,
        is_norm: None,
    });
    let decode_options = DecodeOptions {
        layout: opts.layout,
        check_values: false,
        allow_nonfinite: true,
    };

    let projection = columns.statistics_projection();
    let starts = input.row_group_starts();
    let row_groups = input.num_row_groups();
    let progress = Progress::new(starts[row_groups] as u64, opts.progress);
    progress.pass("inspecting");
    let partials = thread_pool(opts.threads)?.install(|| {
        (0..row_groups)
            .into_par_iter()
            .map(|rg| {
                let batch = input.read_row_group(rg, Some(&projection))?;
                let group = decode(&batch, &columns, &decode_options, file, starts[rg])?;
                let shaped = if shape {
                    Some(pipeline::shape(&pipeline, &group, &constants, file)?)
                } else {
                    None
                };
                progress.inc(group.rows());
                Ok(scan(&group, shaped.as_ref(), &spec))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    progress.finish();

    // Merge in row-group order, so nothing depends on the thread count.
    let mut steps: BTreeMap<Option<i64>, StepTally> = BTreeMap::new();
    for partial in partials {
        for (step, tally) in partial {
            steps.entry(step).or_default().merge(tally);
        }
    }
    if columns.step.is_none() && steps.is_empty() {
        steps.insert(None, StepTally::default());
    }
    Ok(Report {
        file: file.to_string(),
        layout: opts.layout,
        notes,
        steps: steps
            .into_iter()
            .map(|(step, tally)| step_report(step, tally, &checks))
            .collect(),
    })
}
