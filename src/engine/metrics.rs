//! `--metrics`: verl's metric names and values per training batch (reference §2.2, §3.2–3.4)
//! plus advcalc's own. Row groups contribute token sums and per-row values per step in the
//! statistics pass; they are merged in row-group order and finished per step.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::data::RowGroup;
use crate::data::TokenRole;
use crate::engine::pipeline::Pipeline;
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
