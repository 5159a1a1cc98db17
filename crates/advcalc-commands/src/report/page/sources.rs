//! Where the page's numbers come from: the JSON each command prints for the same input, read by
//! JSON pointer. Every pointer the page reads is spelled here, one accessor per source, so the
//! sections name what they show (a step's key, a variant's key) and never build a path; a
//! number is written with its source and pointer (`html::num`), which is what lets
//! tests/report.rs check the page against the commands.

use serde_json::{Value, json};

use super::super::gather::VariantFacts;
use super::super::html::{Style, num, token};

/// `data-src` of numbers from `inspect -e FIRST --json` (the first variant's configuration).
pub const INSPECT: &str = "inspect";
/// `data-src` of numbers from `compare --json`.
pub const COMPARE: &str = "compare";
/// `data-src` of the loss section's numbers: `advcalc loss --json`.
pub const LOSS: &str = "loss";

/// `data-src` of variant `label`'s `inspect -e` statistics per step.
pub fn inspect_of(label: &str) -> String {
    format!("inspect -e {label}")
}

/// `data-src` of variant `label`'s `run --metrics`.
pub fn metrics_of(label: &str) -> String {
    format!("metrics {label}")
}

/// `inspect -e FIRST --json`: the checks' numbers per step and the logged-advantages check.
pub(super) struct Inspect<'a>(pub &'a Value);

impl Inspect<'_> {
    /// Step section `i`'s number at `key` (a path within the step), as the page writes it.
    pub fn step(&self, i: usize, key: &str, style: Style) -> String {
        num(INSPECT, self.0, &format!("/steps/{i}/{key}"), style)
    }

    /// Step section `i`'s number at `key`, for a figure.
    pub fn step_value(&self, i: usize, key: &str) -> Option<f64> {
        self.0
            .pointer(&format!("/steps/{i}/{key}"))
            .and_then(Value::as_f64)
    }

    /// The pointer of step section `i`'s warning `k` (a warning is text: the page writes its
    /// pointer, not a number).
    pub fn warning(i: usize, k: usize) -> String {
        format!("/steps/{i}/warnings/{k}")
    }

    /// The logged-advantages check's number at `key`.
    pub fn logged(&self, key: &str, style: Style) -> String {
        num(INSPECT, self.0, &format!("/logged_advantages/{key}"), style)
    }
}

/// `compare --json`: the input's counts, each variant's statistics and buckets, each pair's.
pub(super) struct Compare<'a>(pub &'a Value);

impl Compare<'_> {
    /// The comparison's own number at `key` (`rows`, `correct_rows`, ...).
    pub fn total(&self, key: &str, style: Style) -> String {
        num(COMPARE, self.0, &format!("/{key}"), style)
    }

    /// Variant `v`'s number at `key`.
    pub fn variant(&self, v: usize, key: &str, style: Style) -> String {
        num(COMPARE, self.0, &format!("/variants/{v}/{key}"), style)
    }

    /// Variant `v`'s pass-rate bucket `k`'s number at `key`.
    pub fn bucket(&self, v: usize, k: usize, key: &str, style: Style) -> String {
        self.variant(v, &format!("pass_rate_buckets/{k}/{key}"), style)
    }

    /// Pair `k`'s number at `key`.
    pub fn pair(&self, k: usize, key: &str, style: Style) -> String {
        num(COMPARE, self.0, &format!("/pairs/{k}/{key}"), style)
    }
}

/// One variant's advantage statistics per step, shaped as `inspect -e`'s JSON.
pub(super) struct Advantages {
    src: String,
    json: Value,
}

impl Advantages {
    /// Variant `v`'s statistics per step.
    pub fn of(v: &VariantFacts) -> Self {
        Advantages {
            src: inspect_of(&v.label),
            json: json!({
                "steps": v.by_step.iter().map(|(_, t)| json!({"advantages": Value::Object(t.to_json())})).collect::<Vec<_>>()
            }),
        }
    }

    /// Step `i`'s statistic `key` (`std`, ...), as the page writes it.
    pub fn step(&self, i: usize, key: &str, style: Style) -> String {
        num(&self.src, &self.json, &Self::pointer(i, key), style)
    }

    /// Step `i`'s statistic `key`, for a figure.
    pub fn step_value(&self, i: usize, key: &str) -> Option<f64> {
        self.json
            .pointer(&Self::pointer(i, key))
            .and_then(Value::as_f64)
    }

    fn pointer(i: usize, key: &str) -> String {
        format!("/steps/{i}/advantages/{key}")
    }
}

/// One variant's `run --metrics`: an object per step (an array), or one object.
pub(super) struct Metrics<'a> {
    src: String,
    json: &'a Value,
}

impl<'a> Metrics<'a> {
    /// Variant `v`'s metrics.
    pub fn of(v: &'a VariantFacts) -> Self {
        Metrics {
            src: metrics_of(&v.label),
            json: &v.metrics,
        }
    }

    /// The steps the metrics have an object for (`None` for a single object).
    pub fn steps(&self) -> Vec<Option<i64>> {
        match self.json {
            Value::Array(a) => a
                .iter()
                .map(|x| x.get("step").and_then(Value::as_i64))
                .collect(),
            _ => vec![None],
        }
    }

    /// `step`'s metric `key`, as the page writes it.
    pub fn at(&self, step: Option<i64>, key: &str, style: Style) -> String {
        num(&self.src, self.json, &self.pointer(step, key), style)
    }

    /// `step`'s metric `key`, for a figure.
    pub fn value(&self, step: Option<i64>, key: &str) -> Option<f64> {
        self.json
            .pointer(&self.pointer(step, key))
            .and_then(Value::as_f64)
    }

    /// The pointer of `step`'s metric `key`: by the index of `step`'s object in an array.
    fn pointer(&self, step: Option<i64>, key: &str) -> String {
        match self.json {
            Value::Array(a) => {
                let i = a
                    .iter()
                    .position(|m| m.get("step").and_then(Value::as_i64) == step)
                    .unwrap_or(a.len());
                format!("/{i}/{}", token(key))
            }
            _ => format!("/{}", token(key)),
        }
    }
}

/// `advcalc loss --json`'s length-bias view: one entry per `loss_agg_mode`.
pub(super) struct Loss<'a>(pub &'a Value);

impl Loss<'_> {
    /// The modes listed.
    pub fn modes(&self) -> usize {
        self.0["modes"].as_array().map_or(0, Vec::len)
    }

    /// Mode `k`'s name.
    pub fn name(&self, k: usize) -> &str {
        self.0["modes"][k]["loss_agg_mode"]
            .as_str()
            .unwrap_or_default()
    }

    /// Mode `k`'s number at `key`.
    pub fn mode(&self, k: usize, key: &str, style: Style) -> String {
        num(LOSS, self.0, &format!("/modes/{k}/{key}"), style)
    }
}
