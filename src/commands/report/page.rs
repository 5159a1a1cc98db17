//! The page: seven sections, each with a one-line caption saying what to look for, or saying
//! why it is absent. Numbers are read from the commands' JSON (`html::num`), figures drawn by
//! `plots`.

use serde_json::{Value, json};

use crate::commands::analysis::buckets::BUCKETS;
use crate::commands::numbers::sig;
use crate::error::Result;
use crate::shaping::correction::IsLevel;

use super::difficulty;
use super::gather::{Facts, VariantFacts};
use super::html::{CSS, Style, escape, num, token};
use super::plots::{self, Axes, Line, Panel, Reference, colour, css};
use super::strips::{Feature, Strip, StripReason};

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
const BINS: usize = 60;
/// The width of the full-width figures, in SVG user units = CSS pixels: at most the page's
/// column (the body's `max-width` in `html::CSS`, 1080 px), so on a screen wide enough for
/// the column a figure is shown at its own size and its text at the sizes `plots` draws it.
pub const WIDTH: u32 = 1000;
/// The per-step small multiples: three to a row of the column (with the grid's gaps).
const STEP_CHART: (u32, u32) = (352, 250);

/// One section: present with its body, or absent with the reason.
struct PageSection {
    id: &'static str,
    title: &'static str,
    caption: String,
    body: std::result::Result<String, String>,
}

/// The whole page.
pub fn render(facts: &Facts) -> Result<String> {
    let sections = [
        findings(facts),
        steps(facts)?,
        distributions(facts)?,
        difficulty_bias(facts)?,
        token_strips(facts)?,
        correction(facts)?,
        loss(facts)?,
    ];
    let labels: Vec<&str> = facts.variants.iter().map(|v| v.label.as_str()).collect();
    let mut out = String::new();
    out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n";
    out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n";
    out += &format!(
        "<meta name=\"generator\" content=\"advcalc {}\"/>\n",
        env!("CARGO_PKG_VERSION")
    );
    out += &format!(
        "<title>advcalc report: {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        escape(&facts.file)
    );
    out += &format!(
        "<h1>Rollout report: <code>{}</code></h1>\n",
        escape(&facts.file)
    );
    let c = &facts.comparison_json;
    out += &format!(
        "<p class=\"meta\">{} rows, {} correct (score above {}) · {} · made by advcalc {} from the same passes as <code>inspect</code> and <code>compare</code></p>\n",
        num(COMPARE, c, "/rows", Style::Plain),
        num(COMPARE, c, "/correct_rows", Style::Plain),
        num(COMPARE, c, "/correct_above", Style::Plain),
        variant_legend(&labels),
        env!("CARGO_PKG_VERSION"),
    );
    out += "<nav><ol>\n";
    for s in &sections {
        out += &format!(
            "<li><a href=\"#{}\">{}</a>{}</li>\n",
            s.id,
            s.title,
            if s.body.is_err() { " (absent)" } else { "" }
        );
    }
    out += "</ol></nav>\n";
    for (k, s) in sections.iter().enumerate() {
        out += &format!(
            "<section id=\"{}\" data-section=\"{}\" data-present=\"{}\">\n<h2>{}. {}</h2>\n<p class=\"caption\">{}</p>\n",
            s.id,
            s.id,
            s.body.is_ok(),
            k + 1,
            s.title,
            s.caption
        );
        match &s.body {
            Ok(body) => out += body,
            Err(why) => out += &format!("<p class=\"why\">Not shown: {why}</p>\n"),
        }
        out += "</section>\n";
    }
    out += "</body>\n</html>\n";
    Ok(out)
}

fn variant_legend(labels: &[&str]) -> String {
    let names: Vec<String> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            format!(
                "<span class=\"swatch\" style=\"background:{}\"></span><b>{}</b>",
                css(colour(i)),
                escape(l)
            )
        })
        .collect();
    format!(
        "variant{}: {}",
        if labels.len() == 1 { "" } else { "s" },
        names.join(", ")
    )
}

fn figure(svg: String) -> String {
    format!("<div class=\"fig\">{svg}</div>\n")
}

/// A figure with its lines' legend under it (swatch and label per line), then `more` (HTML).
fn figure_with_legend(svg: String, lines: &[Line], more: &str) -> String {
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
fn dashed_swatch(label: &str) -> String {
    format!(
        "<span class=\"dash\" style=\"border-color:{}\"></span>{}",
        css(plots::REFERENCE),
        escape(label)
    )
}

/// A step's name in tables.
fn step_name(step: Option<i64>) -> String {
    step.map_or("all rows".into(), |s| format!("step {s}"))
}

/// 1. The inspect findings: warnings first, with their fixes, then the numbers per step.
fn findings(f: &Facts) -> PageSection {
    let j = &f.inspect_json;
    let first = &f.variants[0].label;
    let mut body = String::new();
    let mut any = false;
    body += "<ul class=\"warnings\">\n";
    // one entry per warning code, with the first step's message and the steps it is in
    let mut codes: Vec<&str> = Vec::new();
    for s in &f.inspect.steps {
        for w in &s.warnings {
            if !codes.contains(&w.code) {
                codes.push(w.code);
            }
        }
    }
    for code in codes {
        any = true;
        let at: Vec<(usize, usize)> = f
            .inspect
            .steps
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                s.warnings
                    .iter()
                    .enumerate()
                    .filter(|(_, w)| w.code == code)
                    .map(move |(k, _)| (i, k))
            })
            .collect();
        let (i, k) = at[0];
        let first = &f.inspect.steps[i];
        let steps: Vec<String> = at
            .iter()
            .map(|&(i, _)| step_name(f.inspect.steps[i].step))
            .collect();
        let more = if at.len() > 1 {
            format!(
                " <i>(the numbers of {}; also in {})</i>",
                step_name(first.step),
                steps[1..].join(", ")
            )
        } else {
            String::new()
        };
        body += &format!(
            "<li data-code=\"{code}\" data-path=\"/steps/{i}/warnings/{k}\"><code>{code}</code> · <b>{}</b> — {}{more}</li>\n",
            steps[0],
            escape(&first.warnings[k].message),
        );
    }
    if let Some(check) = f.inspect.logged.as_ref().filter(|c| c.warns()) {
        any = true;
        body += &format!(
            "<li data-code=\"logged_advantages_differ\"><code>logged_advantages_differ</code> — {} of {} rows of this {} dump differ from advcalc's recomputation beyond float32 rounding (below)</li>\n",
            check.differing,
            check.compared,
            escape(check.trainer.title()),
        );
    }
    for facts in &f.variants {
        for w in &facts.warnings {
            any = true;
            body += &format!(
                "<li data-code=\"run\"><code>run -e {}</code> would warn — {}</li>\n",
                escape(&facts.label),
                escape(w)
            );
        }
    }
    body += "</ul>\n";
    if !any {
        body = "<p class=\"ok\">No warnings: none of the checks of <code>advcalc inspect</code> found a likely mistake.</p>\n".into();
    }
    let notes: Vec<&String> = f
        .inspect
        .notes
        .iter()
        .filter(|n| {
            !f.variants[0]
                .warnings
                .iter()
                .any(|w| n.ends_with(w.as_str()))
        })
        .collect();
    if !notes.is_empty() {
        body += "<h3>Notes (what was not checked, and why)</h3>\n<ul class=\"notes\">\n";
        for n in notes {
            body += &format!("<li>{}</li>\n", escape(n));
        }
        body += "</ul>\n";
    }
    body += "<h3>The checks' numbers</h3>\n<table>\n<tr><th class=\"l\">step</th><th>rows</th><th>groups</th><th>groups with no signal</th><th>valid tokens</th><th>rows ending in a tool token</th><th>tool spans per row</th><th>mean score</th><th>mean k1 per token</th><th>ratio outside [0.5, 2]</th><th>tokens rejected</th></tr>\n";
    for (i, s) in f.inspect.steps.iter().enumerate() {
        let p = |k: &str| format!("/steps/{i}/{k}");
        body += &format!(
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            step_name(s.step),
            num(INSPECT, j, &p("rows"), Style::Plain),
            num(INSPECT, j, &p("groups/count"), Style::Plain),
            num(INSPECT, j, &p("groups/no_signal_fraction"), Style::Percent),
            num(INSPECT, j, &p("valid_token_fraction"), Style::Percent),
            num(INSPECT, j, &p("rows_ending_in_tool_token"), Style::Plain),
            num(INSPECT, j, &p("tool_spans/mean"), Style::Plain),
            num(INSPECT, j, &p("score_sum/mean"), Style::Plain),
            num(INSPECT, j, &p("kl/mean_k1"), Style::Plain),
            num(
                INSPECT,
                j,
                &p("train_rollout_mismatch/ratio_outside_fraction"),
                Style::Percent
            ),
            num(
                INSPECT,
                j,
                &p("rejection/rejected_token_fraction"),
                Style::Percent
            ),
        );
    }
    body += "</table>\n<p class=\"meta\">— : the dump lacks the columns for that check (see the notes). docs/inspect.md explains each finding.</p>\n";
    if let Some(check) = &f.inspect.logged {
        let p = |k: &str| format!("/logged_advantages/{k}");
        body += &format!(
            "<h3>Logged advantages</h3>\n<p>This is a {} dump: advcalc recomputed every row's advantage as <code>{}</code> under <code>--convention {}</code> and compared it with the one {} logged (docs/trainers.md).</p>\n<table>\n<tr><th>rows compared</th><th>rows differing</th><th>of them in fragile groups</th><th>largest difference</th></tr>\n<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n</table>\n",
            escape(check.trainer.title()),
            escape(check.estimator),
            escape(check.convention),
            escape(check.trainer.title()),
            num(INSPECT, j, &p("compared"), Style::Plain),
            num(INSPECT, j, &p("differing"), Style::Plain),
            num(INSPECT, j, &p("fragile"), Style::Plain),
            num(INSPECT, j, &p("max_abs_difference"), Style::Plain),
        );
        if !check.causes.is_empty() {
            body += "<ul class=\"notes\">\n";
            for c in &check.causes {
                body += &format!("<li>likely cause: {}</li>\n", escape(c));
            }
            body += "</ul>\n";
        }
    }
    PageSection {
        id: "findings",
        title: "Inspect findings",
        caption: format!(
            "What <code>advcalc inspect -e {}</code> finds in this dump: fix the warnings (each says what to do) before reading the plots below.",
            escape(first)
        ),
        body: Ok(body),
    }
}

/// The index in a `--metrics` value of `step`'s object (`None` for a single object).
fn metrics_pointer(metrics: &Value, step: Option<i64>, key: &str) -> String {
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

fn metric(metrics: &Value, step: Option<i64>, key: &str) -> Option<f64> {
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

/// 2. Per step: score, no-signal groups, KL, IS weights, rejection, advantage std.
fn steps(f: &Facts) -> Result<PageSection> {
    let caption = "How the batch drifts over training steps: falling no-signal share and a steady KL and IS weight are healthy; a jump in any of them marks the step to inspect. Shares are in percent, as in the tables; an IS weight max on the dashed threshold line means truncation is active.".to_string();
    let has_steps = f.inspect.steps.iter().any(|s| s.step.is_some());
    if !has_steps {
        return Ok(PageSection {
            id: "steps",
            title: "Per step",
            caption,
            body: Err("the dump has no <code>step</code> column (nor step=N in its paths): it is one training batch, so there is nothing to draw over steps.".into()),
        });
    }
    let j = &f.inspect_json;
    let steps: Vec<Option<i64>> = f.inspect.steps.iter().map(|s| s.step).collect();
    let xs: Vec<f64> = steps.iter().map(|s| s.unwrap_or(0) as f64).collect();
    let series = |ptr: &dyn Fn(usize) -> String| -> Vec<(f64, Option<f64>)> {
        (0..steps.len())
            .map(|i| (xs[i], j.pointer(&ptr(i)).and_then(Value::as_f64)))
            .collect()
    };
    let is_variant = f
        .variants
        .iter()
        .position(|v| v.correction.as_ref().is_some_and(|c| c.is.is_some()));
    let adv_json: Vec<Value> = f.variants.iter().map(advantage_steps).collect();
    let grey = plotters::style::RGBColor(60, 60, 60);
    let one = |label: &str, pts| {
        vec![Line {
            label: label.into(),
            colour: grey,
            points: pts,
        }]
    };
    let size = STEP_CHART;
    let axes = |title: &'static str, percent: bool| Axes {
        title,
        x_desc: "step",
        y_desc: "",
        x_range: None,
        integer_x: true,
        percent,
        from_zero: true,
        references: &[],
    };
    let mut charts: Vec<String> = vec![
        plots::lines(
            &axes("mean score", false),
            &one("score", series(&|i| format!("/steps/{i}/score_sum/mean"))),
            size,
        )?,
        plots::lines(
            &axes("groups with no signal", true),
            &one(
                "no signal",
                series(&|i| format!("/steps/{i}/groups/no_signal_fraction")),
            ),
            size,
        )?,
        plots::lines(
            &axes("KL: mean k1 per token", false),
            &one("k1", series(&|i| format!("/steps/{i}/kl/mean_k1"))),
            size,
        )?,
    ]
    .into_iter()
    .map(figure)
    .collect();
    if let Some(v) = is_variant {
        let m = &f.variants[v].metrics;
        let pts = |key: &str| -> Vec<(f64, Option<f64>)> {
            steps
                .iter()
                .zip(&xs)
                .map(|(&s, &x)| (x, metric(m, s, key)))
                .collect()
        };
        let is_lines = [
            Line {
                label: "mean".into(),
                colour: colour(0),
                points: pts("rollout_corr/rollout_is_mean"),
            },
            Line {
                label: "max".into(),
                colour: colour(1),
                points: pts("rollout_corr/rollout_is_max"),
            },
        ];
        let spec = f.variants[v]
            .correction
            .as_ref()
            .and_then(|c| c.is.as_ref())
            .expect("an IS variant");
        let threshold = spec.upper;
        let meaning = match (spec.lower, spec.level) {
            (Some(_), _) => {
                "IcePop sets weights outside its bounds to 0 rather than truncating them, so a max near the line means weights are close to being dropped"
            }
            (None, IsLevel::Token) => {
                "verl logs the max after truncation, so a max on the line means truncation is active (larger weights were cut to it)"
            }
            (None, IsLevel::Sequence) => {
                "verl logs the sequence weights' max before truncation, so a max on or above the line means truncation is active"
            }
        };
        let references = [Reference {
            y: threshold,
            label: format!("threshold {}", sig(threshold)),
        }];
        charts.push(figure_with_legend(
            plots::lines(
                &Axes {
                    references: &references,
                    // weights sit near 1: from 0 the mean and the max would merge
                    from_zero: false,
                    ..axes("IS weight: mean and max", false)
                },
                &is_lines,
                size,
            )?,
            &is_lines,
            &format!(
                " &#160; {}<p class=\"figcap\" data-threshold=\"{threshold}\">Dashed: <code>rollout_is_threshold</code>{} = {}. {meaning}.</p>",
                dashed_swatch("threshold"),
                if spec.lower.is_some() { "'s upper bound" } else { "" },
                sig(threshold)
            ),
        ));
    }
    charts.push(figure(plots::lines(
        &axes("tokens rejected", true),
        &one(
            "rejected",
            series(&|i| format!("/steps/{i}/rejection/rejected_token_fraction")),
        ),
        size,
    )?));
    let std_lines: Vec<Line> = adv_json
        .iter()
        .enumerate()
        .map(|(v, a)| Line {
            label: f.variants[v].label.clone(),
            colour: colour(v),
            points: (0..steps.len())
                .map(|i| {
                    (
                        xs[i],
                        a.pointer(&format!("/steps/{i}/advantages/std"))
                            .and_then(Value::as_f64),
                    )
                })
                .collect(),
        })
        .collect();
    charts.push(figure_with_legend(
        plots::lines(&axes("advantage std", false), &std_lines, size)?,
        &std_lines,
        "",
    ));
    let mut body = String::from("<div class=\"grid\">\n");
    for c in charts {
        body += &c;
    }
    body += "</div>\n<table>\n<tr><th class=\"l\">step</th><th>rows</th><th>mean score</th><th>groups with no signal</th><th>mean k1 per token</th>";
    if let Some(v) = is_variant {
        let l = escape(&f.variants[v].label);
        body += &format!("<th>IS weight mean ({l})</th><th>IS weight max ({l})</th>");
    }
    body += "<th>tokens rejected</th>";
    for v in &f.variants {
        body += &format!("<th>advantage std, {}</th>", escape(&v.label));
    }
    body += "</tr>\n";
    for (i, &s) in steps.iter().enumerate() {
        let p = |k: &str| format!("/steps/{i}/{k}");
        body += &format!(
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            step_name(s),
            num(INSPECT, j, &p("rows"), Style::Plain),
            num(INSPECT, j, &p("score_sum/mean"), Style::Plain),
            num(INSPECT, j, &p("groups/no_signal_fraction"), Style::Percent),
            num(INSPECT, j, &p("kl/mean_k1"), Style::Plain),
        );
        if let Some(v) = is_variant {
            let (m, src) = (&f.variants[v].metrics, metrics_of(&f.variants[v].label));
            for key in [
                "rollout_corr/rollout_is_mean",
                "rollout_corr/rollout_is_max",
            ] {
                body += &format!(
                    "<td>{}</td>",
                    num(&src, m, &metrics_pointer(m, s, key), Style::Plain)
                );
            }
        }
        body += &format!(
            "<td>{}</td>",
            num(
                INSPECT,
                j,
                &p("rejection/rejected_token_fraction"),
                Style::Percent
            )
        );
        for (v, a) in f.variants.iter().zip(&adv_json) {
            body += &format!(
                "<td>{}</td>",
                num(
                    &inspect_of(&v.label),
                    a,
                    &format!("/steps/{i}/advantages/std"),
                    Style::Plain
                )
            );
        }
        body += "</tr>\n";
    }
    body += "</table>\n";
    if is_variant.is_none() {
        body +=
            "<p class=\"meta\">No IS-weight plot: no variant computes rollout IS weights.</p>\n";
    }
    Ok(PageSection {
        id: "steps",
        title: "Per step",
        caption,
        body: Ok(body),
    })
}

/// 3. Advantage distributions, one panel per variant on one shared axis.
fn distributions(f: &Facts) -> Result<PageSection> {
    let caption = "Each panel is one variant's advantages over every valid token, all on the same axis: compare spread and tails; a spike at 0 is tokens that get no gradient.".to_string();
    let c = &f.comparison_json;
    let total: u64 = f
        .comparison
        .variants
        .iter()
        .map(|v| v.tokens.valid_tokens)
        .sum();
    if total == 0 {
        return Ok(PageSection {
            id: "distributions",
            title: "Advantage distributions",
            caption,
            body: Err(
                "no variant has a valid token (every response mask is 0 after rejection).".into(),
            ),
        });
    }
    let lo = f
        .comparison
        .variants
        .iter()
        .filter(|v| v.tokens.valid_tokens > 0)
        .map(|v| v.tokens.min)
        .fold(f64::INFINITY, f64::min);
    let hi = f
        .comparison
        .variants
        .iter()
        .filter(|v| v.tokens.valid_tokens > 0)
        .map(|v| v.tokens.max)
        .fold(f64::NEG_INFINITY, f64::max);
    let panels: Vec<Panel> = f
        .variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let n = v.advantages.total().max(1) as f64;
            Panel {
                label: v.label.clone(),
                colour: colour(i),
                fractions: v
                    .advantages
                    .histogram(lo, hi, BINS)
                    .into_iter()
                    .map(|c| c as f64 / n)
                    .collect(),
            }
        })
        .collect();
    let mut body = figure(plots::histograms(
        "advantage (per valid token)",
        lo,
        hi,
        &panels,
        &[(0.0, String::new())],
        WIDTH,
    )?);
    body += "<table>\n<tr><th class=\"l\">variant</th><th>valid tokens</th><th>mean</th><th>std</th><th>min</th><th>max</th><th>exactly 0</th><th>Σ adv, correct rows</th><th>Σ adv, incorrect rows</th></tr>\n";
    for (v, facts) in f.variants.iter().enumerate() {
        let p = |k: &str| format!("/variants/{v}/{k}");
        body += &format!(
            "<tr><td class=\"l\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            css(colour(v)),
            escape(&facts.label),
            num(COMPARE, c, &p("valid_tokens"), Style::Plain),
            num(COMPARE, c, &p("mean"), Style::Plain),
            num(COMPARE, c, &p("std"), Style::Plain),
            num(COMPARE, c, &p("min"), Style::Plain),
            num(COMPARE, c, &p("max"), Style::Plain),
            num(COMPARE, c, &p("zero_fraction"), Style::Percent),
            num(COMPARE, c, &p("weight_correct"), Style::Plain),
            num(COMPARE, c, &p("weight_incorrect"), Style::Plain),
        );
    }
    body += "</table>\n";
    if !f.comparison.pairs.is_empty() {
        body += "<table>\n<tr><th class=\"l\">pair</th><th>same sign</th><th>rank correlation of row means</th></tr>\n";
        for (k, p) in f.comparison.pairs.iter().enumerate() {
            body += &format!(
                "<tr><td class=\"l\">{} · {}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&p.a),
                escape(&p.b),
                num(
                    COMPARE,
                    c,
                    &format!("/pairs/{k}/sign_agreement"),
                    Style::Percent
                ),
                num(
                    COMPARE,
                    c,
                    &format!("/pairs/{k}/rank_correlation"),
                    Style::Plain
                ),
            );
        }
        body += "</table>\n";
    }
    Ok(PageSection {
        id: "distributions",
        title: "Advantage distributions",
        caption,
        body: Ok(body),
    })
}

/// 4. The difficulty-bias curve.
fn difficulty_bias(f: &Facts) -> Result<PageSection> {
    let caption = "Mean |advantage| per token against the share of the group's rows that are correct: a flat line weighs easy and hard prompts alike, a peak shows the difficulty the estimator amplifies; groups at 0 and 1 give group baselines nothing to learn from.".to_string();
    let Some(groups) = &f.groups else {
        return Ok(PageSection {
            id: "difficulty",
            title: "Difficulty bias",
            caption,
            body: Err("the dump has no <code>uid</code> column (or no variant groups its rows), so rows have no group and no pass rate.".into()),
        });
    };
    let c = &f.comparison_json;
    let (points, exact) = match difficulty::curve(groups, &f.row_abs) {
        Some(p) => (
            p.iter()
                .map(|p| (p.pass_rate, p.mean_abs.clone()))
                .collect::<Vec<_>>(),
            true,
        ),
        None => {
            // compare's buckets, drawn at their middles
            let mids = [0.0, 0.125, 0.375, 0.625, 0.875, 1.0];
            let pts = (0..BUCKETS.len())
                .map(|k| {
                    (
                        mids[k],
                        f.comparison
                            .variants
                            .iter()
                            .map(|v| v.buckets.as_ref().and_then(|b| b[k].mean_abs))
                            .collect(),
                    )
                })
                .collect();
            (pts, false)
        }
    };
    let lines: Vec<Line> = f
        .variants
        .iter()
        .enumerate()
        .map(|(v, facts)| Line {
            label: facts.label.clone(),
            colour: colour(v),
            points: points.iter().map(|(x, m)| (*x, m[v])).collect(),
        })
        .collect();
    let mut body = figure_with_legend(
        plots::lines(
            &Axes {
                title: "mean |advantage| by group pass rate",
                x_desc: "group pass rate (share of the group's rows that are correct)",
                y_desc: "mean |advantage| per token",
                x_range: Some((-0.03, 1.03)),
                integer_x: false,
                percent: false,
                from_zero: true,
                references: &[],
            },
            &lines,
            (WIDTH, 400),
        )?,
        &lines,
        "",
    );
    if !exact {
        body += &format!(
            "<p class=\"meta\">Groups have more than {} distinct pass rates: the curve is drawn over the six buckets below.</p>\n",
            difficulty::MAX_POINTS
        );
    }
    body += "<table>\n<tr><th class=\"l\">pass rate</th><th>groups</th>";
    for v in &f.variants {
        body += &format!("<th>mean |adv|, {}</th>", escape(&v.label));
    }
    body += "</tr>\n";
    for (k, name) in BUCKETS.iter().enumerate() {
        body += &format!(
            "<tr><td class=\"l\">{name}</td><td>{}</td>",
            num(
                COMPARE,
                c,
                &format!("/variants/0/pass_rate_buckets/{k}/groups"),
                Style::Plain
            )
        );
        for v in 0..f.variants.len() {
            body += &format!(
                "<td>{}</td>",
                num(
                    COMPARE,
                    c,
                    &format!("/variants/{v}/pass_rate_buckets/{k}/mean_abs_advantage"),
                    Style::Plain
                )
            );
        }
        body += "</tr>\n";
    }
    body += "</table>\n";
    Ok(PageSection {
        id: "difficulty",
        title: "Difficulty bias",
        caption,
        body: Ok(body),
    })
}

/// The loss section: how each `loss_agg_mode` would weigh the dump's tokens by response
/// length (the loss stage, `docs/loss.md`), the configured mode's line marked.
fn loss(f: &Facts) -> Result<PageSection> {
    let caption = "The loss replayed as verl's actor computes it (<code>advcalc loss</code> with the trainer YAML's actor section): the mean gradient weight |dL/d log π| a token gets, against its response's length, under each <code>loss_agg_mode</code>, relative to that mode's mean over all tokens (1 = an average token). Modes that weigh tokens alike lie on one line, which follows only the data (|A| and the clipping of each length); a line that falls with length makes a short response's tokens count more (seq-mean-token-mean's length bias, verl #957, #2776).".to_string();
    let l = match &f.loss {
        Ok(l) => l,
        Err(why) => {
            return Ok(PageSection {
                id: "loss",
                title: "Loss weights by response length",
                caption,
                body: Err(format!(
                    "{}; give the run's trainer YAML (<code>-c</code>) and a dump with <code>old_log_probs</code> (and <code>log_probs</code> off-policy).",
                    escape(why)
                )),
            });
        }
    };
    let lines: Vec<Line> = l
        .curves
        .iter()
        .enumerate()
        .map(|(k, (mode, points))| Line {
            label: if *mode == l.agg {
                format!("{} (configured)", mode.name())
            } else {
                mode.name().to_string()
            },
            colour: colour(k),
            points: points.iter().map(|&(x, y)| (x, Some(y))).collect(),
        })
        .collect();
    let mut body = figure_with_legend(
        plots::lines(
            &Axes {
                title: "gradient weight per token by response length (1 = the mode's mean)",
                x_desc: "response length (mask-1 tokens; rows binned by length)",
                y_desc: "mean |dL/d log π| per token / the mode's mean",
                x_range: None,
                integer_x: false,
                percent: false,
                from_zero: true,
                references: &[],
            },
            &lines,
            (WIDTH, 400),
        )?,
        &lines,
        "",
    );
    body += &format!(
        "<p class=\"meta\">Configured: {}. Share of the total gradient weight by response-length quarter (Q1 the shortest rows), on correct and incorrect rows, and one token of the shortest row against one of the longest:</p>\n",
        escape(&l.configured)
    );
    body += "<table>\n<tr><th class=\"l\">loss_agg_mode</th><th>Q1</th><th>Q2</th><th>Q3</th><th>Q4</th><th>correct</th><th>incorrect</th><th>short/long token</th></tr>\n";
    let modes = l.view["modes"].as_array().map_or(0, Vec::len);
    for k in 0..modes {
        let at = |key: &str| format!("/modes/{k}/{key}");
        body += &format!(
            "<tr><td class=\"l\">{}</td>",
            escape(
                l.view["modes"][k]["loss_agg_mode"]
                    .as_str()
                    .unwrap_or_default()
            )
        );
        for q in 0..4 {
            body += &format!(
                "<td>{}</td>",
                num(
                    LOSS,
                    &l.view,
                    &format!("{}/{q}", at("share_by_length_quartile")),
                    Style::Percent
                )
            );
        }
        body += &format!(
            "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
            num(LOSS, &l.view, &at("share_positive"), Style::Percent),
            num(LOSS, &l.view, &at("share_negative"), Style::Percent),
            num(
                LOSS,
                &l.view,
                &at("token_weight_shortest_to_longest"),
                Style::Plain
            ),
        );
    }
    body += "</table>\n";
    if !l.warnings.is_empty() {
        body += "<ul class=\"warnings\">\n";
        for w in &l.warnings {
            body += &format!("<li>{}</li>\n", escape(w));
        }
        body += "</ul>\n";
    }
    Ok(PageSection {
        id: "loss",
        title: "Loss weights by response length",
        caption,
        body: Ok(body),
    })
}

/// "1 tool span", "3 rejected tokens".
fn count(n: u32, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// A strip's heading: the row, whether it is correct, what it shows besides its advantages.
fn heading(s: &Strip) -> String {
    let mut parts = vec![if s.correct { "correct" } else { "incorrect" }.to_string()];
    if s.shape.tool_spans > 0 {
        parts.push(count(s.shape.tool_spans, "tool span"));
    }
    if s.shape.rejected > 0 {
        parts.push(count(s.shape.rejected, "rejected token"));
    }
    format!("Row {} — {}", s.row, parts.join(", "))
}

/// Why a strip's row was drawn (`strips::choose`'s rule, as it applied to this row).
fn why(s: &Strip, f: &Facts) -> String {
    let rows = f.correct.len();
    let with = |feature: Feature| f.shapes.iter().filter(|x| x.has(feature)).count();
    let (tools, rejected) = (with(Feature::ToolSpans), with(Feature::Rejected));
    // the row's group, with its pass rate, when it has both correct and incorrect rows
    let group = f.groups.as_ref().and_then(|g| {
        let k = g.members.iter().position(|m| m.contains(&s.row))?;
        let n = g.members[k].len();
        let right = g.members[k].iter().filter(|&&r| f.correct[r]).count();
        (right > 0 && right < n).then(|| {
            let uid = s
                .uid
                .as_ref()
                .map(|u| format!("<code>{}</code>, ", escape(u)))
                .unwrap_or_default();
            format!("({uid}{right} of {n} rows correct)")
        })
    });
    let share = |n: usize| format!("{n} of the {rows} rows");
    match s.reason {
        StripReason::Asked => "Why this row: asked for with <code>--rows</code>.".into(),
        StripReason::Pair(_) => {
            let partner = f
                .strips
                .iter()
                .find(|o| matches!(o.reason, StripReason::Pair(_)) && o.row != s.row)
                .map(|o| format!("with row {}, ", o.row))
                .unwrap_or_default();
            let which = match &group {
                Some(g) => format!("{partner}the correct and the incorrect row of a group {g}"),
                None if f.groups.is_none() => format!(
                    "{partner}a correct and an incorrect row of the dump (it has no <code>uid</code> column: rows have no group)"
                ),
                None => format!(
                    "{partner}a correct and an incorrect row of the dump (no group has both)"
                ),
            };
            let order = if group.is_some() {
                "then the group whose pass rate is nearest 50%, then the first"
            } else {
                "then the first"
            };
            if tools + rejected == 0 {
                format!(
                    "Why this row: {which}, the group whose pass rate is nearest 50% (the first on a tie). No row of this dump has a tool span or a rejected token, so an outcome-level estimator gives all of a row's tokens one advantage: one colour per strip."
                )
            } else {
                let kinds: Vec<String> = [("tool spans", tools), ("rejected tokens", rejected)]
                    .into_iter()
                    .filter(|&(_, n)| n > 0)
                    .map(|(what, n)| format!("{what} ({})", share(n)))
                    .collect();
                format!(
                    "Why this row: {which}, chosen to show the most: rows with {} first, {order}.",
                    kinds.join(" or ")
                )
            }
        }
        StripReason::Shows(feature) => {
            let (what, n) = match feature {
                Feature::ToolSpans => ("tool spans", tools),
                Feature::Rejected => ("rejected tokens", rejected),
            };
            if n == 1 {
                format!(
                    "Why this row: it has {what}, which the rows above do not; no other row has any."
                )
            } else {
                format!(
                    "Why this row: it has {what}, which the rows above do not; {} have them{}.",
                    share(n),
                    match &group {
                        Some(g) => format!(
                            "; of those, rows in a group with both correct and incorrect rows come first, then rows with both kinds, then the group nearest 50% correct: here {g}"
                        ),
                        None => ", and this is the first".into(),
                    }
                )
            }
        }
    }
}

/// 5. Token strips.
fn token_strips(f: &Facts) -> Result<PageSection> {
    let caption = "Each cell is one token of the response, coloured by its advantage (blue: made more likely, red: less likely, white: 0), one strip per variant for the same row; light grey cells are tool tokens the policy did not write, dark grey cells tokens that rejection removed, and the triangle marks where the reward sits. Rows with tool spans or rejected tokens are drawn first: without them an outcome-level estimator paints a row in one colour.".to_string();
    if f.sequence_level {
        return Ok(PageSection {
            id: "strips",
            title: "Token strips",
            caption,
            body: Err(
                "the dump is sequence-level (verl's JSONL: one score per row, no tokens).".into(),
            ),
        });
    }
    if f.strips.is_empty() {
        return Ok(PageSection {
            id: "strips",
            title: "Token strips",
            caption,
            body: Err("the dump has no rows.".into()),
        });
    }
    let labels: Vec<String> = f.variants.iter().map(|v| v.label.clone()).collect();
    let mut body = String::new();
    for s in &f.strips {
        let tools = s.mask.iter().filter(|&&m| m == 0.0).count();
        let reason = match s.reason {
            StripReason::Pair(true) => "pair-correct",
            StripReason::Pair(false) => "pair-incorrect",
            StripReason::Shows(Feature::ToolSpans) => "tool-spans",
            StripReason::Shows(Feature::Rejected) => "rejected",
            StripReason::Asked => "asked",
        };
        body += &format!(
            "<h3 data-row=\"{}\" data-reason=\"{reason}\">{}</h3>\n<p class=\"why-row\">{}</p>\n<p class=\"meta\">{}{}score {} ({}) · {} tokens, {} of them tool tokens · {}</p>\n",
            s.row,
            heading(s),
            why(s, f),
            s.uid
                .as_ref()
                .map(|u| format!("uid <code>{}</code> · ", escape(u)))
                .unwrap_or_default(),
            s.step.map(|x| format!("step {x} · ")).unwrap_or_default(),
            sig(s.score),
            if s.correct { "correct" } else { "incorrect" },
            s.mask.len(),
            tools,
            match plots::strip_scale(s) {
                0.0 => "no valid token with a non-zero advantage".to_string(),
                x => format!("colour scale ±{}", sig(x)),
            },
        );
        body += &figure(plots::strip(s, &labels, WIDTH)?);
    }
    body += "<p class=\"meta\">Rows are chosen without looking at the advantages (docs/report.md): a correct and an incorrect row of one group, the rows with tool spans or rejected tokens first, the group whose pass rate is nearest 50% on a tie; then, if the dump has rows with tool spans (or rejected tokens) and neither row of the pair has any, one such row; then the rows named with <code>--rows</code>.</p>\n";
    Ok(PageSection {
        id: "strips",
        title: "Token strips",
        caption,
        body: Ok(body),
    })
}

/// 6. Rollout correction: the IS-weight distribution and what each rejection option removed.
fn correction(f: &Facts) -> Result<PageSection> {
    let caption = "With rollout correction configured: how the IS weights spread around 1 (mass far above 1 means the rollout engine and the trainer disagree) and how many tokens and rows each rejection option took out of the update.".to_string();
    let with: Vec<usize> = (0..f.variants.len())
        .filter(|&v| f.variants[v].correction.is_some())
        .collect();
    if with.is_empty() {
        return Ok(PageSection {
            id: "correction",
            title: "Rollout correction",
            caption,
            body: Err("no variant configures rollout correction (<code>algorithm.rollout_correction.rollout_is</code> or <code>rollout_rs</code>), or the dump has no <code>rollout_log_probs</code> column for it.".into()),
        });
    }
    let mut body = String::new();
    // The correction does not depend on the estimator: variants of one configuration share
    // it, and are shown once.
    let mut shown: Vec<usize> = Vec::new();
    for v in with {
        let facts = &f.variants[v];
        let c = facts.correction.as_ref().expect("filtered");
        if shown.iter().any(|&w| {
            let o = &f.variants[w];
            o.correction.as_ref() == Some(c) && o.is_weights == facts.is_weights
        }) {
            continue;
        }
        shown.push(v);
        let same: Vec<String> = f
            .variants
            .iter()
            .filter(|o| o.correction.as_ref() == Some(c) && o.is_weights == facts.is_weights)
            .map(|o| escape(&o.label))
            .collect();
        let m = &facts.metrics;
        let src = metrics_of(&facts.label);
        let steps: Vec<Option<i64>> = match m {
            Value::Array(a) => a
                .iter()
                .map(|x| x.get("step").and_then(Value::as_i64))
                .collect(),
            _ => vec![None],
        };
        body += &format!(
            "<h3>{}{}</h3>\n",
            same.join(", "),
            if same.len() > 1 {
                " (the same correction)"
            } else {
                ""
            }
        );
        if let (Some(w), Some(spec)) = (&facts.is_weights, &c.is) {
            // from below the smallest weight verl logs (before batch normalisation) and 1,
            // to past the threshold: the bulk near 1 and the line both in view
            let smallest = steps
                .iter()
                .filter_map(|&s| metric(m, s, "rollout_corr/rollout_is_min"))
                .fold(1.0f64, f64::min)
                .max(0.0);
            let top = spec.upper.max(1.0);
            let pad = (top - smallest) * 0.08;
            let (lo, hi) = ((smallest - pad).max(0.0), top + pad);
            let n = w.total().max(1) as f64;
            body += &figure(plots::histograms(
                "IS weight (per valid token, as applied)",
                lo,
                hi,
                &[Panel {
                    label: String::new(),
                    colour: colour(v),
                    fractions: w
                        .histogram(lo, hi, BINS)
                        .into_iter()
                        .map(|c| c as f64 / n)
                        .collect(),
                }],
                &[(1.0, String::new()), (spec.upper, " threshold".into())],
                WIDTH,
            )?);
            body += "<table>\n<tr><th class=\"l\">step</th><th>mean</th><th>min</th><th>max</th><th>std</th><th>effective sample size</th><th>above threshold</th></tr>\n";
            for &s in &steps {
                body += &format!("<tr><td class=\"l\">{}</td>", step_name(s));
                for key in [
                    "rollout_is_mean",
                    "rollout_is_min",
                    "rollout_is_max",
                    "rollout_is_std",
                    "rollout_is_eff_sample_size",
                ] {
                    body += &format!(
                        "<td>{}</td>",
                        num(
                            &src,
                            m,
                            &metrics_pointer(m, s, &format!("rollout_corr/{key}")),
                            Style::Plain
                        )
                    );
                }
                body += &format!(
                    "<td>{}</td></tr>\n",
                    num(
                        &src,
                        m,
                        &metrics_pointer(m, s, "rollout_corr/rollout_is_ratio_fraction_high"),
                        Style::Percent
                    )
                );
            }
            body += "</table>\n<p class=\"meta\">Weights as the update applies them (truncated, and normalised when configured); the table holds verl's <code>rollout_corr/rollout_is_*</code> metrics, before batch normalisation.</p>\n";
        }
        if !c.rs.is_empty() {
            let mean_over = |key: &str| -> f64 {
                let xs: Vec<f64> = steps.iter().filter_map(|&s| metric(m, s, key)).collect();
                xs.iter().sum::<f64>() / xs.len().max(1) as f64
            };
            let mut items: Vec<(String, f64)> =
                c.rs.iter()
                    .map(|o| {
                        (
                            o.name.clone(),
                            mean_over(&format!(
                                "rollout_corr/rollout_rs_{}_masked_fraction",
                                o.name
                            )),
                        )
                    })
                    .collect();
            items.push((
                "all options together".into(),
                mean_over("rollout_corr/rollout_rs_masked_fraction"),
            ));
            body += &figure(plots::bars(
                if steps.len() > 1 {
                    "share of valid tokens rejected (mean over steps)"
                } else {
                    "share of valid tokens rejected"
                },
                &items,
                WIDTH,
            )?);
            body += "<table>\n<tr><th class=\"l\">step</th><th class=\"l\">rejection option</th><th>tokens rejected</th><th>rows touched</th></tr>\n";
            for &s in &steps {
                for o in &c.rs {
                    body += &format!(
                        "<tr><td class=\"l\">{}</td><td class=\"l\"><code>{}</code></td><td>{}</td><td>{}</td></tr>\n",
                        step_name(s),
                        escape(&o.name),
                        num(
                            &src,
                            m,
                            &metrics_pointer(
                                m,
                                s,
                                &format!("rollout_corr/rollout_rs_{}_masked_fraction", o.name)
                            ),
                            Style::Percent
                        ),
                        num(
                            &src,
                            m,
                            &metrics_pointer(
                                m,
                                s,
                                &format!("rollout_corr/rollout_rs_{}_seq_masked_fraction", o.name)
                            ),
                            Style::Percent
                        ),
                    );
                }
                body += &format!(
                    "<tr><td class=\"l\">{}</td><td class=\"l\">all options together</td><td>{}</td><td>{}</td></tr>\n",
                    step_name(s),
                    num(
                        &src,
                        m,
                        &metrics_pointer(m, s, "rollout_corr/rollout_rs_masked_fraction"),
                        Style::Percent
                    ),
                    num(
                        &src,
                        m,
                        &metrics_pointer(m, s, "rollout_corr/rollout_rs_seq_masked_fraction"),
                        Style::Percent
                    ),
                );
            }
            body += "</table>\n<p class=\"meta\">verl's <code>rollout_corr/rollout_rs_*_masked_fraction</code> metrics: the share of valid tokens, and of rows with a valid token, that each option rejects on its own; an option's rows can overlap another's.</p>\n";
        } else {
            body += "<p class=\"meta\">No rejection option is configured (<code>rollout_rs</code>).</p>\n";
        }
    }
    Ok(PageSection {
        id: "correction",
        title: "Rollout correction",
        caption,
        body: Ok(body),
    })
}
