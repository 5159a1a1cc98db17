//! Section 6, the rollout correction: the IS-weight distribution and what each rejection
//! option removed.

use crate::error::Result;

use super::super::gather::Facts;
use super::super::html::{Style, escape};
use super::super::plots::{self, Panel, colour};
use super::parts::{BINS, PageSection, WIDTH, figure, step_name};
use super::sources::Metrics;

/// 6. Rollout correction: the IS-weight distribution and what each rejection option removed.
pub(super) fn correction(f: &Facts) -> Result<PageSection> {
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
        let m = Metrics::of(facts);
        let steps = m.steps();
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
                .filter_map(|&s| m.value(s, "rollout_corr/rollout_is_min"))
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
                        m.at(s, &format!("rollout_corr/{key}"), Style::Plain)
                    );
                }
                body += &format!(
                    "<td>{}</td></tr>\n",
                    m.at(
                        s,
                        "rollout_corr/rollout_is_ratio_fraction_high",
                        Style::Percent
                    )
                );
            }
            body += "</table>\n<p class=\"meta\">Weights as the update applies them (truncated, and normalised when configured); the table holds verl's <code>rollout_corr/rollout_is_*</code> metrics, before batch normalisation.</p>\n";
        }
        if !c.rs.is_empty() {
            let mean_over = |key: &str| -> f64 {
                let xs: Vec<f64> = steps.iter().filter_map(|&s| m.value(s, key)).collect();
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
                        m.at(
                            s,
                            &format!("rollout_corr/rollout_rs_{}_masked_fraction", o.name),
                            Style::Percent
                        ),
                        m.at(
                            s,
                            &format!("rollout_corr/rollout_rs_{}_seq_masked_fraction", o.name),
                            Style::Percent
                        ),
                    );
                }
                body += &format!(
                    "<tr><td class=\"l\">{}</td><td class=\"l\">all options together</td><td>{}</td><td>{}</td></tr>\n",
                    step_name(s),
                    m.at(s, "rollout_corr/rollout_rs_masked_fraction", Style::Percent),
                    m.at(
                        s,
                        "rollout_corr/rollout_rs_seq_masked_fraction",
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
