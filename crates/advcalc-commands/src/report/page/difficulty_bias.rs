//! Section 4, the difficulty-bias curve: mean |advantage| by group pass rate.

use crate::analysis::buckets::BUCKETS;
use crate::error::Result;

use super::super::difficulty;
use super::super::gather::{DISTINCT_SCORES, Facts};
use super::super::html::{Style, escape};
use super::super::plots::{self, Axes, Series, colour};
use super::parts::{PageSection, WIDTH, figure_with_legend};
use super::sources::Compare;

/// 4. The difficulty-bias curve.
pub(super) fn difficulty_bias(f: &Facts) -> Result<PageSection> {
    let mut caption = "Mean |advantage| per token against the share of the group's rows that are correct: a flat line weighs easy and hard prompts alike, a peak shows the difficulty the estimator amplifies; groups at 0 and 1 give group baselines nothing to learn from.".to_string();
    if f.distinct_scores.len() > DISTINCT_SCORES {
        // a graded reward: "correct" is the threshold's cut and nothing more
        caption += &format!(
            " The scores here are graded (more than {DISTINCT_SCORES} distinct values): a row counts as correct when its score is above {} (--correct-above), so a pass rate is the share of a group's rows above that line, not a share of solved attempts; set --correct-above to the score that means solved.",
            crate::numbers::num(f.correct_above)
        );
    }
    let Some(groups) = &f.groups else {
        return Ok(PageSection {
            id: "difficulty",
            title: "Difficulty bias",
            caption,
            body: Err("the dump has no <code>uid</code> column (or no variant groups its rows), so rows have no group and no pass rate.".into()),
        });
    };
    let c = Compare(&f.comparison_json);
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
    let lines: Vec<Series> = f
        .variants
        .iter()
        .enumerate()
        .map(|(v, facts)| Series {
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
            c.bucket(0, k, "groups", Style::Plain)
        );
        for v in 0..f.variants.len() {
            body += &format!(
                "<td>{}</td>",
                c.bucket(v, k, "mean_abs_advantage", Style::Plain)
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
