//! Other trainers' rollout dumps as input, read as the trainers write them: TRL's
//! `completions_NNNNN.parquet`, NeMo-RL's `train_data_stepN.jsonl`, prime-rl's
//! `rollouts/step_N/train/effective/traces.jsonl` and open-instruct's `--save_traces` shards
//! (`docs/trainers.md`; each trainer's reader is its own file here).
//!
//! Like verl's JSONL dumps (`io::jsonl`), a dump is **spooled** into a temporary Parquet file
//! that the passes read: advcalc's columns (`uid`: the group as the trainer forms it, `step`,
//! `response_mask`, `score`, the log-probs the dump holds, and [`LOGGED_ADVANTAGE`]: the
//! advantage the trainer logged for the row), then every field of the dump as a passthrough
//! column. A dump field whose name advcalc reads or writes (`advantages`, `values`, ...) is
//! kept as `trainer_NAME`, so the passes never mistake it for one of their own columns. The
//! spool's schema metadata names the trainer ([`TRAINER_KEY`]); a dump with no token data (TRL)
//! is also marked sequence-level (`io::jsonl::SEQUENCE_LEVEL_KEY`), so token-level
//! configurations are refused on it.
//!
//! `run` writes the spool's columns and advcalc's `advantages`/`returns` beside the logged
//! [`LOGGED_ADVANTAGE`]; `inspect` recomputes the advantages under the trainer's own
//! convention and reports where the logged ones differ (`commands::analysis::logged`).

pub mod nemo_rl;
pub mod open_instruct;
pub mod prime_rl;
pub mod trl;

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::StringArray;
use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, Float64Array, Int8Array, Int64Array, ListArray, RecordBatch};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::estimators::conventions::Convention;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use tempfile::NamedTempFile;

use crate::error::{Error, Result};
use crate::json_fields::{FieldBuilder, FieldKind};
use crate::json_line;
use crate::jsonl::SEQUENCE_LEVEL_KEY;
use crate::walk::Visited;

/// Schema metadata key naming the trainer whose dump a spool holds ([`Trainer::name`]).
pub const TRAINER_KEY: &str = "advcalc:trainer_dump";

/// The spool's column of the advantage the trainer logged for each row (float64; null when
/// the dump holds none for the row).
pub const LOGGED_ADVANTAGE: &str = "trainer_advantage";

/// Rows per spooled row group.
const BATCH_ROWS: usize = 1024;

/// A trainer whose rollout dump advcalc reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trainer {
    Trl,
    NemoRl,
    PrimeRl,
    OpenInstruct,
}

impl Trainer {
    pub const ALL: [Trainer; 4] = [
        Trainer::Trl,
        Trainer::NemoRl,
        Trainer::PrimeRl,
        Trainer::OpenInstruct,
    ];

    /// The name of `--input-format` and of its convention.
    pub fn name(self) -> &'static str {
        match self {
            Trainer::Trl => "trl",
            Trainer::NemoRl => "nemo-rl",
            Trainer::PrimeRl => "prime-rl",
            Trainer::OpenInstruct => "open-instruct",
        }
    }

    /// The trainer's name as its project writes it, for messages.
    pub fn title(self) -> &'static str {
        match self {
            Trainer::Trl => "TRL",
            Trainer::NemoRl => "NeMo-RL",
            Trainer::PrimeRl => "prime-rl",
            Trainer::OpenInstruct => "open-instruct",
        }
    }

    pub fn from_name(name: &str) -> Option<Trainer> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The `--convention` whose numbers the trainer's default algorithm (GRPO) gives: the
    /// default for its dumps, and what `inspect`'s check recomputes under.
    pub fn convention(self) -> Convention {
        match self {
            Trainer::Trl => Convention::Trl,
            Trainer::NemoRl => Convention::NemoRl,
            // prime-rl's GRPO: reward − group mean in float32, no std
            Trainer::PrimeRl => Convention::PrimeRl,
            Trainer::OpenInstruct => Convention::OpenInstruct,
        }
    }

    /// Whether the dump holds one score per row and no tokens.
    pub fn sequence_level(self) -> bool {
        self == Trainer::Trl
    }

    /// Whether `file` (a file name) is one of the trainer's dump files.
    fn names_a_dump_file(self, file: &str) -> bool {
        let numbered = |s: &str, prefix: &str, suffix: &str| {
            s.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(suffix))
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        };
        match self {
            Trainer::Trl => numbered(file, "completions_", ".parquet"),
            Trainer::NemoRl => numbered(file, "train_data_step", ".jsonl"),
            Trainer::PrimeRl => file == "traces.jsonl" || file == prime_rl::OLD_FILE,
            Trainer::OpenInstruct => file
                .rsplit_once("_rollouts_")
                .is_some_and(|(run, n)| !run.is_empty() && numbered(n, "", ".jsonl")),
        }
    }

    /// The dump's files under `dir` (or `dir` itself when it is a file), in reading order.
    fn files(self, path: &Path, name: &str) -> Result<Vec<PathBuf>> {
        match self {
            Trainer::Trl => trl::files(path, name),
            Trainer::NemoRl => nemo_rl::files(path, name),
            Trainer::PrimeRl => prime_rl::files(path, name),
            Trainer::OpenInstruct => open_instruct::files(path, name),
        }
    }
}

/// What a reader needs from the configuration: what the dump itself does not record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DumpOptions {
    /// `algorithm.group_size`: the rows per group where the trainer forms groups of
    /// consecutive rows (TRL); `None`: inferred from the dump, and said so.
    pub group_size: Option<usize>,
    /// `algorithm.trl.reward_weights`: TRL's `reward_weights` (empty: 1.0 for every reward
    /// function, as TRL's default).
    pub reward_weights: Vec<f64>,
    /// Whether a TRL row that no reward function scored (its score NaN) is taken as TRL takes
    /// it, advantage 0: under `--convention trl`. Otherwise the reader refuses it, naming the
    /// file and the row, unless non-finite values are let through.
    pub trl_unscored_rows: bool,
}

impl DumpOptions {
    /// What the configuration says of other trainers' dumps (`algorithm.group_size`,
    /// `algorithm.trl.reward_weights`, and whether TRL's convention gives unscored rows 0).
    pub fn of(config: &crate::config::Config) -> Self {
        let ext = &config.algorithm.ext;
        DumpOptions {
            group_size: ext.group_size,
            reward_weights: ext.trl_reward_weights.clone(),
            trl_unscored_rows: ext.convention == Convention::Trl,
        }
    }
}

/// One row of a dump as advcalc's columns hold it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DumpRow {
    pub step: i64,
    /// The group label: rows with the same label in one step are one group, as the trainer
    /// forms them.
    pub group: String,
    /// The row's reward; NaN for a row the trainer could not score.
    pub score: f64,
    /// The response's tokens (1: trained on); `[1]` for a sequence-level dump.
    pub mask: Vec<i8>,
    /// The sampler's log-probs, aligned with `mask`.
    pub rollout_log_probs: Option<Vec<f32>>,
    /// The trainer's log-probs before the update, aligned with `mask`.
    pub old_log_probs: Option<Vec<f32>>,
    /// The trainer's advantage for the row.
    pub logged_advantage: Option<f64>,
}

/// Which log-prob columns a trainer's spool has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogProbColumns {
    pub rollout: bool,
    pub old: bool,
}

/// A dump as read: the trainer, its files, and what the reader assumed.
#[derive(Debug, Clone)]
pub struct TrainerInput {
    pub trainer: Trainer,
    pub files: Vec<PathBuf>,
    pub rows: usize,
    /// What the reader chose that the dump does not say (an inferred group size, default
    /// reward weights): `inspect` and `run` print them as notes.
    pub notes: Vec<String>,
    /// The size of consecutive groups the reader cut (TRL), given or inferred.
    pub group_size: Option<usize>,
    /// Each spooled row's file (index into `files`) and line, for a JSONL dump: where an
    /// error the passes raise on a row is in the user's files.
    lines: Vec<(u32, u32)>,
    /// The dump's field each spooled token column comes from (`LineReader::FIELDS`).
    fields: &'static [(&'static str, &'static str)],
}

impl TrainerInput {
    /// Where spooled row `row` came from, `FILE line N`, when the reader kept it.
    pub fn locate(&self, row: usize) -> Option<String> {
        let &(file, line) = self.lines.get(row)?;
        Some(format!(
            "{} line {line}",
            self.files.get(file as usize)?.display()
        ))
    }

    /// `e` with the user's file, line and field in front, when it is about a spooled row the
    /// reader kept the origin of (the passes name the spool's columns and rows).
    pub fn locate_error(&self, e: crate::error::Error) -> crate::error::Error {
        let Some((column, row)) = e.cell() else {
            return e;
        };
        let Some(at) = self.locate(row) else {
            return e;
        };
        match self.fields.iter().find(|(c, _)| *c == column) {
            Some((_, field)) => e.context(format!("{at}: {field}")),
            None => e.context(at),
        }
    }

    /// Whether the dump's NaN scores are the trainer's own, handled by its convention: a
    /// TRL row whose reward functions all returned None, which TRL gives advantage 0 (as
    /// `--convention trl` does). Then `run` needs no `--allow-nonfinite` for them.
    pub fn own_nan_scores(&self, convention: Convention) -> bool {
        self.trainer == Trainer::Trl && convention == Convention::Trl
    }
}

/// The trainer whose dump `path` is: `explicit` (`--input-format`) when given, else by the
/// layout (a dump file's name, or a directory holding them); `None`: not another trainer's
/// dump. A directory holding files of two trainers is an error naming both.
/// The trainer whose dump files are named like `file` (a file name, not a path), if any.
pub fn by_file_name(file: &str) -> Option<Trainer> {
    Trainer::ALL.into_iter().find(|t| t.names_a_dump_file(file))
}

pub fn detect(path: &Path, explicit: Option<Trainer>) -> Result<Option<Trainer>> {
    if explicit.is_some() {
        return Ok(explicit);
    }
    let name = path.display().to_string();
    if let Some(files) = glob_files(path, &name)? {
        let mut found = files
            .iter()
            .filter_map(|f| by_file_name(&f.file_name()?.to_string_lossy()));
        let first = found.next();
        // every file of one trainer's dump, or not a dump glob (a dataset's)
        return Ok(first.filter(|t| {
            found.all(|u| u == *t)
                && files.iter().all(|f| {
                    t.names_a_dump_file(&f.file_name().unwrap_or_default().to_string_lossy())
                })
        }));
    }
    if path.is_file() {
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
        return Ok(by_file_name(&file.unwrap_or_default()));
    }
    if !path.is_dir() {
        return Ok(None);
    }
    let mut found: Vec<(Trainer, PathBuf)> = Vec::new();
    // verl's own JSONL dump files (`{global_steps}.jsonl`), which no trainer's reader reads
    let mut verl: Option<PathBuf> = None;
    scan(path, 0, &mut Visited::default(), &mut |file: &Path| {
        let f = file.file_name().map(|f| f.to_string_lossy().into_owned());
        let f = f.unwrap_or_default();
        if let Some(t) = by_file_name(&f)
            && !found.iter().any(|(k, _)| *k == t)
        {
            found.push((t, file.to_path_buf()));
        }
        if verl.is_none() && is_verl_step_file(&f) {
            verl = Some(file.to_path_buf());
        }
    })
    .map_err(|e| Error::data(format!("{name}: cannot read the directory")).with_source(e))?;
    match found.as_slice() {
        [] => Ok(None),
        // the trainer's reader would leave verl's files unread: refused as two trainers are
        [(t, f)] => match verl {
            None => Ok(Some(*t)),
            Some(v) => Err(Error::data(format!(
                "{name}: holds both a {} dump ({}) and verl JSONL files ({})",
                t.title(),
                f.display(),
                v.display()
            ))
            .with_hint(format!(
                "give the directory of one of them, or pass --input-format {} to read only the {} files",
                t.name(),
                t.title()
            ))),
        },
        [(a, fa), (b, fb), ..] => Err(Error::data(format!(
            "{name}: holds both a {} dump ({}) and a {} dump ({})",
            a.title(),
            fa.display(),
            b.title(),
            fb.display()
        ))
        .with_hint("give the directory of one run, or pass --input-format")),
    }
}

/// Whether `file` (a file name) is named as verl names its JSONL dump files,
/// `{global_steps}.jsonl`.
fn is_verl_step_file(file: &str) -> bool {
    file.strip_suffix(".jsonl")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The files a glob IN matches, in natural order (`step_2` before `step_10`); `None` when IN
/// is not a glob (it exists, or has no glob character).
fn glob_files(path: &Path, name: &str) -> Result<Option<Vec<PathBuf>>> {
    use crate::dataset::{glob_matches, is_glob, split_glob};
    let pattern = path.to_string_lossy().into_owned();
    if path.exists() || !is_glob(&pattern) {
        return Ok(None);
    }
    let (base, rest) = split_glob(&pattern);
    if !base.is_dir() {
        return Ok(Some(Vec::new()));
    }
    let rest: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let mut files = find_files(&base, name, &|f| {
        f.strip_prefix(&base)
            .is_ok_and(|rel| glob_matches(&rest, rel))
    })?;
    files.sort_by_key(|f| natural_key(f));
    Ok(Some(files))
}

/// A path's sort key with its digit runs compared as numbers.
fn natural_key(path: &Path) -> Vec<(String, u64)> {
    let s = path.to_string_lossy();
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut n = c.to_digit(10).unwrap_or(0) as u64;
            while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                n = n.saturating_mul(10).saturating_add(d as u64);
                chars.next();
            }
            key.push((std::mem::take(&mut text), n));
        } else {
            text.push(c);
        }
    }
    key.push((text, u64::MAX));
    key
}

/// Directories deeper than this below IN are not searched for a dump's files.
const MAX_DEPTH: usize = 5;

/// Call `each` with every file under `dir` (hidden names skipped), to [`MAX_DEPTH`], in name
/// order; symlinks followed, each real directory and file once (`visited` notes the rest).
fn scan(
    dir: &Path,
    depth: usize,
    visited: &mut Visited,
    each: &mut dyn FnMut(&Path),
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    if depth == 0 {
        visited.first(dir);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if visited.first(&path) {
                scan(&path, depth + 1, visited, each)?;
            }
        } else if path.is_file() && visited.first(&path) {
            each(&path);
        }
    }
    Ok(())
}

/// Every file under `dir` whose name `keep` accepts, sorted by path (to `MAX_DEPTH`).
pub fn find_files(dir: &Path, name: &str, keep: &dyn Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    scan(dir, 0, &mut Visited::default(), &mut |f| {
        if keep(f) {
            out.push(f.to_path_buf());
        }
    })
    .map_err(|e| Error::data(format!("{name}: cannot read the directory")).with_source(e))?;
    Ok(out)
}

/// The notes of a walk of the dump directory `dir` (or a glob's): what [`find_files`] skipped
/// as a second path to a directory or file it had read.
fn walk_notes(path: &Path) -> Vec<String> {
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else {
        crate::dataset::split_glob(&path.to_string_lossy()).0
    };
    let mut visited = Visited::default();
    if dir.is_dir() {
        let _ = scan(&dir, 0, &mut visited, &mut |_| {});
    }
    visited.notes
}

/// The number a file or directory name carries after `prefix` (`step_12` → 12).
pub fn number_after(name: &str, prefix: &str, suffix: &str) -> Option<i64> {
    name.strip_prefix(prefix)?
        .strip_suffix(suffix)?
        .parse()
        .ok()
}

/// Read the dump at `path` (`name` in messages) and spool it into a temporary Parquet file in
/// `dir`.
///
/// A score the passes could not take (NaN, ±inf, or beyond float32, the type of advcalc's
/// scores) is refused naming the file, the line (or row) and the field as the dump wrote
/// them, unless `allow_nonfinite` (`--allow-nonfinite`, and `inspect`, which counts them).
pub fn spool(
    trainer: Trainer,
    path: &Path,
    name: &str,
    opts: &DumpOptions,
    allow_nonfinite: bool,
    dir: &Path,
) -> Result<(NamedTempFile, TrainerInput)> {
    let files = match glob_files(path, name)? {
        Some(files) => files,
        None => trainer.files(path, name)?,
    };
    if files.is_empty() {
        return Err(
            Error::data(format!("{name}: no {} dump files found", trainer.title()))
                .with_hint("docs/trainers.md shows where each trainer writes its dump"),
        );
    }
    let (spool, handle) = crate::ipc::spool_file(dir, name)?;
    let mut input = TrainerInput {
        trainer,
        files,
        rows: 0,
        notes: walk_notes(path),
        group_size: None,
        lines: Vec::new(),
        fields: &[],
    };
    let sink = BufWriter::new(handle);
    match trainer {
        Trainer::Trl => trl::spool(&mut input, opts, allow_nonfinite, sink, name)?,
        Trainer::NemoRl => {
            spool_jsonl::<nemo_rl::NemoRlReader>(&mut input, allow_nonfinite, sink, name)?
        }
        Trainer::PrimeRl => {
            spool_jsonl::<prime_rl::PrimeRlReader>(&mut input, allow_nonfinite, sink, name)?
        }
        Trainer::OpenInstruct => spool_jsonl::<open_instruct::OpenInstructReader>(
            &mut input,
            allow_nonfinite,
            sink,
            name,
        )?,
    }
    Ok((spool, input))
}

/// Names advcalc reads or writes: a dump field of one of these names is spooled as
/// `trainer_NAME`.
const RESERVED: [&str; 25] = [
    "uid",
    "step",
    "score",
    "response_mask",
    "loss_mask",
    "session_id",
    "output_index",
    "prompt_ids",
    "reward_baselines",
    "rm_scores",
    "token_level_scores",
    "token_level_rewards",
    "advantages",
    "returns",
    "rollout_is_weights",
    "old_log_probs",
    "ref_log_prob",
    "values",
    "rollout_log_probs",
    "log_probs",
    "sum_pi_squared",
    "pg_losses",
    "grad_weights",
    "kl_losses",
    LOGGED_ADVANTAGE,
];

/// The spool's name for a dump field.
pub fn passthrough_name(field: &str) -> String {
    if RESERVED.contains(&field) || field.starts_with("trainer_") {
        format!("trainer_{field}")
    } else {
        field.to_string()
    }
}

/// The spool's schema: advcalc's columns, then `passthrough` (already renamed).
fn spool_schema(trainer: Trainer, log_probs: LogProbColumns, passthrough: Vec<Field>) -> SchemaRef {
    let list = |t: DataType| DataType::List(Arc::new(Field::new("item", t, true)));
    let mut fields = vec![
        Field::new("uid", DataType::Utf8, false),
        Field::new("step", DataType::Int64, false),
        Field::new("response_mask", list(DataType::Int8), false),
        Field::new("score", DataType::Float64, false),
    ];
    if log_probs.rollout {
        fields.push(Field::new(
            "rollout_log_probs",
            list(DataType::Float32),
            false,
        ));
    }
    if log_probs.old {
        fields.push(Field::new("old_log_probs", list(DataType::Float32), false));
    }
    fields.push(Field::new(LOGGED_ADVANTAGE, DataType::Float64, true));
    fields.extend(passthrough);
    let mut metadata = HashMap::from([(TRAINER_KEY.to_string(), trainer.name().to_string())]);
    if trainer.sequence_level() {
        metadata.insert(
            SEQUENCE_LEVEL_KEY.to_string(),
            format!("{} dump", trainer.title()),
        );
    }
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// Writes the spool: advcalc's columns from [`DumpRow`]s, the passthrough columns as given.
pub struct SpoolWriter {
    writer: ArrowWriter<BufWriter<File>>,
    schema: SchemaRef,
    log_probs: LogProbColumns,
    name: String,
}

impl SpoolWriter {
    pub fn new(
        sink: BufWriter<File>,
        trainer: Trainer,
        log_probs: LogProbColumns,
        passthrough: Vec<Field>,
        name: &str,
    ) -> Result<SpoolWriter> {
        let schema = spool_schema(trainer, log_probs, passthrough);
        // the spool is written once and its chunks are spliced into OUT as they are: fast
        // compression, no dictionaries (token lists as text are all distinct), no statistics
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap_or_default()))
            .set_dictionary_enabled(false)
            .set_statistics_enabled(parquet::file::properties::EnabledStatistics::None)
            .set_max_row_group_row_count(Some(BATCH_ROWS))
            .build();
        let writer = ArrowWriter::try_new(sink, schema.clone(), Some(props))
            .map_err(|e| Error::data(format!("{name}: cannot spool")).with_source(e))?;
        Ok(SpoolWriter {
            writer,
            schema,
            log_probs,
            name: name.to_string(),
        })
    }

    /// Write `rows` with their passthrough columns (as many rows each).
    pub fn write(&mut self, rows: &[DumpRow], passthrough: Vec<ArrayRef>) -> Result<()> {
        let fail = || Error::data(format!("{}: cannot spool", self.name));
        let mask = ListArray::new(
            Arc::new(Field::new("item", DataType::Int8, true)),
            OffsetBuffer::from_lengths(rows.iter().map(|r| r.mask.len())),
            Arc::new(Int8Array::from_iter_values(
                rows.iter().flat_map(|r| r.mask.iter().copied()),
            )),
            None,
        );
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.group.as_str()),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.step))),
            Arc::new(mask),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.score))),
        ];
        let floats = |pick: &dyn Fn(&DumpRow) -> Option<&Vec<f32>>| -> ArrayRef {
            let mut b = ListBuilder::new(Float32Builder::new());
            for r in rows {
                // a row without them (none logged) gets zeros of its mask's length
                match pick(r) {
                    Some(v) => b.values().append_slice(v),
                    None => b.values().append_slice(&vec![0.0; r.mask.len()]),
                }
                b.append(true);
            }
            Arc::new(b.finish())
        };
        if self.log_probs.rollout {
            columns.push(floats(&|r| r.rollout_log_probs.as_ref()));
        }
        if self.log_probs.old {
            columns.push(floats(&|r| r.old_log_probs.as_ref()));
        }
        columns.push(Arc::new(Float64Array::from_iter(
            rows.iter().map(|r| r.logged_advantage),
        )));
        columns.extend(passthrough);
        let batch = RecordBatch::try_new(self.schema.clone(), columns)
            .map_err(|e| fail().with_source(e))?;
        self.writer.write(&batch).map_err(|e| fail().with_source(e))
    }

    pub fn close(self) -> Result<()> {
        let name = self.name;
        self.writer
            .close()
            .map(|_| ())
            .map_err(|e| Error::data(format!("{name}: cannot spool")).with_source(e))
    }
}

/// A JSONL trainer's reader: each non-blank line is one row.
pub trait LineReader {
    /// The log-prob columns its rows carry.
    const LOG_PROBS: LogProbColumns;

    /// The dump's field each spooled token column comes from (spool column, field as the
    /// user reads it), for errors the passes raise on a spooled row.
    const FIELDS: &[(&str, &str)] = &[];

    /// Whether the writer wraps every value in a batch of one (NeMo-RL): the passthrough
    /// columns then hold the one element (`rewards: [1.0]` → `rewards` 1.0).
    const BATCHED: bool = false;

    /// The top-level fields `row` reads as trees ([`field_tree`]): parsed ahead on the
    /// parsing threads. The line's other nested values are only checked there, not built.
    const TREES: &[&str];

    /// Called before the lines of each file (`name`: the file in messages).
    fn file(&mut self, path: &Path, name: &str) -> Result<()>;

    /// One line's row, in file order; `at` is "FILE line N" for messages. The line's nested
    /// values were parsed ahead, on any thread ([`Line`], [`field_tree`]).
    fn row(&mut self, fields: &Line<'_>, at: &str) -> Result<DumpRow>;

    /// Notes on what the reader assumed, after the last line.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// The error for a line whose score (`score`, as [`LineReader::row`] gave it) is not a
    /// float32 number: NaN, ±inf or beyond float32's range. It names the line (`at`) and the
    /// field the score came from, with its value as written ([`score_fault`]).
    fn score_error(&self, fields: &Line<'_>, at: &str, score: f64) -> Error;
}

/// What is wrong with a score that is not a float32 number (advcalc's scores are float32, as
/// verl's), said with its value as the dump wrote it (`raw`, its JSON text, when known: it
/// tells `Infinity` from a number beyond float64, which both read as inf); `None` when the
/// score is a float32 number.
pub fn score_fault(value: f64, raw: Option<&str>) -> Option<String> {
    if (value as f32).is_finite() {
        return None;
    }
    let written = raw.map(str::trim).filter(|w| !w.is_empty());
    // a number as written (not the words NaN, Infinity, -Infinity)
    let number = written
        .filter(|w| w.starts_with(|c: char| c == '-' || c.is_ascii_digit()) && *w != "-Infinity");
    Some(match (number, written) {
        (Some(w), _) if value.is_infinite() => format!("{w}, which overflows float64"),
        (Some(w), _) if value.is_finite() => format!("{w}, which overflows float32"),
        (None, _) if value.is_finite() => format!("{value:?}, which overflows float32"),
        (_, Some(w)) => w.to_string(),
        (_, None) if value.is_nan() => "NaN".to_string(),
        (_, None) => (if value > 0.0 { "inf" } else { "-inf" }).to_string(),
    })
}

/// The error for a score field that is not a float32 number: "`AT`: `FIELD` is WHAT".
pub fn refused_score(at: &str, field: &str, what: &str) -> Error {
    Error::data(format!(
        "{at}: `{field}` is {what} (pass --allow-nonfinite to let non-finite values through)"
    ))
}

/// One non-blank line of a dump file.
struct RawLine {
    /// The index of its file.
    file: usize,
    /// "FILE line N", for messages.
    at: String,
    text: String,
}

/// Call `each` with the non-blank lines of `files`, in order, up to `BATCH_ROWS` at a time.
fn for_each_chunk(files: &[PathBuf], mut each: impl FnMut(&[RawLine]) -> Result<()>) -> Result<()> {
    let mut chunk: Vec<RawLine> = Vec::with_capacity(BATCH_ROWS);
    for (index, path) in files.iter().enumerate() {
        let lines = json_line::read_lines(path, |at, text| {
            chunk.push(RawLine {
                file: index,
                at,
                text: text.to_string(),
            });
            if chunk.len() == BATCH_ROWS {
                each(&chunk)?;
                chunk.clear();
            }
            Ok(())
        })?;
        if lines == 0 {
            // each trainer creates a file to write a step's rows into it: an empty one is a
            // write cut short, not a step without rows
            return Err(
                Error::data(format!("{}: empty file, no JSON lines", path.display())).with_hint(
                    "the trainer writes a file with the rows of a step: a 0-byte one was cut short (a crash, a full disk); remove it, or give the other files",
                ),
            );
        }
    }
    if !chunk.is_empty() {
        each(&chunk)?;
    }
    Ok(())
}

/// One line's top-level fields, with the trees of its nested values parsed ahead (on the
/// thread that parsed the line): what a [`LineReader`] reads, through [`field_tree`] and
/// [`required`]. It derefs to the fields.
pub struct Line<'a> {
    fields: Vec<json_line::Field<'a>>,
    /// The tree of each nested field built ahead, by index; taken by the first `field_tree`.
    trees: std::cell::RefCell<Vec<Option<json_line::Json>>>,
}

impl<'a> Line<'a> {
    /// The line's fields (read shallow: nested values only bracket-matched), with the trees
    /// of the nested values named in `trees` built and the others checked, so every nested
    /// value is checked in full; `Err` names the first that is not JSON.
    fn parsed(
        fields: Vec<json_line::Field<'a>>,
        trees: &[&str],
    ) -> std::result::Result<Self, (String, json_line::SyntaxError)> {
        let mut built = Vec::with_capacity(fields.len());
        for f in &fields {
            if f.value != json_line::JsonValue::Json {
                built.push(None);
            } else if trees.contains(&f.key.as_str()) {
                let tree = json_line::parse_json(f.raw).map_err(|e| (f.key.clone(), e))?;
                built.push(Some(tree));
            } else {
                json_line::check_json(f.raw).map_err(|e| (f.key.clone(), e))?;
                built.push(None);
            }
        }
        Ok(Line {
            fields,
            trees: std::cell::RefCell::new(built),
        })
    }
}

impl<'a> From<Vec<json_line::Field<'a>>> for Line<'a> {
    /// The fields alone: trees are parsed when asked for.
    fn from(fields: Vec<json_line::Field<'a>>) -> Self {
        let n = fields.len();
        Line {
            fields,
            trees: std::cell::RefCell::new((0..n).map(|_| None).collect()),
        }
    }
}

impl<'a> std::ops::Deref for Line<'a> {
    type Target = [json_line::Field<'a>];

    fn deref(&self) -> &Self::Target {
        &self.fields
    }
}

/// A line parsed on a worker thread: its fields for the reader, or the line's error.
fn parse_line(raw: &RawLine, shallow: bool) -> Result<Vec<json_line::Field<'_>>> {
    let parsed = if shallow {
        json_line::parse_object_shallow(&raw.text)
    } else {
        json_line::parse_object(&raw.text)
    };
    parsed.map_err(|e| Error::data(format!("{}: not a JSON object", raw.at)).with_source(e))
}

/// Spool a JSONL dump in one read: the passthrough columns take their kinds from the first
/// chunk of lines, and each line is converted with a fresh `R` and its fields appended. Only
/// when a later line holds a field of another kind (an integer after floats, a value after
/// nulls, a field first seen later) is every line read once for the kinds ([`field_kinds`])
/// and the spool written again with them.
fn spool_jsonl<R: LineReader + Default>(
    input: &mut TrainerInput,
    allow_nonfinite: bool,
    sink: BufWriter<File>,
    name: &str,
) -> Result<()> {
    use std::io::Seek;
    let cannot = |e: std::io::Error| Error::data(format!("{name}: cannot spool")).with_source(e);
    let file = sink.into_inner().map_err(|e| cannot(e.into_error()))?;
    let first = BufWriter::new(file.try_clone().map_err(cannot)?);
    if let Spooled::Misfit(_) = write_spool::<R>(input, None, allow_nonfinite, first, name)? {
        let kinds = field_kinds::<R>(&input.files)?;
        let mut again = file.try_clone().map_err(cannot)?;
        again.set_len(0).map_err(cannot)?;
        again.rewind().map_err(cannot)?;
        if let Spooled::Misfit(at) = write_spool::<R>(
            input,
            Some(kinds),
            allow_nonfinite,
            BufWriter::new(again),
            name,
        )? {
            // every line's kinds were read, and this line no longer fits them
            return Err(Error::data(format!(
                "{at}: the file changed while advcalc read it"
            )));
        }
    }
    Ok(())
}

/// How a spool went: written, or stopped at a line (where) whose field does not fit the
/// kinds it was written with.
enum Spooled {
    Done,
    Misfit(String),
}

/// The kinds of the dump's passthrough fields over every line (nested values only
/// bracket-matched: the conversion checks every line).
fn field_kinds<R: LineReader>(files: &[PathBuf]) -> Result<Vec<(String, FieldKind)>> {
    use rayon::prelude::*;
    let mut kinds: Vec<(String, FieldKind)> = Vec::new();
    for_each_chunk(files, |chunk| {
        let lines: Vec<Result<Vec<(String, FieldKind)>>> = chunk
            .par_iter()
            .map(|raw| {
                let fields = parse_line(raw, true)?;
                Ok(passthrough_fields::<R>(&fields)
                    .into_iter()
                    .map(|f| (f.key, FieldKind::of(&f.value)))
                    .collect())
            })
            .collect();
        for line in lines {
            merge_kinds(&mut kinds, line?);
        }
        Ok(())
    })?;
    Ok(kinds)
}

/// Merge one line's field kinds into `kinds` (new fields after the others, in order).
fn merge_kinds(kinds: &mut Vec<(String, FieldKind)>, line: Vec<(String, FieldKind)>) {
    for (key, kind) in line {
        match kinds.iter_mut().find(|(k, _)| *k == key) {
            Some((_, k)) => *k = k.merge(kind),
            None => kinds.push((key, kind)),
        }
    }
}

/// Convert every line with a fresh `R` into the spool `sink`, its passthrough columns of
/// `kinds` (`None`: the first chunk's). [`Spooled::Misfit`]: a line's field does not fit the
/// kinds, and the spool is incomplete; otherwise `input` gets its rows and notes. A row whose
/// score is not a float32 number is refused ([`LineReader::score_error`]) unless
/// `allow_nonfinite`.
fn write_spool<R: LineReader + Default>(
    input: &mut TrainerInput,
    kinds: Option<Vec<(String, FieldKind)>>,
    allow_nonfinite: bool,
    sink: BufWriter<File>,
    name: &str,
) -> Result<Spooled> {
    use rayon::prelude::*;
    // a second write (the kinds did not fit) starts the rows again
    input.lines.clear();
    input.fields = R::FIELDS;
    let mut reader = R::default();
    let mut kinds = kinds;
    let mut sink = Some(sink);
    let mut position: HashMap<String, usize> = HashMap::new();
    let mut builders: Vec<FieldBuilder> = Vec::new();
    // the spool is encoded and compressed on its own thread while the next lines are parsed
    let mut send: Option<std::sync::mpsc::SyncSender<(Vec<DumpRow>, Vec<ArrayRef>)>> = None;
    let mut encoder: Option<std::thread::JoinHandle<Result<()>>> = None;
    let mut rows: Vec<DumpRow> = Vec::new();
    let mut total = 0usize;
    let mut misfit: Option<String> = None;
    let mut current_file = None;
    let read = for_each_chunk(&input.files, |chunk| {
        // parsing (the lines' fields and nested values) on every thread; the reader's state,
        // the passthrough columns and errors in file order
        let parsed: Vec<Result<(Line<'_>, Vec<json_line::Field<'_>>)>> = chunk
            .par_iter()
            .map(|raw| {
                // the top level checked here, the nested values by their trees
                let fields = parse_line(raw, true)?;
                let passthrough = passthrough_fields::<R>(&fields);
                let line = Line::parsed(fields, R::TREES).map_err(|(key, e)| {
                    // the column counts within the field's value
                    Error::data(format!("{}: `{key}` is not JSON", raw.at)).with_source(e)
                })?;
                Ok((line, passthrough))
            })
            .collect();
        if send.is_none() {
            // the first chunk: the kinds, the columns and the encoder
            let known = match kinds.take() {
                Some(k) => k,
                None => {
                    let mut k = Vec::new();
                    for (_, passthrough) in parsed.iter().flatten() {
                        merge_kinds(
                            &mut k,
                            passthrough
                                .iter()
                                .map(|f| (f.key.clone(), FieldKind::of(&f.value)))
                                .collect(),
                        );
                    }
                    k
                }
            };
            position = known
                .iter()
                .enumerate()
                .map(|(i, (k, _))| (k.clone(), i))
                .collect();
            builders = known
                .iter()
                .map(|&(_, kind)| FieldBuilder::new(kind))
                .collect();
            let passthrough: Vec<Field> = known
                .iter()
                .map(|(k, kind)| Field::new(passthrough_name(k), kind.data_type(), true))
                .collect();
            let sink = sink.take().expect("the sink, before the first chunk");
            let writer = SpoolWriter::new(sink, input.trainer, R::LOG_PROBS, passthrough, name)?;
            let (tx, receive) = std::sync::mpsc::sync_channel::<(Vec<DumpRow>, Vec<ArrayRef>)>(2);
            send = Some(tx);
            encoder = Some(std::thread::spawn(move || -> Result<()> {
                let mut writer = writer;
                for (rows, passthrough) in receive {
                    writer.write(&rows, passthrough)?;
                }
                writer.close()
            }));
        }
        for (raw, line) in chunk.iter().zip(parsed) {
            let (line, passthrough) = line?;
            let at = raw.at.as_str();
            if current_file != Some(raw.file) {
                current_file = Some(raw.file);
                let path = &input.files[raw.file];
                reader.file(path, &path.display().to_string())?;
            }
            let row = reader.row(&line, at)?;
            // `at` is "FILE line N" (json_line::read_lines)
            let number = at.rsplit_once(" line ").and_then(|(_, n)| n.parse().ok());
            input
                .lines
                .push((raw.file as u32, number.unwrap_or(u32::MAX)));
            if !allow_nonfinite && !(row.score as f32).is_finite() {
                return Err(reader.score_error(&line, at, row.score));
            }
            rows.push(row);
            let mut slots: Vec<Option<&json_line::Field<'_>>> = vec![None; builders.len()];
            for f in &passthrough {
                let Some(&i) = position.get(f.key.as_str()) else {
                    misfit = Some(at.to_string());
                    return Err(Error::data("a field the first lines did not have"));
                };
                slots[i] = Some(f);
            }
            for (builder, slot) in builders.iter_mut().zip(slots) {
                if !builder.append(slot) {
                    misfit = Some(at.to_string());
                    return Err(Error::data("a field of another kind than the first lines'"));
                }
            }
            total += 1;
        }
        let batch = (
            std::mem::take(&mut rows),
            builders.iter_mut().map(FieldBuilder::finish).collect(),
        );
        // a closed channel: the encoder failed, and says why below
        if let Some(send) = &send {
            let _ = send.send(batch);
        }
        Ok(())
    });
    drop(send);
    let encoded = match encoder {
        Some(encoder) => encoder
            .join()
            .map_err(|_| Error::data(format!("{name}: the spool's encoder failed")))?,
        None => Ok(()),
    };
    if let Some(at) = misfit {
        return Ok(Spooled::Misfit(at));
    }
    read?;
    encoded?;
    if total == 0 {
        return Err(Error::data(format!(
            "{name}: the {} dump has no rows",
            input.trainer.title()
        )));
    }
    input.rows = total;
    input.notes.extend(reader.notes());
    Ok(Spooled::Done)
}

/// A line's fields as the passthrough columns hold them: unwrapped from a batch of one when
/// the writer batches ([`LineReader::BATCHED`]).
fn passthrough_fields<'a, R: LineReader>(
    fields: &[json_line::Field<'a>],
) -> Vec<json_line::Field<'a>> {
    fields
        .iter()
        .map(|f| match json_line::single_element(f.raw) {
            Some((value, raw)) if R::BATCHED => json_line::Field {
                key: f.key.clone(),
                value,
                raw,
            },
            _ => f.clone(),
        })
        .collect()
}

/// A JSON field's value as a list of floats (`at`, `what`: for the message).
pub fn float_list(v: &json_line::Json, at: &str, what: &str) -> Result<Vec<f64>> {
    match v.floats() {
        Some(numbers) => Ok(numbers.into_owned()),
        None => list(v, at, what, json_line::Json::as_f64, "a number"),
    }
}

/// A JSON field's value as a list of integers.
pub fn int_list(v: &json_line::Json, at: &str, what: &str) -> Result<Vec<i64>> {
    match v.ints() {
        Some(numbers) => Ok(numbers.to_vec()),
        None => list(v, at, what, json_line::Json::as_i64, "an integer"),
    }
}

/// A JSON list's items, each converted by `item` (`expected` names what it takes): the
/// path of a list that is not all numbers, which words the error.
fn list<T>(
    v: &json_line::Json,
    at: &str,
    what: &str,
    item: fn(&json_line::Json) -> Option<T>,
    expected: &str,
) -> Result<Vec<T>> {
    let items = v
        .as_array()
        .ok_or_else(|| Error::data(format!("{at}: `{what}` is {}, not a list", v.kind())))?;
    items
        .iter()
        .map(|x| {
            item(x).ok_or_else(|| {
                Error::data(format!("{at}: `{what}` holds {}, not {expected}", x.kind()))
            })
        })
        .collect()
}

/// A top-level field parsed as a tree; `None` when the line lacks it.
pub fn field_tree(fields: &Line<'_>, key: &str, at: &str) -> Result<Option<json_line::Json>> {
    let Some(i) = fields.iter().position(|f| f.key == key) else {
        return Ok(None);
    };
    // parsed ahead when the line was, else now
    if let Some(tree) = fields.trees.borrow_mut().get_mut(i).and_then(Option::take) {
        return Ok(Some(tree));
    }
    json_line::parse_json(fields[i].raw)
        .map(Some)
        .map_err(|e| Error::data(format!("{at}: `{key}` is not JSON")).with_source(e))
}

/// A required top-level field parsed as a tree.
pub fn required(
    fields: &Line<'_>,
    key: &str,
    at: &str,
    trainer: Trainer,
) -> Result<json_line::Json> {
    field_tree(fields, key, at)?.ok_or_else(|| {
        Error::data(format!(
            "{at}: no `{key}` (every line of a {} dump has one)",
            trainer.title()
        ))
    })
}

/// The group size of consecutive groups inferred from runs of equal prompts: the greatest
/// common divisor of the lengths of every maximal run of equal `keys` within a step (two
/// adjacent groups of one prompt form a run of twice the size, so the gcd is the size when
/// any group stands alone).
pub fn inferred_group_size<K: PartialEq>(runs: impl Iterator<Item = (i64, K)>) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    let mut g = 0usize;
    let mut current: Option<(i64, K)> = None;
    let mut len = 0usize;
    for item in runs {
        if current.as_ref() == Some(&item) {
            len += 1;
        } else {
            if len > 0 {
                g = gcd(g, len);
            }
            current = Some(item);
            len = 1;
        }
    }
    if len > 0 {
        g = gcd(g, len);
    }
    g.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_files_are_told_by_their_names() {
        let of = |f: &str| Trainer::ALL.into_iter().find(|t| t.names_a_dump_file(f));
        assert_eq!(of("completions_00012.parquet"), Some(Trainer::Trl));
        assert_eq!(of("completions_.parquet"), None);
        assert_eq!(of("train_data_step3.jsonl"), Some(Trainer::NemoRl));
        assert_eq!(of("val_data_step3.jsonl"), None);
        assert_eq!(of("traces.jsonl"), Some(Trainer::PrimeRl));
        assert_eq!(
            of("run1_rollouts_000000.jsonl"),
            Some(Trainer::OpenInstruct)
        );
        assert_eq!(of("run1_metadata.jsonl"), None);
        assert_eq!(of("12.jsonl"), None);
    }

    #[test]
    fn a_nested_value_that_is_not_json_is_named() {
        let fields = json_line::parse_object_shallow(r#"{"a": 1, "b": [1, x]}"#).unwrap();
        let Err((key, e)) = Line::parsed(fields, &[]) else {
            panic!("a bad nested value is refused")
        };
        assert_eq!((key.as_str(), e.column), ("b", 5));
    }

    #[test]
    fn a_score_that_is_not_float32_is_said_as_written() {
        assert_eq!(score_fault(1.5, Some("1.5")), None);
        assert_eq!(score_fault(3e38, None), None);
        assert_eq!(score_fault(f64::NAN, Some("NaN")).unwrap(), "NaN");
        assert_eq!(score_fault(f64::NAN, None).unwrap(), "NaN");
        let inf = f64::INFINITY;
        assert_eq!(score_fault(inf, Some("Infinity")).unwrap(), "Infinity");
        assert_eq!(score_fault(-inf, Some("-Infinity")).unwrap(), "-Infinity");
        assert_eq!(score_fault(-inf, None).unwrap(), "-inf");
        // a number as written, beyond float64 (read as inf) or float32
        assert_eq!(
            score_fault(inf, Some("1e400")).unwrap(),
            "1e400, which overflows float64"
        );
        assert_eq!(
            score_fault(-1e300, Some("-1E+300")).unwrap(),
            "-1E+300, which overflows float32"
        );
        assert_eq!(
            score_fault(1e39, None).unwrap(),
            "1e39, which overflows float32"
        );
    }

    #[test]
    fn verl_dump_files_are_told_by_their_names() {
        assert!(is_verl_step_file("12.jsonl"));
        assert!(is_verl_step_file("012.jsonl"));
        assert!(!is_verl_step_file(".jsonl"));
        assert!(!is_verl_step_file("train_data_step1.jsonl"));
        assert!(!is_verl_step_file("12.parquet"));
    }

    #[test]
    fn natural_order_compares_numbers() {
        let mut v = [
            PathBuf::from("r/step_10/a.jsonl"),
            PathBuf::from("r/step_2/a.jsonl"),
            PathBuf::from("r/step_1/b.jsonl"),
        ];
        v.sort_by_key(|p| natural_key(p));
        assert_eq!(v[0], PathBuf::from("r/step_1/b.jsonl"));
        assert_eq!(v[2], PathBuf::from("r/step_10/a.jsonl"));
    }

    #[test]
    fn group_size_is_the_gcd_of_prompt_runs() {
        let runs = |v: &[(i64, &str)]| inferred_group_size(v.iter().copied());
        // a prompt drawn twice in a row makes a run of 8; the lone group says 4
        let a = [(1, "a"); 4];
        let b = [(1, "b"); 8];
        let rows: Vec<(i64, &str)> = a.iter().chain(&b).chain(&a).copied().collect();
        assert_eq!(runs(&rows), 4);
        // the same prompt across a step boundary is two runs
        let rows = [(1, "a"), (1, "a"), (2, "a"), (2, "a")];
        assert_eq!(runs(&rows), 2);
        assert_eq!(runs(&[]), 1);
    }

    #[test]
    fn fields_advcalc_reads_are_renamed() {
        assert_eq!(passthrough_name("advantages"), "trainer_advantages");
        assert_eq!(passthrough_name("step"), "trainer_step");
        assert_eq!(passthrough_name("trainer_x"), "trainer_trainer_x");
        assert_eq!(passthrough_name("prompt"), "prompt");
    }
}
