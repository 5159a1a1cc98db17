//! The two passes over the input (docs/architecture.md's data flow), each parallel over row groups:
//!
//! 1. **Statistics**: decode the few columns cross-row statistics need (labels, step, mask,
//!    scores), reduce each row to its scalars, merge in row-group order, and run the
//!    estimator per training batch to get every row's advantage scalar.
//! 2. **Output**: decode each row group again, compute the token outputs, encode them on the
//!    worker thread, and append row groups in input order to a temporary file that is
//!    renamed onto OUT at the end.
//!
//! Results never depend on the thread count: merging and appending follow row-group order.
//!
//! A dataset IN is dispatched to `dataset` from here; what both write with (the options,
//! OUT's provenance, pass 2's encoding) lives in `run_options`, `provenance` and `encode`,
//! so `dataset` never imports this file.

#[cfg(feature = "cloud")]
use std::path::Path;

pub use crate::run_options::{DatasetOptions, RunOptions, RunSummary};

use crate::encode::encode_row_group;
use crate::engine::Engine;
use crate::engine::job::Job;
use crate::engine::kept::DEFAULT_MEMORY;
use crate::engine::kept::Kept;
use crate::engine::metrics;
use crate::engine::ordered::produce_in_parallel_consume_in_order;
use crate::engine::passes::{prepare_jobs_keeping, thread_pool};
use crate::engine::progress::Progress;
use crate::error::{Error, Result};
use crate::io::atomic::{check_destination, same_file, temporary_result};
use crate::io::dataset::Dataset;
use crate::io::format::{Format, is_stdio};
use crate::io::input::Input;
use crate::io::input_source::InputSource;
use crate::io::ipc;
use crate::io::read::ParquetInput;
use crate::io::sequence_output;
use crate::io::write::ParquetOutput;
#[cfg(feature = "cloud")]
use crate::provenance::PROVENANCE_PREFIX;
use crate::provenance::provenance_of;
use crate::run_options::metrics_force;
use advcalc_config::Config;

/// Compute the configured estimator's outputs from IN into OUT: the two passes, streamed
/// by row group, with every other column of IN copied unchanged and how OUT was made
/// recorded in its `advcalc.*` key-value metadata. OUT appears only once it is complete.
///
/// Errors are usage errors for OUT (the same file as IN, a directory, an existing file
/// without `force`) and data errors for IN (unreadable, a missing column, a refused value).
///
/// ```
/// use std::path::Path;
/// use advcalc_commands::run::{RunOptions, run};
/// use advcalc_config::{Config, ConfigSources};
/// use advcalc_maths::ErrorKind;
/// use advcalc_maths::shaping::scores::Layout;
///
/// let config = Config::load(&ConfigSources { estimator: Some("grpo"), ..Default::default() })?;
/// let dir = tempfile::tempdir().unwrap();
/// let opts = RunOptions {
///     input: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo.parquet"),
///     output: dir.path().join("out.parquet"),
///     force: false,
///     threads: Some(1),
///     progress: false,
///     layout: Layout::Ragged,
///     allow_nonfinite: false,
///     input_format: None,
///     output_format: None,
///     metrics: None,
///     memory: None,
/// };
/// let summary = run(&config, &opts)?;
/// // the demo dump: 256 rows in row groups of 64, no `step` column
/// assert_eq!((summary.rows, summary.row_groups, summary.training_batches), (256, 4, 1));
/// assert!(opts.output.is_file());
/// // OUT exists now: without `force` a second run refuses to overwrite it
/// assert_eq!(run(&config, &opts).unwrap_err().kind(), ErrorKind::Usage);
/// # Ok::<(), advcalc_maths::Error>(())
/// ```
pub fn run(config: &Config, opts: &RunOptions) -> Result<RunSummary> {
    run_with(config, opts, &DatasetOptions::default())
}

/// [`run`], with the options of a dataset run: IN a directory or a glob of Parquet or Arrow
/// files, OUT a directory mirroring them (`docs/datasets.md`).
pub fn run_with(
    config: &Config,
    opts: &RunOptions,
    dataset: &DatasetOptions,
) -> Result<RunSummary> {
    // what IN is, decided once; without `cloud` an object URL IN is refused here
    let source = InputSource::resolve(&opts.input, opts.input_format)?;
    #[cfg(not(feature = "cloud"))]
    crate::io::location::refuse_object_url(&opts.output)?;
    if let Some(metrics) = &opts.metrics {
        // under OUT's rules, before any work: never IN, never OUT, create-only
        crate::io::whole_file::check_side_output(
            metrics,
            metrics_force(opts, dataset),
            "--metrics",
            &[&opts.input],
            &[&opts.output],
        )?;
    }
    match &source {
        #[cfg(feature = "cloud")]
        InputSource::ObjectDataset { url, .. } => {
            return crate::dataset::run_objects(config, opts, dataset, url);
        }
        // a local dataset, into a local directory or (with `cloud`) a prefix in object storage
        InputSource::Dataset { .. } => return crate::dataset::run(config, opts, dataset),
        _ => {}
    }
    #[cfg(feature = "cloud")]
    if let Some(out) = crate::io::location::object_url(&opts.output)? {
        return run_to_object(config, opts, dataset, &source, &out);
    }
    run_file(config, opts, dataset, &source)
}

/// [`run_with`] on one file (IN not a dataset), `source` as resolved from `opts.input`.
fn run_file(
    config: &Config,
    opts: &RunOptions,
    dataset: &DatasetOptions,
    source: &InputSource,
) -> Result<RunSummary> {
    if dataset.resume {
        return Err(Error::usage(format!(
            "{}: --resume finishes a dataset run (IN a directory or a glob), not a file",
            opts.input.display()
        ))
        .with_hint("rerun a single file without --resume (with --force to overwrite OUT)"));
    }
    let out_format = Format::of(&opts.output, opts.output_format);
    if let Format::Jsonl | Format::Trainer(_) = out_format {
        let what = match out_format {
            Format::Trainer(t) => format!("{} dump", t.a_title()),
            _ => "JSONL".to_string(),
        };
        return Err(Error::usage(format!(
            "{}: advcalc writes Parquet or Arrow IPC, not {what}",
            opts.output.display()
        ))
        .with_hint("name OUT .parquet or .arrow (or pass --output-format)"));
    }
    if !is_stdio(&opts.input) && !is_stdio(&opts.output) && same_file(&opts.input, &opts.output) {
        return Err(Error::usage(format!(
            "{}: OUT is the same file as IN",
            opts.output.display()
        ))
        .with_hint("write to another file"));
    }
    if !is_stdio(&opts.output) {
        check_destination(&opts.output, opts.force)?;
    }
    let pool = thread_pool(opts.threads)?;
    // within the pool: a trainer dump's reader parses on its threads
    let opened = pool.install(|| {
        Input::open(
            source,
            opts.allow_nonfinite,
            &crate::io::trainers::DumpOptions::of(config),
        )
    })?;
    let input = &opened.parquet;
    let engine = Engine::new(config, input.schema(), input.name())?
        .with_layout(opts.layout)
        // a trainer's own NaN scores, under its convention, are not a fault
        .allow_nonfinite(opts.allow_nonfinite || opened.own_nan_scores(config))
        .with_metrics(opts.metrics.is_some());
    // Arrow IPC output is written from a finished Parquet result, and so is the output of a
    // JSONL dump (its own fields and one advantage per row).
    let result = match (out_format, &opened.jsonl) {
        (Format::Parquet, None) => None,
        _ => Some(temporary_result()?),
    };
    let provenance = provenance(config, opts, input);
    let mut summary = pool
        .install(|| {
            Passes {
                opts,
                job: engine.job(),
                input,
                output: result.as_ref().map_or(opts.output.as_path(), |r| r.path()),
                force: opts.force || result.is_some(),
                provenance: provenance.clone(),
            }
            .run()
        })
        // an error on a row of a trainer's dump names the user's file and line too
        .map_err(|e| opened.locate_error(e))?;
    if let Some(dump) = &opened.trainer {
        // what the dump's reader assumed comes first
        summary.notes.splice(0..0, dump.notes.iter().cloned());
    }
    match (&result, &opened.jsonl) {
        (Some(result), Some(jsonl)) => sequence_output::write(
            jsonl,
            result.path(),
            &opts.output,
            out_format,
            opts.force,
            provenance,
        )?,
        (Some(result), None) => {
            ipc::export_parquet(result.path(), &opts.output, out_format, opts.force)?
        }
        (None, _) => {}
    }
    Ok(summary)
}

/// [`run_with`] with OUT an object (`s3://…`): the result is written to a temporary local
/// file as for a local OUT, then put at OUT (`io::object::sink`): create-only unless
/// `--force`, so an existing OUT is refused by the store itself; nothing is visible at OUT
/// on any error.
#[cfg(feature = "cloud")]
fn run_to_object(
    config: &Config,
    opts: &RunOptions,
    dataset: &DatasetOptions,
    source: &InputSource,
    out: &crate::io::object::url::ObjectUrl,
) -> Result<RunSummary> {
    use crate::io::object::{sink, store::store_for};
    if crate::io::location::same_location(&opts.input, Path::new(&out.url)) {
        return Err(Error::usage(format!("{out}: OUT is the same object as IN"))
            .with_hint("write to another object"));
    }
    let key: &str = out.key.as_ref();
    let file_name = key.rsplit('/').next().unwrap_or(key);
    let suffix = file_name
        .rsplit_once('.')
        .map(|(_, ext)| format!(".{ext}"))
        .unwrap_or_default();
    let store = store_for(out)?;
    if !opts.force {
        // before any work; the create-only PUT at the end is what makes it race-free
        sink::refuse_existing(&store, &out.key, &out.url)?;
    }
    let dir = crate::io::atomic::temporary_dir(&out.url)?;
    let local = dir.path().join(format!("out{suffix}"));
    let output_format = Some(Format::of(Path::new(file_name), opts.output_format));
    let local_opts = RunOptions {
        output: local.clone(),
        output_format,
        ..opts.clone()
    };
    let summary = run_file(config, &local_opts, dataset, source)?;
    let policy = sink::PutPolicy {
        force: opts.force,
        ..Default::default()
    };
    sink::upload_to(&store, &out.key, &out.url, &local, &policy)?;
    Ok(summary)
}

struct Passes<'a> {
    opts: &'a RunOptions,
    job: Job<'a>,
    /// Where the Parquet result goes (OUT, or a temporary file for IPC output).
    output: &'a std::path::Path,
    force: bool,
    input: &'a ParquetInput,
    /// What OUT records about how it was made (its key-value metadata).
    provenance: Vec<(String, String)>,
}

/// How OUT was made, as `advcalc.*` key-value metadata: what makes an offline re-analysis
/// reproducible (`advcalc inspect` shows it). The row count comes from IN's footer.
pub fn provenance(
    config: &Config,
    opts: &RunOptions,
    input: &ParquetInput,
) -> Vec<(String, String)> {
    // the size of IN as given (a stream on stdin has none)
    let bytes = std::fs::metadata(&opts.input)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let starts = input.row_group_starts();
    #[cfg(feature = "cloud")]
    if let Some(object) = input.object() {
        // an object's size, and the ETag (and version) it was read at, as a dataset's
        // outputs record them
        let mut kv = provenance_of(
            config,
            input.name(),
            Some(object.size()),
            starts[starts.len() - 1],
        );
        let key = |k: &str| format!("{PROVENANCE_PREFIX}{k}");
        if let Some(e_tag) = object.etag() {
            kv.push((key("input_etag"), e_tag.to_string()));
        }
        if let Some(version) = object.version() {
            kv.push((key("input_version"), version.to_string()));
        }
        return kv;
    }
    provenance_of(config, input.name(), bytes, starts[starts.len() - 1])
}

impl Passes<'_> {
    fn run(&self) -> Result<RunSummary> {
        let job = &self.job;
        let starts = self.input.row_group_starts();
        let row_groups = self.input.num_row_groups();
        let rows = starts[row_groups];
        let progress = Progress::new(rows as u64, self.opts.progress);
        // Only what the maths needs is decoded; every other column is copied unchanged.
        let projection = job.columns.projection(job.metrics);
        let single = Dataset::single(self.input);
        // pass 1's decoded row groups, kept for pass 2 within the memory budget
        let kept = Kept::new(row_groups, self.opts.memory.unwrap_or(DEFAULT_MEMORY));
        let mut prepared = prepare_jobs_keeping(
            &single,
            std::slice::from_ref(job),
            &projection,
            &progress,
            &kept,
        )?;
        let prepared = prepared.pop().expect("one job");
        let mut summary = RunSummary {
            rows,
            row_groups,
            files: 1,
            kept: 0,
            training_batches: prepared.training_batches.len(),
            warnings: prepared.warnings.clone(),
            notes: prepared.notes.clone(),
            length_bias: None,
        };
        let mut metric_parts = prepared.metric_parts.clone();

        progress.pass("writing");
        let (output_schema, sources) = job.output_layout();
        let mut output = ParquetOutput::create_with_metadata(
            self.output,
            output_schema,
            sources,
            self.input.copy_source(),
            self.force,
            self.provenance.clone(),
        )?;
        // Row groups are encoded on every worker and appended in order by whichever worker is
        // free; memory is bounded by the row groups encoded ahead of the append.
        let (encoder, sink) = output.split();
        produce_in_parallel_consume_in_order(
            row_groups,
            2 * rayon::current_num_threads(),
            |rg| {
                let batch = kept.take(&single, rg, &projection)?;
                let done = encode_row_group(
                    job,
                    &batch,
                    starts[rg],
                    &prepared,
                    encoder,
                    rg,
                    self.opts.metrics.is_some(),
                )?;
                progress.inc(batch.num_rows());
                Ok(done)
            },
            |rg, (encoded, parts)| {
                metrics::merge(&mut metric_parts, parts);
                sink.append(rg, encoded)
            },
        )?;
        if let Some((warnings, json, table)) = job.loss_report(&prepared, &metric_parts) {
            summary.warnings.extend(warnings);
            summary.length_bias = Some((json, table));
        }
        if let Some(path) = &self.opts.metrics {
            let json = metrics::to_json(job, &prepared, &metric_parts);
            let text = serde_json::to_string_pretty(&json).unwrap_or_default();
            crate::io::whole_file::write_side_output(
                path,
                (text + "\n").as_bytes(),
                self.opts.force,
                "--metrics",
            )?;
        }
        output.finish()?;
        progress.finish();
        Ok(summary)
    }
}
