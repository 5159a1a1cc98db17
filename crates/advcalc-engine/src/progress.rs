//! A progress bar on stderr, drawn only when stderr is a terminal and the user did not ask
//! for quiet.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress(ProgressBar);

impl Progress {
    /// `total` is the number of rows one pass handles.
    pub fn new(total: u64, visible: bool) -> Self {
        let bar = if visible {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style =
                ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/{len} rows ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
            bar.set_style(style);
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress(bar)
    }

    /// Start a pass: reset the count and name it.
    pub fn pass(&self, name: &'static str) {
        self.0.set_position(0);
        self.0.set_message(name);
    }

    pub fn inc(&self, rows: usize) {
        self.0.inc(rows as u64);
    }

    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
