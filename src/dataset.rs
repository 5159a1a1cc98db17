//! Datasets (a directory or a glob of Parquet or Arrow IPC files read as one input,
//! `docs/datasets.md`) for runners that spread a dataset's files over processes or machines
//! (the Python package's `advcalc.ray`): its files in the CLI's order, a share of them run as
//! the CLI runs a dataset, and the clean-up of the temporary outputs killed writers left.
//! [`crate::run_with`] runs a whole dataset.

use std::path::{Path, PathBuf};

use crate::commands::run::{DatasetOptions, RunOptions, RunSummary};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::io::dataset::{Dataset, is_dataset, path_step};
use crate::io::format::Format;

/// One file of a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetFile {
    /// The file's path.
    pub path: PathBuf,
    /// Its path relative to the dataset (the directory, or a glob's fixed part): the output's
    /// path relative to OUT.
    pub rel: PathBuf,
    /// The step its path names (`step=N`), if any.
    pub path_step: Option<i64>,
    /// Its rows.
    pub rows: usize,
}

/// The files of the dataset IN names, in dataset order (by step, then by relative path), with
/// the CLI's checks (one schema, steps in paths); `None` when IN is not a dataset (one file, or
/// a directory of verl JSONL files). `format`: `--input-format`.
pub fn files(path: &Path, format: Option<Format>) -> Result<Option<Vec<DatasetFile>>> {
    if !is_dataset(path, format)? {
        return Ok(None);
    }
    let dataset = Dataset::open(path, format)?;
    Ok(Some(
        dataset
            .parts
            .iter()
            .map(|p| DatasetFile {
                path: p.path.clone(),
                rel: p.rel.clone(),
                path_step: p.path_step,
                rows: p.rows,
            })
            .collect(),
    ))
}

/// Run a share of a dataset as [`crate::run_with`] runs a dataset: the files `rels` under the
/// directory `opts.input`, in that order, read as one dataset named `name` (their own
/// pre-pass, pass 1, plan and pass 2), each output written to `opts.output` joined with its
/// `rel` (a temporary file renamed into place). OUT is not checked here: the caller has made
/// sure it is a directory or missing. `opts.input_format` applies to every file.
pub fn run_files(
    config: &Config,
    opts: &RunOptions,
    dopts: &DatasetOptions,
    name: String,
    rels: Vec<PathBuf>,
) -> Result<RunSummary> {
    let base = &opts.input;
    let keyed = rels
        .into_iter()
        .map(|rel| {
            let step = path_step(&rel)
                .map_err(|e| Error::data(format!("{}: {e}", base.join(&rel).display())))?;
            Ok((step, rel))
        })
        .collect::<Result<Vec<_>>>()?;
    let dataset = Dataset::from_files(name, base.clone(), keyed, opts.input_format)?;
    crate::commands::dataset::run_opened(config, opts, dopts, dataset)
}

/// Remove the temporary outputs in `dir` that killed processes of this host left (as `run`
/// does before it writes there): a runner's tasks killed mid-write. Best effort: errors are
/// ignored.
pub fn remove_stale_temporaries(dir: &Path) {
    crate::io::atomic::remove_stale_temporaries(dir);
}

/// The start of the temporary output names that process `pid` of this host writes,
/// `.advcalc-HOST-KEY-PID-`: what a runner's own atomic writes (the Python package's
/// `advcalc._atomic`) must name theirs as, for `remove_stale_temporaries` to know them.
pub fn temp_prefix_for(pid: u32) -> String {
    crate::io::atomic::temp_prefix_for(pid)
}
