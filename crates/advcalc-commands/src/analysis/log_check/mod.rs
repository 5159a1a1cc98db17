//! What a trainer logged per step against the same metrics recomputed from the steps' dumps
//! under the run's configuration (docs/check.md): `advcalc check`, and `advcalc view --log`.
//!
//! `io::logs` reads the log (verl's file or console logger, TensorBoard events, TRL's
//! trainer_state.json); `recompute` runs the variant's passes over the dumps and sums per
//! step; this module pairs the steps and metrics, gives each pair a verdict against a
//! tolerance scaled to the metric, finds the first divergence and, for advantages that
//! diverge, tries the likeliest wrong setting (the other `norm_adv_by_std_in_grpo`).

mod recompute;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::analysis::collect::{CompareOptions, Variant};
use crate::analysis::table::Table;
use crate::error::{Error, Result};
use crate::io::logs::{self, LogFormat, Logged};
use crate::numbers::num;

use recompute::{StepSums, clip_ratios, metrics, recompute};

/// Relative tolerance: the trainers compute in float32, advcalc in f64; a mean over a step's
/// tokens in float32 stays well within 1e-5 of the exact one.
pub const RTOL: f64 = 1e-5;

/// How to check, beyond the run's variant.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The log: a file or directory `io::logs::read` takes.
    pub log: PathBuf,
    /// The dumps and how to read them (`compare`'s options; `input` is the dumps).
    pub read: CompareOptions,
    /// `data.max_response_length`, for `response_length/clip_ratio`.
    pub max_response_length: Option<usize>,
    /// Other settings to try when advantages diverge: (what differs, the variant).
    pub alternatives: Vec<(String, Variant)>,
}

/// The settings tried when the advantages diverge, as `CheckOptions::alternatives` takes
/// them: `variant` with the other `norm_adv_by_std_in_grpo` (the likeliest wrong setting,
/// verl #7893).
pub fn likely_alternatives(variant: &Variant) -> Vec<(String, Variant)> {
    let mut other = variant.clone();
    let norm = !variant.config.algorithm.norm_adv_by_std_in_grpo;
    other.config.algorithm.norm_adv_by_std_in_grpo = norm;
    vec![(format!("norm_adv_by_std_in_grpo={norm}"), other)]
}

/// One metric of one step.
#[derive(Debug, Clone)]
pub struct Compared {
    pub step: i64,
    pub metric: String,
    pub logged: f64,
    pub recomputed: f64,
    /// The largest difference that still agrees.
    pub tolerance: f64,
}

impl Compared {
    pub fn difference(&self) -> f64 {
        self.logged - self.recomputed
    }

    pub fn agrees(&self) -> bool {
        (self.logged - self.recomputed).abs() <= self.tolerance
    }
}

/// What `check` found.
#[derive(Debug, Clone)]
pub struct CheckReport {
    pub log: String,
    pub format: LogFormat,
    pub dumps: String,
    /// The variant's label (the estimator, or the config's stem).
    pub label: String,
    pub compared: Vec<Compared>,
    /// Metrics the log holds that advcalc does not recompute, with why.
    pub not_recomputed: Vec<(String, String)>,
    pub steps_only_logged: Vec<i64>,
    pub steps_only_dumped: Vec<i64>,
    /// The likeliest cause of diverging advantages, when a tried setting explains them.
    pub causes: Vec<String>,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

impl CheckReport {
    /// The first step and metric that diverge (steps in order, metrics by name).
    pub fn first_divergence(&self) -> Option<&Compared> {
        self.compared.iter().find(|c| !c.agrees())
    }

    pub fn diverging(&self) -> usize {
        self.compared.iter().filter(|c| !c.agrees()).count()
    }
}

/// Check `opts.log` against the dumps under `variant`.
pub fn check(variant: &Variant, opts: &CheckOptions) -> Result<CheckReport> {
    let logged = logs::read(&opts.log)?;
    let recomputed = recompute(variant, opts)?;
    let dumps = recomputed.opened.dataset.name.clone();
    let mut notes = logged.notes.clone();
    if let Some(f) = recomputed
        .opened
        .file
        .as_ref()
        .and_then(|f| f.trainer.as_ref())
    {
        notes.extend(f.notes.iter().cloned());
    }
    let (steps, steps_only_logged, steps_only_dumped) =
        pair_steps(&logged, &recomputed.steps, &dumps)?;
    let mut compared = Vec::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut recomputable: BTreeSet<String> = BTreeSet::new();
    for &(step, key) in &steps {
        let sums = &recomputed.steps[&key];
        let ours = step_metrics(sums, opts.max_response_length);
        recomputable.extend(ours.keys().cloned());
        for (name, &value) in &logged.steps[&step] {
            names.insert(name.clone());
            if let Some(&mine) = ours.get(name) {
                compared.push(Compared {
                    step,
                    metric: name.clone(),
                    logged: value,
                    recomputed: mine,
                    tolerance: tolerance(name, mine, &ours, logged.resolution(step, name)),
                });
            }
        }
    }
    let not_recomputed = names
        .iter()
        .filter(|n| !recomputable.contains(*n))
        .map(|n| (n.clone(), why_not(n, opts)))
        .collect();
    let mut report = CheckReport {
        log: logged.name.clone(),
        format: logged.format,
        dumps,
        label: variant.label.clone(),
        compared,
        not_recomputed,
        steps_only_logged,
        steps_only_dumped,
        causes: Vec::new(),
        notes,
        warnings: recomputed.warnings.clone(),
    };
    report.causes = causes(&report, &logged, &steps, opts)?;
    // TRL's logged reward is the weighted sum of its reward functions, with weights no file
    // records
    let reward_differs = report
        .compared
        .iter()
        .any(|c| !c.agrees() && (c.metric == "reward" || c.metric == "reward_std"));
    if logged.format == LogFormat::TrlState
        && reward_differs
        && crate::io::trainers::DumpOptions::of(&variant.config)
            .reward_weights
            .is_empty()
    {
        report.causes.push("TRL's reward_weights: the log's reward is the weighted sum of the reward functions, and neither file records the weights (1.0 each was assumed); give them with --set algorithm.trl.reward_weights=[...]".into());
    }
    Ok(report)
}

/// The steps both hold, as (log step, dump step key); the ones only one holds.
#[allow(clippy::type_complexity)]
fn pair_steps(
    logged: &Logged,
    dumped: &BTreeMap<Option<i64>, StepSums>,
    dumps: &str,
) -> Result<(Vec<(i64, Option<i64>)>, Vec<i64>, Vec<i64>)> {
    let dump_steps: Vec<Option<i64>> = dumped.keys().copied().collect();
    if dump_steps == [None] {
        // one training batch without a step: it is the log's only step, or nothing is
        if logged.steps.len() == 1 {
            let &step = logged.steps.keys().next().expect("one");
            return Ok((vec![(step, None)], Vec::new(), Vec::new()));
        }
        return Err(Error::usage(format!(
            "{dumps}: the dumps have no step (no step column, no step=N in the paths), and the log has {} steps: which one they are is not known",
            logged.steps.len()
        ))
        .with_hint("give the run's dump directory (one file per step), or the dump of one step with a log of that step"));
    }
    let ours: BTreeSet<i64> = dump_steps.iter().flatten().copied().collect();
    let theirs: BTreeSet<i64> = logged.steps.keys().copied().collect();
    let both: Vec<(i64, Option<i64>)> = ours.intersection(&theirs).map(|&s| (s, Some(s))).collect();
    if both.is_empty() {
        return Err(Error::data(format!(
            "{}: no step of the log ({}) is a step of the dumps ({dumps}: {})",
            logged.name,
            span(&theirs),
            span(&ours)
        ))
        .with_hint("a log of another run, or dumps of another run: check the paths"));
    }
    Ok((
        both,
        theirs.difference(&ours).copied().collect(),
        ours.difference(&theirs).copied().collect(),
    ))
}

fn span(steps: &BTreeSet<i64>) -> String {
    match (steps.first(), steps.last()) {
        (Some(a), Some(b)) if a == b => format!("step {a}"),
        (Some(a), Some(b)) => format!("steps {a}..{b}, {} of them", steps.len()),
        _ => "no step".into(),
    }
}

/// A step's recomputed metrics, `clip_ratio` with the configured maximum.
fn step_metrics(s: &StepSums, max_response_length: Option<usize>) -> BTreeMap<String, f64> {
    let mut m = metrics(s);
    if max_response_length.is_some() {
        let (all, non_aborted) = clip_ratios(s);
        m.insert("response_length/clip_ratio".into(), all);
        if s.length_non_aborted.count() > 0 {
            m.insert("response_length_non_aborted/clip_ratio".into(), non_aborted);
        }
    }
    m
}

/// The tolerance of one metric: float32 residue relative to the metric's scale (its
/// family's largest magnitude: `critic/advantages/mean` is judged against the step's
/// largest |advantage|, since a mean near 0 has no scale of its own), plus the log's own
/// resolution.
fn tolerance(name: &str, value: f64, ours: &BTreeMap<String, f64>, resolution: f64) -> f64 {
    let family = name.rsplit_once('/').map_or(name, |(f, _)| f);
    let scale = ["max", "min", "mean"]
        .iter()
        .filter_map(|s| ours.get(&format!("{family}/{s}")))
        .fold(value.abs(), |m, v| m.max(v.abs()));
    RTOL * scale.max(1e-3) + resolution
}

/// Why a logged metric is not recomputed.
fn why_not(name: &str, opts: &CheckOptions) -> String {
    let prefix = name.split('/').next().unwrap_or(name);
    if name.starts_with("critic/values/") || name == "critic/vf_explained_var" {
        return "needs the critic's values column in the dumps".into();
    }
    if name.starts_with("rewards/") {
        return "one reward function's: the dump's score is their weighted sum".into();
    }
    match prefix {
        "timing_s"
        | "timing_per_token_ms"
        | "perf"
        | "global_seqlen"
        | "step_time"
        | "total_flos"
        | "train_runtime"
        | "train_samples_per_second"
        | "train_steps_per_second" => "time and throughput: not in the dumps".into(),
        "critic" => "the critic's update: not in the dumps".into(),
        "actor" | "loss" | "train_loss" | "grad_norm" | "learning_rate" | "kl" | "entropy"
        | "clip_ratio" => {
            "the update's (it needs the policy's log-probs after the rollout; docs/loss.md)".into()
        }
        "prompt_length" => "the dumps hold responses only (no prompt lengths)".into(),
        "response_length" | "response_length_non_aborted"
            if name.ends_with("clip_ratio") && opts.max_response_length.is_none() =>
        {
            "needs data.max_response_length (-c a trainer YAML with it, or --max-response-length)"
                .into()
        }
        "completions" => {
            "token counts: TRL's completions file holds the text, without its special tokens".into()
        }
        "num_tokens" => "a running total since the start of training".into(),
        "training" | "val-core" | "val-aux" | "val" | "epoch" => {
            "not from the training batch".into()
        }
        "num_turns" => "needs the rollout's turn counts (__num_turns__): not in the dumps".into(),
        _ => "advcalc does not compute it".into(),
    }
}

/// For diverging advantages: the other `norm_adv_by_std_in_grpo` (and any other
/// alternative the command line gave), recomputed; a setting under which every diverging
/// advantage metric agrees is the likely cause.
fn causes(
    report: &CheckReport,
    logged: &Logged,
    steps: &[(i64, Option<i64>)],
    opts: &CheckOptions,
) -> Result<Vec<String>> {
    let diverging: Vec<&Compared> = report
        .compared
        .iter()
        .filter(|c| !c.agrees() && c.metric.starts_with("critic/advantages/"))
        .collect();
    if diverging.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (what, alternative) in &opts.alternatives {
        let sums = recompute(alternative, opts)?;
        let all_agree = diverging.iter().all(|c| {
            let key = steps.iter().find(|(s, _)| *s == c.step).map(|(_, k)| *k);
            let Some(s) = key.and_then(|k| sums.steps.get(&k)) else {
                return false;
            };
            let ours = step_metrics(s, opts.max_response_length);
            ours.get(&c.metric).is_some_and(|&v| {
                Compared {
                    recomputed: v,
                    tolerance: tolerance(&c.metric, v, &ours, logged.resolution(c.step, &c.metric)),
                    ..(*c).clone()
                }
                .agrees()
            })
        });
        if all_agree {
            out.push(format!(
                "the logged advantages are the ones {what} gives, not the configuration's: a setting the trainer did not apply (verl #7893: grpo_vectorized ignored norm_adv_by_std_in_grpo)"
            ));
        }
    }
    Ok(out)
}

impl CheckReport {
    /// The report as JSON (docs/check.md).
    pub fn to_json(&self) -> Value {
        let first = self.first_divergence();
        json!({
            "log": self.log,
            "format": self.format.name(),
            "dumps": self.dumps,
            "variant": self.label,
            "rtol": RTOL,
            "compared": self.compared.iter().map(|c| json!({
                "step": c.step,
                "metric": c.metric,
                "logged": c.logged,
                "recomputed": c.recomputed,
                "difference": c.difference(),
                "tolerance": c.tolerance,
                "agrees": c.agrees(),
            })).collect::<Vec<_>>(),
            "diverging": self.diverging(),
            "first_divergence": first.map(|c| json!({"step": c.step, "metric": c.metric})),
            "likely_causes": self.causes,
            "not_recomputed": self.not_recomputed.iter().map(|(m, why)| json!({"metric": m, "why": why})).collect::<Vec<_>>(),
            "steps_only_in_log": self.steps_only_logged,
            "steps_only_in_dumps": self.steps_only_dumped,
            "notes": self.notes,
            "warnings": self.warnings,
        })
    }

    /// The report as text: a line per step, the diverging metrics in full, the first
    /// divergence and its likely cause, what was not recomputed.
    pub fn render(&self) -> String {
        let mut out = format!(
            "advcalc check: {} ({}) against {} under {}\n",
            self.log,
            self.format.name(),
            self.dumps,
            self.label
        );
        for n in &self.notes {
            out += &format!("note: {n}\n");
        }
        let mut by_step: BTreeMap<i64, (usize, usize)> = BTreeMap::new();
        for c in &self.compared {
            let e = by_step.entry(c.step).or_default();
            e.0 += 1;
            e.1 += usize::from(!c.agrees());
        }
        out += "\nstep  metrics  agree  differ\n";
        for (step, (n, bad)) in &by_step {
            out += &format!("{step:>4}  {n:>7}  {:>5}  {bad:>6}\n", n - bad);
        }
        let bad: Vec<&Compared> = self.compared.iter().filter(|c| !c.agrees()).collect();
        if !bad.is_empty() {
            out += "\ndiffering (|logged − recomputed| > tolerance)\n";
            let mut table = Table::new(
                "step",
                ["metric", "logged", "recomputed", "difference", "tolerance"].map(String::from),
            )
            .left_aligned(1);
            for c in &bad {
                table.row(
                    &c.step.to_string(),
                    vec![
                        c.metric.clone(),
                        num(c.logged),
                        num(c.recomputed),
                        num(c.difference()),
                        num(c.tolerance),
                    ],
                );
            }
            for line in table.render().lines() {
                out += &format!("  {line}\n");
            }
        }
        if let Some(c) = self.first_divergence() {
            out += &format!(
                "\nfirst divergence: step {}, {} (logged {}, recomputed {})\n",
                c.step,
                c.metric,
                num(c.logged),
                num(c.recomputed)
            );
            for cause in &self.causes {
                out += &format!("likely cause: {cause}\n");
            }
        }
        if !self.not_recomputed.is_empty() {
            let mut why: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (m, w) in &self.not_recomputed {
                why.entry(w.as_str()).or_default().push(m.as_str());
            }
            out += &format!("\nnot recomputed ({} metrics)\n", self.not_recomputed.len());
            for (w, ms) in why {
                out += &format!("  {w}: {}\n", ms.join(", "));
            }
        }
        if !self.steps_only_logged.is_empty() {
            out += &format!(
                "note: {} logged step(s) have no dump: {}\n",
                self.steps_only_logged.len(),
                list(&self.steps_only_logged)
            );
        }
        if !self.steps_only_dumped.is_empty() {
            out += &format!(
                "note: {} dumped step(s) are not in the log: {}\n",
                self.steps_only_dumped.len(),
                list(&self.steps_only_dumped)
            );
        }
        let n = self.diverging();
        out += &format!(
            "\n{} of {} logged values agree with the dumps{}\n",
            self.compared.len() - n,
            self.compared.len(),
            if n == 0 {
                ""
            } else {
                "; see the first divergence above"
            }
        );
        out
    }
}

fn list(steps: &[i64]) -> String {
    let shown: Vec<String> = steps.iter().take(10).map(i64::to_string).collect();
    let more = steps.len().saturating_sub(10);
    if more > 0 {
        format!("{}, … ({more} more)", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
