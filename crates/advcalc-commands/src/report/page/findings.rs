//! Section 1, the inspect findings: warnings first, with their fixes, then the checks'
//! numbers per step.

use super::super::gather::Facts;
use super::super::html::{Style, escape};
use super::parts::{PageSection, step_name};
use super::sources::Inspect;

/// 1. The inspect findings: warnings first, with their fixes, then the numbers per step.
pub(super) fn findings(f: &Facts) -> PageSection {
    let j = Inspect(&f.inspect_json);
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
            "<li data-code=\"{code}\" data-path=\"{}\"><code>{code}</code> · <b>{}</b> — {}{more}</li>\n",
            Inspect::warning(i, k),
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
        let p = |k: &str, style: Style| j.step(i, k, style);
        body += &format!(
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            step_name(s.step),
            p("rows", Style::Plain),
            p("groups/count", Style::Plain),
            p("groups/no_signal_fraction", Style::Percent),
            p("valid_token_fraction", Style::Percent),
            p("rows_ending_in_tool_token", Style::Plain),
            p("tool_spans/mean", Style::Plain),
            p("score_sum/mean", Style::Plain),
            p("kl/mean_k1", Style::Plain),
            p(
                "train_rollout_mismatch/ratio_outside_fraction",
                Style::Percent
            ),
            p("rejection/rejected_token_fraction", Style::Percent),
        );
    }
    body += "</table>\n";
    // the dash's footnote only where a dash is
    if body.contains(">—<") {
        body += "<p class=\"meta\">— : not checked: the dump lacks the columns, or the configuration does not run the check (the notes say which). docs/inspect.md explains each finding.</p>\n";
    } else {
        body += "<p class=\"meta\">docs/inspect.md explains each finding.</p>\n";
    }
    if let Some(check) = &f.inspect.logged {
        body += &format!(
            "<h3>Logged advantages</h3>\n<p>This is {} dump: advcalc recomputed every row's advantage as <code>{}</code> under <code>--convention {}</code> and compared it with the one {} logged (docs/trainers.md).</p>\n<table>\n<tr><th>rows compared</th><th>rows differing</th><th>of them in fragile groups</th><th>largest difference</th></tr>\n<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n</table>\n",
            escape(&check.trainer.a_title()),
            escape(check.estimator),
            escape(check.convention),
            escape(check.trainer.title()),
            j.logged("compared", Style::Plain),
            j.logged("differing", Style::Plain),
            j.logged("fragile", Style::Plain),
            j.logged("max_abs_difference", Style::Plain),
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
            "What <code>advcalc inspect -e {}</code> finds in this dump{}: fix the warnings (each says what to do) before reading the plots below.",
            escape(f.inspect_estimators[0]),
            match &f.inspect_estimators[1..] {
                [] => String::new(),
                others => format!(
                    ", with the checks that depend on the estimator made for {} too",
                    escape(&others.join(" and "))
                ),
            }
        ),
        body: Ok(body),
    }
}
