//! Metrics files as the corpora compare them: verl's JSON (Python's `NaN`/`Infinity`
//! tokens) against advcalc's, with the NaN rule of the shared oracle.

use std::path::Path;

use serde_json::Value;

use super::values_close;

pub const METRIC_ATOL: f64 = 1e-6;
pub const METRIC_RTOL: f64 = 1e-4;

pub fn read_json(path: &Path) -> Result<Value, String> {
    parse_json(&std::fs::read_to_string(path).map_err(|e| e.to_string())?)
}

/// JSON as Python's `json.dump` writes it: the bare tokens `NaN`, `Infinity` and
/// `-Infinity` (outside strings) are read as the strings "NaN", "Infinity", "-Infinity",
/// which [`metric_value`] turns back into numbers.
pub fn parse_json(text: &str) -> Result<Value, String> {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        let token = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|t| rest.starts_with(t));
        if let Some(t) = token {
            out.push_str(&format!("\"{t}\""));
            rest = &rest[t.len()..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    serde_json::from_str(&out).map_err(|e| e.to_string())
}

/// A metric's value: a number; "NaN"/"Infinity"/"-Infinity" (verl's file, see
/// [`parse_json`]); on advcalc's side (`null_is_nan`) also `null`, which is how its JSON
/// writer stores a non-finite float, read as NaN. Anything else is not a metric value.
pub fn metric_value(v: &Value, null_is_nan: bool) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Null if null_is_nan => Some(f64::NAN),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// verl's metrics (every key it produced) against advcalc's: the same shape (one object,
/// or one object per step), every verl key present with a close value (NaN a value), and
/// no verl-named key (`actor/`, `rollout_corr/`) that verl did not produce. `only`: compare
/// just these of verl's keys (the others verl logs are not claimed).
pub fn compare_metrics(expected: &Value, actual: &Value, only: Option<&[&str]>) -> Vec<String> {
    let steps = |v: &Value| -> Option<Vec<Value>> {
        match v {
            Value::Object(_) => Some(vec![v.clone()]),
            Value::Array(items) if items.iter().all(Value::is_object) => Some(items.clone()),
            _ => None,
        }
    };
    let (Some(e), Some(a)) = (steps(expected), steps(actual)) else {
        return vec![format!(
            "metrics: not an object or a list of objects (verl {}, advcalc {})",
            kind(expected),
            kind(actual)
        )];
    };
    if expected.is_array() != actual.is_array() {
        return vec![format!(
            "metrics: verl wrote {}, advcalc {}",
            kind(expected),
            kind(actual)
        )];
    }
    if e.len() != a.len() {
        return vec![format!("metrics: {} steps, expected {}", a.len(), e.len())];
    }
    let mut problems = Vec::new();
    for (step, (es, as_)) in e.iter().zip(&a).enumerate() {
        let (es, as_) = (es.as_object().unwrap(), as_.as_object().unwrap());
        for (key, ev) in es {
            if only.is_some_and(|keys| !keys.contains(&key.as_str())) {
                continue;
            }
            let Some(ev) = metric_value(ev, false) else {
                problems.push(format!(
                    "metric {key} (step {step}): verl's value {ev} is not a number"
                ));
                continue;
            };
            match as_.get(key).map(|v| (v, metric_value(v, true))) {
                None => problems.push(format!("metric {key} (step {step}) missing")),
                Some((v, None)) => {
                    problems.push(format!("metric {key} (step {step}): {v} is not a number"))
                }
                Some((_, Some(av))) if values_close(av, ev, METRIC_ATOL, METRIC_RTOL) => {}
                Some((_, Some(av))) => {
                    problems.push(format!("metric {key} (step {step}): {av} vs verl {ev}"))
                }
            }
        }
        for key in as_.keys() {
            let verl_named = key.starts_with("actor/") || key.starts_with("rollout_corr/");
            let claimed = only.is_none_or(|keys| keys.contains(&key.as_str()));
            if verl_named && claimed && !es.contains_key(key) {
                problems.push(format!(
                    "metric {key} (step {step}) written but verl produced none"
                ));
            }
        }
    }
    problems
}

pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "an object",
        Value::Array(_) => "a list",
        _ => "neither an object nor a list",
    }
}
