//! The passes on one file of a larger input whose plan is made elsewhere: a runner that
//! spreads the passes over machines (`advcalc.ray`'s two passes) has each task read its own
//! file through the CLI's IO layer (a local file, or an object by ranged GETs), return its
//! pass-1 statistics to the driver, and later write the file's output with the plan shard of
//! its steps as `run` writes OUT: IN's unchanged column chunks copied byte for byte, the
//! computed ones encoded by `io::float_lists`, a temporary file synced and renamed into place,
//! the provenance.
//!
//! The numbers are those of `run` on the whole input: a row's pass-1 statistics depend on the
//! row alone (and the pre-pass constants), and its pass 2 on its step's constants and the
//! estimator's plan for it, which the shard carries.

use std::path::Path;

use crate::encode::encode_outputs;
use crate::engine::Engine;
use crate::engine::ordered::produce_in_parallel_consume_in_order;
use crate::engine::passes::thread_pool;
use crate::engine::shard::PlanShard;
use crate::error::{Error, Result};
use crate::io::atomic::temporary_result;
use crate::io::dataset::{Dataset, FileIdentity};
use crate::io::format::Format;
use crate::io::input::Input;
use crate::io::input_source::InputSource;
use crate::io::ipc;
use crate::io::write::ParquetOutput;
use crate::provenance::PROVENANCE_PREFIX;
use crate::run::provenance;
use crate::run_options::RunOptions;
use advcalc_config::Config;
use advcalc_maths::estimators::RowStats;
use rayon::prelude::*;

/// Where the file sits in the whole input.
#[derive(Debug, Clone, Copy)]
pub struct PartOf<'a> {
    /// The input row index of the file's first row (the plan numbers rows in input order).
    pub first_row: usize,
    /// The step the file's path names (`step=N`), when the file has no `step` column.
    pub path_step: Option<i64>,
    /// The version of the file pass 1 read ([`PartStats::version`]): pass 2 refuses another
    /// (the file rewritten between the passes would mix two versions of it).
    pub version: Option<&'a str>,
}

/// What [`part_stats`] found in the file.
#[derive(Debug)]
pub struct PartStats {
    pub stats: RowStats,
    /// The file's version as read: its size, modification time and inode, or an object's
    /// ETag (and version id); `None` where none can be told.
    pub version: Option<String>,
}

/// Which statistics [`part_stats`] gathers.
#[derive(Debug, Clone, Copy)]
pub enum StatsOf<'a> {
    /// The constants pre-pass ([`Engine::prepass_stats`]).
    Prepass,
    /// Pass 1 ([`Engine::row_stats`]), with the whole input's pre-pass statistics when the
    /// configuration needs them.
    Pass1(Option<&'a RowStats>),
}

/// The version of the opened file `input` (`path` locally): what tells a rewritten file.
fn version_of(input: &Input, path: &Path) -> Option<String> {
    #[cfg(feature = "cloud")]
    if let Some(object) = input.parquet.object() {
        return object
            .etag()
            .map(|e| format!("{e} {}", object.version().unwrap_or_default()));
    }
    let _ = input;
    let id = FileIdentity::of(path).ok()?;
    let modified = id
        .modified
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Some(format!(
        "{} bytes, modified {modified}, inode {}",
        id.len, id.ino
    ))
}

/// `opts.input` (one Parquet or Arrow file, local or an object) opened, and the engine bound
/// to its own schema at its place in the input; a version other than the one `part` names
/// is refused.
fn open(config: &Config, opts: &RunOptions, part: PartOf<'_>) -> Result<(Input, Engine)> {
    // listed as one file by the runner: a key with `*` is a file here, not a glob
    let source = InputSource::one_file(&opts.input, opts.input_format)?;
    let input = Input::open(
        &source,
        opts.allow_nonfinite,
        &crate::io::trainers::DumpOptions::of(config),
    )?;
    let engine = Engine::new(config, input.parquet.schema(), input.parquet.name())?
        .with_layout(opts.layout)
        .allow_nonfinite(opts.allow_nonfinite)
        .at(part.first_row, part.path_step);
    if let Some(read) = part.version
        && let Some(now) = version_of(&input, &opts.input)
        && now != read
    {
        return Err(Error::data(format!(
            "{}: changed between the passes (pass 1 read {read}, now {now})",
            input.parquet.name()
        ))
        .with_hint("keep the dataset's files in place while advcalc runs, then run again"));
    }
    Ok((input, engine))
}

/// The pre-pass or pass-1 statistics of the file `opts.input`, its row groups read in
/// parallel (only the columns the maths needs), appended in order, and the file's version.
pub fn part_stats(
    config: &Config,
    opts: &RunOptions,
    part: PartOf<'_>,
    of: StatsOf<'_>,
) -> Result<PartStats> {
    thread_pool(opts.threads)?.install(|| {
        let (input, engine) = open(config, opts, part)?;
        let constants = match of {
            StatsOf::Pass1(Some(prepass)) => Some(engine.constants(prepass)?),
            StatsOf::Pass1(None) => Some(engine.start()),
            StatsOf::Prepass => None,
        };
        let file = &input.parquet;
        let single = Dataset::single(file);
        let projection = engine.job().columns.projection(false);
        let starts = file.row_group_starts();
        let found = (0..file.num_row_groups())
            .into_par_iter()
            .map(|rg| {
                let batch = single.read_unit(rg, Some(&projection))?;
                let first = part.first_row + starts[rg];
                match &constants {
                    Some(constants) => engine.row_stats(&batch, first, constants),
                    None => engine.prepass_stats(&batch, first),
                }
            })
            .collect::<Result<Vec<_>>>()
            .map_err(|e| input.locate_error(e))?;
        let mut stats = RowStats::default();
        for s in found {
            stats.append(s);
        }
        Ok(PartStats {
            stats,
            version: version_of(&input, &opts.input),
        })
    })
}

/// Pass 2 of the file `opts.input` with `shard`, the plan shard of the steps its rows hold,
/// into `opts.output` (a local path: Parquet, or Arrow IPC by its extension); `dataset`, the
/// whole input's name, is recorded in its provenance. Returns the rows written. A row whose step the shard does not hold, or a shard of another configuration,
/// is an error.
pub fn part_outputs(
    config: &Config,
    opts: &RunOptions,
    part: PartOf<'_>,
    dataset: &str,
    shard: &PlanShard,
) -> Result<usize> {
    let out_format = Format::of(&opts.output, opts.output_format);
    if !matches!(
        out_format,
        Format::Parquet | Format::ArrowFile | Format::ArrowStream
    ) {
        return Err(Error::usage(format!(
            "{}: a file's output is Parquet or Arrow IPC",
            opts.output.display()
        )));
    }
    let pool = thread_pool(opts.threads)?;
    let (opened, engine) = pool.install(|| open(config, opts, part))?;
    engine.check_shard(shard)?;
    let job = engine.job();
    let input = &opened.parquet;
    let result = match out_format {
        Format::Parquet => None,
        _ => Some(temporary_result()?),
    };
    let mut kv = provenance(config, opts, input);
    kv.push((format!("{PROVENANCE_PREFIX}dataset"), dataset.to_string()));
    let starts = input.row_group_starts();
    let row_groups = input.num_row_groups();
    let (output_schema, sources) = job.output_layout();
    let written: &Path = result.as_ref().map_or(opts.output.as_path(), |r| r.path());
    let mut output = ParquetOutput::create_with_metadata(
        written,
        output_schema,
        sources,
        input.copy_source(),
        opts.force || result.is_some(),
        kv,
    )?;
    let single = Dataset::single(input);
    let projection = job.columns.projection(false);
    pool.install(|| {
        let (encoder, sink) = output.split();
        produce_in_parallel_consume_in_order(
            row_groups,
            2 * rayon::current_num_threads(),
            |rg| {
                // pass 1 ran in another task: each row group is read again, here
                let batch = single.read_unit(rg, Some(&projection))?;
                let done = job.row_group_outputs_with(
                    &batch,
                    part.first_row + starts[rg],
                    &shard.constants,
                    &shard.plan,
                    Some(&shard.steps),
                    None,
                )?;
                Ok(encode_outputs(&job, &batch, done, encoder, rg, false)?.0)
            },
            |rg, encoded| sink.append(rg, encoded),
        )
    })
    .map_err(|e| opened.locate_error(e))?;
    output.finish()?;
    if let Some(result) = result {
        ipc::export_parquet(result.path(), &opts.output, out_format, opts.force)?;
    }
    Ok(starts[row_groups])
}
