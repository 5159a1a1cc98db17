//! Section 3, the advantage distributions: one panel per variant on one shared axis.

use crate::error::Result;

use super::super::gather::Facts;
use super::super::html::{Style, escape};
use super::super::plots::{self, Panel, colour, css};
use super::parts::{BINS, PageSection, WIDTH, figure};
use super::sources::Compare;

/// 3. Advantage distributions, one panel per variant on one shared axis.
pub(super) fn distributions(f: &Facts) -> Result<PageSection> {
    let caption = "Each panel is one variant's advantages over every valid token, all on the same axis: compare spread and tails; a spike at 0 is tokens that get no gradient.".to_string();
    let c = Compare(&f.comparison_json);
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
        let p = |k: &str, style: Style| c.variant(v, k, style);
        body += &format!(
            "<tr><td class=\"l\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            css(colour(v)),
            escape(&facts.label),
            p("valid_tokens", Style::Plain),
            p("mean", Style::Plain),
            p("std", Style::Plain),
            p("min", Style::Plain),
            p("max", Style::Plain),
            p("zero_fraction", Style::Percent),
            p("weight_correct", Style::Plain),
            p("weight_incorrect", Style::Plain),
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
                c.pair(k, "sign_agreement", Style::Percent),
                c.pair(k, "rank_correlation", Style::Plain),
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
