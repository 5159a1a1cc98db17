//! What `run` takes and returns, on one file and on a dataset (`run` and `dataset` share them).

use std::path::PathBuf;

use crate::io::format::Format;
use crate::shaping::scores::Layout;

/// How to run, beyond the algorithm configuration.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// IN: Parquet, an Arrow IPC file or stream, `-` for an Arrow IPC stream on stdin, or a
    /// verl JSONL dump (a `.jsonl` file or a directory of them; OUT then holds the dump's
    /// fields and one `advantage` per row).
    pub input: PathBuf,
    /// OUT: IN with the computed columns, written to a temporary file and renamed onto this
    /// path at the end; `-` writes an Arrow IPC stream to stdout. Never IN itself.
    pub output: PathBuf,
    /// Overwrite OUT if it exists (`--force`); without it an existing OUT is a usage error.
    pub force: bool,
    /// Worker threads; `None` means one per core.
    pub threads: Option<usize>,
    /// Draw a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
    /// How token lists are laid out (`--layout`): where a scalar `score` column is placed.
    pub layout: Layout,
    /// Let NaN and ±inf through instead of refusing them.
    pub allow_nonfinite: bool,
    /// `--input-format` / `--output-format`; `None`: by extension (`-` is an Arrow stream).
    pub input_format: Option<Format>,
    /// Format of OUT; `None`: by extension, as for IN.
    pub output_format: Option<Format>,
    /// Where to write the metrics as JSON (`--metrics`).
    pub metrics: Option<PathBuf>,
    /// `--memory`: bytes of decoded row groups pass 1 may keep for pass 2, which reads again
    /// whatever did not fit (`engine::kept`); `None`: [`DEFAULT_MEMORY`](crate::engine::kept::DEFAULT_MEMORY) (1 GiB). The output
    /// is the same for any budget.
    pub memory: Option<usize>,
}

/// How to run on a dataset (IN a directory or a glob), beyond [`RunOptions`].
#[derive(Debug, Clone, Default)]
pub struct DatasetOptions {
    /// `--resume`: keep each output file that a run of this configuration finished from the
    /// same input (its provenance says so and it is newer than its input), redo the others;
    /// refuse outputs of another configuration.
    pub resume: bool,
}

/// What a run did, for the user.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    /// Rows of IN (and of OUT).
    pub rows: usize,
    /// Row groups of IN, which OUT keeps.
    pub row_groups: usize,
    /// Files of IN (1 unless IN is a dataset).
    pub files: usize,
    /// Output files a dataset's `--resume` kept as they were.
    pub kept: usize,
    /// Training batches: one per `step` value, or one without a `step` column.
    pub training_batches: usize,
    /// Things the user should know about the data (printed by `main`).
    pub warnings: Vec<String>,
    /// Things the user should know about the run (printed as notes).
    pub notes: Vec<String>,
    /// `advcalc loss`: how each `loss_agg_mode` weighs the dump (`docs/loss.md`), as JSON
    /// and as a table.
    pub length_bias: Option<(serde_json::Value, String)>,
}

/// Whether `--metrics` may replace an existing file: with `--force`, and with `--resume`,
/// whose metrics cover the whole dataset again.
pub fn metrics_force(opts: &RunOptions, dataset: &DatasetOptions) -> bool {
    opts.force || dataset.resume
}
