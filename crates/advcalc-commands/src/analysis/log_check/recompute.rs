//! The metrics a trainer logs per step, recomputed from the step's dumps under the run's
//! configuration: the variant's pass 1, then one output pass whose row groups are reduced
//! to per-step sums (rows' score, reward and length; valid tokens' advantages, returns and
//! values), finished into verl's `compute_data_metrics` names and TRL's.
//!
//! verl 0.9.1 (`verl/trainer/ppo/metric_utils.py`, `compute_data_metrics`): a row's score is
//! the sum of its `token_level_scores`, its reward the sum of its `token_level_rewards`, its
//! response length the count of its response tokens (the hook's rows are that long); token
//! statistics run over `response_mask` (after rejection). Means are over rows (scores,
//! rewards, lengths) or valid tokens (advantages, returns, values).

use std::collections::BTreeMap;

use rayon::prelude::*;

use crate::analysis::collect::{Variant, sorted_union};
use crate::data::TokenRole;
use crate::engine::Engine;
use crate::engine::job::GroupOutputs;
use crate::engine::passes::{prepare_jobs, thread_pool};
use crate::engine::progress::Progress;
use crate::error::{Error, Result};
use crate::io::dataset::Dataset;
use crate::io::input::Opened;
use advcalc_maths::estimators::moments::Moments;

use super::CheckOptions;

/// Count, mean and variance (the estimators' mergeable [`Moments`]), min and max of some
/// values.
#[derive(Debug, Clone, Copy)]
pub struct ValueStats {
    moments: Moments,
    pub min: f64,
    pub max: f64,
}

impl Default for ValueStats {
    fn default() -> Self {
        ValueStats {
            moments: Moments::default(),
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl ValueStats {
    fn add(&mut self, x: f64) {
        self.moments.push(x);
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }

    fn merge(&mut self, o: &ValueStats) {
        self.moments.merge(&o.moments);
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// How many values.
    pub fn count(&self) -> u64 {
        self.moments.n as u64
    }

    pub fn mean(&self) -> Option<f64> {
        (self.moments.n > 0.0).then_some(self.moments.mean)
    }

    /// The unbiased variance (torch's `var`, correction 1).
    pub fn var(&self) -> Option<f64> {
        (self.moments.n > 1.0).then(|| self.moments.m2 / (self.moments.n - 1.0))
    }
}

/// One step's sums.
#[derive(Debug, Clone, Default)]
pub struct StepSums {
    /// Rows with at least one response token (verl leaves aborted, empty rows out of the
    /// score and reward statistics).
    pub score: ValueStats,
    pub reward: ValueStats,
    /// Every row's response length (aborted rows included).
    pub length: ValueStats,
    /// The response lengths of the rows that are not aborted (length > 0).
    pub length_non_aborted: ValueStats,
    /// Of those, the ones at the configured maximum.
    pub clipped_non_aborted: u64,
    /// Rows whose response length is the configured maximum.
    pub clipped: u64,
    pub aborted: u64,
    pub advantages: ValueStats,
    pub returns: ValueStats,
    pub values: Option<ValueStats>,
    /// returns − values over valid tokens, for the explained variance.
    pub return_minus_value: Option<ValueStats>,
    /// verl's `__num_turns__` per row, where the dump has it.
    pub num_turns: Option<ValueStats>,
    /// Per group: its rows' scores (TRL's reward_std and frac_reward_zero_std).
    pub groups: BTreeMap<String, Vec<f64>>,
}

impl StepSums {
    fn merge(&mut self, o: StepSums) {
        self.score.merge(&o.score);
        self.reward.merge(&o.reward);
        self.length.merge(&o.length);
        self.length_non_aborted.merge(&o.length_non_aborted);
        self.clipped += o.clipped;
        self.clipped_non_aborted += o.clipped_non_aborted;
        self.aborted += o.aborted;
        self.advantages.merge(&o.advantages);
        self.returns.merge(&o.returns);
        for (mine, theirs) in [
            (&mut self.num_turns, o.num_turns),
            (&mut self.values, o.values),
            (&mut self.return_minus_value, o.return_minus_value),
        ] {
            if let Some(t) = theirs {
                mine.get_or_insert_with(ValueStats::default).merge(&t);
            }
        }
        for (g, scores) in o.groups {
            self.groups.entry(g).or_default().extend(scores);
        }
    }
}

/// The dumps opened, and every step's sums under the variant's configuration.
pub struct Recomputed {
    pub opened: Opened,
    pub steps: BTreeMap<Option<i64>, StepSums>,
    /// The data warnings `run` would print.
    pub warnings: Vec<String>,
}

/// Read the dumps once more than `run` would (pass 1, then the output pass) and sum per step.
pub fn recompute(variant: &Variant, opts: &CheckOptions) -> Result<Recomputed> {
    let read = &opts.read;
    let pool = thread_pool(read.threads)?;
    let opened = crate::analysis::collect::open_input(read, &variant.config)?;
    let input: &Dataset = &opened.dataset;
    let allow_nonfinite =
        read.allow_nonfinite || opened.own_nan_scores([&variant.config].into_iter());
    let engine = Engine::new(&variant.config, input.schema(), &input.name)?
        .with_layout(read.layout)
        .allow_nonfinite(allow_nonfinite);
    let job = engine.job();
    let values_column = input.schema().index_of(TokenRole::Values.column()).ok();
    let turns_column = input.schema().index_of(NUM_TURNS).ok();
    let projection = sorted_union(
        job.columns
            .projection(false)
            .into_iter()
            .chain(values_column)
            .chain(turns_column),
    );
    let units = input.units();
    let quiet = Progress::new(input.rows() as u64, read.progress);
    let max_length = opts.max_response_length;
    let (plan, parts) = pool
        .install(|| {
            let plan = prepare_jobs(input, std::slice::from_ref(&job), &projection, &quiet)?
                .pop()
                .expect("one job");
            quiet.pass("check");
            let parts = (0..units.len())
                .into_par_iter()
                .map(|u| {
                    let batch = input.read_unit(u, Some(&projection))?;
                    let out =
                        job.at(input.part(u))
                            .row_group_outputs(&batch, units[u].start, &plan)?;
                    quiet.inc(batch.num_rows());
                    let turns = num_turns(&batch)?;
                    Ok(sums_of(
                        &out,
                        turns.as_deref(),
                        max_length,
                        values_column.is_some(),
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok::<_, Error>((plan, parts))
        })
        .map_err(|e| opened.locate_error(e))?;
    quiet.finish();
    let mut steps: BTreeMap<Option<i64>, StepSums> = BTreeMap::new();
    for part in parts {
        for (step, s) in part {
            steps.entry(step).or_default().merge(s);
        }
    }
    let warnings = plan.warnings.clone();
    Ok(Recomputed {
        opened,
        steps,
        warnings,
    })
}

/// verl's per-row turn count, which its hook writes beside the tensors.
const NUM_TURNS: &str = "__num_turns__";

/// The batch's `__num_turns__` as f64, when it has the column.
fn num_turns(batch: &arrow_array::RecordBatch) -> Result<Option<Vec<f64>>> {
    use arrow_array::Array as _;
    use arrow_array::cast::AsArray as _;
    use arrow_array::types::{Float64Type, Int32Type, Int64Type};
    use arrow_schema::DataType;
    let Some(c) = batch.column_by_name(NUM_TURNS) else {
        return Ok(None);
    };
    let values: Vec<f64> = match c.data_type() {
        DataType::Int32 => c
            .as_primitive::<Int32Type>()
            .values()
            .iter()
            .map(|&v| v as f64)
            .collect(),
        DataType::Int64 => c
            .as_primitive::<Int64Type>()
            .values()
            .iter()
            .map(|&v| v as f64)
            .collect(),
        DataType::Float64 => c.as_primitive::<Float64Type>().values().to_vec(),
        other => {
            return Err(Error::data(format!(
                "column {NUM_TURNS}: expected an integer, found {other}"
            )));
        }
    };
    if c.null_count() > 0 {
        return Err(Error::data(format!(
            "column {NUM_TURNS}: a null turn count"
        )));
    }
    Ok(Some(values))
}

/// One row group's sums by step.
fn sums_of(
    out: &GroupOutputs,
    turns: Option<&[f64]>,
    max_length: Option<usize>,
    has_values: bool,
) -> BTreeMap<Option<i64>, StepSums> {
    let g = &out.group;
    let mut steps: BTreeMap<Option<i64>, StepSums> = BTreeMap::new();
    let values = g.token(TokenRole::Values).filter(|_| has_values);
    let returns = out
        .outputs
        .returns
        .as_deref()
        .unwrap_or(&out.outputs.advantages);
    for i in 0..g.rows() {
        let s = steps.entry(g.step_of(i)).or_default();
        if let Some(t) = turns {
            s.num_turns
                .get_or_insert_with(ValueStats::default)
                .add(t[i]);
        }
        let span = g.span(i);
        let length = span.len();
        s.length.add(length as f64);
        if max_length == Some(length) {
            s.clipped += 1;
        }
        if length == 0 {
            s.aborted += 1;
        } else {
            s.length_non_aborted.add(length as f64);
            if max_length == Some(length) {
                s.clipped_non_aborted += 1;
            }
            let score: f64 = g.scores[span.clone()].iter().map(|&x| x as f64).sum();
            // a row without a score (TRL's row whose every reward function returned None) is
            // left out of the statistics, as TRL's nanmean leaves it out
            if score.is_finite() {
                s.score.add(score);
            }
            s.reward.add(
                out.outputs.token_level_rewards[span.clone()]
                    .iter()
                    .map(|&x| x as f64)
                    .sum(),
            );
            if let Some(uid) = &g.uid {
                s.groups.entry(uid[i].to_string()).or_default().push(score);
            }
        }
        for t in span {
            if out.mask[t] != 1.0 {
                continue;
            }
            s.advantages.add(out.outputs.advantages[t] as f64);
            s.returns.add(returns[t] as f64);
            if let Some(v) = values {
                s.values
                    .get_or_insert_with(ValueStats::default)
                    .add(v[t] as f64);
                s.return_minus_value
                    .get_or_insert_with(ValueStats::default)
                    .add(returns[t] as f64 - v[t] as f64);
            }
        }
    }
    steps
}

/// verl's and TRL's metric names with their values, as far as the sums give them.
pub fn metrics(s: &StepSums) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    let mut put = |name: &str, v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            m.insert(name.to_string(), v);
        }
    };
    let finite = |x: f64| x.is_finite().then_some(x);
    for (prefix, moments) in [
        ("critic/score", &s.score),
        ("critic/rewards", &s.reward),
        ("critic/advantages", &s.advantages),
        ("critic/returns", &s.returns),
        ("response_length", &s.length),
        ("response_length_non_aborted", &s.length_non_aborted),
    ] {
        put(&format!("{prefix}/mean"), moments.mean());
        put(&format!("{prefix}/max"), finite(moments.max));
        put(&format!("{prefix}/min"), finite(moments.min));
    }
    if let Some(t) = &s.num_turns {
        put("num_turns/mean", t.mean());
        put("num_turns/max", finite(t.max));
        put("num_turns/min", finite(t.min));
    }
    if let Some(v) = &s.values {
        put("critic/values/mean", v.mean());
        put("critic/values/max", finite(v.max));
        put("critic/values/min", finite(v.min));
    }
    if let (Some(diff), Some(_)) = (&s.return_minus_value, &s.values)
        && let (Some(dv), Some(rv)) = (diff.var(), s.returns.var())
    {
        put("critic/vf_explained_var", Some(1.0 - dv / (rv + 1e-5)));
    }
    let rows = s.length.count() as f64;
    if rows > 0.0 {
        put("response/aborted_ratio", Some(s.aborted as f64 / rows));
    }
    // TRL 1.16's names (GRPOTrainer._generate_and_score_completions): the mean and the
    // sample std of the scored rows' rewards over the whole batch, and the share of groups
    // whose std is 0 (torch.isclose: at most 1e-8; a group of fewer than two scored rows has
    // a NaN std, which is not 0)
    put("reward", s.score.mean());
    put("reward_std", s.score.var().map(f64::sqrt));
    if !s.groups.is_empty() {
        let zero = s
            .groups
            .values()
            .filter(|g| sample_std(g).is_some_and(|sd| sd <= 1e-8))
            .count();
        put(
            "frac_reward_zero_std",
            Some(zero as f64 / s.groups.len() as f64),
        );
    }
    m
}

/// The sample standard deviation of the finite values (TRL's `nanstd`, correction 1), `None`
/// with fewer than two.
fn sample_std(v: &[f64]) -> Option<f64> {
    let mut s = ValueStats::default();
    v.iter().filter(|x| x.is_finite()).for_each(|&x| s.add(x));
    s.var().map(f64::sqrt)
}

/// `response_length/clip_ratio` and `response_length_non_aborted/clip_ratio`, with the
/// configured maximum.
pub fn clip_ratios(s: &StepSums) -> (f64, f64) {
    (
        s.clipped as f64 / (s.length.count() as f64).max(1.0),
        s.clipped_non_aborted as f64 / (s.length_non_aborted.count() as f64).max(1.0),
    )
}
