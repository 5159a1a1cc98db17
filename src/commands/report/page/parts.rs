//! What the page's sections share: where numbers come from (`data-src`), the figures' sizes,
//! a section's shape, and the small pieces of HTML more than one section writes.

use serde_json::{Value, json};

use super::super::gather::VariantFacts;
use super::super::html::{escape, token};
use super::super::plots::{self, Line, css};

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

/// Bins of the advantage and IS-weight histograms.
pub(super) const BINS: usize = 60;
/// The width of the full-width figures, in SVG user units = CSS pixels: at most the page's
/// column (the body's `max-width` in `html::CSS`, 1080 px), so on a screen wide enough for
/// the column a figure is shown at its own size and its text at the sizes `plots` draws it.
pub const WIDTH: u32 = 1000;
/// The per-step small multiples: three to a row of the column (with the grid's gaps).
pub(super) const STEP_CHART: (u32, u32) = (352, 250);

/// One section: present with its body, or absent with the reason.
pub(super) struct PageSection {
    /// The section's anchor and `data-section`.
    pub id: &'static str,
    /// Its heading.
    pub title: &'static str,
    /// What to look for (HTML).
    pub caption: String,
    /// The body (HTML), or why the section is absent.
    pub body: std::result::Result<String, String>,
}

/// An SVG figure in its frame.
pub(super) fn figure(svg: String) -> String {
    format!("<div class=\"fig\">{svg}</div>\n")
}

/// A figure with its lines' legend under it (swatch and label per line), then `more` (HTML).
pub(super) fn figure_with_legend(svg: String, lines: &[Line], more: &str) -> String {
    let keys: Vec<String> = lines
        .iter()
        .map(|l| {
            format!(
                "<span class=\"swatch\" style=\"background:{}\"></span>{}",
                css(l.colour),
                escape(&l.label)
            )
        })
        .collect();
    format!(
        "<div class=\"fig\">{svg}<div class=\"legend\">{}{more}</div></div>\n",
        keys.join(" &#160; ")
    )
}

/// A legend key for a dashed reference line.
pub(super) fn dashed_swatch(label: &str) -> String {
    format!(
        "<span class=\"dash\" style=\"border-color:{}\"></span>{}",
        css(plots::REFERENCE),
        escape(label)
    )
}

/// A step's name in tables.
pub(super) fn step_name(step: Option<i64>) -> String {
    step.map_or("all rows".into(), |s| format!("step {s}"))
}

/// The index in a `--metrics` value of `step`'s object (`None` for a single object).
pub(super) fn metrics_pointer(metrics: &Value, step: Option<i64>, key: &str) -> String {
    match metrics {
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

/// The number at `key` of `step`'s object in a `--metrics` value.
pub(super) fn metric(metrics: &Value, step: Option<i64>, key: &str) -> Option<f64> {
    metrics
        .pointer(&metrics_pointer(metrics, step, key))
        .and_then(Value::as_f64)
}

/// Variant `v`'s per-step advantage statistics, shaped as `inspect -e`'s JSON.
pub fn advantage_steps(v: &VariantFacts) -> Value {
    json!({
        "steps": v.by_step.iter().map(|(_, t)| json!({"advantages": Value::Object(t.to_json())})).collect::<Vec<_>>()
    })
}
