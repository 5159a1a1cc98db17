//! Section 5, the token strips: the chosen rows' tokens coloured by advantage, with why each
//! row was drawn.

use crate::error::Result;
use crate::numbers::sig;

use super::super::gather::Facts;
use super::super::html::escape;
use super::super::plots;
use super::super::strips::{Feature, Strip, StripReason};
use super::parts::{PageSection, WIDTH, figure};

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
pub(super) fn token_strips(f: &Facts) -> Result<PageSection> {
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
