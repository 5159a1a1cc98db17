//! Section 2, per step: score, no-signal groups, KL, IS weights, rejection, advantage std.

use crate::error::Result;
use crate::numbers::sig;
use crate::shaping::correction::IsLevel;

use super::super::gather::Facts;
use super::super::html::{Style, escape};
use super::super::plots::{self, Axes, Reference, Series, colour};
use super::parts::{PageSection, STEP_CHART, dashed_swatch, figure, figure_with_legend, step_name};
use super::sources::{Advantages, Inspect, Metrics};

/// 2. Per step: score, no-signal groups, KL, IS weights, rejection, advantage std.
pub(super) fn steps(f: &Facts) -> Result<PageSection> {
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
    let j = Inspect(&f.inspect_json);
    let steps: Vec<Option<i64>> = f.inspect.steps.iter().map(|s| s.step).collect();
    let xs: Vec<f64> = steps.iter().map(|s| s.unwrap_or(0) as f64).collect();
    let series = |key: &str| -> Vec<(f64, Option<f64>)> {
        (0..steps.len())
            .map(|i| (xs[i], j.step_value(i, key)))
            .collect()
    };
    let is_variant = f
        .variants
        .iter()
        .position(|v| v.correction.as_ref().is_some_and(|c| c.is.is_some()));
    let adv_steps: Vec<Advantages> = f.variants.iter().map(Advantages::of).collect();
    let grey = plotters::style::RGBColor(60, 60, 60);
    let one = |label: &str, pts| {
        vec![Series {
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
            &one("score", series("score_sum/mean")),
            size,
        )?,
        plots::lines(
            &axes("groups with no signal", true),
            &one("no signal", series("groups/no_signal_fraction")),
            size,
        )?,
    ]
    .into_iter()
    .map(figure)
    .collect();
    // a chart with nothing to draw is a one-line note instead, saying why
    let mut absent: Vec<&str> = Vec::new();
    if f.inspect.steps.iter().any(|s| s.kl.is_some()) {
        charts.push(figure(plots::lines(
            &axes("KL: mean k1 per token", false),
            &one("k1", series("kl/mean_k1")),
            size,
        )?));
    } else {
        absent.push(
            "No KL plot: the dump lacks <code>old_log_probs</code> or <code>ref_log_prob</code> (<code>rollout_log_probs</code> in bypass mode).",
        );
    }
    if let Some(v) = is_variant {
        let m = Metrics::of(&f.variants[v]);
        let pts = |key: &str| -> Vec<(f64, Option<f64>)> {
            steps
                .iter()
                .zip(&xs)
                .map(|(&s, &x)| (x, m.value(s, key)))
                .collect()
        };
        let is_lines = [
            Series {
                label: "mean".into(),
                colour: colour(0),
                points: pts("rollout_corr/rollout_is_mean"),
            },
            Series {
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
    if f.inspect.steps.iter().any(|s| s.rejection.is_some()) {
        charts.push(figure(plots::lines(
            &axes("tokens rejected", true),
            &one("rejected", series("rejection/rejected_token_fraction")),
            size,
        )?));
    } else {
        absent.push(
            "No rejection plot: the first variant rejects no tokens (no <code>rollout_rs</code> is configured, or the dump lacks the log-probs it needs; §1's notes say which).",
        );
    }
    let std_lines: Vec<Series> = adv_steps
        .iter()
        .enumerate()
        .map(|(v, a)| Series {
            label: f.variants[v].label.clone(),
            colour: colour(v),
            points: (0..steps.len())
                .map(|i| (xs[i], a.step_value(i, "std")))
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
        body += &format!(
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            step_name(s),
            j.step(i, "rows", Style::Plain),
            j.step(i, "score_sum/mean", Style::Plain),
            j.step(i, "groups/no_signal_fraction", Style::Percent),
            j.step(i, "kl/mean_k1", Style::Plain),
        );
        if let Some(v) = is_variant {
            let m = Metrics::of(&f.variants[v]);
            for key in [
                "rollout_corr/rollout_is_mean",
                "rollout_corr/rollout_is_max",
            ] {
                body += &format!("<td>{}</td>", m.at(s, key, Style::Plain));
            }
        }
        body += &format!(
            "<td>{}</td>",
            j.step(i, "rejection/rejected_token_fraction", Style::Percent)
        );
        for a in &adv_steps {
            body += &format!("<td>{}</td>", a.step(i, "std", Style::Plain));
        }
        body += "</tr>\n";
    }
    body += "</table>\n";
    if is_variant.is_none() {
        absent.push("No IS-weight plot: no variant computes rollout IS weights.");
    }
    for why in absent {
        body += &format!("<p class=\"meta\">{why}</p>\n");
    }
    Ok(PageSection {
        id: "steps",
        title: "Per step",
        caption,
        body: Ok(body),
    })
}
