//! What the page's sections share: the figures' sizes, a section's shape, and the small pieces
//! of HTML more than one section writes (where numbers come from is `sources`).

use super::super::html::escape;
use super::super::plots::{self, Series, css};

/// Bins of the advantage and IS-weight histograms.
pub(super) const BINS: usize = 60;
/// The width of the full-width figures, in SVG user units = CSS pixels: at most the page's
/// column (the body's `max-width` in `html::CSS`, 1080 px), so on a screen wide enough for
/// the column a figure is shown at its own size and its text at the sizes `plots` draws it.
pub const WIDTH: u32 = 1000;
/// The per-step small multiples: three to a row of the column (with the grid's gaps).
pub(super) const STEP_CHART: (u32, u32) = (352, 250);

/// One section: present with its body, or absent with the reason.
pub(super) struct PageSection {
    /// The section's anchor and `data-section`.
    pub id: &'static str,
    /// Its heading.
    pub title: &'static str,
    /// What to look for (HTML).
    pub caption: String,
    /// The body (HTML), or why the section is absent.
    pub body: std::result::Result<String, String>,
}

/// An SVG figure in its frame.
pub(super) fn figure(svg: String) -> String {
    format!("<div class=\"fig\">{svg}</div>\n")
}

/// A figure with its lines' legend under it (swatch and label per line), then `more` (HTML).
pub(super) fn figure_with_legend(svg: String, lines: &[Series], more: &str) -> String {
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
pub(super) fn dashed_swatch(label: &str) -> String {
    format!(
        "<span class=\"dash\" style=\"border-color:{}\"></span>{}",
        css(plots::REFERENCE),
        escape(label)
    )
}

/// A step's name in tables.
pub(super) fn step_name(step: Option<i64>) -> String {
    step.map_or("all rows".into(), |s| format!("step {s}"))
}
