//! `--metrics`: verl's metric names and values per training batch (reference §2.2, §3.2–3.4)
//! plus advcalc's own. Row groups contribute token sums and per-row values per step in the
//! statistics pass; they are merged in row-group order and finished per step.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::data::RowGroup;
use crate::data::TokenRole;
use crate::job::{Job, Plan};
use crate::loss::AggMode;
use crate::loss::length_bias::LengthBias;
use crate::pipeline::Pipeline;
use crate::plan::training_batches;
use crate::shaping::correction::{
    self, Correction, IsLevel, RsAggregate, RsOption, RsStatistic, SAFETY_BOUND,
};

/// Token-level sums of one rejection option over a step.
#[derive(Debug, Clone, Default)]
struct RsTokens {
    stat: f64,
    clamped: f64,
    clamped_sq: f64,
    high: f64,
    low: f64,
    rejected: f64,
    max: Option<f64>,
    min: Option<f64>,
}

/// Per-row values of one step.
#[derive(Debug, Clone, Default)]
struct RowValues {
    valid: bool,
    l_old: f64,
    l_rollout: f64,
    seq_log_ratio: f64,
    is_mean: f64,
    is_raw_mean: f64,
    rs_value: Vec<f64>,
    rs_rejected: Vec<bool>,
    any_rejected: bool,
}

/// One step's partial metrics.
#[derive(Debug, Clone, Default)]
pub struct StepParts {
    n: f64,
    kl: f64,
    k3: f64,
    rho2: f64,
    w: f64,
    w_clamped: f64,
    w_clamped_sq: f64,
    above: f64,
    below: f64,
    oob: f64,
    w_max: Option<f64>,
    w_min: Option<f64>,
    rs: Vec<RsTokens>,
    rejected: f64,
    rows: Vec<RowValues>,
    /// Advantage statistics over valid tokens (pass 2).
    adv: crate::estimators::moments::Moments,
    adv_min: Option<f64>,
    adv_max: Option<f64>,
    /// The loss stage's per-row sums (pass 2), by global row.
    pub loss_rows: Vec<(usize, crate::loss::row::RowSums)>,
}

fn fmax(a: Option<f64>, b: f64) -> Option<f64> {
    Some(a.map_or(b, |a| a.max(b)))
}
fn fmin(a: Option<f64>, b: f64) -> Option<f64> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// The larger / smaller of two optional extremes (`None`: nothing seen yet).
fn max_of_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    b.map_or(a, |v| fmax(a, v))
}
fn min_of_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    b.map_or(a, |v| fmin(a, v))
}

impl StepParts {
    pub fn merge(&mut self, o: StepParts) {
        self.n += o.n;
        self.kl += o.kl;
        self.k3 += o.k3;
        self.rho2 += o.rho2;
        self.w += o.w;
        self.w_clamped += o.w_clamped;
        self.w_clamped_sq += o.w_clamped_sq;
        self.above += o.above;
        self.below += o.below;
        self.oob += o.oob;
        self.loss_rows.extend(o.loss_rows);
        self.w_max = max_of_opt(self.w_max, o.w_max);
        self.w_min = min_of_opt(self.w_min, o.w_min);
        if self.rs.len() < o.rs.len() {
            self.rs.resize(o.rs.len(), RsTokens::default());
        }
        for (a, b) in self.rs.iter_mut().zip(o.rs) {
            a.stat += b.stat;
            a.clamped += b.clamped;
            a.clamped_sq += b.clamped_sq;
            a.high += b.high;
            a.low += b.low;
            a.rejected += b.rejected;
            a.max = max_of_opt(a.max, b.max);
            a.min = min_of_opt(a.min, b.min);
        }
        self.rejected += o.rejected;
        self.rows.extend(o.rows);
        self.adv.merge(&o.adv);
        self.adv_min = min_of_opt(self.adv_min, o.adv_min);
        self.adv_max = max_of_opt(self.adv_max, o.adv_max);
    }
}

pub type Parts = BTreeMap<Option<i64>, StepParts>;

/// The loss stage's per-row sums of an input of `rows` rows, by row, from pass 2's parts.
pub fn loss_rows(parts: &Parts, rows: usize) -> Vec<crate::loss::row::RowSums> {
    let mut out = vec![crate::loss::row::RowSums::default(); rows];
    for (r, sums) in parts.values().flat_map(|p| &p.loss_rows) {
        out[*r] = *sums;
    }
    out
}

pub fn merge(into: &mut Parts, other: Parts) {
    for (step, parts) in other {
        into.entry(step).or_default().merge(parts);
    }
}

/// The thresholds a rejection option's metrics compare with: (upper, lower-or-0, is_k1).
fn rs_bounds(o: &RsOption) -> (f64, f64, bool) {
    match o.lower {
        Some(lo) => (o.upper, lo, true),
        None => (o.upper, 0.0, false),
    }
}

fn token_stat(o: &RsOption, lr: f32) -> f32 {
    let x = lr.clamp(-SAFETY_BOUND, SAFETY_BOUND);
    match o.statistic {
        RsStatistic::K1 => -x,
        RsStatistic::K2 => 0.5 * x * x,
        RsStatistic::K3 => x.exp() - 1.0 - x,
    }
}

/// Pass 1: the rollout-correction metric parts of a row group (original mask).
pub fn correction_parts(pipeline: &Pipeline, c: &Correction, group: &RowGroup) -> Parts {
    let mut parts = Parts::new();
    let (Some(old), Some(rollout)) = (
        pipeline.old_log_probs(group),
        group.token(TokenRole::RolloutLogProbs),
    ) else {
        return parts;
    };
    let mask = &group.mask.values;
    for i in 0..group.rows() {
        let s = group.span(i);
        let (o, r, m) = (&old[s.clone()], &rollout[s.clone()], &mask[s.clone()]);
        let p = parts.entry(group.step_of(i)).or_default();
        let mut lr = vec![0.0f32; m.len()];
        correction::log_ratio_row(o, r, &mut lr);
        let n: f64 = m.iter().map(|&x| x as f64).sum();
        let mut row = RowValues {
            valid: n > 0.0,
            l_old: correction::masked_sum(o, m) / (n + 1e-8),
            l_rollout: correction::masked_sum(r, m) / (n + 1e-8),
            seq_log_ratio: correction::masked_sum(&lr, m),
            ..Default::default()
        };
        p.n += n;
        for t in 0..m.len() {
            if m[t] == 0.0 {
                continue;
            }
            p.kl += (r[t] - o[t]) as f64;
            p.k3 += (lr[t].exp() - lr[t] - 1.0) as f64;
            let rho = lr[t].clamp(-SAFETY_BOUND, SAFETY_BOUND).exp();
            p.rho2 += (rho * rho) as f64;
        }
        if let Some(spec) = &c.is {
            let mut raw = vec![0.0f32; m.len()];
            correction::raw_weights_row(spec, &lr, m, &mut raw);
            let mut w = raw.clone();
            correction::truncate_weights(spec, &mut w);
            let upper = spec.upper as f32;
            let lower_m = spec.lower.unwrap_or(1.0 / spec.upper) as f32;
            for t in 0..m.len() {
                if m[t] == 0.0 {
                    continue;
                }
                let c = w[t].clamp(0.0, upper) as f64;
                p.w += w[t] as f64;
                p.w_clamped += c;
                p.w_clamped_sq += c * c;
                if raw[t] > upper {
                    p.above += 1.0;
                }
                if raw[t] < lower_m {
                    p.below += 1.0;
                }
                if let Some(lo) = spec.lower
                    && (raw[t] < lo as f32 || raw[t] > upper)
                {
                    p.oob += 1.0;
                }
                p.w_max = fmax(p.w_max, w[t] as f64);
                p.w_min = fmin(p.w_min, w[t] as f64);
            }
            row.is_mean = correction::masked_sum(&w, m) / (n + 1e-8);
            row.is_raw_mean = correction::masked_sum(&raw, m) / (n + 1e-8);
        }
        if !c.rs.is_empty() {
            if p.rs.len() < c.rs.len() {
                p.rs.resize(c.rs.len(), RsTokens::default());
            }
            let mut combined = vec![1.0f32; m.len()];
            for (k, option) in c.rs.iter().enumerate() {
                let (upper, lower, k1) = rs_bounds(option);
                let sequence = option.aggregate != RsAggregate::Token;
                let seq_value = option.sequence_statistic(&lr, m);
                let mut keep = vec![1.0f32; m.len()];
                option.apply(&lr, m, &mut keep);
                let acc = &mut p.rs[k];
                let mut token_sum = 0.0;
                for t in 0..m.len() {
                    combined[t] *= keep[t];
                    if m[t] == 0.0 {
                        continue;
                    }
                    let stat = if sequence {
                        seq_value as f32
                    } else {
                        token_stat(option, lr[t])
                    } as f64;
                    token_sum += stat;
                    acc.stat += stat;
                    let clamped = stat.clamp(lower, upper);
                    acc.clamped += clamped;
                    acc.clamped_sq += clamped * clamped;
                    if stat > upper {
                        acc.high += 1.0;
                    }
                    if k1 && stat < lower {
                        acc.low += 1.0;
                    }
                    acc.rejected += 1.0 - keep[t] as f64;
                    acc.max = fmax(acc.max, stat);
                    acc.min = fmin(acc.min, stat);
                }
                row.rs_value.push(if sequence {
                    seq_value
                } else {
                    token_sum / (n + 1e-8)
                });
                row.rs_rejected
                    .push((0..m.len()).any(|t| m[t] != 0.0 && keep[t] == 0.0));
            }
            for t in 0..m.len() {
                if m[t] != 0.0 {
                    p.rejected += 1.0 - combined[t] as f64;
                }
            }
            row.any_rejected = (0..m.len()).any(|t| m[t] != 0.0 && combined[t] <= 0.5);
        }
        p.rows.push(row);
    }
    parts
}

/// Pass 2: advantage statistics over the valid tokens of a row group.
pub fn advantage_parts(group: &RowGroup, mask: &[f32], advantages: &[f32]) -> Parts {
    let mut parts = Parts::new();
    for i in 0..group.rows() {
        let p = parts.entry(group.step_of(i)).or_default();
        for t in group.span(i) {
            if mask[t] != 0.0 {
                let a = advantages[t] as f64;
                p.adv.push(a);
                p.adv_min = fmin(p.adv_min, a);
                p.adv_max = fmax(p.adv_max, a);
            }
        }
    }
    parts
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0.0), |(s, n), x| (s + x, n + 1.0));
    if n > 0.0 { s / n } else { 0.0 }
}

fn unbiased_std(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v.iter().copied());
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

fn max_of(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(f64::NEG_INFINITY, f64::max)
}

fn min_of(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(f64::INFINITY, f64::min)
}

/// verl's `rollout_corr/...` metrics of one step.
/// verl's std of the clamped values from their sum and sum of squares over `n` valid
/// tokens: `sqrt(max(E[x²] − E[x]², 0))` with its 1e-8 guards, 0 for n ≤ 1.
fn clamped_std(sum: f64, sum_sq: f64, n: f64) -> f64 {
    let (ec, ec2) = (sum / (n + 1e-8), sum_sq / (n + 1e-8));
    if n > 1.0 {
        (ec2 - ec * ec).max(0.0).sqrt()
    } else {
        0.0
    }
}

pub fn correction_metrics(
    c: &Correction,
    p: &StepParts,
    is_norm: Option<f64>,
    out: &mut Map<String, Value>,
) {
    let mut put = |k: &str, v: f64| {
        out.insert(format!("rollout_corr/{k}"), Value::from(v));
    };
    let n = p.n;
    let rows = &p.rows;
    // off-policy diagnostics (§3.4)
    put("training_ppl", mean(rows.iter().map(|r| (-r.l_old).exp())));
    put("training_log_ppl", mean(rows.iter().map(|r| -r.l_old)));
    put("kl", p.kl / (n + 1e-8));
    put("k3_kl", p.k3 / (n + 1e-8));
    put(
        "rollout_ppl",
        mean(rows.iter().map(|r| (-r.l_rollout).exp())),
    );
    put("rollout_log_ppl", mean(rows.iter().map(|r| -r.l_rollout)));
    let diff: Vec<f64> = rows.iter().map(|r| r.l_rollout - r.l_old).collect();
    put("log_ppl_diff", mean(diff.iter().copied()));
    put("log_ppl_abs_diff", mean(diff.iter().map(|d| d.abs())));
    put("log_ppl_diff_max", max_of(diff.iter().copied()));
    put("log_ppl_diff_min", min_of(diff.iter().copied()));
    put("ppl_ratio", mean(diff.iter().map(|d| d.exp())));
    put("chi2_token", p.rho2 / (n + 1e-8) - 1.0);
    let bound = SAFETY_BOUND as f64;
    put(
        "chi2_seq",
        mean(
            rows.iter()
                .map(|r| (2.0 * r.seq_log_ratio.clamp(-bound, bound)).exp()),
        ) - 1.0,
    );
    // importance-sampling weights (§3.2), before batch normalisation
    if let Some(spec) = &c.is {
        let upper = spec.upper;
        let lower_m = spec.lower.unwrap_or(1.0 / upper);
        match spec.level {
            IsLevel::Sequence => {
                let s = rows.iter().map(|r| r.seq_log_ratio);
                put("rollout_is_max", max_of(s.clone()).min(bound).exp());
                put("rollout_is_min", min_of(s.clone()).exp());
                put(
                    "rollout_is_ratio_fraction_high",
                    mean(s.clone().map(|x| f64::from(x > upper.ln()))),
                );
                put(
                    "rollout_is_ratio_fraction_low",
                    mean(s.map(|x| f64::from(x < lower_m.ln()))),
                );
            }
            IsLevel::Token => {
                put("rollout_is_ratio_fraction_high", p.above / (n + 1e-8));
                put("rollout_is_ratio_fraction_low", p.below / (n + 1e-8));
                put("rollout_is_max", p.w_max.unwrap_or(f64::NEG_INFINITY));
                put("rollout_is_min", p.w_min.unwrap_or(f64::INFINITY));
            }
        }
        put("rollout_is_mean", p.w / (n + 1e-8));
        let (ec, ec2) = (p.w_clamped / (n + 1e-8), p.w_clamped_sq / (n + 1e-8));
        put(
            "rollout_is_std",
            clamped_std(p.w_clamped, p.w_clamped_sq, n),
        );
        put(
            "rollout_is_eff_sample_size",
            1.0 / (ec2 / ((ec + 1e-8) * (ec + 1e-8))),
        );
        let seq: Vec<f64> = rows.iter().map(|r| r.is_mean).collect();
        put("rollout_is_seq_mean", mean(seq.iter().copied()));
        put("rollout_is_seq_std", unbiased_std(&seq));
        put("rollout_is_seq_max", max_of(seq.iter().copied()));
        put("rollout_is_seq_min", min_of(seq.iter().copied()));
        put(
            "rollout_is_seq_max_deviation",
            max_of(seq.iter().map(|s| (s - 1.0).abs())),
        );
        put(
            "rollout_is_seq_fraction_high",
            mean(rows.iter().map(|r| f64::from(r.is_raw_mean > upper))),
        );
        put(
            "rollout_is_seq_fraction_low",
            mean(rows.iter().map(|r| f64::from(r.is_raw_mean < lower_m))),
        );
        if spec.lower.is_some() {
            put("rollout_is_oob_ratio", p.oob / (n + 1e-8));
        }
        if spec.batch_normalize {
            put("rollout_is_batch_norm_factor", is_norm.unwrap_or(1.0));
        }
    }
    // rejection sampling (§3.3)
    if !c.rs.is_empty() {
        for (k, option) in c.rs.iter().enumerate() {
            let (upper, lower, k1) = rs_bounds(option);
            let sequence = option.aggregate != RsAggregate::Token;
            let acc = p.rs.get(k).cloned().unwrap_or_default();
            let valid: Vec<f64> = rows
                .iter()
                .filter(|r| r.valid)
                .map(|r| r.rs_value[k])
                .collect();
            let prefix = format!("rollout_rs_{}", option.name);
            let mut put = |k: &str, v: f64| {
                out.insert(format!("rollout_corr/{prefix}_{k}"), Value::from(v));
            };
            put("mean", acc.stat / (n + 1e-8));
            if sequence && !valid.is_empty() {
                put("max", max_of(valid.iter().copied()));
                put("min", min_of(valid.iter().copied()));
                put(
                    "fraction_high",
                    mean(valid.iter().map(|&v| f64::from(v > upper))),
                );
                put(
                    "fraction_low",
                    if k1 {
                        mean(valid.iter().map(|&v| f64::from(v < lower)))
                    } else {
                        0.0
                    },
                );
            } else {
                put("max", acc.max.unwrap_or(f64::NEG_INFINITY));
                put("min", acc.min.unwrap_or(f64::INFINITY));
                put("fraction_high", acc.high / (n + 1e-8));
                put("fraction_low", if k1 { acc.low / (n + 1e-8) } else { 0.0 });
            }
            put("std", clamped_std(acc.clamped, acc.clamped_sq, n));
            if valid.is_empty() {
                for key in [
                    "seq_mean",
                    "seq_std",
                    "seq_max",
                    "seq_min",
                    "seq_max_deviation",
                    "seq_fraction_high",
                    "seq_fraction_low",
                ] {
                    put(key, 0.0);
                }
            } else {
                put("seq_mean", mean(valid.iter().copied()));
                put("seq_std", unbiased_std(&valid));
                put("seq_max", max_of(valid.iter().copied()));
                put("seq_min", min_of(valid.iter().copied()));
                put("seq_max_deviation", max_of(valid.iter().map(|v| v.abs())));
                put(
                    "seq_fraction_high",
                    mean(valid.iter().map(|&v| f64::from(v > upper))),
                );
                if k1 {
                    put(
                        "seq_fraction_low",
                        mean(valid.iter().map(|&v| f64::from(v < lower))),
                    );
                }
            }
            put("masked_fraction", acc.rejected / (n + 1e-8));
            let valid_rows = rows.iter().filter(|r| r.valid).count();
            let rejected_rows = rows.iter().filter(|r| r.valid && r.rs_rejected[k]).count();
            put(
                "seq_masked_fraction",
                if valid_rows > 0 {
                    rejected_rows as f64 / valid_rows as f64
                } else {
                    0.0
                },
            );
        }
        out.insert(
            "rollout_corr/rollout_rs_masked_fraction".into(),
            Value::from(p.rejected / (n + 1e-8)),
        );
        out.insert(
            "rollout_corr/rollout_rs_seq_masked_fraction".into(),
            Value::from(mean(rows.iter().map(|r| f64::from(r.any_rejected)))),
        );
    }
}

/// advcalc's own advantage statistics of one step.
pub fn advantage_metrics(p: &StepParts, out: &mut Map<String, Value>) {
    let std = if p.adv.n > 1.0 {
        (p.adv.m2 / (p.adv.n - 1.0)).sqrt()
    } else {
        0.0
    };
    out.insert("advcalc/advantage_mean".into(), Value::from(p.adv.mean));
    out.insert("advcalc/advantage_std".into(), Value::from(std));
    out.insert(
        "advcalc/advantage_min".into(),
        Value::from(p.adv_min.unwrap_or(0.0)),
    );
    out.insert(
        "advcalc/advantage_max".into(),
        Value::from(p.adv_max.unwrap_or(0.0)),
    );
}

/// The `--metrics` JSON: one object per training batch (a single object without a step
/// column), verl's metric names where verl has them.
pub fn to_json(job: &Job<'_>, prepared: &Plan, parts: &Parts) -> Value {
    let (stats, kl_metrics, constants, plan) = (
        &prepared.stats,
        &prepared.kl_metrics,
        &prepared.constants,
        &prepared.plan,
    );
    let has_rollout = job.has_rollout();
    let pipeline = job.pipeline;
    let empty = StepParts::default();
    let mut loss: BTreeMap<Option<i64>, crate::loss::metrics::StepMetrics> =
        match (&pipeline.loss, &prepared.loss) {
            (Some(stage), Some(plan)) => {
                let rows = loss_rows(parts, stats.rows());
                crate::loss::metrics::step_metrics(
                    &stage.spec,
                    pipeline.bypass,
                    &plan.partition,
                    &rows,
                )
                .into_iter()
                .collect()
            }
            _ => BTreeMap::new(),
        };
    let mut steps = Vec::new();
    for (step, rows) in training_batches(stats.step.as_deref(), stats.rows()) {
        let mut m = Map::new();
        if let Some(s) = step {
            m.insert("step".into(), Value::from(s));
        }
        if let Some(&(current, beta)) = kl_metrics.get(&step) {
            m.insert("actor/reward_kl_penalty".into(), Value::from(current));
            m.insert("actor/reward_kl_penalty_coeff".into(), Value::from(beta));
        }
        let p = parts.get(&step).unwrap_or(&empty);
        if let Some(c) = pipeline.correction_runs(has_rollout) {
            correction_metrics(c, p, constants.get(step).is_norm, &mut m);
        }
        m.insert("advcalc/rows".into(), Value::from(rows.len()));
        let valid: f64 = rows.iter().map(|&r| stats.valid[r]).sum();
        m.insert("advcalc/valid_tokens".into(), Value::from(valid));
        m.insert(
            "advcalc/rows_without_valid_token".into(),
            Value::from(rows.iter().filter(|&&r| stats.valid[r] == 0.0).count()),
        );
        if !stats.uid.is_empty() {
            let grouping =
                crate::estimators::groups::Grouping::by_key(rows.iter().map(|&r| &stats.uid[r]));
            let members = grouping.members();
            let mut histogram = std::collections::BTreeMap::new();
            for g in &members {
                *histogram.entry(g.len()).or_insert(0usize) += 1;
            }
            let flat = members
                .iter()
                .filter(|g| {
                    g.iter()
                        .all(|&i| stats.score[rows[i]] == stats.score[rows[g[0]]])
                })
                .count();
            m.insert("advcalc/groups".into(), Value::from(members.len()));
            m.insert(
                "advcalc/group_size_histogram".into(),
                Value::Object(
                    histogram
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), Value::from(v)))
                        .collect(),
                ),
            );
            m.insert(
                "advcalc/zero_variance_group_fraction".into(),
                Value::from(flat as f64 / members.len().max(1) as f64),
            );
        }
        m.insert(
            "advcalc/nan_rows_zeroed".into(),
            Value::from(plan.nan_rows()),
        );
        advantage_metrics(p, &mut m);
        if let Some(l) = loss.remove(&step) {
            m.extend(
                l.into_iter()
                    .map(|(name, value)| (name.to_string(), Value::from(value))),
            );
        }
        steps.push(Value::Object(m));
    }
    if stats.step.is_some() {
        Value::Array(steps)
    } else {
        steps.pop().unwrap_or(Value::Object(Map::new()))
    }
}

/// The length-bias view as JSON (`advcalc loss --json`, `docs/loss.md`), `configured` being
/// the run's `loss_agg_mode`.
pub fn length_bias_json(view: &LengthBias, configured: AggMode) -> Value {
    json!({
        "configured": configured.name(),
        "split": view.split,
        "length_quartile_bounds": view.bounds,
        "shortest": view.lengths.0,
        "longest": view.lengths.1,
        "modes": view.modes.iter().map(|m| json!({
            "loss_agg_mode": m.mode.name(),
            "share_by_length_quartile": m.quartiles,
            "share_positive": m.positive,
            "share_negative": 1.0 - m.positive,
            "token_weight_shortest_to_longest": m.short_to_long,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    //! Expected numbers are worked by hand from the reference's formulas (§3.2 IS metrics,
    //! §3.3 RS metrics, §3.4 off-policy diagnostics) on a two-row batch, never taken from
    //! advcalc. The batch (padding marked by mask 0):
    //!
    //! ```text
    //! row 0: mask [1, 1, 0]  old [-1, -0.5, -3]  rollout [-1, -1, -2]     log ρ [0, 0.5, (-1)]
    //! row 1: mask [1, 1]     old [-2, -1]        rollout [-1.5, -0.75]    log ρ [-0.5, -0.25]
    //! ```
    //!
    //! 4 valid tokens; ℓ = masked_mean(old) = [-0.75, -1.5], r = masked_mean(rollout) =
    //! [-1, -1.125]; S = Σ log ρ·m = [0.5, -0.75]. The values carry the 1e-8 guards of verl's
    //! masked means (≤ 4e-9 here) and f32 token arithmetic (exp in f32: ~1e-7), hence the
    //! tolerance.
    use super::*;
    use crate::config::{Config, ConfigSources};
    use crate::data::FloatBuffer;
    use crate::test_support::assert_close;

    const ATOL: f64 = 3e-7;
    const RTOL: f64 = 1e-6;

    const MASK: [&[f32]; 2] = [&[1.0, 1.0, 0.0], &[1.0, 1.0]];
    const OLD: [&[f32]; 2] = [&[-1.0, -0.5, -3.0], &[-2.0, -1.0]];
    const ROLLOUT: [&[f32]; 2] = [&[-1.0, -1.0, -2.0], &[-1.5, -0.75]];

    fn flat(rows: &[&[f32]]) -> FloatBuffer {
        FloatBuffer::from(rows.concat())
    }

    /// Rows `range` of the batch as one row group, with an optional step per row.
    fn group(range: std::ops::Range<usize>, step: Option<Vec<i64>>) -> RowGroup {
        let (mask, old, rollout) = (
            &MASK[range.clone()],
            &OLD[range.clone()],
            &ROLLOUT[range.clone()],
        );
        let mut offsets = vec![0];
        for r in mask {
            offsets.push(offsets.last().unwrap() + r.len());
        }
        let tokens = *offsets.last().unwrap();
        RowGroup {
            first_row: range.start,
            mask: crate::data::TokenColumn {
                offsets,
                values: flat(mask),
            },
            scores: FloatBuffer::from(vec![0.0f32; tokens]),
            scalar_scores: None,
            tokens: vec![
                (TokenRole::OldLogProbs, flat(old)),
                (TokenRole::RolloutLogProbs, flat(rollout)),
            ],
            reward_baselines: None,
            components: Vec::new(),
            uid: None,
            step,
            session: None,
            dropped_scores: 0,
            positive_log_probs: None,
        }
    }

    /// The `--set` overrides of a rollout_correction section: (option, threshold) for IS
    /// and rejection.
    fn rollout_correction(
        is: Option<(&str, crate::config::Value)>,
        rs: Option<(&str, crate::config::Value)>,
    ) -> Vec<String> {
        let yaml = |v: &crate::config::Value| crate::config::to_yaml::scalar(v);
        let key = "algorithm.rollout_correction";
        let mut sets = Vec::new();
        if let Some((option, threshold)) = is {
            sets.push(format!("{key}.rollout_is={option}"));
            sets.push(format!("{key}.rollout_is_threshold={}", yaml(&threshold)));
        }
        if let Some((option, threshold)) = rs {
            sets.push(format!("{key}.rollout_rs={option}"));
            sets.push(format!("{key}.rollout_rs_threshold={}", yaml(&threshold)));
        }
        sets
    }

    /// verl's defaults with `sets` applied to the rollout_correction section: the pipeline
    /// and its correction.
    fn pipeline(sets: Vec<String>) -> (Pipeline, Correction) {
        let config = Config::load(&ConfigSources {
            sets: &sets,
            ..Default::default()
        })
        .unwrap();
        let p = Pipeline::new(&config.algorithm);
        let c = p.correction.clone().expect("correction configured");
        (p, c)
    }

    fn metrics_of(cfg: Vec<String>, is_norm: Option<f64>) -> Map<String, Value> {
        let (p, c) = pipeline(cfg);
        let parts = correction_parts(&p, &c, &group(0..2, None));
        assert_eq!(parts.keys().collect::<Vec<_>>(), [&None]);
        let mut out = Map::new();
        correction_metrics(&c, &parts[&None], is_norm, &mut out);
        out
    }

    /// `out` has exactly the keys of `expected` (after the `rollout_corr/` prefix), each
    /// close to its value.
    #[track_caller]
    fn assert_metrics(out: &Map<String, Value>, expected: &[(&str, f64)]) {
        let mut want: Vec<String> = expected
            .iter()
            .map(|(k, _)| format!("rollout_corr/{k}"))
            .collect();
        want.sort();
        let got: Vec<String> = out.keys().cloned().collect();
        assert_eq!(got, want, "metric names");
        for (k, e) in expected {
            let key = format!("rollout_corr/{k}");
            let a = out[&key]
                .as_f64()
                .unwrap_or_else(|| panic!("{key}: {}", out[&key]));
            assert_close(&key, &[a], &[*e], ATOL, RTOL);
        }
    }

    /// §3.4 on the batch above (all 13 are always there in decoupled mode).
    const OFFPOLICY: [(&str, f64); 13] = [
        // mean(e^0.75, e^1.5) = (2.1170000166 + 4.4816890703)/2
        ("training_ppl", 3.2993445435),
        ("training_log_ppl", 1.125),
        // masked_mean(rollout − old) = (0 − 0.5 + 0.5 + 0.25)/4
        ("kl", 0.0625),
        // (0 + (e^0.5 − 1.5) + (e^−0.5 − 0.5) + (e^−0.25 − 0.75))/4
        // = (0.1487212707 + 0.1065306597 + 0.0288007831)/4
        ("k3_kl", 0.0710131784),
        // mean(e^1, e^1.125) = (2.7182818285 + 3.0802168489)/2
        ("rollout_ppl", 2.8992493387),
        ("rollout_log_ppl", 1.0625),
        // r − ℓ = [-0.25, 0.375]
        ("log_ppl_diff", 0.0625),
        ("log_ppl_abs_diff", 0.3125),
        ("log_ppl_diff_max", 0.375),
        ("log_ppl_diff_min", -0.25),
        // mean(e^−0.25, e^0.375) = (0.7788007831 + 1.4549914146)/2
        ("ppl_ratio", 1.1168960988),
        // (e^0 + e^1 + e^−1 + e^−0.5)/4 − 1
        ("chi2_token", 0.1731729823),
        // mean(e^(2·0.5), e^(2·−0.75)) − 1 = (2.7182818285 + 0.2231301601)/2 − 1
        ("chi2_seq", 0.4707059943),
    ];

    #[test]
    fn offpolicy_metrics_alone_with_verls_yaml_defaults() {
        // rollout_is and rollout_rs null: the correction step runs for its metrics only.
        let out = metrics_of(rollout_correction(None, None), None);
        assert_metrics(&out, &OFFPOLICY);
    }

    #[test]
    fn token_tis_and_token_k1_rejection_by_hand() {
        let cfg = rollout_correction(Some(("token", 1.5.into())), Some(("token_k1", 1.5.into())));
        let out = metrics_of(cfg, None);
        // IS, token TIS upper 1.5 (lower_m = 1/1.5): w_raw = e^logρ = [1, 1.6487213 | 0.6065307,
        // 0.7788008], w = min(w_raw, 1.5) = [1, 1.5 | 0.6065307, 0.7788008].
        // E[c] = 3.8853314/4 = 0.9713329; E[c²] = (1 + 2.25 + e^−1 + e^−0.5)/4 = 1.0561025;
        // std = √(E[c²] − E[c]²) = 0.3355816; ESS = E[c]²/E[c²] = 0.8933674.
        // Per row s = [1.25, 0.6926657]: unbiased std |Δ|/√2 = 0.3940948, max |s − 1| =
        // 0.3073343; raw row means [1.3243606, 0.6926657] are inside [0.667, 1.5].
        //
        // RS, token_k1 1.5: bounds L = ln(1/1.5) = -0.4054651, U = 0.4054651; k1 = −logρ =
        // [0, -0.5 | 0.5, 0.25]: one token above U, one below L, both rejected (2 of 4).
        // c = clamp(k1, L, U) = [0, L | U, 0.25]: E[c] = 0.0625, std = 0.3064633.
        // Per row masked means [-0.25, 0.375]: unbiased std 0.625/√2 = 0.4419417; none
        // outside [L, U]. Both rows lose a token.
        let mut expected = OFFPOLICY.to_vec();
        expected.extend([
            ("rollout_is_mean", 0.9713328607),
            ("rollout_is_max", 1.5),
            ("rollout_is_min", 0.6065306597),
            ("rollout_is_ratio_fraction_high", 0.25),
            ("rollout_is_ratio_fraction_low", 0.25),
            ("rollout_is_std", 0.3355815832),
            ("rollout_is_eff_sample_size", 0.8933673797),
            ("rollout_is_seq_mean", 0.9713328607),
            ("rollout_is_seq_std", 0.3940948478),
            ("rollout_is_seq_max", 1.25),
            ("rollout_is_seq_min", 0.6926657214),
            ("rollout_is_seq_max_deviation", 0.3073342786),
            ("rollout_is_seq_fraction_high", 0.0),
            ("rollout_is_seq_fraction_low", 0.0),
            ("rollout_rs_token_k1_mean", 0.0625),
            ("rollout_rs_token_k1_max", 0.5),
            ("rollout_rs_token_k1_min", -0.5),
            ("rollout_rs_token_k1_fraction_high", 0.25),
            ("rollout_rs_token_k1_fraction_low", 0.25),
            ("rollout_rs_token_k1_std", 0.3064632555),
            ("rollout_rs_token_k1_seq_mean", 0.0625),
            ("rollout_rs_token_k1_seq_std", 0.4419417382),
            ("rollout_rs_token_k1_seq_max", 0.375),
            ("rollout_rs_token_k1_seq_min", -0.25),
            ("rollout_rs_token_k1_seq_max_deviation", 0.375),
            ("rollout_rs_token_k1_seq_fraction_high", 0.0),
            ("rollout_rs_token_k1_seq_fraction_low", 0.0),
            ("rollout_rs_token_k1_masked_fraction", 0.5),
            ("rollout_rs_token_k1_seq_masked_fraction", 1.0),
            ("rollout_rs_masked_fraction", 0.5),
            ("rollout_rs_seq_masked_fraction", 1.0),
        ]);
        // 13 + 14 IS (no oob_ratio for TIS, no batch_norm_factor) + 15 RS (k1) + 2
        assert_eq!(expected.len(), 44);
        assert_metrics(&out, &expected);
    }

    #[test]
    fn sequence_is_and_sequence_k3_rejection_by_hand() {
        let mut cfg = rollout_correction(
            Some(("sequence", 2.0.into())),
            Some(("seq_mean_k3", 0.07.into())),
        );
        cfg.push("algorithm.rollout_correction.rollout_is_batch_normalize=true".into());
        let out = metrics_of(cfg, Some(0.75));
        // IS, sequence TIS 2.0: w = e^S = [e^0.5 ×2 | e^−0.75 ×2] = [1.6487213, 0.4723666],
        // both ≤ 2. max = e^0.5, min = e^−0.75; S > ln 2: none; S < ln 0.5: row 1 (1 of 2).
        // E[w] = 1.0605439; two equally weighted values: std = |Δ|/2 = 0.5881774;
        // ESS = E[w]²/E[w²] = 1.1247533/1.4707060 = 0.7647711. Per row s = the weights:
        // unbiased std |Δ|/√2 = 0.8318084, max |s − 1| = 0.6487213; raw row means below 0.5:
        // row 1. The batch-normalisation factor is the one passed in.
        //
        // RS, seq_mean_k3 0.07: k3 = e^x − 1 − x = [0, 0.1487213 | 0.1065307, 0.0288008],
        // row means [0.0743606, 0.0676657]: row 0 > 0.07 is rejected (2 of 4 tokens, 1 of
        // 2 rows). mean (token-weighted) = 0.0710132; c = min(value, 0.07) = [0.07, 0.0676657]
        // ×2: std = |Δ|/2 = 0.0011671; unbiased row std |Δ|/√2 = 0.0047340. No
        // seq_fraction_low for a k3 option.
        let mut expected = OFFPOLICY.to_vec();
        expected.extend([
            ("rollout_is_max", 1.6487212707),
            ("rollout_is_min", 0.4723665527),
            ("rollout_is_ratio_fraction_high", 0.0),
            ("rollout_is_ratio_fraction_low", 0.5),
            ("rollout_is_mean", 1.0605439117),
            ("rollout_is_std", 0.5881773590),
            ("rollout_is_eff_sample_size", 0.7647710788),
            ("rollout_is_seq_mean", 1.0605439117),
            ("rollout_is_seq_std", 0.8318083981),
            ("rollout_is_seq_max", 1.6487212707),
            ("rollout_is_seq_min", 0.4723665527),
            ("rollout_is_seq_max_deviation", 0.6487212707),
            ("rollout_is_seq_fraction_high", 0.0),
            ("rollout_is_seq_fraction_low", 0.5),
            ("rollout_is_batch_norm_factor", 0.75),
            ("rollout_rs_seq_mean_k3_mean", 0.0710131784),
            ("rollout_rs_seq_mean_k3_max", 0.0743606354),
            ("rollout_rs_seq_mean_k3_min", 0.0676657214),
            ("rollout_rs_seq_mean_k3_fraction_high", 0.5),
            ("rollout_rs_seq_mean_k3_fraction_low", 0.0),
            ("rollout_rs_seq_mean_k3_std", 0.0011671393),
            ("rollout_rs_seq_mean_k3_seq_mean", 0.0710131784),
            ("rollout_rs_seq_mean_k3_seq_std", 0.0047340191),
            ("rollout_rs_seq_mean_k3_seq_max", 0.0743606354),
            ("rollout_rs_seq_mean_k3_seq_min", 0.0676657214),
            ("rollout_rs_seq_mean_k3_seq_max_deviation", 0.0743606354),
            ("rollout_rs_seq_mean_k3_seq_fraction_high", 0.5),
            ("rollout_rs_seq_mean_k3_masked_fraction", 0.5),
            ("rollout_rs_seq_mean_k3_seq_masked_fraction", 0.5),
            ("rollout_rs_masked_fraction", 0.5),
            ("rollout_rs_seq_masked_fraction", 0.5),
        ]);
        assert_metrics(&out, &expected);
        // Normalising without a factor (none computed) reports 1.
        let mut cfg = rollout_correction(Some(("sequence", 2.0.into())), None);
        cfg.push("algorithm.rollout_correction.rollout_is_batch_normalize=true".into());
        let out = metrics_of(cfg, None);
        assert_eq!(out["rollout_corr/rollout_is_batch_norm_factor"], 1.0);
    }

    #[test]
    fn icepop_reports_the_out_of_bounds_ratio() {
        // token IcePop "0.7_1.5": w_raw = [1, 1.6487213 | 0.6065307, 0.7788008]; outside
        // [0.7, 1.5]: 1.6487 and 0.6065, zeroed. w = [1, 0 | 0, 0.7788008]: mean 0.4447002,
        // max 1, min 0 (over valid tokens); high 1/4, low (below 0.7) 1/4, oob 2/4.
        let cfg = rollout_correction(Some(("token", "0.7_1.5".into())), None);
        let out = metrics_of(cfg, None);
        for (k, e) in [
            ("rollout_is_oob_ratio", 0.5),
            ("rollout_is_mean", 0.4447001958),
            ("rollout_is_max", 1.0),
            ("rollout_is_min", 0.0),
            ("rollout_is_ratio_fraction_high", 0.25),
            ("rollout_is_ratio_fraction_low", 0.25),
        ] {
            let key = format!("rollout_corr/{k}");
            let a = out[&key].as_f64().unwrap();
            assert_close(&key, &[a], &[e], ATOL, RTOL);
        }
        // 13 + 14 + oob_ratio
        assert_eq!(out.len(), 28);
    }

    #[test]
    fn row_groups_merge_into_the_batch_and_steps_stay_apart() {
        let cfg = rollout_correction(Some(("token", 1.5.into())), Some(("token_k1", 1.5.into())));
        let (p, c) = pipeline(cfg);
        // Row by row, merged in order, gives the same metrics as the whole batch at once.
        let mut merged = correction_parts(&p, &c, &group(0..1, None));
        merge(&mut merged, correction_parts(&p, &c, &group(1..2, None)));
        let whole = correction_parts(&p, &c, &group(0..2, None));
        let (mut a, mut b) = (Map::new(), Map::new());
        correction_metrics(&c, &merged[&None], None, &mut a);
        correction_metrics(&c, &whole[&None], None, &mut b);
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (k, v) in &a {
            assert_close(
                k,
                &[v.as_f64().unwrap()],
                &[b[k].as_f64().unwrap()],
                1e-12,
                1e-12,
            );
        }
        // With a step column each step is its own batch: step 7 is row 1 alone.
        // kl = (0.5 + 0.25)/2 = 0.375; training_log_ppl = 1.5; one row: seq std 0;
        // k1 = [0.5, 0.25]: one of two tokens rejected.
        let parts = correction_parts(&p, &c, &group(0..2, Some(vec![3, 7])));
        assert_eq!(parts.keys().collect::<Vec<_>>(), [&Some(3), &Some(7)]);
        let mut out = Map::new();
        correction_metrics(&c, &parts[&Some(7)], None, &mut out);
        for (k, e) in [
            ("kl", 0.375),
            ("training_log_ppl", 1.5),
            ("rollout_is_seq_std", 0.0),
            ("rollout_rs_token_k1_masked_fraction", 0.5),
            ("rollout_rs_seq_masked_fraction", 1.0),
        ] {
            let key = format!("rollout_corr/{k}");
            assert_close(&key, &[out[&key].as_f64().unwrap()], &[e], ATOL, RTOL);
        }
    }

    #[test]
    fn advantage_metrics_by_hand() {
        // Valid-token advantages (the mask-0 token's 9 is left out):
        // row 0 [1.5, -0.5, (9)], row 1 [0, -1]: mean 0, unbiased std √((2.25 + 0.25 + 0 +
        // 1)/3) = √(3.5/3) = 1.0801234, min -1, max 1.5.
        let g = group(0..2, None);
        let advantages = [1.5f32, -0.5, 9.0, 0.0, -1.0];
        let parts = advantage_parts(&g, &g.mask.values, &advantages);
        let mut out = Map::new();
        advantage_metrics(&parts[&None], &mut out);
        let got: Vec<f64> = [
            "advcalc/advantage_mean",
            "advcalc/advantage_std",
            "advcalc/advantage_min",
            "advcalc/advantage_max",
        ]
        .iter()
        .map(|k| out[*k].as_f64().unwrap())
        .collect();
        assert_eq!(out.len(), 4);
        assert_close(
            "advantage metrics",
            &got,
            &[0.0, 1.0801234497, -1.0, 1.5],
            1e-9,
            1e-9,
        );

        // Steps apart, and merged row group by row group: step 1 is row 1 alone
        // ([0, -1]: mean -0.5, std √0.5 = 0.7071068).
        let mut parts = advantage_parts(
            &group(0..1, Some(vec![0])),
            &[1.0, 1.0, 0.0],
            &[1.5, -0.5, 9.0],
        );
        merge(
            &mut parts,
            advantage_parts(&group(1..2, Some(vec![1])), &[1.0, 1.0], &[0.0, -1.0]),
        );
        let mut out = Map::new();
        advantage_metrics(&parts[&Some(1)], &mut out);
        assert_close(
            "step 1 mean, std",
            &[
                out["advcalc/advantage_mean"].as_f64().unwrap(),
                out["advcalc/advantage_std"].as_f64().unwrap(),
            ],
            &[-0.5, 0.5f64.sqrt()],
            1e-12,
            1e-12,
        );

        // Nothing valid: zeros, not ±inf or NaN.
        let mut out = Map::new();
        advantage_metrics(&StepParts::default(), &mut out);
        for k in ["mean", "std", "min", "max"] {
            assert_eq!(out[&format!("advcalc/advantage_{k}")], 0.0, "{k}");
        }
    }

    #[test]
    fn clamped_std_by_hand() {
        // values {1, 2}: E = 1.5, E[x²] = 2.5, √(2.5 − 2.25) = 0.5 (the 1e-8 guards move it by
        // ~1e-8)
        assert_close("{1, 2}", &[clamped_std(3.0, 5.0, 2.0)], &[0.5], 1e-7, 0.0);
        // a single token: 0 whatever the sums
        assert_eq!(clamped_std(3.0, 100.0, 1.0), 0.0);
        assert_eq!(clamped_std(0.0, 0.0, 0.0), 0.0);
        // E[x²] < E[x]² (rounding in the sums): max(·, 0) gives 0, not NaN
        assert_eq!(clamped_std(3.0, 4.4, 2.0), 0.0);
    }
}
