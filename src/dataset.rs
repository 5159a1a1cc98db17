//! Datasets (a directory or a glob of Parquet or Arrow IPC files read as one input,
//! `docs/datasets.md`) for runners that spread a dataset's files over processes or machines
//! (the Python package's `advcalc.ray`): its files in the CLI's order, a share of them run as
//! the CLI runs a dataset, and the clean-up of the temporary outputs killed writers left.
//! [`crate::run_with`] runs a whole dataset; [`part_stats`] and [`part_outputs`] are the passes
//! on one file of an input whose plan is made elsewhere.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::io::dataset::{Dataset, path_step};
use crate::io::format::Format;
use crate::io::input_source::InputSource;
pub use advcalc_commands::part_passes::{PartOf, PartStats, StatsOf, part_outputs, part_stats};
use advcalc_commands::run::{DatasetOptions, RunOptions, RunSummary};

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
/// the CLI's checks (one schema, steps in paths); `None` when IN is not a local dataset (one
/// file, or a directory of verl JSONL files). `format`: `--input-format`.
pub fn files(path: &Path, format: Option<Format>) -> Result<Option<Vec<DatasetFile>>> {
    // a dataset in object storage is listed by the Python package's own client
    let InputSource::Dataset { path, format } = InputSource::resolve(path, format)? else {
        return Ok(None);
    };
    let dataset = Dataset::open(&path, format)?;
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
    advcalc_commands::dataset::run_opened(config, opts, dopts, dataset)
}

/// [`run_files`] on a share of a dataset in object storage: the objects `rels` under the
/// prefix `opts.input` (`s3://bucket/dumps/`), in that order, read as one dataset named
/// `name` by ranged GETs (no listing of IN), each output written under `opts.output` (a
/// prefix, or a local directory) as `run` writes a dataset's: an object put once complete,
/// create-only unless `opts.force`, with the same provenance (the input's ETag). OUT is
/// checked and listed as `run` checks it (apart from IN's prefix).
#[cfg(feature = "cloud")]
pub fn run_objects(
    config: &Config,
    opts: &RunOptions,
    dopts: &DatasetOptions,
    name: String,
    rels: Vec<String>,
) -> Result<RunSummary> {
    use crate::io::object::list::dataset_url_of;
    let base = match dataset_url_of(&opts.input)? {
        Some(url) if url.pattern.is_none() => url,
        _ => {
            return Err(Error::usage(format!(
                "{}: not a prefix in object storage (s3://bucket/dumps/)",
                opts.input.display()
            )));
        }
    };
    let dataset = Dataset::from_objects(name, &base, rels, opts.input_format)?;
    advcalc_commands::dataset::run_objects_opened(config, opts, dopts, &base, dataset)
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

#[cfg(all(test, feature = "cloud"))]
mod tests {
    use super::*;
    use crate::io::object::runtime::block_on;
    use crate::io::object::testing::{Counting, put};
    use object_store::ObjectStoreExt;
    use std::sync::Arc;

    fn opts(input: &str, output: &str, force: bool) -> RunOptions {
        RunOptions {
            input: PathBuf::from(input),
            output: PathBuf::from(output),
            force,
            threads: Some(1),
            progress: false,
            layout: crate::Layout::Ragged,
            allow_nonfinite: false,
            input_format: None,
            output_format: None,
            metrics: None,
            memory: None,
        }
    }

    /// A share of a dataset in object storage (one step's object): read without listing IN,
    /// its output put under OUT with the input's ETag in its provenance, and put create-only:
    /// a second run refuses the existing output unless forced.
    #[test]
    fn a_share_of_objects_runs_as_a_dataset() {
        let store = Arc::new(Counting::default());
        crate::io::object::store::register("s3://run-object-share", store.clone());
        let demo = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/demo.parquet"
        ))
        .unwrap();
        for key in ["in/step=1.parquet", "in/step=2.parquet"] {
            put(&store, key, &demo);
        }
        let config = Config::load(&crate::ConfigSources {
            estimator: Some("grpo"),
            ..Default::default()
        })
        .unwrap();
        let run = |force: bool| {
            run_objects(
                &config,
                &opts(
                    "s3://run-object-share/in/",
                    "s3://run-object-share/out/",
                    force,
                ),
                &DatasetOptions::default(),
                "s3://run-object-share/in/".into(),
                vec!["step=2.parquet".into()],
            )
        };
        let before = store.counts();
        let summary = run(false).unwrap();
        assert_eq!((summary.rows, summary.files), (256, 1));
        // one listing: OUT's (what exists there), none of IN
        assert_eq!(store.counts().lists - before.lists, 1);
        let key = object_store::path::Path::from("out/step=2.parquet");
        let got = block_on(async { store.get(&key).await.unwrap().bytes().await }).unwrap();
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(got).unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows(), 256);
        let kv = reader
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .unwrap();
        assert!(kv.iter().any(|kv| kv.key == "advcalc.input_etag"));
        assert!(
            block_on(store.head(&object_store::path::Path::from("out/step=1.parquet"))).is_err()
        );

        let e = run(false).unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        run(true).unwrap();
        // a glob is not a prefix
        let e = run_objects(
            &config,
            &opts(
                "s3://run-object-share/in/*.parquet",
                "s3://run-object-share/o2/",
                false,
            ),
            &DatasetOptions::default(),
            "x".into(),
            vec!["step=1.parquet".into()],
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a prefix"), "{e}");
    }
}
