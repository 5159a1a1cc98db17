//! Section 7, the loss: each `loss_agg_mode`'s gradient weight per token by response length.

use crate::error::Result;

use super::super::gather::Facts;
use super::super::html::{Style, escape};
use super::super::plots::{self, Axes, Series, colour};
use super::parts::{PageSection, WIDTH, figure_with_legend};
use super::sources::Loss;

/// The loss section: how each `loss_agg_mode` would weigh the dump's tokens by response
/// length (the loss stage, `docs/loss.md`), the configured mode's line marked.
pub(super) fn loss(f: &Facts) -> Result<PageSection> {
    let caption = "The loss replayed as verl's actor computes it (<code>advcalc loss</code> with the trainer YAML's actor section): the mean gradient weight |dL/d log π| a token gets, against its response's length, under each <code>loss_agg_mode</code>, relative to that mode's mean over all tokens (1 = an average token). Modes that weigh tokens alike lie on one line, which follows only the data (|A| and the clipping of each length); a line that falls with length makes a short response's tokens count more (seq-mean-token-mean's length bias, verl #957, #2776).".to_string();
    let l = match &f.loss {
        Ok(l) => l,
        Err(why) => {
            return Ok(PageSection {
                id: "loss",
                title: "Loss weights by response length",
                caption,
                // the fix that fits the reason: the trainer YAML when there is none, the
                // columns when they are missing; the reason alone otherwise (a mini-batch size
                // that does not divide a step is the configuration's, not the dump's)
                body: Err(if why.contains("no actor_rollout_ref.actor section") {
                    format!(
                        "{}; give the run's trainer YAML (<code>-c</code>).",
                        escape(why)
                    )
                } else if why.contains("log_probs") {
                    format!(
                        "{}; the replay reads <code>old_log_probs</code> (and <code>log_probs</code> off-policy).",
                        escape(why)
                    )
                } else {
                    format!("{}.", escape(why.trim_end_matches('.')))
                }),
            });
        }
    };
    let lines: Vec<Series> = l
        .curves
        .iter()
        .enumerate()
        .map(|(k, (mode, points))| Series {
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
    let view = Loss(&l.view);
    for k in 0..view.modes() {
        body += &format!("<tr><td class=\"l\">{}</td>", escape(view.name(k)));
        for q in 0..4 {
            body += &format!(
                "<td>{}</td>",
                view.mode(k, &format!("share_by_length_quartile/{q}"), Style::Percent)
            );
        }
        body += &format!(
            "<td>{}</td><td>{}</td><td>{}</td></tr>\n",
            view.mode(k, "share_positive", Style::Percent),
            view.mode(k, "share_negative", Style::Percent),
            view.mode(k, "token_weight_shortest_to_longest", Style::Plain),
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
