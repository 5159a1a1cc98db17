//! The spool every trainer's reader writes: advcalc's columns from [`DumpRow`]s, then the
//! dump's fields (renamed by [`passthrough_name`]), and the one-read spooling of a JSONL dump.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

use arrow_array::StringArray;
use arrow_array::builder::{Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, Float64Array, Int8Array, Int64Array, ListArray, RecordBatch};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use tempfile::NamedTempFile;

use super::discovery::{glob_files, walk_notes};
use super::line_reader::{
    Line, LineReader, field_kinds, for_each_chunk, merge_kinds, parse_line, passthrough_fields,
};
use super::{
    BATCH_ROWS, DumpOptions, LOGGED_ADVANTAGE, TRAINER_KEY, Trainer, TrainerInput, nemo_rl,
    open_instruct, prime_rl, trl,
};
use crate::error::{Error, Result};
use crate::json_fields::{FieldBuilder, FieldKind};
use crate::json_line;
use crate::jsonl::SEQUENCE_LEVEL_KEY;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_advcalc_reads_are_renamed() {
        assert_eq!(passthrough_name("advantages"), "trainer_advantages");
        assert_eq!(passthrough_name("step"), "trainer_step");
        assert_eq!(passthrough_name("trainer_x"), "trainer_trainer_x");
        assert_eq!(passthrough_name("prompt"), "prompt");
    }
}
