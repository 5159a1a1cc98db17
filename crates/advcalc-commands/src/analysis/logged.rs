//! The check of another trainer's logged advantages (`inspect`, `compare`; docs/trainers.md):
//! advcalc recomputes the advantages of a trainer's dump (`io::trainers`) under that trainer's
//! convention with its default algorithm (`grpo`), and compares them row by row with the
//! ones the trainer logged ([`LOGGED_ADVANTAGE`]).
//!
//! A row differs when |logged − recomputed| > [`ATOL`] + [`RTOL`]·|recomputed|: beyond the
//! float32 rounding of the trainers' own arithmetic (they compute in float32, advcalc in f64
//! and writes float32). For the differing rows the check names the likely cause when it is
//! a known one: a numerically fragile group (where the trainer's float32 departs from the
//! exact answer, `analysis::fragile`), a group size that does not match TRL's blocks (the
//! check retries the divisors of the step's row count), open-instruct's other normalisation
//! (centered instead of standard, or back), or TRL's reward weights, which the file does
//! not record.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int8Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use serde_json::{Value, json};

use crate::analysis::fragile::fragile_groups;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::io::dataset::Dataset;
use crate::io::input::Input;
use crate::io::input_source::InputSource;
use crate::io::trainers::{DumpOptions, LOGGED_ADVANTAGE, Trainer};
use crate::shaping::scores::Layout;
use advcalc_config::Config;
use advcalc_maths::estimators::Estimator;
use advcalc_maths::estimators::conventions::Convention;

/// Absolute tolerance of the comparison.
pub const ATOL: f64 = 1e-5;
/// Relative tolerance of the comparison.
pub const RTOL: f64 = 1e-5;

/// Rows the check lists by name (the largest differences).
const LISTED: usize = 5;

/// One row whose logged advantage differs from advcalc's.
#[derive(Debug, Clone, PartialEq)]
pub struct Differing {
    /// The row's index in IN (counted from 0, in reading order).
    pub row: usize,
    pub step: i64,
    pub group: String,
    pub logged: f64,
    pub recomputed: f64,
}

/// The check's result.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedCheck {
    pub trainer: Trainer,
    /// What advcalc recomputed with: the estimator and the convention.
    pub estimator: &'static str,
    pub convention: &'static str,
    pub rows: usize,
    /// Rows with a logged advantage and a token to compare on.
    pub compared: usize,
    pub differing: usize,
    /// Of the differing rows, those in numerically fragile groups.
    pub fragile: usize,
    pub max_abs: f64,
    /// The largest differences, largest first.
    pub worst: Vec<Differing>,
    /// Likely causes, when known.
    pub causes: Vec<String>,
}

impl LoggedCheck {
    /// Whether the check found rows that differ for no known float32 reason.
    pub fn warns(&self) -> bool {
        self.differing > self.fragile
    }

    pub fn to_json(&self) -> Value {
        json!({
            "trainer": self.trainer.name(),
            "estimator": self.estimator,
            "convention": self.convention,
            "rows": self.rows,
            "compared": self.compared,
            "differing": self.differing,
            "fragile": self.fragile,
            "max_abs_difference": self.max_abs,
            "tolerance": {"atol": ATOL, "rtol": RTOL},
            "worst": self.worst.iter().map(|d| json!({
                "row": d.row, "step": d.step, "group": d.group,
                "logged": d.logged, "recomputed": d.recomputed,
            })).collect::<Vec<_>>(),
            "causes": self.causes,
        })
    }

    /// The check as `inspect` prints it.
    pub fn render(&self) -> String {
        let mut out = format!(
            "logged advantages ({} dump, recomputed as {} under --convention {})\n",
            self.trainer.title(),
            self.estimator,
            self.convention
        );
        let line = |k: &str, v: String| format!("  {k:<30}{v}\n");
        out += &line(
            "rows compared",
            format!("{} of {}", self.compared, self.rows),
        );
        out += &line(
            "rows differing",
            format!(
                "{} (beyond {ATOL:e} + {RTOL:e}·|a|){}",
                self.differing,
                if self.fragile > 0 {
                    format!(", {} in numerically fragile groups", self.fragile)
                } else {
                    String::new()
                }
            ),
        );
        out += &line("largest difference", format!("{:.3e}", self.max_abs));
        for d in &self.worst {
            out += &line(
                "",
                format!(
                    "row {} (step {}, group {}): logged {}, advcalc {}",
                    d.row,
                    d.step,
                    d.group,
                    short(d.logged),
                    short(d.recomputed)
                ),
            );
        }
        for c in &self.causes {
            out += &format!("  likely cause: {c}\n");
        }
        out
    }
}

fn short(x: f64) -> String {
    format!("{x:.7}")
}

/// One row as the check reads it from the computed output.
struct Row {
    step: i64,
    group: String,
    score: f64,
    logged: Option<f64>,
    /// advcalc's advantage on the row's first mask-1 token; `None` without one.
    recomputed: Option<f64>,
}

/// The trainer's convention, and `config` with its default algorithm under it.
fn check_config(config: &Config, trainer: Trainer) -> Result<(Config, Convention)> {
    let convention = trainer.convention();
    let mut c = Config {
        loss: None,
        ..config.clone()
    };
    c.algorithm.adv_estimator = Estimator::Grpo;
    c.algorithm.ext.convention = convention;
    Ok((c, convention))
}

/// Recompute every row of the spooled dump `input` under `config`.
fn recompute(config: &Config, input: &Dataset, layout: Layout) -> Result<Vec<Row>> {
    // advcalc's columns only: the spool puts them first, up to the logged advantage, and the
    // dump's own fields (token lists as text, message graphs) after it
    let schema = input.schema();
    let last = schema
        .index_of(LOGGED_ADVANTAGE)
        .map_err(|_| Error::data(format!("{}: no `{LOGGED_ADVANTAGE}` column", input.name)))?;
    let projection: Vec<usize> = (0..=last).collect();
    let schema = std::sync::Arc::new(
        schema
            .project(&projection)
            .map_err(|e| Error::data(format!("{}: cannot read", input.name)).with_source(e))?,
    );
    let batches = (0..input.units().len())
        .map(|u| input.read_unit(u, Some(&projection)))
        .collect::<Result<Vec<_>>>()?;
    let engine = Engine::new(config, schema, &input.name)?
        .with_layout(layout)
        .allow_nonfinite(true);
    let computed = engine.compute(&batches)?;
    let mut rows = Vec::new();
    for b in &computed.batches {
        rows.extend(rows_of(b, &input.name)?);
    }
    Ok(rows)
}

fn rows_of(b: &RecordBatch, name: &str) -> Result<Vec<Row>> {
    let col = |c: &str| {
        b.column_by_name(c)
            .ok_or_else(|| Error::data(format!("{name}: no `{c}` column after the passes")))
    };
    let uid = col("uid")?;
    let uid = uid.as_string::<i32>();
    let step = col("step")?.as_primitive::<Int64Type>().clone();
    let score = col("score")?.as_primitive::<Float64Type>().clone();
    let logged = col(LOGGED_ADVANTAGE)?.as_primitive::<Float64Type>().clone();
    let mask = col("response_mask")?.as_list::<i32>().clone();
    let adv = col("advantages")?.as_list::<i32>().clone();
    let mut out = Vec::with_capacity(b.num_rows());
    for i in 0..b.num_rows() {
        let m = mask.value(i);
        let m = m.as_primitive::<Int8Type>();
        let a = adv.value(i);
        let a = a.as_primitive::<Float32Type>();
        let first = (0..m.len()).find(|&t| m.value(t) != 0);
        out.push(Row {
            step: step.value(i),
            group: uid.value(i).to_string(),
            score: score.value(i),
            logged: (!logged.is_null(i)).then(|| logged.value(i)),
            recomputed: first.map(|t| a.value(t) as f64),
        });
    }
    Ok(out)
}

fn differs(logged: f64, recomputed: f64) -> bool {
    // a NaN on either side differs
    let close = (logged - recomputed).abs() <= ATOL + RTOL * recomputed.abs();
    !close
}

/// The rows that differ, the number of rows compared and the largest difference.
fn compare(rows: &[Row]) -> (Vec<Differing>, usize, f64) {
    let (mut compared, mut max_abs) = (0, 0.0f64);
    let mut differing = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let (Some(logged), Some(recomputed)) = (r.logged, r.recomputed) else {
            continue;
        };
        compared += 1;
        let d = (logged - recomputed).abs();
        max_abs = if d.is_nan() { f64::NAN } else { max_abs.max(d) };
        if differs(logged, recomputed) {
            differing.push(Differing {
                row: i,
                step: r.step,
                group: r.group.clone(),
                logged,
                recomputed,
            });
        }
    }
    (differing, compared, max_abs)
}

/// Check the dump IN (already spooled as `input`, read from `path` with `config`'s
/// `DumpOptions::of`) against advcalc's recomputation under the trainer's convention.
pub fn check(
    config: &Config,
    trainer: Trainer,
    input: &Dataset,
    path: &Path,
    layout: Layout,
) -> Result<LoggedCheck> {
    let dump = &crate::io::trainers::DumpOptions::of(config);
    let (c, convention) = check_config(config, trainer)?;
    let rows = recompute(&c, input, layout)?;
    let (differing, compared, max_abs) = compare(&rows);
    // the groups' scores, for the fragile-group attribution
    let mut groups: BTreeMap<(i64, &str), Vec<f64>> = BTreeMap::new();
    for r in &rows {
        groups.entry((r.step, &r.group)).or_default().push(r.score);
    }
    let fragile = differing
        .iter()
        .filter(|d| {
            groups
                .get(&(d.step, d.group.as_str()))
                .is_some_and(|s| fragile_groups(std::slice::from_ref(s)).any())
        })
        .count();
    let mut worst = differing.clone();
    worst.sort_by(|a, b| {
        (b.logged - b.recomputed)
            .abs()
            .total_cmp(&(a.logged - a.recomputed).abs())
    });
    worst.truncate(LISTED);
    let mut result = LoggedCheck {
        trainer,
        estimator: Estimator::Grpo.name(),
        convention: convention.name(),
        rows: rows.len(),
        compared,
        differing: differing.len(),
        fragile,
        max_abs,
        worst,
        causes: Vec::new(),
    };
    if fragile > 0 {
        result.causes.push(format!(
            "{fragile} differing row(s) are in numerically fragile groups (equal inexact scores or a tight spread), where {}'s float32 arithmetic departs from the exact answer advcalc writes (docs/conventions.md, Float residue)",
            trainer.title()
        ));
    }
    if result.warns() {
        result
            .causes
            .extend(known_causes(trainer, input, path, dump, layout, &c)?);
    }
    Ok(result)
}

/// Whether the logged advantages match under `config` (every compared row within tolerance).
fn matches(config: &Config, input: &Dataset, layout: Layout) -> bool {
    recompute(config, input, layout)
        .map(|rows| {
            let (differing, compared, _) = compare(&rows);
            compared > 0 && differing.is_empty()
        })
        .unwrap_or(false)
}

/// Try the known alternatives one at a time; each that makes every row match is a cause.
fn known_causes(
    trainer: Trainer,
    input: &Dataset,
    path: &Path,
    dump: &DumpOptions,
    layout: Layout,
    c: &Config,
) -> Result<Vec<String>> {
    let mut causes = Vec::new();
    let spool =
        |d: &DumpOptions| Input::open(&InputSource::dump(path.to_path_buf(), trainer), true, d);
    match trainer {
        Trainer::OpenInstruct => {
            let mut other = c.clone();
            let by_std = c.algorithm.norm_adv_by_std_in_grpo;
            other.algorithm.norm_adv_by_std_in_grpo = !by_std;
            if matches(&other, input, layout) {
                causes.push(if by_std {
                    "the logged advantages are open-instruct's `centered` normalisation (score − group mean; its default advantage_normalization_type): pass --no-norm-adv-by-std".to_string()
                } else {
                    "the logged advantages are open-instruct's `standard` normalisation ((score − mean)/(std + 1e-8)): drop --no-norm-adv-by-std".to_string()
                });
            }
        }
        Trainer::Trl => {
            // another group size: a divisor of every file's row count
            let rows = input.rows();
            let given = used_group_size(path, trainer, dump);
            for n in (1..=rows.min(256)).filter(|&n| rows.is_multiple_of(n) && Some(n) != given) {
                let d = DumpOptions {
                    group_size: Some(n),
                    ..dump.clone()
                };
                let Ok(input) = spool(&d) else { continue };
                let mut with_n = c.clone();
                with_n.algorithm.ext.group_size = Some(n);
                if matches(&with_n, &Dataset::single(&input.parquet), layout) {
                    causes.push(format!(
                        "the logged advantages match groups of {n} consecutive rows, not {}: set algorithm.group_size={n} (TRL's num_generations)",
                        given.map_or("the inferred size".to_string(), |g| g.to_string())
                    ));
                    break;
                }
            }
            if dump.reward_weights.is_empty() && causes.is_empty() {
                causes.push("TRL's reward_weights are not in the file and were taken as 1.0 each: with other weights every group whose reward columns differ changes (set algorithm.trl.reward_weights)".to_string());
            }
        }
        Trainer::NemoRl | Trainer::PrimeRl => {}
    }
    Ok(causes)
}

/// The group size the reader used (given, or inferred).
fn used_group_size(path: &Path, trainer: Trainer, dump: &DumpOptions) -> Option<usize> {
    dump.group_size.or_else(|| {
        Input::open(&InputSource::dump(path.to_path_buf(), trainer), true, dump)
            .ok()?
            .trainer?
            .group_size
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float32_rounding_is_not_a_difference() {
        // TRL's float32 advantage against advcalc's exact one (the TRL fixture, group 2)
        assert!(!differs(-0.4998001158237457, -0.49980011582374573));
        assert!(!differs(1e-7, 0.0));
        assert!(differs(0.5772, 0.0));
        assert!(differs(-0.4998, -0.4999));
        assert!(differs(f64::NAN, 0.0));
    }
}
