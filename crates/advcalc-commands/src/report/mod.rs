//! `advcalc report`: one self-contained HTML page (inline SVG and CSS, nothing fetched,
//! printable) with the figures an RL engineer reaches for — the `inspect` findings, per-step
//! curves, advantage distributions, the difficulty-bias curve, token strips and the rollout
//! correction — from the same passes as `inspect` and `compare` (docs/report.md).
//!
//! `gather` runs the passes, `page` lays out the sections from what they found (its numbers
//! read from the commands' own JSON, `html`), `plots` draws the figures with plotters' SVG
//! backend; `sketch`, `groups`, `difficulty` and `strips` are the report's own reductions.

mod difficulty;
mod gather;
mod groups;
mod html;
mod loss;
mod page;
mod plots;
mod sketch;
mod strips;

use std::path::PathBuf;

use crate::analysis::collect::{CompareOptions, Variant};
use crate::error::{Error, Result};
use crate::io::whole_file;

/// How to make the report, beyond the variants.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// What the passes read and how, as for `compare` (the input: a file, `-` for an Arrow IPC
    /// stream on stdin, a JSONL dump or a dataset).
    pub read: CompareOptions,
    /// Rows (0-based, in input order) to draw as token strips besides the chosen ones.
    pub rows: Vec<usize>,
    /// The HTML file to write.
    pub output: PathBuf,
    /// Overwrite `output` if it exists.
    pub force: bool,
    /// The loss section's configuration: the first variant's with the trainer YAML's actor
    /// section (`advcalc loss`), or why it cannot be read.
    pub loss: std::result::Result<advcalc_config::Config, String>,
}

/// What the report found, for the command line.
#[derive(Debug, Clone)]
pub struct ReportSummary {
    /// Rows read.
    pub rows: usize,
    /// Warnings on the page (inspect's and the variants' `run` warnings).
    pub warnings: usize,
    /// Sections shown, of seven.
    pub sections: usize,
}

/// Make the report of `variants` on `opts.read.input` and write it to `opts.output` (a temporary
/// file beside it, renamed once complete: never a half-written page).
pub fn report(variants: &[Variant], opts: &ReportOptions) -> Result<ReportSummary> {
    whole_file::check_destination(&opts.output, opts.force)?;
    if crate::io::location::same_location(&opts.read.input, &opts.output) {
        return Err(Error::usage(format!(
            "{}: the report would overwrite its input",
            opts.output.display()
        )));
    }
    if crate::io::location::within(&opts.output, &opts.read.input) {
        return Err(Error::usage(format!(
            "{}: lies inside IN ({}), where it would become an input of the next run",
            opts.output.display(),
            opts.read.input.display()
        ))
        .with_hint("write the page outside IN"));
    }
    let facts = gather::gather(variants, opts)?;
    let html = page::render(&facts)?;
    whole_file::write(&opts.output, html.as_bytes(), opts.force, "the report")?;
    Ok(ReportSummary {
        rows: facts.rows,
        warnings: facts.inspect.warnings()
            + facts
                .variants
                .iter()
                .map(|v| v.warnings.len())
                .sum::<usize>(),
        sections: html.matches("data-present=\"true\"").count(),
    })
}
