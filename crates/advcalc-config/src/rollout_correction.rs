//! verl's `algorithm.rollout_correction` (docs/reference/verl-0.9.1.md §3.1) read into the typed
//! [`RolloutCorrection`]: the IS level and threshold, the rejection options and their
//! thresholds, parsed as verl's `_parse_rollout_is_threshold` / `_parse_rollout_rs_thresholds`
//! do, with verl's messages. Thresholds keep verl's forms: a number or a string (`"lo_hi"` for
//! IcePop and k1 bounds, a comma list for several rejection options).

use super::value::Value;

use super::section::Section;
use crate::error::Result;
use crate::settings::{Invalid, Keys};
use crate::shaping::correction::{Correction, IsLevel, IsSpec, RsAggregate, RsOption, RsStatistic};

/// What rollout correction does in a run.
#[derive(Debug, Clone, PartialEq)]
pub enum RolloutCorrection {
    /// The section is null: no correction and no `rollout_corr/` metrics.
    Off,
    /// Decoupled mode (verl's default, and the section's defaults: metrics only): IS weights
    /// and rejection from `old_log_probs − rollout_log_probs`.
    Decoupled(Correction),
    /// `bypass_mode: true`: `old_log_probs` are replaced by `rollout_log_probs` and nothing is
    /// corrected here (`loss_type`, the policy loss verl then uses, is recorded only).
    Bypass {
        /// `loss_type` (verl's default `ppo_clip`).
        loss_type: String,
        /// The IS and rejection settings, which verl's `bypass_mode` loss applies per
        /// micro-batch: parsed only for `advcalc loss` (verl parses them inside the loss; a
        /// `run` never reads them).
        in_loss: Option<Correction>,
    },
}

impl Default for RolloutCorrection {
    /// verl's `algorithm/rollout_correction.yaml`: decoupled, IS and rejection off.
    fn default() -> Self {
        RolloutCorrection::Decoupled(Correction::default())
    }
}

impl RolloutCorrection {
    /// The decoupled-mode correction, when it runs.
    pub fn decoupled(&self) -> Option<&Correction> {
        match self {
            RolloutCorrection::Decoupled(c) => Some(c),
            _ => None,
        }
    }

    /// Bypass mode.
    pub fn bypass(&self) -> bool {
        matches!(self, RolloutCorrection::Bypass { .. })
    }
}

/// verl's default `rollout_is_threshold`.
pub const IS_THRESHOLD: f64 = 2.0;
/// verl's default `loss_type`.
pub const LOSS_TYPE: &str = "ppo_clip";

/// One of verl's rejection options (`rollout_rs`), parsed once from its name: the
/// aggregation over the sequence and the log-ratio statistic it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)] // each variant is its verl name (`name`), e.g. `seq_max_k2`
pub enum RsKind {
    SeqMaxK2,
    SeqMaxK3,
    SeqMeanK1,
    SeqMeanK2,
    SeqMeanK3,
    SeqSumK1,
    SeqSumK2,
    SeqSumK3,
    TokenK1,
    TokenK2,
    TokenK3,
}

impl RsKind {
    /// verl's options, in its order.
    pub const ALL: [RsKind; 11] = [
        RsKind::SeqMaxK2,
        RsKind::SeqMaxK3,
        RsKind::SeqMeanK1,
        RsKind::SeqMeanK2,
        RsKind::SeqMeanK3,
        RsKind::SeqSumK1,
        RsKind::SeqSumK2,
        RsKind::SeqSumK3,
        RsKind::TokenK1,
        RsKind::TokenK2,
        RsKind::TokenK3,
    ];

    /// verl's name, its aggregation and its statistic.
    fn parts(self) -> (&'static str, RsAggregate, RsStatistic) {
        use RsAggregate::{SeqMax, SeqMean, SeqSum, Token};
        use RsStatistic::{K1, K2, K3};
        match self {
            RsKind::SeqMaxK2 => ("seq_max_k2", SeqMax, K2),
            RsKind::SeqMaxK3 => ("seq_max_k3", SeqMax, K3),
            RsKind::SeqMeanK1 => ("seq_mean_k1", SeqMean, K1),
            RsKind::SeqMeanK2 => ("seq_mean_k2", SeqMean, K2),
            RsKind::SeqMeanK3 => ("seq_mean_k3", SeqMean, K3),
            RsKind::SeqSumK1 => ("seq_sum_k1", SeqSum, K1),
            RsKind::SeqSumK2 => ("seq_sum_k2", SeqSum, K2),
            RsKind::SeqSumK3 => ("seq_sum_k3", SeqSum, K3),
            RsKind::TokenK1 => ("token_k1", Token, K1),
            RsKind::TokenK2 => ("token_k2", Token, K2),
            RsKind::TokenK3 => ("token_k3", Token, K3),
        }
    }

    /// verl's name, e.g. `seq_mean_k3`.
    pub fn name(self) -> &'static str {
        self.parts().0
    }

    /// The option verl names `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Read `rollout_correction` from the algorithm section. verl's trainer YAML always carries
/// the section (rollout_is and rollout_rs null): an absent key means those defaults, an
/// explicit null turns correction off entirely.
pub fn read(s: &mut Section<'_>, loss: bool) -> Result<RolloutCorrection> {
    let explicit_null = s.is_null("rollout_correction");
    let Some(mut r) = s.subsection("rollout_correction")? else {
        return Ok(if explicit_null {
            RolloutCorrection::Off
        } else {
            RolloutCorrection::default()
        });
    };
    let rollout_is = r.opt_string("rollout_is")?;
    let is_threshold = r.opt_scalar("rollout_is_threshold", Some(IS_THRESHOLD.into()))?;
    let batch_normalize = r.bool("rollout_is_batch_normalize", false)?;
    let rollout_rs = r.opt_string("rollout_rs")?;
    let rs_threshold = r.opt_scalar("rollout_rs_threshold", None)?;
    let bypass_mode = r.bool("bypass_mode", false)?;
    let loss_type = r.string("loss_type", LOSS_TYPE)?;
    // verl parses the thresholds in decoupled mode, and inside the bypass loss (`advcalc
    // loss`); a bypass-mode `run` never reads them
    let typed = if bypass_mode && !loss {
        Ok(RolloutCorrection::Bypass {
            loss_type,
            in_loss: None,
        })
    } else {
        let parsed = decoupled(
            &r,
            rollout_is,
            is_threshold,
            batch_normalize,
            rollout_rs,
            rs_threshold,
        );
        if bypass_mode {
            parsed.map(|c| RolloutCorrection::Bypass {
                loss_type,
                in_loss: c.decoupled().cloned(),
            })
        } else {
            parsed
        }
    };
    r.finish()?; // an unknown key is reported before a bad threshold
    typed
}

fn decoupled(
    r: &Section<'_>,
    rollout_is: Option<String>,
    is_threshold: Option<Value>,
    batch_normalize: bool,
    rollout_rs: Option<String>,
    rs_threshold: Option<Value>,
) -> Result<RolloutCorrection> {
    let is = match (rollout_is, is_threshold) {
        (Some(level), Some(threshold)) => {
            Some(is_spec(&level, &threshold, batch_normalize).map_err(|e| r.reject(e))?)
        }
        _ => None,
    };
    let rs = match rollout_rs {
        None => Vec::new(),
        Some(spec) => {
            let Some(threshold) = rs_threshold else {
                return Err(r.reject(Invalid::new(
                    "rollout_rs",
                    "rollout_rs_threshold must be explicitly provided when rollout_rs is enabled. Set rollout_rs_threshold to the desired threshold value.",
                )));
            };
            rs_options(&spec, &threshold).map_err(|e| r.reject(e))?
        }
    };
    Ok(RolloutCorrection::Decoupled(Correction { is, rs }))
}

/// The IS settings: `rollout_is` (`token` or `sequence`) and `_parse_rollout_is_threshold`.
pub fn is_spec(level: &str, threshold: &Value, batch_normalize: bool) -> Result<IsSpec, Invalid> {
    let level = match level {
        "token" => IsLevel::Token,
        "sequence" => IsLevel::Sequence,
        other => {
            return Err(Invalid::new(
                "rollout_is",
                format!("Invalid rollout_is: {other}. Must be one of {{'token', 'sequence'}}."),
            ));
        }
    };
    let (upper, lower) = is_threshold(threshold)?;
    Ok(IsSpec {
        level,
        upper,
        lower,
        batch_normalize,
    })
}

fn is_error(message: impl Into<String>) -> Invalid {
    Invalid::new("rollout_is_threshold", message)
}

/// `_parse_rollout_is_threshold`: returns (upper, lower).
fn is_threshold(spec: &Value) -> Result<(f64, Option<f64>), Invalid> {
    let (upper, lower) = match spec {
        Value::Bool(_) => {
            return Err(is_error(
                "rollout_is_threshold must be specified as a float or a string threshold specification, not a boolean.",
            ));
        }
        Value::Int(_) | Value::Float(_) => (spec.as_f64().unwrap_or(f64::NAN), None),
        Value::Str(s) => {
            let t = s.trim();
            if t.is_empty() {
                return Err(is_error(
                    "rollout_is_threshold must not be an empty string.",
                ));
            }
            let invalid = || is_error(format!("Invalid rollout_is_threshold '{s}'."));
            match t.split_once('_') {
                Some((lo, hi)) => (
                    py_float(hi).ok_or_else(invalid)?,
                    Some(py_float(lo).ok_or_else(invalid)?),
                ),
                None => (py_float(t).ok_or_else(invalid)?, None),
            }
        }
        _ => {
            return Err(is_error(
                "rollout_is_threshold must be a float or a string threshold specification.",
            ));
        }
    };
    if upper <= 0.0 {
        return Err(is_error(format!(
            "rollout_is_threshold upper bound must be positive, got {upper}."
        )));
    }
    if let Some(lo) = lower {
        if lo <= 0.0 {
            return Err(is_error(format!(
                "rollout_is_threshold lower bound must be positive, got {lo}."
            )));
        }
        if lo > upper {
            return Err(is_error(
                "rollout_is_threshold lower bound must be <= upper bound.",
            ));
        }
    }
    Ok((upper, lower))
}

fn rs_error(message: impl Into<String>) -> Invalid {
    Invalid::new("rollout_rs_threshold", message)
}

/// `compute_rollout_rejection_mask`'s option list (duplicates dropped, order kept) and
/// `_parse_rollout_rs_thresholds`.
pub fn rs_options(spec: &str, threshold: &Value) -> Result<Vec<RsOption>, Invalid> {
    let mut options: Vec<RsKind> = Vec::new();
    for opt in spec.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let Some(kind) = RsKind::from_name(opt) else {
            return Err(Invalid::new(
                "rollout_rs",
                format!(
                    "Invalid rollout_rs option: {opt}. Must be one of [{}].",
                    RsKind::ALL
                        .iter()
                        .map(|o| format!("'{}'", o.name()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        if !options.contains(&kind) {
            options.push(kind);
        }
    }
    if options.is_empty() {
        return Err(Invalid::new(
            "rollout_rs",
            "rollout_rs must contain at least one valid option.",
        ));
    }
    let raw: Vec<String> = match threshold {
        Value::Str(s) => s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect(),
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => vec![threshold.py_str()],
        _ => {
            return Err(rs_error(
                "rollout_rs_threshold must be a string or numeric value specifying per-option thresholds.",
            ));
        }
    };
    if raw.is_empty() {
        return Err(rs_error(
            "rollout_rs_threshold must contain at least one threshold value.",
        ));
    }
    if raw.len() != 1 && raw.len() != options.len() {
        return Err(rs_error(format!(
            "rollout_rs_threshold expects either one threshold shared by all options or exactly {} thresholds to match the provided rollout_rs options.",
            options.len()
        )));
    }
    options
        .iter()
        .enumerate()
        .map(|(i, &kind)| rs_option(kind, if raw.len() == 1 { &raw[0] } else { &raw[i] }))
        .collect()
}

/// One rejection option with its threshold spec.
fn rs_option(kind: RsKind, spec: &str) -> Result<RsOption, Invalid> {
    let (name, aggregate, statistic) = kind.parts();
    let invalid = || {
        rs_error(format!(
            "Invalid numeric threshold '{spec}' for option '{name}'."
        ))
    };
    let threshold = match statistic {
        RsStatistic::K1 => {
            let (lo, hi) = match spec.split_once('_') {
                Some((lo, hi)) => (
                    py_float(lo).ok_or_else(invalid)?,
                    py_float(hi).ok_or_else(invalid)?,
                ),
                None => {
                    let hi = py_float(spec).ok_or_else(|| {
                        rs_error(format!(
                            "could not convert string to float: '{spec}' (option '{name}')"
                        ))
                    })?;
                    if hi == 0.0 {
                        return Err(rs_error(format!(
                            "float division by zero (option '{name}', threshold '{spec}')"
                        )));
                    }
                    (1.0 / hi, hi)
                }
            };
            if lo <= 0.0 || hi <= 0.0 {
                return Err(rs_error(format!(
                    "Thresholds for option '{name}' must be positive, got {spec}."
                )));
            }
            if lo > hi {
                return Err(rs_error(format!(
                    "Thresholds for option '{name}' must be lower <= upper, got {spec}."
                )));
            }
            (Some(lo), hi)
        }
        RsStatistic::K2 | RsStatistic::K3 => {
            if spec.contains('_') {
                return Err(rs_error(format!(
                    "rollout_rs_threshold for option '{name}' must provide a single upper bound without '_'. Received '{spec}'."
                )));
            }
            let hi = py_float(spec).ok_or_else(invalid)?;
            if hi <= 0.0 {
                return Err(rs_error(format!(
                    "Threshold for option '{name}' must be positive, got {spec}."
                )));
            }
            (None, hi)
        }
    };
    Ok(RsOption::new(name, aggregate, statistic, threshold))
}

/// Python's `float(str)` for the forms thresholds use.
fn py_float(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    t.parse::<f64>().ok()
}

/// The YAML that reads back into `correction`: `(rollout_is, rollout_is_threshold,
/// rollout_is_batch_normalize, rollout_rs, rollout_rs_threshold)`.
pub fn to_values(correction: &Correction) -> [(&'static str, Value); 5] {
    let (level, is_threshold, batch_normalize) = match &correction.is {
        None => (Value::Null, Value::from(IS_THRESHOLD), false),
        Some(spec) => (
            Value::from(match spec.level {
                IsLevel::Token => "token",
                IsLevel::Sequence => "sequence",
            }),
            match spec.lower {
                None => Value::from(spec.upper),
                Some(lo) => Value::from(format!("{lo}_{}", spec.upper)),
            },
            spec.batch_normalize,
        ),
    };
    let (rs, rs_threshold) = if correction.rs.is_empty() {
        (Value::Null, Value::Null)
    } else {
        let names: Vec<&str> = correction.rs.iter().map(|o| o.name.as_str()).collect();
        let thresholds: Vec<String> = correction
            .rs
            .iter()
            .map(|o| match o.threshold {
                (Some(lo), hi) => format!("{lo}_{hi}"),
                (None, hi) => format!("{hi}"),
            })
            .collect();
        (
            Value::from(names.join(",")),
            Value::from(thresholds.join(",")),
        )
    };
    [
        ("rollout_is", level),
        ("rollout_is_threshold", is_threshold),
        ("rollout_is_batch_normalize", Value::Bool(batch_normalize)),
        ("rollout_rs", rs),
        ("rollout_rs_threshold", rs_threshold),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    // Each option's aggregation and statistic are the ones its name spells, and the name
    // parses back to the option.
    #[test]
    fn rs_kinds_are_their_names() {
        for kind in RsKind::ALL {
            let (name, aggregate, statistic) = kind.parts();
            let prefix = match aggregate {
                RsAggregate::Token => "token",
                RsAggregate::SeqSum => "seq_sum",
                RsAggregate::SeqMean => "seq_mean",
                RsAggregate::SeqMax => "seq_max",
            };
            let suffix = match statistic {
                RsStatistic::K1 => "k1",
                RsStatistic::K2 => "k2",
                RsStatistic::K3 => "k3",
            };
            assert_eq!(name, format!("{prefix}_{suffix}"));
            assert_eq!(RsKind::from_name(name), Some(kind));
        }
        assert_eq!(RsKind::from_name("seq_max_k1"), None);
    }

    fn is_err(threshold: Value) -> String {
        is_spec("token", &threshold, false).unwrap_err().message
    }

    fn rs_err(spec: &str, threshold: Value) -> String {
        rs_options(spec, &threshold).unwrap_err().message
    }

    #[test]
    fn verl_threshold_errors() {
        assert!(is_err("0_1".into()).contains("lower bound must be positive, got 0"));
        assert!(is_err("2_1".into()).contains("lower bound must be <= upper bound"));
        assert!(is_err((-1).into()).contains("upper bound must be positive, got -1"));
        assert!(is_err(true.into()).contains("not a boolean"));
        assert!(is_err("abc".into()).contains("Invalid rollout_is_threshold 'abc'"));
        assert!(rs_err("token_k5", 2.0.into()).contains("Invalid rollout_rs option: token_k5"));
        assert!(rs_err("token_k2", "0.1_0.2".into()).contains("without '_'"));
        assert!(rs_err("token_k1,token_k2", "1,2,3".into()).contains("exactly 2 thresholds"));
        assert!(rs_err("seq_sum_k1", "2_1".into()).contains("lower <= upper"));
        let level = is_spec("tokens", &2.0.into(), false).unwrap_err();
        assert_eq!(level.key, "rollout_is");
    }

    #[test]
    fn duplicates_and_shared_thresholds() {
        let rs = rs_options("token_k1, token_k1,seq_max_k3", &2.0.into()).unwrap();
        assert_eq!(rs.len(), 2);
        assert!((rs[0].lower.unwrap() - (0.5f64).ln()).abs() < 1e-12);
        assert!((rs[0].upper - 2f64.ln()).abs() < 1e-12);
        assert_eq!(rs[0].threshold, (Some(0.5), 2.0));
        assert_eq!(rs[1].upper, 2.0);
    }

    #[test]
    fn written_back_as_verl_reads_it() {
        let c = Correction {
            is: Some(is_spec("sequence", &"0.3_1.7".into(), true).unwrap()),
            rs: rs_options("token_k1,seq_mean_k3", &"3,0.01".into()).unwrap(),
        };
        let v = to_values(&c);
        assert_eq!(v[1].1, Value::from("0.3_1.7"));
        assert_eq!(v[4].1, Value::from("0.3333333333333333_3,0.01"));
        let again = Correction {
            is: Some(is_spec("sequence", &v[1].1, true).unwrap()),
            rs: rs_options(v[3].1.as_str().unwrap(), &v[4].1).unwrap(),
        };
        assert_eq!(again, c);
    }
}
