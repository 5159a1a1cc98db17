//! What the view knows of the whole input before anyone asks for a row: the variants' pass 1
//! (their plans, kept for the rows' pass 2 on demand), then one output pass reduced to the
//! inspect tallies and per-row scalars (score, length, each variant's mean advantage, the
//! logged advantage), and from them the steps and groups. O(rows) scalars, never tokens.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use rayon::prelude::*;
use serde_json::{Map, Value, json};

use crate::analysis::buckets::uid_groups;
use crate::analysis::collect::{
    Variant, jobs_projection, open_input, outputs_of, sorted_union, variant_engines,
};
use crate::analysis::fragile::fragile_groups;
use crate::analysis::inspection::{Inspection, Tallies};
use crate::analysis::log_check::{CheckOptions, check, likely_alternatives};
use crate::analysis::sums::Sums;
use crate::analysis::tokens::TokenStats;
use crate::engine::Engine;
use crate::engine::job::{GroupOutputs, Job, Plan};
use crate::engine::metrics;
use crate::engine::passes::{prepare_jobs, thread_pool};
use crate::engine::progress::Progress;
use crate::error::{Error, Result};
use crate::io::input::Opened;
use crate::io::jsonl::SEQUENCE_LEVEL_KEY;
use crate::io::trainers::LOGGED_ADVANTAGE;

use super::ViewOptions;

/// No group (the input has no `uid`, or no variant groups its rows).
pub const NO_GROUP: u32 = u32::MAX;

/// The input opened, the variants' engines and plans, and the index of its steps, groups and
/// rows: everything a request needs besides the one row group it reads.
pub struct Snapshot {
    pub opened: Opened,
    /// The variants' engines, then the loss replay's when it runs.
    engines: Vec<Engine>,
    plans: Vec<Plan>,
    /// Whether the last engine is the loss replay's.
    pub has_loss: bool,
    /// The input's columns every engine reads, plus the logged advantage.
    pub projection: Vec<usize>,
    pub index: Index,
    /// The overview's JSON, made on first request (it does not change with the snapshot).
    overview: std::sync::OnceLock<Value>,
    /// A verl JSONL dump's line starts, found on the first row request.
    jsonl_lines: std::sync::OnceLock<std::result::Result<super::jsonl_lines::LineIndex, String>>,
}

/// The steps, groups and rows, as scalars.
pub struct Index {
    pub labels: Vec<String>,
    pub rows: usize,
    pub sequence_level: bool,
    pub steps: Vec<StepInfo>,
    pub groups: Vec<GroupInfo>,
    /// Per row: its step's index in `steps`.
    pub row_step: Vec<u32>,
    /// Per row: its group's index in `groups`, or [`NO_GROUP`].
    pub row_group: Vec<u32>,
    /// Per row: Σ token scores.
    pub score: Vec<f64>,
    /// Per row: valid tokens before rejection (the response length the loss sees).
    pub length: Vec<u32>,
    /// Per variant, per row: mean advantage over the valid tokens (after rejection).
    pub advantage: Vec<Vec<f64>>,
    /// Per row: the advantage the trainer logged, when the dump carries one.
    pub logged: Option<Vec<Option<f64>>>,
    /// Per row: correct (score above `correct_above`).
    pub correct: Vec<bool>,
    /// The inspect report as JSON (`advcalc inspect --json`), checked under the first variant.
    pub inspect: Value,
    /// Per variant: `run --metrics` per step (verl's names).
    pub metrics: Vec<Vec<Value>>,
    /// Per variant: the data warnings `run` prints.
    pub warnings: Vec<Vec<String>>,
    /// What the user should know about how IN was read and what the view left out.
    pub notes: Vec<String>,
    /// With `--log`: the log checked against IN (`advcalc check`), as the page draws it.
    pub check: Option<Value>,
}

/// One training batch.
pub struct StepInfo {
    pub step: Option<i64>,
    pub rows: Vec<usize>,
    /// Its groups' indices, in first-appearance order.
    pub groups: Vec<usize>,
    /// Per variant: advantage statistics over its valid tokens.
    pub advantages: Vec<TokenStats>,
}

/// One group (`uid`) of a step.
pub struct GroupInfo {
    pub uid: String,
    pub step: usize,
    /// Its rows, ascending.
    pub rows: Vec<usize>,
    /// Every row has the same score: the group gives no learning signal.
    pub no_signal: bool,
    /// Numerically fragile (`analysis::fragile`): trainers' float32 departs from the exact
    /// group-normalised advantage.
    pub fragile: bool,
}

impl Snapshot {
    /// Open the input and run the passes.
    pub fn build(variants: &[Variant], opts: &ViewOptions) -> Result<Snapshot> {
        if variants.is_empty() {
            return Err(Error::usage("view needs at least one estimator"));
        }
        let read = &opts.read;
        let pool = thread_pool(read.threads)?;
        let opened = open_input(read, &variants[0].config)?;
        let input = &opened.dataset;
        let own_nan_scores = opened.own_nan_scores(variants.iter().map(|v| &v.config));
        let allow_nonfinite = read.allow_nonfinite || own_nan_scores;
        let inspection = Inspection::new(&variants[0].config, input, read.layout)?
            .with_variants(variants[1..].iter().map(|v| &v.config))
            .with_own_nan_scores(own_nan_scores);
        let mut engines = variant_engines(variants, input, read.layout, allow_nonfinite)?;
        let mut notes: Vec<String> = Vec::new();
        let has_loss = match &opts.loss {
            Ok(config) if config.actor_given => {
                match Engine::new(config, input.schema(), &input.name) {
                    Ok(e) => {
                        engines.push(e.with_layout(read.layout).allow_nonfinite(allow_nonfinite));
                        true
                    }
                    Err(e) => {
                        notes.push(format!(
                            "no gradient weights: the loss replay cannot run ({e})"
                        ));
                        false
                    }
                }
            }
            Ok(_) => {
                notes.push("no gradient weights: the configuration has no actor_rollout_ref.actor section, so there is no loss to replay (-c a trainer YAML with one)".into());
                false
            }
            Err(e) => {
                notes.push(format!(
                    "no gradient weights: the actor section cannot be read ({e})"
                ));
                false
            }
        };
        let jobs: Vec<Job<'_>> = engines.iter().map(Engine::job).collect();
        let logged_column = input.schema().index_of(LOGGED_ADVANTAGE).ok();
        let projection = sorted_union(jobs_projection(&jobs).into_iter().chain(logged_column));
        let all_columns = sorted_union(projection.iter().copied().chain(inspection.projection()));
        let n = variants.len();
        let units = input.units();
        let quiet = Progress::new(input.rows() as u64, read.progress);
        let (plans, parts) = pool
            .install(|| {
                let plans = prepare_jobs(input, &jobs, &projection, &quiet)?;
                quiet.pass("view");
                let parts = (0..units.len())
                    .into_par_iter()
                    .map(|u| {
                        let batch = input.read_unit(u, Some(&all_columns))?;
                        let tallies = inspection.scan_unit(input, u, &batch)?;
                        let outputs = outputs_of(&jobs[..n], &plans[..n], input, u, &batch)?;
                        quiet.inc(batch.num_rows());
                        Ok((tallies, Sums::of_row_group(&outputs), logged_of(&batch)?))
                    })
                    .collect::<Result<Vec<(Tallies, Sums, Option<Vec<Option<f64>>>)>>>()?;
                Ok::<_, Error>((plans, parts))
            })
            .map_err(|e| opened.locate_error(e))?;
        quiet.finish();

        let rows = input.rows();
        let mut sums = Sums::with_capacity(n, rows);
        let mut tallies = Vec::with_capacity(parts.len());
        let mut logged: Option<Vec<Option<f64>>> = logged_column.map(|_| Vec::with_capacity(rows));
        for (t, s, l) in parts {
            tallies.push(t);
            sums.append(s);
            if let (Some(all), Some(l)) = (logged.as_mut(), l) {
                all.extend(l);
            }
        }
        let mut report = inspection.finish(input, tallies);
        if let Some(dump) = opened.file.as_ref().and_then(|f| f.trainer.as_ref()) {
            report.notes.splice(0..0, dump.notes.iter().cloned());
        }
        notes.splice(0..0, input.notes.iter().cloned());
        let metrics: Vec<Vec<Value>> = jobs[..n]
            .iter()
            .zip(&plans)
            .map(|(job, p)| match metrics::to_json(job, p, &p.metric_parts) {
                Value::Array(steps) => steps,
                one => vec![one],
            })
            .collect();
        let index = Index::new(
            variants,
            &plans[..n],
            &sums,
            logged,
            read.correct_above,
            report.to_json(),
            metrics,
            notes,
            input.schema().metadata().contains_key(SEQUENCE_LEVEL_KEY),
        );
        drop(jobs);
        let mut index = index;
        if let Some(log) = &opts.log {
            index.check = Some(check_json(&variants[0], opts, log));
        }
        Ok(Snapshot {
            opened,
            engines,
            plans,
            has_loss,
            projection,
            index,
            overview: std::sync::OnceLock::new(),
            jsonl_lines: std::sync::OnceLock::new(),
        })
    }

    /// Where a verl JSONL dump's rows start (`None` for another input).
    pub fn jsonl_lines(&self) -> Result<Option<&super::jsonl_lines::LineIndex>> {
        let Some(jsonl) = self.opened.file.as_ref().and_then(|f| f.jsonl.as_ref()) else {
            return Ok(None);
        };
        match self.jsonl_lines.get_or_init(|| {
            super::jsonl_lines::LineIndex::build(&jsonl.files)
                .map_err(|e| super::server::describe(&e))
        }) {
            Ok(ix) => Ok(Some(ix)),
            Err(why) => Err(Error::data(why.clone())),
        }
    }

    /// The overview's JSON ([`Index::overview`]), made once.
    pub fn overview(&self) -> &Value {
        self.overview.get_or_init(|| self.index.overview())
    }

    /// Every engine's pass-2 outputs of one unit (the variants', then the loss replay's).
    pub fn outputs(&self, unit: usize, batch: &RecordBatch) -> Result<Vec<GroupOutputs>> {
        let jobs: Vec<Job<'_>> = self.engines.iter().map(Engine::job).collect();
        outputs_of(&jobs, &self.plans, &self.opened.dataset, unit, batch)
    }
}

/// `--log`: the log checked against IN under the first variant (the other
/// `norm_adv_by_std_in_grpo` tried when advantages diverge), per metric `[step, logged,
/// recomputed, agrees, tolerance]`; or why it could not be checked.
fn check_json(variant: &Variant, opts: &ViewOptions, log: &std::path::Path) -> Value {
    let options = CheckOptions {
        log: log.to_path_buf(),
        read: opts.read.clone(),
        max_response_length: opts.max_response_length,
        alternatives: likely_alternatives(variant),
    };
    let report = match check(variant, &options) {
        Ok(r) => r,
        Err(e) => {
            return json!({ "log": log.display().to_string(), "error": super::server::describe(&e) });
        }
    };
    let mut metrics: std::collections::BTreeMap<&str, Vec<Value>> = Default::default();
    for c in &report.compared {
        metrics.entry(c.metric.as_str()).or_default().push(json!([
            c.step,
            c.logged,
            c.recomputed,
            c.agrees(),
            c.tolerance
        ]));
    }
    json!({
        "log": report.log,
        "format": report.format.name(),
        "compared": report.compared.len(),
        "diverging": report.diverging(),
        "first_divergence": report.first_divergence().map(|c| json!({"step": c.step, "metric": c.metric})),
        "causes": report.causes,
        "metrics": metrics,
        "not_recomputed": report.not_recomputed.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        "notes": report.notes,
    })
}

/// The logged advantage of each row of `batch` (a scalar column), when it has one.
fn logged_of(batch: &RecordBatch) -> Result<Option<Vec<Option<f64>>>> {
    let Some(column) = batch.column_by_name(LOGGED_ADVANTAGE) else {
        return Ok(None);
    };
    let values = match column.data_type() {
        DataType::Float64 => {
            let a = column.as_primitive::<Float64Type>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| a.value(i)))
                .collect()
        }
        DataType::Float32 => {
            let a = column.as_primitive::<Float32Type>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| a.value(i) as f64))
                .collect()
        }
        other => {
            return Err(Error::data(format!(
                "column {LOGGED_ADVANTAGE}: expected a float, found {other}"
            )));
        }
    };
    Ok(Some(values))
}

impl Index {
    #[allow(clippy::too_many_arguments)]
    fn new(
        variants: &[Variant],
        plans: &[Plan],
        sums: &Sums,
        logged: Option<Vec<Option<f64>>>,
        correct_above: f64,
        inspect: Value,
        metrics: Vec<Vec<Value>>,
        notes: Vec<String>,
        sequence_level: bool,
    ) -> Index {
        let rows = sums.score.len();
        let first = &plans[0];
        let mut row_step = vec![0u32; rows];
        let mut steps: Vec<StepInfo> = first
            .training_batches
            .iter()
            .enumerate()
            .map(|(i, (step, members))| {
                for &r in members {
                    row_step[r] = i as u32;
                }
                StepInfo {
                    step: *step,
                    rows: members.clone(),
                    groups: Vec::new(),
                    advantages: sums
                        .rows
                        .iter()
                        .map(|v| TokenStats::of(members.iter().map(|&r| &v[r])))
                        .collect(),
                }
            })
            .collect();
        let mut row_group = vec![NO_GROUP; rows];
        let mut groups = Vec::new();
        if let Some(grouping) = uid_groups(plans) {
            let uid = plans
                .iter()
                .map(|p| &p.stats.uid)
                .find(|u| !u.is_empty())
                .expect("uid_groups found one");
            for members in grouping.members() {
                let g = groups.len();
                let step = row_step[members[0]] as usize;
                for &r in &members {
                    row_group[r] = g as u32;
                }
                let scores: Vec<f64> = members.iter().map(|&r| sums.score[r]).collect();
                steps[step].groups.push(g);
                groups.push(GroupInfo {
                    uid: match &uid[members[0]] {
                        crate::data::GroupKey::Str(s) => s.to_string(),
                        k => k.to_string(),
                    },
                    step,
                    no_signal: scores.len() > 1 && scores.iter().all(|&s| s == scores[0]),
                    fragile: fragile_groups(std::slice::from_ref(&scores)).any(),
                    rows: members,
                });
            }
        }
        let advantage = sums
            .rows
            .iter()
            .map(|v| {
                v.iter()
                    .map(|r| {
                        if r.valid == 0 {
                            0.0
                        } else {
                            r.sum / r.valid as f64
                        }
                    })
                    .collect()
            })
            .collect();
        Index {
            labels: variants.iter().map(|v| v.label.clone()).collect(),
            rows,
            sequence_level,
            steps,
            groups,
            row_step,
            row_group,
            correct: sums.score.iter().map(|&s| s > correct_above).collect(),
            score: sums.score.clone(),
            length: first.stats.orig_valid.iter().map(|&v| v as u32).collect(),
            advantage,
            logged,
            inspect,
            metrics,
            warnings: plans.iter().map(|p| p.warnings.clone()).collect(),
            notes,
            check: None,
        }
    }

    /// The overview: every step's curves and findings.
    pub fn overview(&self) -> Value {
        // inspect's steps by their step value (a map: thousands of steps)
        let inspect_steps: std::collections::HashMap<Option<i64>, &Value> = self.inspect["steps"]
            .as_array()
            .map(|all| all.iter().map(|x| (x["step"].as_i64(), x)).collect())
            .unwrap_or_default();
        let steps: Vec<Value> = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let inspect = inspect_steps
                    .get(&s.step)
                    .map_or(Value::Null, |v| (*v).clone());
                let groups = || s.groups.iter().map(|&g| &self.groups[g]);
                let mut m = Map::new();
                m.insert("index".into(), json!(i));
                m.insert("step".into(), json!(s.step));
                m.insert("rows".into(), json!(s.rows.len()));
                m.insert("groups".into(), json!(s.groups.len()));
                m.insert("score_mean".into(), json!(self.mean(&s.rows, &self.score)));
                m.insert(
                    "pass_rate".into(),
                    json!(
                        s.rows.iter().filter(|&&r| self.correct[r]).count() as f64
                            / s.rows.len().max(1) as f64
                    ),
                );
                m.insert(
                    "no_signal_groups".into(),
                    json!(groups().filter(|g| g.no_signal).count()),
                );
                m.insert(
                    "fragile_groups".into(),
                    json!(groups().filter(|g| g.fragile).count()),
                );
                m.insert(
                    "length_mean".into(),
                    json!(
                        s.rows.iter().map(|&r| self.length[r] as f64).sum::<f64>()
                            / s.rows.len().max(1) as f64
                    ),
                );
                m.insert(
                    "advantage_std".into(),
                    json!(s.advantages.iter().map(|a| a.std).collect::<Vec<_>>()),
                );
                m.insert(
                    "metrics".into(),
                    json!(
                        self.metrics
                            .iter()
                            .map(|v| v.get(i).cloned().unwrap_or(Value::Null))
                            .collect::<Vec<_>>()
                    ),
                );
                m.insert("kl_mean".into(), inspect["kl"]["mean_k1"].clone());
                m.insert(
                    "findings".into(),
                    json!(
                        inspect["warnings"]
                            .as_array()
                            .map(|w| w.iter().map(|x| x["code"].clone()).collect::<Vec<_>>())
                            .unwrap_or_default()
                    ),
                );
                Value::Object(m)
            })
            .collect();
        json!({
            "file": self.inspect["file"],
            "rows": self.rows,
            "labels": self.labels,
            "sequence_level": self.sequence_level,
            "has_groups": !self.groups.is_empty(),
            "has_logged": self.logged.is_some(),
            "steps": steps,
            "inspect": self.inspect,
            "warnings": self.warnings,
            "notes": self.notes,
            "check": self.check,
        })
    }

    /// A step's groups (or, without groups, its rows).
    pub fn step(&self, i: usize) -> Value {
        let s = &self.steps[i];
        let groups: Vec<Value> = s
            .groups
            .iter()
            .map(|&g| {
                let info = &self.groups[g];
                let spread: Vec<f64> = self
                    .advantage
                    .iter()
                    .map(|a| {
                        let (lo, hi) = info.rows.iter().fold(
                            (f64::INFINITY, f64::NEG_INFINITY),
                            |(lo, hi), &r| (lo.min(a[r]), hi.max(a[r])),
                        );
                        if lo.is_finite() { hi - lo } else { 0.0 }
                    })
                    .collect();
                let mut findings = Vec::new();
                if info.no_signal {
                    findings.push("no_signal");
                }
                if info.fragile {
                    findings.push("fragile");
                }
                json!({
                    "index": g,
                    "uid": info.uid,
                    "size": info.rows.len(),
                    "score_mean": self.mean(&info.rows, &self.score),
                    "score_min": info.rows.iter().map(|&r| self.score[r]).fold(f64::INFINITY, f64::min),
                    "score_max": info.rows.iter().map(|&r| self.score[r]).fold(f64::NEG_INFINITY, f64::max),
                    "pass_rate": info.rows.iter().filter(|&&r| self.correct[r]).count() as f64 / info.rows.len() as f64,
                    "length_mean": info.rows.iter().map(|&r| self.length[r] as f64).sum::<f64>() / info.rows.len() as f64,
                    "advantage_spread": spread,
                    "findings": findings,
                })
            })
            .collect();
        json!({
            "index": i,
            "step": s.step,
            "rows": s.rows.len(),
            "labels": self.labels,
            "groups": groups,
            // without groups, the step's rows are listed instead (the first ROW_LIMIT)
            "row_list": if s.groups.is_empty() {
                self.row_list(&s.rows[..s.rows.len().min(ROW_LIMIT)])
            } else {
                Value::Null
            },
        })
    }

    /// A group's rows side by side.
    pub fn group(&self, g: usize) -> Value {
        let info = &self.groups[g];
        json!({
            "index": g,
            "uid": info.uid,
            "step_index": info.step,
            "step": self.steps[info.step].step,
            "labels": self.labels,
            "no_signal": info.no_signal,
            "fragile": info.fragile,
            "rows": self.row_list(&info.rows),
        })
    }

    /// Rows as the group table shows them.
    fn row_list(&self, rows: &[usize]) -> Value {
        Value::Array(
            rows.iter()
                .map(|&r| {
                    json!({
                        "row": r,
                        "score": self.score[r],
                        "correct": self.correct[r],
                        "length": self.length[r],
                        "advantages": self.advantage.iter().map(|a| a[r]).collect::<Vec<_>>(),
                        "logged": self.logged.as_ref().and_then(|l| l[r]),
                    })
                })
                .collect(),
        )
    }

    fn mean(&self, rows: &[usize], values: &[f64]) -> f64 {
        rows.iter().map(|&r| values[r]).sum::<f64>() / rows.len().max(1) as f64
    }
}

/// At most this many rows in a step's row list when the step has no groups.
pub const ROW_LIMIT: usize = 2000;
