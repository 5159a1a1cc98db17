//! `advcalc._native`: the Python package's bridge to the engine. It converts at the edges
//! only (Arrow C streams in, a pyarrow RecordBatchReader out, JSON text for reports) and
//! leaves argument handling to the Python layer (`advcalc/__init__.py`), which documents the
//! API. Every call runs the engine on a worker thread with the GIL released, checks for
//! Ctrl-C meanwhile, and turns engine errors and panics into `advcalc.Error` subclasses.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::ffi_stream::RecordBatchStreamReader;
use arrow::pyarrow::{PyArrowType, Table};
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use advcalc::commands::compare::{CompareOptions, Variant, compare as compare_dump};
use advcalc::commands::inspect::{InspectOptions, inspect as inspect_dump};
use advcalc::input::{InputFile, InputSource};
use advcalc::{
    Config, ConfigSources, DatasetOptions, Engine, ErrorKind, Exchange, Format, Layout, PlanShard,
    RowStats, RunOptions,
};
use rayon::prelude::*;

/// Where a configuration comes from: a file, or YAML text (a dict arrives as JSON text).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ConfigArgs {
    config_file: Option<PathBuf>,
    config_text: Option<String>,
    /// What messages call `config_text` (`config`, or the URL it was read from).
    config_name: Option<String>,
    sets: Vec<String>,
    estimator: Option<String>,
    convention: Option<String>,
    /// `advcalc.loss`: read the actor section too.
    actor: bool,
}

impl ConfigArgs {
    fn load(&self) -> advcalc::Result<Config> {
        self.load_for(None)
    }

    /// The configuration for IN `dump`, another trainer's dump (its estimator and convention
    /// are the defaults), as the CLI loads it.
    fn load_for(&self, dump: Option<advcalc::Trainer>) -> advcalc::Result<Config> {
        Config::load(&ConfigSources {
            input_defaults: dump.map(advcalc::input::dump_defaults),
            actor: self.actor,
            file: self.config_file.as_deref(),
            text: self
                .config_text
                .as_deref()
                .map(|t| (self.config_name.as_deref().unwrap_or("config"), t)),
            sets: &self.sets,
            estimator: self.estimator.as_deref(),
            convention: self.convention.as_deref(),
            ..Default::default()
        })
    }
}

/// How to read IN, shared by every call that reads a dump.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ReadArgs {
    input_format: Option<String>,
    layout: String,
    threads: Option<usize>,
    allow_nonfinite: bool,
}

impl ReadArgs {
    fn format(&self) -> advcalc::Result<Option<Format>> {
        self.input_format.as_deref().map(parse_format).transpose()
    }

    fn layout(&self) -> advcalc::Result<Layout> {
        match self.layout.as_str() {
            "ragged" => Ok(Layout::Ragged),
            "padded" => Ok(Layout::Padded),
            other => Err(advcalc::Error::usage(format!(
                "layout={other:?}: expected \"ragged\" or \"padded\""
            ))),
        }
    }
}

fn parse_format(name: &str) -> advcalc::Result<Format> {
    match name {
        "parquet" => Ok(Format::Parquet),
        "arrow" => Ok(Format::ArrowFile),
        "arrows" => Ok(Format::ArrowStream),
        "jsonl" => Ok(Format::Jsonl),
        other => advcalc::Trainer::from_name(other)
            .map(Format::Trainer)
            .ok_or_else(|| {
                advcalc::Error::usage(format!(
                    "format {other:?}: expected \"parquet\", \"arrow\", \"arrows\", \"jsonl\", \"trl\", \"nemo-rl\", \"prime-rl\" or \"open-instruct\""
                ))
            }),
    }
}

/// Run `work` on a worker thread with the GIL released, checking for Ctrl-C meanwhile: on a
/// pending `KeyboardInterrupt` the engine is asked to stop (it unwinds within a fraction of a
/// second, removing its temporary files) and the interrupt is raised. A panic becomes
/// `advcalc.Error`; no Rust panic crosses into the interpreter.
fn run_engine<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> advcalc::Result<T> + Send,
) -> PyResult<T> {
    let (tx, rx) = mpsc::channel();
    // detach needs what it borrows to be Sync; only this thread receives
    let rx = Mutex::new(rx);
    let recv_timeout = |d| {
        rx.lock()
            .map_or(Err(mpsc::RecvTimeoutError::Disconnected), |r| {
                r.recv_timeout(d)
            })
    };
    let outcome = std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(work)));
        });
        loop {
            match py.detach(|| recv_timeout(Duration::from_millis(50))) {
                Ok(done) => return Ok(done),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(interrupt) = py.check_signals() {
                        advcalc::interrupt::request_stop(2);
                        // wait for the work to unwind (its temporary files removed)
                        let _ = py.detach(|| recv_timeout(Duration::MAX));
                        advcalc::interrupt::clear();
                        return Err(interrupt);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Ok(Err(Box::new("the worker thread ended without a result")));
                }
            }
        }
    })?;
    match outcome {
        Ok(result) => result.map_err(|e| to_python(py, &e)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(raise(
                py,
                "Error",
                format!("internal error (a bug in advcalc, please report it): {what}"),
                None,
                Vec::new(),
            ))
        }
    }
}

/// An engine error as the matching `advcalc` exception, with the CLI's message, causes and
/// hint (their flags renamed to the Python arguments by `advcalc._errors._from_engine`).
fn to_python(py: Python<'_>, e: &advcalc::Error) -> PyErr {
    let class = match e.kind() {
        ErrorKind::Data => "DataError",
        ErrorKind::Usage => "UsageError",
        ErrorKind::Interrupted(_) => {
            return pyo3::exceptions::PyKeyboardInterrupt::new_err(e.message().to_string());
        }
    };
    let mut causes: Vec<String> = Vec::new();
    let mut last = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        // as the CLI prints them: a wrapper that repeats its cause is said once
        let line = cause.to_string();
        if !last.contains(&line) {
            causes.push(line.clone());
            last = line;
        }
        source = cause.source();
    }
    raise(
        py,
        class,
        e.to_string(),
        e.hint().map(str::to_string),
        causes,
    )
}

fn raise(
    py: Python<'_>,
    class: &str,
    message: String,
    hint: Option<String>,
    causes: Vec<String>,
) -> PyErr {
    // the Python layer names the CLI's flags in the text as its own arguments
    let made = py
        .import("advcalc._errors")
        .and_then(|m| m.getattr("_from_engine"))
        .and_then(|f| f.call1((class, message.clone(), hint, causes)));
    match made {
        Ok(exception) => PyErr::from_value(exception),
        Err(e) => e,
    }
}

fn usage(py: Python<'_>, message: String) -> PyErr {
    to_python(py, &advcalc::Error::usage(message))
}

/// The batches of a C stream, read to the end (a stream that fails halfway is an error,
/// never a partial table).
fn collect_stream(
    reader: RecordBatchStreamReader,
) -> advcalc::Result<(SchemaRef, Vec<RecordBatch>)> {
    let schema = reader.schema();
    let mut batches = Vec::new();
    for batch in reader {
        // a slow producer must not delay Ctrl-C
        advcalc::interrupt::check()?;
        batches.push(batch.map_err(|e| {
            advcalc::Error::data("<stream>: cannot read the Arrow C stream").with_source(e)
        })?);
    }
    Ok((schema, batches))
}

/// What `compute` returns to the Python layer: the result as a pyarrow Table (no copy), the
/// metrics as JSON text, the warnings and notes.
type ComputedParts = (PyArrowType<Table>, Option<String>, Vec<String>, Vec<String>);

/// `advcalc.compute` on an Arrow C stream: the engine on the batches in memory. `name`
/// names the input in messages (default `<stream>`).
#[pyfunction]
#[pyo3(signature = (data, config, read, metrics, name=None))]
fn compute_stream(
    py: Python<'_>,
    data: PyArrowType<RecordBatchStreamReader>,
    config: ConfigArgs,
    read: ReadArgs,
    metrics: bool,
    name: Option<String>,
) -> PyResult<ComputedParts> {
    let reader = data.0;
    let name = name.unwrap_or_else(|| "<stream>".to_string());
    let done = run_engine(py, move || {
        let (schema, batches) = collect_stream(reader)?;
        compute_in_memory(
            config.load()?,
            &read,
            read.allow_nonfinite,
            metrics,
            schema,
            &name,
            &batches,
        )
    })?;
    into_python(py, done)
}

/// `advcalc.compute` on a Parquet or Arrow IPC file: its row groups read in parallel by the
/// CLI's reader (its checks, its messages naming the file), then the engine in memory.
/// `None` for a verl JSONL dump, whose output (the dump's fields and one advantage per row)
/// only `run` writes: the Python layer then goes through `run`.
#[pyfunction]
fn compute_path(
    py: Python<'_>,
    src: PathBuf,
    config: ConfigArgs,
    read: ReadArgs,
    metrics: bool,
) -> PyResult<Option<ComputedParts>> {
    let done = run_engine(py, move || {
        // a JSONL dump is told by its name (or a directory's .jsonl files) before it is read,
        // so that only `run` parses it
        let source = InputSource::resolve(&src, read.format()?)?;
        if source.is_jsonl() {
            return Ok(None);
        }
        let mut config = config.load_for(source.trainer())?;
        let input = InputFile::open(
            &source,
            read.allow_nonfinite,
            &advcalc::DumpOptions::of(&config),
        )?;
        // the reader's notes first, as `run` prints them
        config.notes.splice(0..0, input.notes().iter().cloned());
        let allow_nonfinite = read.allow_nonfinite || input.own_nan_scores(&config);
        let batches = advcalc::thread_pool(read.threads)?.install(|| {
            (0..input.num_row_groups())
                .into_par_iter()
                .map(|rg| input.read_row_group(rg))
                .collect::<advcalc::Result<Vec<_>>>()
        })?;
        compute_in_memory(
            config,
            &read,
            allow_nonfinite,
            metrics,
            input.schema(),
            input.name(),
            &batches,
        )
        .map(Some)
    })?;
    done.map(|d| into_python(py, d)).transpose()
}

/// The engine over record batches held in memory: the output schema, what it computed, and
/// the configuration's notes.
type InMemory = (SchemaRef, advcalc::Computed, Vec<String>);

#[allow(clippy::too_many_arguments)]
fn compute_in_memory(
    config: Config,
    read: &ReadArgs,
    allow_nonfinite: bool,
    metrics: bool,
    schema: SchemaRef,
    name: &str,
    batches: &[RecordBatch],
) -> advcalc::Result<InMemory> {
    let engine = Engine::new(&config, schema, name)?
        .with_layout(read.layout()?)
        .allow_nonfinite(allow_nonfinite)
        .with_metrics(metrics);
    let computed = advcalc::thread_pool(read.threads)?.install(|| engine.compute(batches))?;
    Ok((engine.output_schema(), computed, config.notes))
}

fn into_python(py: Python<'_>, (schema, result, mut notes): InMemory) -> PyResult<ComputedParts> {
    notes.extend(result.notes);
    let metrics = result.metrics.map(|m| m.to_string());
    let table = Table::try_new(result.batches, schema).map_err(|e| {
        to_python(
            py,
            &advcalc::Error::data("cannot build the result table").with_source(e),
        )
    })?;
    Ok((PyArrowType(table), metrics, result.warnings, notes))
}

/// What `run` returns to the Python layer: rows, row groups, batches, warnings, notes.
type RunDone = (usize, usize, usize, Vec<String>, Vec<String>);

/// `advcalc.run`: the CLI's file-to-file job. Returns (rows, row_groups, batches, warnings,
/// notes).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    config: ConfigArgs,
    read: ReadArgs,
    output_format: Option<String>,
    force: bool,
    metrics: Option<PathBuf>,
    memory: Option<usize>,
) -> PyResult<RunDone> {
    run_engine(py, move || {
        let config = config.load_for(advcalc::input::dump_trainer(&src, read.format()?))?;
        let opts = RunOptions {
            input: src,
            output: dst,
            force,
            threads: read.threads,
            progress: false,
            layout: read.layout()?,
            allow_nonfinite: read.allow_nonfinite,
            input_format: read.format()?,
            output_format: output_format.as_deref().map(parse_format).transpose()?,
            metrics,
            memory,
        };
        let summary = advcalc::run(&config, &opts)?;
        let mut notes = config.notes;
        notes.extend(summary.notes);
        Ok((
            summary.rows,
            summary.row_groups,
            summary.training_batches,
            summary.warnings,
            notes,
        ))
    })
}

/// `advcalc.inspect`: the report as `inspect --json` prints it (JSON text).
#[pyfunction]
fn inspect(py: Python<'_>, src: PathBuf, config: ConfigArgs, read: ReadArgs) -> PyResult<String> {
    run_engine(py, move || {
        let config = config.load_for(advcalc::input::dump_trainer(&src, read.format()?))?;
        let opts = InspectOptions {
            input: src,
            input_format: read.format()?,
            layout: read.layout()?,
            threads: read.threads,
            progress: false,
            estimator_given: config.estimator_configured,
        };
        Ok(inspect_dump(&config, &opts)?.to_json().to_string())
    })
}

/// `advcalc.compare`: the comparison as `compare --json` prints it (JSON text), and each
/// variant's warnings. `variants` are (label, configuration) pairs.
#[pyfunction]
fn compare(
    py: Python<'_>,
    src: PathBuf,
    variants: Vec<(String, ConfigArgs)>,
    read: ReadArgs,
    correct_above: f64,
) -> PyResult<String> {
    if variants.len() < 2 {
        return Err(usage(py, "compare needs at least two variants".into()));
    }
    run_engine(py, move || {
        let dump = advcalc::input::dump_trainer(&src, read.format()?);
        let variants = variants
            .iter()
            .map(|(label, c)| {
                Ok(Variant {
                    label: label.clone(),
                    config: c
                        .load_for(dump)
                        .map_err(|e| e.context(format!("variant {label}")))?,
                })
            })
            .collect::<advcalc::Result<Vec<_>>>()?;
        let opts = CompareOptions {
            input: src,
            input_format: read.format()?,
            layout: read.layout()?,
            threads: read.threads,
            progress: false,
            allow_nonfinite: read.allow_nonfinite,
            correct_above,
        };
        Ok(compare_dump(&variants, &opts)?.to_json().to_string())
    })
}

/// The name of the estimator a configuration selects (compare's variant labels).
#[pyfunction]
fn estimator_name(py: Python<'_>, config: ConfigArgs) -> PyResult<String> {
    run_engine(py, move || {
        Ok(config.load()?.algorithm.adv_estimator.name().to_string())
    })
}

/// `Engine.file_stats`' result: statistics, steps, rows, the file's version.
type FileStats<'py> = (Bound<'py, PyBytes>, Vec<Option<i64>>, usize, Option<String>);

/// The engine's passes on record batches, for runners that spread them over processes and
/// machines (`advcalc.ray`): statistics and plan shards cross as bytes (Arrow IPC,
/// `engine::exchange`), and each unit of work (a file, a block) is numbered by its first row
/// in the input's order.
#[pyclass(name = "Engine", frozen)]
struct PyEngine {
    engine: Engine,
    /// What the engine was made with, for the passes on one file (`file_stats`,
    /// `file_outputs`), which bind an engine to the file's own schema: the configuration,
    /// and how to read (`share_options`, without paths).
    config: Config,
    read: RunOptions,
}

impl PyEngine {
    /// The run options of the passes on the file `src` (its output at `dst`).
    fn part_options(&self, src: String, dst: PathBuf, threads: Option<usize>) -> RunOptions {
        RunOptions {
            input: PathBuf::from(src),
            output: dst,
            threads,
            ..self.read.clone()
        }
    }
}

#[pymethods]
impl PyEngine {
    #[new]
    fn new(
        py: Python<'_>,
        config: ConfigArgs,
        schema: PyArrowType<Schema>,
        name: String,
        read: ReadArgs,
    ) -> PyResult<Self> {
        run_engine(py, move || {
            let config = config.load()?;
            // the driver checked the outputs; a retried task redoes its file
            let read = share_options(PathBuf::new(), PathBuf::new(), true, &read)?;
            let engine = Engine::new(&config, Arc::new(schema.0), &name)?
                .with_layout(read.layout)
                .allow_nonfinite(read.allow_nonfinite);
            Ok(PyEngine {
                engine,
                config,
                read,
            })
        })
    }

    /// The pre-pass (`prepass=True`) or pass 1 of the file or object `src`, read by the
    /// CLI's IO layer (only the columns the maths needs; an object by ranged GETs): rows
    /// `first_row..` of the input, `step` the step its path names. Pass 1 takes the whole
    /// input's pre-pass statistics (`merge_stats`) when the configuration needs them.
    /// `version`: the file's version an earlier pass read (the pre-pass's), which this one
    /// must read too. Returns the statistics as bytes, the steps the file holds, its rows
    /// (which the caller compares with the rows it listed) and its version.
    #[allow(clippy::too_many_arguments)]
    fn file_stats<'py>(
        &self,
        py: Python<'py>,
        src: String,
        step: Option<i64>,
        first_row: usize,
        prepass: bool,
        pre: Option<&[u8]>,
        version: Option<String>,
        threads: Option<usize>,
    ) -> PyResult<FileStats<'py>> {
        let pre = pre.map(<[u8]>::to_vec);
        let (bytes, steps, rows, version) = run_engine(py, || {
            let opts = self.part_options(src, PathBuf::new(), threads);
            let part = advcalc::dataset::PartOf {
                first_row,
                path_step: step,
                version: version.as_deref(),
            };
            let pre = pre.as_deref().map(RowStats::from_bytes).transpose()?;
            let of = match prepass {
                true => advcalc::dataset::StatsOf::Prepass,
                false => advcalc::dataset::StatsOf::Pass1(pre.as_ref()),
            };
            let found = advcalc::dataset::part_stats(&self.config, &opts, part, of)?;
            let stats = found.stats;
            Ok((
                stats.to_bytes()?,
                stats.steps(),
                stats.rows(),
                found.version,
            ))
        })?;
        Ok((PyBytes::new(py, &bytes), steps, rows, version))
    }

    /// Pass 2 of the file or object `src` (rows `first_row..` of the input `dataset`; `step`
    /// the step its path names) with the plan `shard` of its steps, written to the local path
    /// `dst` by the CLI's writer (IN's unchanged column chunks copied byte for byte, a
    /// temporary file synced and renamed into place, the provenance). `version`: the one
    /// pass 1 read, which the file must still be. Returns the rows written.
    #[allow(clippy::too_many_arguments)]
    fn file_outputs(
        &self,
        py: Python<'_>,
        dataset: String,
        src: String,
        step: Option<i64>,
        first_row: usize,
        shard: &[u8],
        dst: PathBuf,
        version: Option<String>,
        threads: Option<usize>,
    ) -> PyResult<usize> {
        let shard = shard.to_vec();
        run_engine(py, || {
            let shard = PlanShard::from_bytes(&shard)?;
            let opts = self.part_options(src, dst, threads);
            let part = advcalc::dataset::PartOf {
                first_row,
                path_step: step,
                version: version.as_deref(),
            };
            advcalc::dataset::part_outputs(&self.config, &opts, part, &dataset, &shard)
        })
    }

    /// Whether pass 1 needs the statistics of a pre-pass first (adaptive KL, OTB with
    /// batch-normalised IS weights).
    fn needs_prepass(&self) -> bool {
        self.engine.needs_prepass()
    }

    /// Whether a step's numbers depend on the steps before it (an adaptive KL controller):
    /// then the steps cannot be run apart.
    fn carries_across_steps(&self) -> bool {
        self.engine.carries_across_steps()
    }

    /// The columns the pre-pass and pass 1 read (a unit may be read with only these).
    fn pass1_columns(&self) -> Vec<String> {
        self.engine.pass1_columns()
    }

    /// The pre-pass over one unit: its statistics, as bytes.
    fn prepass_stats<'py>(
        &self,
        py: Python<'py>,
        data: PyArrowType<RecordBatchStreamReader>,
        first_row: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let reader = data.0;
        let bytes = run_engine(py, || {
            let (_, batches) = collect_stream(reader)?;
            let mut stats = RowStats::default();
            let mut row = first_row;
            for batch in &batches {
                stats.append(self.engine.prepass_stats(batch, row)?);
                row += batch.num_rows();
            }
            stats.to_bytes()
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Pass 1 over one unit: its statistics as bytes, and the steps its rows hold. `prepass`
    /// is the pre-pass statistics of the whole input (`merge_stats`), when it needs one.
    fn row_stats<'py>(
        &self,
        py: Python<'py>,
        data: PyArrowType<RecordBatchStreamReader>,
        first_row: usize,
        prepass: Option<&[u8]>,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<Option<i64>>)> {
        let reader = data.0;
        let prepass = prepass.map(<[u8]>::to_vec);
        let (bytes, steps) = run_engine(py, || {
            let constants = match prepass {
                Some(bytes) => self.engine.constants(&RowStats::from_bytes(&bytes)?)?,
                None => self.engine.start(),
            };
            let (_, batches) = collect_stream(reader)?;
            let mut stats = RowStats::default();
            let mut row = first_row;
            for batch in &batches {
                stats.append(self.engine.row_stats(batch, row, &constants)?);
                row += batch.num_rows();
            }
            Ok((stats.to_bytes()?, stats.steps()))
        })?;
        Ok((PyBytes::new(py, &bytes), steps))
    }

    /// Between the passes, on the driver: every unit's pass-1 statistics, in input order, to
    /// the plan.
    fn plan(&self, py: Python<'_>, stats: Vec<Vec<u8>>) -> PyResult<PyPlan> {
        let prepared = run_engine(py, || self.engine.plan(merge(&stats)?))?;
        Ok(PyPlan { prepared })
    }

    /// Pass 2 over one unit with the plan shard of its steps: the unit with the computed
    /// columns, as a pyarrow Table.
    fn token_outputs(
        &self,
        py: Python<'_>,
        data: PyArrowType<RecordBatchStreamReader>,
        first_row: usize,
        shard: &[u8],
    ) -> PyResult<PyArrowType<Table>> {
        let reader = data.0;
        let shard = shard.to_vec();
        let batches = run_engine(py, || {
            let shard = PlanShard::from_bytes(&shard)?;
            let (_, batches) = collect_stream(reader)?;
            let mut out = Vec::with_capacity(batches.len());
            let mut row = first_row;
            for batch in &batches {
                out.push(self.engine.token_outputs(batch, row, &shard)?);
                row += batch.num_rows();
            }
            Ok(out)
        })?;
        let table = Table::try_new(batches, self.engine.output_schema()).map_err(|e| {
            to_python(
                py,
                &advcalc::Error::data("cannot build the result table").with_source(e),
            )
        })?;
        Ok(PyArrowType(table))
    }
}

/// One file of a dataset for the Python layer: path, relative path, step of the path, rows.
type DatasetPart = (String, String, Option<i64>, usize);

/// The files of a dataset (a directory or a glob) in the CLI's dataset order, with its checks
/// (one schema, steps in paths): (path, path relative to the dataset, `step=N` of the path,
/// rows). Empty when `src` is not a dataset (one file).
#[pyfunction]
fn dataset_parts(py: Python<'_>, src: PathBuf) -> PyResult<Vec<DatasetPart>> {
    run_engine(py, move || {
        let Some(files) = advcalc::dataset::files(&src, None)? else {
            return Ok(Vec::new());
        };
        Ok(files
            .iter()
            .map(|f| {
                let rel = f.rel.to_string_lossy().into_owned();
                (f.path.display().to_string(), rel, f.path_step, f.rows)
            })
            .collect())
    })
}

/// One share of a dataset, run as the CLI runs a dataset (`advcalc.ray`'s per-step tasks):
/// the files `rels` under `base`, in that order, read as one dataset named `name` (their own
/// pre-pass, pass 1, plan and pass 2), each output written to `dst/rel` by the CLI's writer
/// (unchanged column chunks copied byte for byte, a temporary file renamed into place).
/// Existing outputs are overwritten (the caller checked them; a retried task redoes its
/// files). Returns (rows, warnings).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn run_parts(
    py: Python<'_>,
    name: String,
    base: PathBuf,
    rels: Vec<PathBuf>,
    dst: PathBuf,
    config: ConfigArgs,
    read: ReadArgs,
) -> PyResult<(usize, Vec<String>)> {
    run_engine(py, move || {
        let config = config.load()?;
        let opts = share_options(base, dst, true, &read)?;
        let summary =
            advcalc::dataset::run_files(&config, &opts, &DatasetOptions::default(), name, rels)?;
        Ok((summary.rows, summary.warnings))
    })
}

/// [`run_parts`] on a share of a dataset in object storage: the objects `rels` under the
/// prefix `base` (`s3://bucket/dumps/`), read as one dataset named `name` by the CLI's IO
/// layer (ranged GETs, no listing of IN), each output written under `dst` (a prefix, or a
/// local directory) as `advcalc run s3://… s3://…` writes it: put once complete,
/// create-only unless `force`, with the same provenance. Returns (rows, warnings).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn run_object_parts(
    py: Python<'_>,
    name: String,
    base: String,
    rels: Vec<String>,
    dst: String,
    config: ConfigArgs,
    read: ReadArgs,
    force: bool,
) -> PyResult<(usize, Vec<String>)> {
    run_engine(py, move || {
        let config = config.load()?;
        let opts = share_options(PathBuf::from(base), PathBuf::from(dst), force, &read)?;
        let summary =
            advcalc::dataset::run_objects(&config, &opts, &DatasetOptions::default(), name, rels)?;
        Ok((summary.rows, summary.warnings))
    })
}

/// The run options of one share of a dataset (`run_parts`, `run_object_parts`, and
/// `Engine`'s passes on one file): IN's base directory or prefix, OUT's, no progress bar,
/// no metrics.
fn share_options(
    base: PathBuf,
    dst: PathBuf,
    force: bool,
    read: &ReadArgs,
) -> advcalc::Result<RunOptions> {
    Ok(RunOptions {
        input: base,
        output: dst,
        force,
        threads: read.threads,
        progress: false,
        layout: read.layout()?,
        allow_nonfinite: read.allow_nonfinite,
        input_format: read.format()?,
        output_format: None,
        metrics: None,
        memory: None,
    })
}

/// Remove the temporary outputs in `dir` that killed processes of this host left (as the
/// CLI does before writing there): a runner's tasks that Ray killed mid-write.
#[pyfunction]
fn remove_stale_temporaries(dir: PathBuf) {
    advcalc::dataset::remove_stale_temporaries(&dir);
}

/// The start of the temporary output names that process `pid` of this host writes,
/// `.advcalc-HOST-KEY-PID-` (the CLI's atomic writes): what the pure-Python twin of the
/// scheme (`advcalc._atomic`) is checked against.
#[pyfunction]
fn temp_prefix_for(pid: u32) -> String {
    advcalc::dataset::temp_prefix_for(pid)
}

/// Put the finished local file `local` at the object URL `url` as `run` puts its OUT (the
/// Python layer's outputs in object storage: `advcalc.ray`'s, `run`'s metrics): visible only
/// when complete; create-only unless `force`, so an existing object is refused by the store
/// itself (`url: already exists`).
#[pyfunction]
fn put_object(py: Python<'_>, local: PathBuf, url: String, force: bool) -> PyResult<()> {
    run_engine(py, move || {
        let Some(target) = advcalc::object::parse_object(&url)? else {
            return Err(advcalc::Error::usage(format!(
                "{url}: not an object URL (s3://, gs://, az://, abfs[s]://, https://)"
            )));
        };
        let policy = advcalc::object::PutPolicy {
            force,
            ..Default::default()
        };
        advcalc::object::upload(&local, &target, &policy).map(|_| ())
    })
}

/// Statistics of several units (bytes), appended in input order.
fn merge(parts: &[Vec<u8>]) -> advcalc::Result<RowStats> {
    let mut all = RowStats::default();
    for part in parts {
        all.append(RowStats::from_bytes(part)?);
    }
    Ok(all)
}

/// Several units' statistics appended in input order, as bytes (the pre-pass statistics
/// every pass-1 task needs).
#[pyfunction]
fn merge_stats<'py>(py: Python<'py>, parts: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = run_engine(py, || merge(&parts)?.to_bytes())?;
    Ok(PyBytes::new(py, &bytes))
}

/// The plan of pass 2, held by the driver; `shard(steps)` cuts what one task needs.
#[pyclass(name = "Plan", frozen)]
struct PyPlan {
    prepared: advcalc::Plan,
}

#[pymethods]
impl PyPlan {
    /// The input's steps, ascending (`[None]` without a step column).
    fn steps(&self) -> Vec<Option<i64>> {
        self.prepared.steps()
    }

    /// The shard of some steps, as bytes.
    fn shard<'py>(
        &self,
        py: Python<'py>,
        steps: Vec<Option<i64>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self
            .prepared
            .for_steps(&steps)
            .to_bytes()
            .map_err(|e| to_python(py, &e))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The data warnings `run` would print.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.prepared.warnings().to_vec()
    }
}

/// The `advcalc` command of the wheel (`advcalc/__main__.py`): the CLI's own `main` with
/// these arguments (the first is the program's name), without the GIL; returns the exit
/// status. It installs the CLI's SIGINT/SIGTERM handlers, so it is only called as the
/// process's last work.
#[pyfunction]
fn cli(py: Python<'_>, args: Vec<std::ffi::OsString>) -> u8 {
    py.detach(move || advcalc::cli::main(args))
}

/// `advcalc.estimators`: `advcalc estimators --json` (JSON text).
#[pyfunction]
fn estimators() -> String {
    advcalc::commands::estimators::to_json().to_string()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Panics inside the Parquet decoder are caught and reported as data errors; keep
    // Python's stderr free of their default report, as the CLI does.
    advcalc::input::quiet_decoder_panics();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(compute_stream, m)?)?;
    m.add_function(wrap_pyfunction!(compute_path, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(estimators, m)?)?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_function(wrap_pyfunction!(estimator_name, m)?)?;
    m.add_function(wrap_pyfunction!(merge_stats, m)?)?;
    m.add_function(wrap_pyfunction!(dataset_parts, m)?)?;
    m.add_function(wrap_pyfunction!(run_parts, m)?)?;
    m.add_function(wrap_pyfunction!(run_object_parts, m)?)?;
    m.add_function(wrap_pyfunction!(remove_stale_temporaries, m)?)?;
    m.add_function(wrap_pyfunction!(temp_prefix_for, m)?)?;
    m.add_function(wrap_pyfunction!(put_object, m)?)?;
    m.add_class::<PyEngine>()?;
    m.add_class::<PyPlan>()?;
    Ok(())
}
