//! The page: seven sections, each with a one-line caption saying what to look for, or saying
//! why it is absent. Numbers are read from the commands' JSON (`html::num`), figures drawn by
//! `plots`.
//!
//! One file per section, in the page's order: `findings`, `steps`, `distributions`,
//! `difficulty_bias`, `token_strips`, `correction` and `loss`; `parts` holds what they share.
//! Numbers are read by JSON pointer from the commands' own JSON (`inspect`, `compare`,
//! `run --metrics`, `loss`), every pointer spelled in `sources` (one accessor per source): the
//! pointer is written into the page with the number, which is what lets tests/report.rs check
//! the page against the commands.

mod correction;
mod difficulty_bias;
mod distributions;
mod findings;
mod loss;
mod parts;
mod sources;
mod steps;
mod token_strips;

use crate::error::Result;

use super::gather::Facts;
use super::html::{CSS, Style, escape};
use super::plots::{colour, css};
use sources::Compare;

/// The whole page.
pub fn render(facts: &Facts) -> Result<String> {
    let sections = [
        findings::findings(facts),
        steps::steps(facts)?,
        distributions::distributions(facts)?,
        difficulty_bias::difficulty_bias(facts)?,
        token_strips::token_strips(facts)?,
        correction::correction(facts)?,
        loss::loss(facts)?,
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
    let c = Compare(&facts.comparison_json);
    out += &format!(
        "<p class=\"meta\">{} rows, {} correct (score above {}) · {} · made by advcalc {} from the same passes as <code>inspect</code> and <code>compare</code></p>\n",
        c.total("rows", Style::Plain),
        c.total("correct_rows", Style::Plain),
        c.total("correct_above", Style::Plain),
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

/// "variant: …" or "variants: …", each label with its colour's swatch.
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
