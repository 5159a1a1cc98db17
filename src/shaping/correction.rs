//! Pipeline stage 3: rollout correction in decoupled mode (reference §3, verl
//! `rollout_corr_helper`): importance-sampling weights and rejection sampling, both from
//! the per-token log ratio `log ρ = old_log_probs − rollout_log_probs` under the original
//! (pre-rejection) mask.
//!
//! - **IS weights** (`rollout_is: token | sequence`): `w_raw = exp(clamp(log ρ, ±20))` per
//!   token, or `exp(clamp(Σ_t log ρ·m, ±20))` broadcast over the row; then TIS (`min(w, upper)`)
//!   or IcePop (`"lo_hi"`: 0 outside [lo, hi]); padding gets 0. With
//!   `rollout_is_batch_normalize` the weights are divided by their batch mean μ (when
//!   μ > 1e-8) — after truncation, so they can exceed `upper` (quirk §9.15).
//! - **Rejection** (`rollout_rs`, comma list, all must pass): statistics of
//!   `x = clamp(log ρ, ±20)`: k1 = −x, k2 = ½x², k3 = eˣ − 1 − x, per token, or per row as a
//!   masked sum, masked mean or max over valid tokens. k1 bounds `lo_hi` keep
//!   `ln lo ≤ k1 ≤ ln hi` (they bound π_rollout/π_train, quirk §9.13); k2/k3 keep `≤ upper`.
//!   The new mask is `m · Π keep`.
//!
//! Parsing follows verl's `_parse_rollout_is_threshold` / `_parse_rollout_rs_thresholds`
//! and reports its reasons.

use serde_yaml::Value;

use crate::config::RolloutCorrectionConfig;
use crate::error::{Error, Result};

pub const SAFETY_BOUND: f32 = 20.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsLevel {
    Token,
    Sequence,
}

/// Importance-sampling weight settings.
#[derive(Debug, Clone, PartialEq)]
pub struct IsSpec {
    pub level: IsLevel,
    pub upper: f64,
    /// IcePop's lower bound; `None` means TIS.
    pub lower: Option<f64>,
    pub batch_normalize: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RsStatistic {
    K1,
    K2,
    K3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RsAggregate {
    Token,
    SeqSum,
    SeqMean,
    SeqMax,
}

/// One rejection option with its bounds (k1: log bounds; k2/k3: an upper bound).
#[derive(Debug, Clone, PartialEq)]
pub struct RsOption {
    pub name: String,
    pub aggregate: RsAggregate,
    pub statistic: RsStatistic,
    pub lower: Option<f64>,
    pub upper: f64,
}

/// What rollout correction does in a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Correction {
    pub is: Option<IsSpec>,
    pub rs: Vec<RsOption>,
}

const RS_OPTIONS: [&str; 11] = [
    "seq_max_k2",
    "seq_max_k3",
    "seq_mean_k1",
    "seq_mean_k2",
    "seq_mean_k3",
    "seq_sum_k1",
    "seq_sum_k2",
    "seq_sum_k3",
    "token_k1",
    "token_k2",
    "token_k3",
];

fn verl_error(msg: impl std::fmt::Display) -> Error {
    Error::usage(format!("algorithm.rollout_correction: {msg}"))
}

/// Python's `float(str)` for the forms thresholds use.
fn py_float(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    t.parse::<f64>().ok()
}

/// Python's `str(number)` for a YAML number (`2.0` stays "2.0", `2` stays "2").
fn py_str(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 1e16 {
                format!("{f:.1}")
            } else {
                format!("{f}")
            }
        }
        Value::Number(n) => n.to_string(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => s.clone(),
        _ => String::new(),
    }
}

impl Correction {
    /// IS or RS is configured (beyond metrics).
    pub fn is_some_active(&self) -> bool {
        self.is.is_some() || !self.rs.is_empty()
    }

    /// `None` when correction does not run (no config, or bypass mode).
    pub fn parse(cfg: Option<&RolloutCorrectionConfig>) -> Result<Option<Self>> {
        let Some(cfg) = cfg else { return Ok(None) };
        if cfg.bypass_mode {
            return Ok(None);
        }
        let is = match (&cfg.rollout_is, &cfg.rollout_is_threshold) {
            (Some(level), Some(threshold)) => {
                let level = match level.as_str() {
                    "token" => IsLevel::Token,
                    "sequence" => IsLevel::Sequence,
                    other => {
                        return Err(verl_error(format!(
                            "Invalid rollout_is: {other}. Must be one of {{'token', 'sequence'}}."
                        )));
                    }
                };
                let (upper, lower) = parse_is_threshold(threshold)?;
                Some(IsSpec {
                    level,
                    upper,
                    lower,
                    batch_normalize: cfg.rollout_is_batch_normalize,
                })
            }
            _ => None,
        };
        let rs = match &cfg.rollout_rs {
            None => Vec::new(),
            Some(spec) => {
                let Some(threshold) = &cfg.rollout_rs_threshold else {
                    return Err(verl_error(
                        "rollout_rs_threshold must be explicitly provided when rollout_rs is enabled. Set rollout_rs_threshold to the desired threshold value.",
                    ));
                };
                parse_rs(spec, threshold)?
            }
        };
        Ok(Some(Correction { is, rs }))
    }
}

/// `_parse_rollout_is_threshold`: returns (upper, lower).
fn parse_is_threshold(spec: &Value) -> Result<(f64, Option<f64>)> {
    let (upper, lower) = match spec {
        Value::Bool(_) => {
            return Err(verl_error(
                "rollout_is_threshold must be specified as a float or a string threshold specification, not a boolean.",
            ));
        }
        Value::Number(n) => (n.as_f64().unwrap_or(f64::NAN), None),
        Value::String(s) => {
            let t = s.trim();
            if t.is_empty() {
                return Err(verl_error(
                    "rollout_is_threshold must not be an empty string.",
                ));
            }
            let invalid = || verl_error(format!("Invalid rollout_is_threshold '{s}'."));
            match t.split_once('_') {
                Some((lo, hi)) => (
                    py_float(hi).ok_or_else(invalid)?,
                    Some(py_float(lo).ok_or_else(invalid)?),
                ),
                None => (py_float(t).ok_or_else(invalid)?, None),
            }
        }
        _ => {
            return Err(verl_error(
                "rollout_is_threshold must be a float or a string threshold specification.",
            ));
        }
    };
    if upper <= 0.0 {
        return Err(verl_error(format!(
            "rollout_is_threshold upper bound must be positive, got {upper}."
        )));
    }
    if let Some(lo) = lower {
        if lo <= 0.0 {
            return Err(verl_error(format!(
                "rollout_is_threshold lower bound must be positive, got {lo}."
            )));
        }
        if lo > upper {
            return Err(verl_error(
                "rollout_is_threshold lower bound must be <= upper bound.",
            ));
        }
    }
    Ok((upper, lower))
}

/// `compute_rollout_rejection_mask`'s option list and `_parse_rollout_rs_thresholds`.
fn parse_rs(spec: &str, threshold: &Value) -> Result<Vec<RsOption>> {
    let mut options: Vec<&str> = Vec::new();
    for opt in spec.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        if !RS_OPTIONS.contains(&opt) {
            return Err(verl_error(format!(
                "Invalid rollout_rs option: {opt}. Must be one of [{}].",
                RS_OPTIONS
                    .iter()
                    .map(|o| format!("'{o}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if !options.contains(&opt) {
            options.push(opt);
        }
    }
    if options.is_empty() {
        return Err(verl_error(
            "rollout_rs must contain at least one valid option.",
        ));
    }
    let raw: Vec<String> = match threshold {
        Value::String(s) => s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect(),
        Value::Number(_) | Value::Bool(_) => vec![py_str(threshold)],
        _ => {
            return Err(verl_error(
                "rollout_rs_threshold must be a string or numeric value specifying per-option thresholds.",
            ));
        }
    };
    if raw.is_empty() {
        return Err(verl_error(
            "rollout_rs_threshold must contain at least one threshold value.",
        ));
    }
    if raw.len() != 1 && raw.len() != options.len() {
        return Err(verl_error(format!(
            "rollout_rs_threshold expects either one threshold shared by all options or exactly {} thresholds to match the provided rollout_rs options.",
            options.len()
        )));
    }
    options
        .iter()
        .enumerate()
        .map(|(i, &name)| {
            let spec = if raw.len() == 1 { &raw[0] } else { &raw[i] };
            let invalid = || verl_error(format!("Invalid numeric threshold '{spec}' for option '{name}'."));
            let statistic = match &name[name.len() - 2..] {
                "k1" => RsStatistic::K1,
                "k2" => RsStatistic::K2,
                _ => RsStatistic::K3,
            };
            let aggregate = if name.starts_with("token") {
                RsAggregate::Token
            } else if name.starts_with("seq_sum") {
                RsAggregate::SeqSum
            } else if name.starts_with("seq_mean") {
                RsAggregate::SeqMean
            } else {
                RsAggregate::SeqMax
            };
            let (lower, upper) = if statistic == RsStatistic::K1 {
                let (lo, hi) = match spec.split_once('_') {
                    Some((lo, hi)) => (py_float(lo).ok_or_else(invalid)?, py_float(hi).ok_or_else(invalid)?),
                    None => {
                        let hi = py_float(spec).ok_or_else(|| {
                            verl_error(format!("could not convert string to float: '{spec}' (option '{name}')"))
                        })?;
                        if hi == 0.0 {
                            return Err(verl_error(format!("float division by zero (option '{name}', threshold '{spec}')")));
                        }
                        (1.0 / hi, hi)
                    }
                };
                if lo <= 0.0 || hi <= 0.0 {
                    return Err(verl_error(format!(
                        "Thresholds for option '{name}' must be positive, got {spec}."
                    )));
                }
                if lo > hi {
                    return Err(verl_error(format!(
                        "Thresholds for option '{name}' must be lower <= upper, got {spec}."
                    )));
                }
                (Some(lo.ln()), hi.ln())
            } else {
                if spec.contains('_') {
                    return Err(verl_error(format!(
                        "rollout_rs_threshold for option '{name}' must provide a single upper bound without '_'. Received '{spec}'."
                    )));
                }
                let hi = py_float(spec).ok_or_else(invalid)?;
                if hi <= 0.0 {
                    return Err(verl_error(format!(
                        "Threshold for option '{name}' must be positive, got {spec}."
                    )));
                }
                (None, hi)
            };
            Ok(RsOption {
                name: name.to_string(),
                aggregate,
                statistic,
                lower,
                upper,
            })
        })
        .collect()
}

/// `log ρ` of one row, in f32 as torch.
pub fn log_ratio_row(old: &[f32], rollout: &[f32], out: &mut [f32]) {
    for ((o, &a), &b) in out.iter_mut().zip(old).zip(rollout) {
        *o = a - b;
    }
}

/// `masked_sum(log ρ, m)` of a row (unclamped), in f64.
pub fn masked_sum(values: &[f32], mask: &[f32]) -> f64 {
    values
        .iter()
        .zip(mask)
        .filter(|&(_, &m)| m != 0.0)
        .map(|(&v, &m)| (v * m) as f64)
        .sum()
}

/// Raw IS weights of one row (before truncation), padding 0.
pub fn raw_weights_row(spec: &IsSpec, log_ratio: &[f32], mask: &[f32], out: &mut [f32]) {
    match spec.level {
        IsLevel::Token => {
            for ((o, &lr), &m) in out.iter_mut().zip(log_ratio).zip(mask) {
                *o = lr.clamp(-SAFETY_BOUND, SAFETY_BOUND).exp() * m;
            }
        }
        IsLevel::Sequence => {
            let s = (masked_sum(log_ratio, mask) as f32)
                .clamp(-SAFETY_BOUND, SAFETY_BOUND)
                .exp();
            for (o, &m) in out.iter_mut().zip(mask) {
                *o = s * m;
            }
        }
    }
}

/// Truncate (TIS) or zero out-of-band (IcePop) raw weights, in place.
pub fn truncate_weights(spec: &IsSpec, weights: &mut [f32]) {
    let upper = spec.upper as f32;
    match spec.lower {
        None => weights.iter_mut().for_each(|w| *w = w.min(upper)),
        Some(lower) => {
            let lower = lower as f32;
            weights
                .iter_mut()
                .for_each(|w| *w = if *w >= lower && *w <= upper { *w } else { 0.0 })
        }
    }
}

/// The per-token statistic of one option at log ratio `lr` (clamped).
fn token_statistic(statistic: RsStatistic, lr: f32) -> f32 {
    let x = lr.clamp(-SAFETY_BOUND, SAFETY_BOUND);
    match statistic {
        RsStatistic::K1 => -x,
        RsStatistic::K2 => 0.5 * x * x,
        RsStatistic::K3 => x.exp() - 1.0 - x,
    }
}

impl RsOption {
    fn keeps(&self, stat: f64) -> bool {
        match self.lower {
            Some(lo) => stat >= lo as f32 as f64 && stat <= self.upper as f32 as f64,
            None => stat <= self.upper as f32 as f64,
        }
    }

    /// The row-level statistic of a sequence option (masked sum / mean / max).
    pub fn sequence_statistic(&self, log_ratio: &[f32], mask: &[f32]) -> f64 {
        let stats = log_ratio
            .iter()
            .map(|&lr| token_statistic(self.statistic, lr));
        match self.aggregate {
            RsAggregate::Token => 0.0,
            RsAggregate::SeqSum => stats
                .zip(mask)
                .filter(|(_, m)| **m != 0.0)
                .map(|(s, m)| (s * m) as f64)
                .sum(),
            RsAggregate::SeqMean => {
                let n: f64 = mask.iter().map(|&m| m as f64).sum();
                let sum: f64 = stats
                    .zip(mask)
                    .filter(|(_, m)| **m != 0.0)
                    .map(|(s, m)| (s * m) as f64)
                    .sum();
                sum / (n + 1e-8)
            }
            RsAggregate::SeqMax => stats
                .zip(mask)
                .filter(|(_, m)| **m != 0.0)
                .map(|(s, _)| s as f64)
                .fold(None, |acc: Option<f64>, s| {
                    Some(acc.map_or(s, |a| a.max(s)))
                })
                .unwrap_or(0.0),
        }
    }

    /// Multiply `keep` (1 keep / 0 reject, every position) by this option's decision.
    pub fn apply(&self, log_ratio: &[f32], mask: &[f32], keep: &mut [f32]) {
        if self.aggregate == RsAggregate::Token {
            for (k, &lr) in keep.iter_mut().zip(log_ratio) {
                if !self.keeps(token_statistic(self.statistic, lr) as f64) {
                    *k = 0.0;
                }
            }
        } else if !self.keeps(self.sequence_statistic(log_ratio, mask)) {
            keep.iter_mut().for_each(|k| *k = 0.0);
        }
    }
}

/// The rejected mask of one row: `m · Π_options keep`.
pub fn reject_row(options: &[RsOption], log_ratio: &[f32], mask: &[f32], new_mask: &mut [f32]) {
    new_mask.copy_from_slice(mask);
    let mut keep = vec![1.0f32; mask.len()];
    for option in options {
        option.apply(log_ratio, mask, &mut keep);
    }
    for (m, k) in new_mask.iter_mut().zip(keep) {
        *m *= k;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{assert_close, assert_rows_close};

    fn cfg(
        is: Option<&str>,
        is_t: Option<Value>,
        rs: Option<&str>,
        rs_t: Option<Value>,
    ) -> RolloutCorrectionConfig {
        RolloutCorrectionConfig {
            rollout_is: is.map(String::from),
            rollout_is_threshold: is_t,
            rollout_is_batch_normalize: false,
            rollout_rs: rs.map(String::from),
            rollout_rs_threshold: rs_t,
            bypass_mode: false,
            loss_type: "ppo_clip".into(),
        }
    }

    // Reference §3.2: log ratios of three rows (padding marked by mask 0).
    const LR: [[f32; 4]; 3] = [
        [0.1, 0.0, -1.5, 0.0],
        [0.0, 0.05, 0.0, -2.9],
        [0.0, 0.0, 0.0, 0.0],
    ];
    const M: [[f32; 4]; 3] = [[1., 1., 1., 0.], [1., 1., 1., 1.], [1., 1., 0., 0.]];

    fn weights(spec: &IsSpec) -> Vec<Vec<f32>> {
        (0..3)
            .map(|i| {
                let mut w = [0.0f32; 4];
                raw_weights_row(spec, &LR[i], &M[i], &mut w);
                truncate_weights(spec, &mut w);
                w.to_vec()
            })
            .collect()
    }

    /// Every row (three, four tokens each) within 2e-6 of the reference's numbers.
    #[track_caller]
    fn close(what: &str, a: &[Vec<f32>], e: &[[f32; 4]; 3]) {
        assert_rows_close(what, a, e, 2e-6, 0.0);
    }

    #[test]
    fn token_tis_worked_example() {
        let c = Correction::parse(Some(&cfg(Some("token"), Some(2.0.into()), None, None)))
            .unwrap()
            .unwrap();
        close(
            "token TIS 2.0",
            &weights(c.is.as_ref().unwrap()),
            &[
                [1.105171, 1.0, 0.223130, 0.0],
                [1.0, 1.051271, 1.0, 0.055023],
                [1.0, 1.0, 0.0, 0.0],
            ],
        );
    }

    #[test]
    fn sequence_worked_example() {
        let c = Correction::parse(Some(&cfg(Some("sequence"), Some(2.0.into()), None, None)))
            .unwrap()
            .unwrap();
        let w = 0.246597;
        let v = 0.057844;
        close(
            "sequence TIS 2.0",
            &weights(c.is.as_ref().unwrap()),
            &[[w, w, w, 0.0], [v, v, v, v], [1.0, 1.0, 0.0, 0.0]],
        );
    }

    #[test]
    fn icepop_worked_example() {
        let c = Correction::parse(Some(&cfg(
            Some("token"),
            Some("0.5_1.5".into()),
            None,
            None,
        )))
        .unwrap()
        .unwrap();
        close(
            "token IcePop 0.5_1.5",
            &weights(c.is.as_ref().unwrap()),
            &[
                [1.105171, 1.0, 0.0, 0.0],
                [1.0, 1.051271, 1.0, 0.0],
                [1.0, 1.0, 0.0, 0.0],
            ],
        );
    }

    fn rejected(rs: &str, threshold: Value) -> Vec<Vec<f32>> {
        let c = Correction::parse(Some(&cfg(None, None, Some(rs), Some(threshold))))
            .unwrap()
            .unwrap();
        (0..3)
            .map(|i| {
                let mut m = [0.0f32; 4];
                reject_row(&c.rs, &LR[i], &M[i], &mut m);
                m.to_vec()
            })
            .collect()
    }

    // Reference §3.3 worked masks.
    #[test]
    fn rejection_worked_examples() {
        close(
            "token_k1 0.5_1.5",
            &rejected("token_k1", "0.5_1.5".into()),
            &[[1., 1., 0., 0.], [1., 1., 1., 0.], [1., 1., 0., 0.]],
        );
        let only_last = [[0., 0., 0., 0.], [0., 0., 0., 0.], [1., 1., 0., 0.]];
        close(
            "seq_sum_k1",
            &rejected("seq_sum_k1", "0.5_2.0".into()),
            &only_last,
        );
        close(
            "seq_mean_k3",
            &rejected("seq_mean_k3", 0.01.into()),
            &only_last,
        );
        close(
            "seq_max_k2",
            &rejected("seq_max_k2", 0.1.into()),
            &only_last,
        );
    }

    fn parse_err(is: Option<Value>, rs: Option<(&str, Value)>) -> String {
        let c = cfg(
            is.as_ref().map(|_| "token"),
            is,
            rs.as_ref().map(|r| r.0),
            rs.map(|r| r.1),
        );
        Correction::parse(Some(&c))
            .unwrap_err()
            .message()
            .to_string()
    }

    #[test]
    fn verl_threshold_errors() {
        assert!(
            parse_err(Some("0_1".into()), None).contains("lower bound must be positive, got 0")
        );
        assert!(parse_err(Some("2_1".into()), None).contains("lower bound must be <= upper bound"));
        assert!(
            parse_err(Some((-1).into()), None).contains("upper bound must be positive, got -1")
        );
        assert!(parse_err(Some(true.into()), None).contains("not a boolean"));
        assert!(parse_err(Some("abc".into()), None).contains("Invalid rollout_is_threshold 'abc'"));
        assert!(
            parse_err(None, Some(("token_k5", 2.0.into())))
                .contains("Invalid rollout_rs option: token_k5")
        );
        assert!(parse_err(None, Some(("token_k2", "0.1_0.2".into()))).contains("without '_'"));
        assert!(
            parse_err(None, Some(("token_k1,token_k2", "1,2,3".into())))
                .contains("exactly 2 thresholds")
        );
        assert!(parse_err(None, Some(("seq_sum_k1", "2_1".into()))).contains("lower <= upper"));
    }

    #[test]
    fn duplicates_and_shared_thresholds() {
        let c = Correction::parse(Some(&cfg(
            None,
            None,
            Some("token_k1, token_k1,seq_max_k3"),
            Some(2.0.into()),
        )))
        .unwrap()
        .unwrap();
        assert_eq!(c.rs.len(), 2);
        let k1 = &c.rs[0];
        assert_close(
            "token_k1 bounds",
            &[k1.lower.unwrap(), k1.upper],
            &[0.5f64.ln(), 2f64.ln()],
            1e-12,
            0.0,
        );
        assert_eq!(c.rs[1].upper, 2.0);
    }
}
