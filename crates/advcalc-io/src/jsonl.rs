//! verl's text dumps as input: the JSONL files of `trainer.rollout_data_dir` and
//! `validation_data_dir` (`{global_steps}.jsonl`, one JSON object per generated response,
//! written by `RayPPOTrainer._dump_generations` with `json.dumps(entry, ensure_ascii=False)`:
//! `input`, `output`, `gts`, `score`, `step`, then each `reward_extra_infos` key). IN is one
//! such file or a directory of them (read in step order of their names: `2.jsonl` before
//! `10.jsonl`).
//!
//! Two writers: the legacy trainer's (`RayPPOTrainer`, `trainer.use_v1: false`) writes no
//! uid, so rows of one prompt are the rows with the same `input` text; verl 0.9.1's default
//! V1 trainer (`trainer/ppo/v1/trainer_base.py` `_log_rollout_data`) adds
//! `"uid": "{uid}_{session_id}_{index}"` to every line ([`Writer`]). With it, the group is the
//! key's uid part (a prompt drawn twice in a step is two groups), and `{uid}_{session_id}` is
//! a multi-output session whose last `index` GRPO scores (verl's `v1/utils.py`).
//!
//! A dump holds one score per row and no tokens, so it is **sequence-level** data. The passes
//! read it through a spooled Parquet file holding only what they need: `uid` (the key's uid
//! part, or the `input` text), with the V1 writer `session_id` and `output_index`, a one-token
//! `response_mask` of `[1]` (`[0]` for V1 padding rows, as verl trains them), the `score` and
//! the `step`; the spool's schema metadata carries [`SEQUENCE_LEVEL_KEY`] (its value names the
//! writer), so that a configuration that needs real tokens (a token-level estimator, KL in the reward, rollout
//! correction) is refused when the columns are resolved (`io::schema`), never run on the
//! synthesized rows. `run` writes the dump's own fields back out with one `advantage` per
//! row (`io::sequence_output`), reading the files again through [`field_batches`].
//!
//! Every fault names the file and the line (counted from 1): a line that is not a JSON
//! object, no `input` or `score`, a score that is not a number, a `step` that is not an
//! integer or disagrees with the file name, a `uid` that is not a V1 key, lines with and
//! without `uid` (or `step`) in one input, an empty file, a directory mixing JSONL with
//! Parquet or Arrow files. Blank lines are skipped (verl ends every file with a newline, and
//! an empty batch writes a lone one).

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, Float64Array, Int8Array, Int64Array, ListArray, StringArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use tempfile::NamedTempFile;

use crate::error::{Error, Result};
use crate::json_fields::{FieldBuilder, FieldKind};
use crate::json_line::{self, JsonValue};

/// Schema metadata key of sequence-level input: one synthesized token per row carrying the
/// row's score. Deliberately outside the `advcalc.` provenance keys.
pub const SEQUENCE_LEVEL_KEY: &str = "advcalc:sequence_level";

/// Which of verl's two writers made a dump, as [`SEQUENCE_LEVEL_KEY`]'s value records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// `RayPPOTrainer._dump_generations` (`trainer.use_v1: false`): no uid; groups are rows
    /// with the same `input` text.
    Legacy,
    /// The V1 trainer's `_log_rollout_data`: every line has `"uid": "{uid}_{session_id}_{index}"`.
    V1,
}

impl Writer {
    /// The value of [`SEQUENCE_LEVEL_KEY`] in the spool's metadata.
    pub fn tag(self) -> &'static str {
        match self {
            Writer::Legacy => "verl JSONL",
            Writer::V1 => "verl JSONL V1",
        }
    }

    /// The writer a spool's [`SEQUENCE_LEVEL_KEY`] value names.
    pub fn of_tag(tag: &str) -> Option<Writer> {
        [Writer::Legacy, Writer::V1]
            .into_iter()
            .find(|w| w.tag() == tag)
    }

    /// How the rows are grouped, for `inspect`'s note.
    pub fn grouping(self) -> &'static str {
        match self {
            Writer::Legacy => {
                "rows are grouped by their `input` text (verl's legacy writer: the lines have no `uid`)"
            }
            Writer::V1 => {
                "rows are grouped by the uid part of their `uid` key `{uid}_{session_id}_{index}` (verl V1's writer), and `grpo` scores each `{uid}_{session_id}` session by its last `index`"
            }
        }
    }
}

/// The V1 writer's key `{uid}_{session_id}_{index}`, split as verl splits it
/// (`key.rsplit("_", 2)`, so a uid may contain `_`); `None` when it is not of that form.
pub fn split_v1_key(key: &str) -> Option<(&str, i64, i64)> {
    let (rest, index) = key.rsplit_once('_')?;
    let (uid, session) = rest.rsplit_once('_')?;
    Some((uid, session.parse().ok()?, index.parse().ok()?))
}

/// Whether a V1 row is one of verl's synthetic padding rows (`padding_utils.py`
/// `upsample_batch_to_divisible_size`: uid `pad` + a uuid4's 32 hex digits, index 0, score 0),
/// which verl trains with a response mask of `[0]`: the spool gives them that mask, so every
/// estimator gives them 0, as verl does, and `inspect` counts them as padding.
fn is_v1_padding(uid: &str, index: i64, score: f64) -> bool {
    uid.strip_prefix("pad").is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    }) && index == 0
        && score == 0.0
}

/// Rows per spooled row group and per output batch.
const BATCH_ROWS: usize = 1024;

/// The extensions of the other input formats, which a JSONL directory must not mix in.
const OTHER_FORMATS: [&str; 5] = ["parquet", "arrow", "arrows", "feather", "ipc"];

/// A JSONL input, as read once: its files in reading order and its fields' kinds.
#[derive(Debug, Clone)]
pub struct JsonlInput {
    /// The files, in the order their rows are read (and written).
    pub files: Vec<PathBuf>,
    /// Every top-level key, in order of first appearance, with the kind of its values.
    pub fields: Vec<(String, FieldKind)>,
    /// Rows (non-blank lines) over all files.
    pub rows: usize,
    /// Let NaN and ±inf scores through (`--allow-nonfinite`, and `inspect`, which counts them).
    pub allow_nonfinite: bool,
}

/// Whether `path` names JSONL by its extension.
pub fn is_jsonl_name(path: &Path) -> bool {
    extension(path).as_deref() == Some("jsonl")
}

fn extension(path: &Path) -> Option<String> {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
}

/// A directory's data files: `(jsonl, others)` (Parquet or Arrow), hidden files skipped.
fn directory_files(dir: &Path, name: &str) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::data(format!("{name}: cannot read the directory")).with_source(e))?;
    let (mut jsonl, mut others) = (Vec::new(), Vec::new());
    for entry in entries {
        let entry = entry.map_err(|e| {
            Error::data(format!("{name}: cannot read the directory")).with_source(e)
        })?;
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if hidden || !path.is_file() {
            continue;
        }
        match extension(&path).as_deref() {
            Some("jsonl") => jsonl.push(path),
            Some(e) if OTHER_FORMATS.contains(&e) => others.push(path),
            _ => {}
        }
    }
    others.sort();
    Ok((jsonl, others))
}

/// Whether the directory holds `.jsonl` files (then it is a verl JSONL dump; otherwise a
/// dataset of Parquet or Arrow files, `io::dataset`).
pub fn directory_has_jsonl(dir: &Path, name: &str) -> Result<bool> {
    Ok(!directory_files(dir, name)?.0.is_empty())
}

fn empty_directory(dir: &Path, name: &str) -> Error {
    match nested_jsonl(dir, name) {
        Ok(Some(e)) | Err(e) => e,
        Ok(None) => Error::data(format!("{name}: is a directory with no .jsonl files in it"))
            .with_hint(
                "give a Parquet or Arrow file, or verl's rollout_data_dir (its STEP.jsonl files)",
            ),
    }
}

/// The error for a directory `dir` that holds no `.jsonl` file itself but some in the
/// directories below it, naming where they are: verl writes its dump files side by side in
/// one directory (`rollout_data_dir/{global_steps}.jsonl`), which is the one to give. `None`
/// when there are none below either.
pub fn nested_jsonl(dir: &Path, name: &str) -> Result<Option<Error>> {
    let below = crate::trainers::find_files(dir, name, &|f| is_jsonl_name(f))?;
    let Some(first) = below.first() else {
        return Ok(None);
    };
    let holders: std::collections::BTreeSet<&Path> =
        below.iter().filter_map(|f| f.parent()).collect();
    let holder = first.parent().unwrap_or(dir);
    let others = match holders.len() {
        1 => String::new(),
        n => format!(" (and {} other directories)", n - 1),
    };
    Ok(Some(
        Error::data(format!(
            "{name}: holds no .jsonl file itself; its .jsonl files are below it, in {}{others}",
            holder.display()
        ))
        .with_hint(format!(
            "verl writes a dump's STEP.jsonl files side by side in one directory (rollout_data_dir): give that directory, {}",
            holder.display()
        )),
    ))
}

/// The files of IN: the file itself, or a directory's `.jsonl` files in the order of the
/// step their names give (`2.jsonl` before `10.jsonl`; other names after, by name).
pub fn files(path: &Path, name: &str) -> Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let (mut jsonl, others) = directory_files(path, name)?;
    if jsonl.is_empty() {
        return Err(empty_directory(path, name));
    }
    if let Some(other) = others.first() {
        jsonl.sort();
        return Err(Error::data(format!(
            "{name}: the directory mixes JSONL ({}) with Parquet or Arrow files ({})",
            jsonl[0].display(),
            other.display()
        ))
        .with_hint("keep one format per directory, or give the file to read"));
    }
    jsonl.sort_by(|a, b| {
        let key = |p: &Path| (file_step(p).map_or((1, 0), |s| (0, s)), p.to_path_buf());
        key(a).cmp(&key(b))
    });
    // verl writes one `{global_steps}.jsonl` per step: two files of one step (`01.jsonl` and
    // `1.jsonl`) would put both copies' rows in the step's groups
    if let Some(pair) = jsonl
        .windows(2)
        .find(|w| file_step(&w[0]).is_some() && file_step(&w[0]) == file_step(&w[1]))
    {
        return Err(Error::data(format!(
            "{name}: two files for step {}, {} and {}",
            file_step(&pair[0]).unwrap_or_default(),
            pair[0].display(),
            pair[1].display()
        ))
        .with_hint("verl writes one STEP.jsonl per step: keep one of them"));
    }
    Ok(jsonl)
}

/// The step a file's name gives (verl writes `{global_steps}.jsonl`).
fn file_step(path: &Path) -> Option<i64> {
    path.file_stem()?.to_str()?.parse().ok()
}

/// One line, checked: its fields, and what the passes need of it.
struct Row<'a> {
    fields: Vec<json_line::Field<'a>>,
    /// The group label: the V1 key's uid part, else the `input` text.
    group: String,
    /// The V1 key's `(session_id, index)`; `None` for the legacy writer.
    session: Option<(i64, i64)>,
    /// A V1 synthetic padding row ([`is_v1_padding`]): spooled with a mask of `[0]`.
    padding: bool,
    score: f64,
    step: Option<i64>,
}

/// A value as a message shows it: its JSON text, cut short.
fn shown(raw: &str) -> String {
    const MAX: usize = 40;
    match raw.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &raw[..cut]),
        None => raw.to_string(),
    }
}

/// Check one line (`at`: "FILE line N") of a file whose name gives `file_step`.
fn check_row<'a>(
    text: &'a str,
    at: &str,
    file_step: Option<i64>,
    allow_nonfinite: bool,
) -> Result<Row<'a>> {
    let fields = json_line::parse_object(text)
        .map_err(|e| Error::data(format!("{at}: not a JSON object")).with_source(e))?;
    let find = |key: &str| fields.iter().find(|f| f.key == key);
    let input = match find("input") {
        None
        | Some(json_line::Field {
            value: JsonValue::Null,
            ..
        }) => {
            return Err(Error::data(format!(
                "{at}: no `input` (the prompt text, which groups the rows)"
            )));
        }
        Some(json_line::Field {
            value: JsonValue::Str(s),
            ..
        }) => s.clone(),
        Some(f) => {
            return Err(Error::data(format!(
                "{at}: `input` is {}, not a string",
                shown(f.raw)
            )));
        }
    };
    let score = match find("score") {
        None => return Err(Error::data(format!("{at}: no `score`"))),
        Some(f) => f.value.as_f64().ok_or_else(|| {
            Error::data(format!("{at}: `score` is {}, not a number", shown(f.raw)))
        })?,
    };
    // NaN, ±inf, or beyond float32 (the passes' scores are float32, as verl's)
    if !allow_nonfinite
        && let Some(what) = crate::trainers::score_fault(score, find("score").map(|f| f.raw))
    {
        return Err(Error::data(format!(
            "{at}: `score` is {what} (pass --allow-nonfinite to let non-finite values through, as verl would)"
        )));
    }
    let step = match find("step").map(|f| (&f.value, f.raw)) {
        None | Some((JsonValue::Null, _)) => file_step,
        Some((&JsonValue::Int(s), _)) => {
            if let Some(named) = file_step
                && named != s
            {
                return Err(Error::data(format!(
                    "{at}: `step` is {s}, but the file name says step {named}"
                )));
            }
            Some(s)
        }
        Some((_, raw)) => {
            return Err(Error::data(format!(
                "{at}: `step` is {}, not an integer",
                shown(raw)
            )));
        }
    };
    let (group, session) = match find("uid").map(|f| (&f.value, f.raw)) {
        None => (input, None),
        Some((JsonValue::Str(key), raw)) => match split_v1_key(key) {
            Some((uid, session, index)) => (uid.to_string(), Some((session, index))),
            None => {
                return Err(Error::data(format!(
                    "{at}: `uid` is {}, not verl V1's key `{{uid}}_{{session_id}}_{{index}}`",
                    shown(raw)
                ))
                .with_hint(
                    "verl's V1 trainer writes `uid` as `{uid}_{session_id}_{index}` with integer session and index; remove the field to group rows by their `input` text",
                ));
            }
        },
        Some((_, raw)) => {
            return Err(Error::data(format!(
                "{at}: `uid` is {}, not a string (verl V1 writes `{{uid}}_{{session_id}}_{{index}}`)",
                shown(raw)
            )));
        }
    };
    let padding = session.is_some_and(|(_, index)| is_v1_padding(&group, index, score));
    Ok(Row {
        fields,
        group,
        session,
        padding,
        score,
        step,
    })
}

/// Whether the lines so far have a field (`None`: no line yet); a line that breaks the rule
/// is an error naming it, since one input mixing two writers (or steps and none) has no
/// single meaning.
fn all_or_none(seen: &mut Option<bool>, has: bool, at: &str, what: &str) -> Result<()> {
    match *seen {
        None => *seen = Some(has),
        Some(true) if !has => {
            return Err(Error::data(format!(
                "{at}: no {what}, while the lines before have one"
            )));
        }
        Some(false) if has => {
            return Err(Error::data(format!(
                "{at}: a {what}, while the lines before have none"
            )));
        }
        _ => {}
    }
    Ok(())
}

/// Call `each` with every non-blank line of `files` (in order) and where it is
/// ("FILE line N"), checked. An empty file (no non-blank line) is an error.
fn for_each_row(
    files: &[PathBuf],
    allow_nonfinite: bool,
    mut each: impl FnMut(Row<'_>, &str) -> Result<()>,
) -> Result<()> {
    let (mut has_step, mut has_uid): (Option<bool>, Option<bool>) = (None, None);
    for path in files {
        let step = file_step(path);
        let rows = json_line::read_lines(path, |at, text| {
            let row = check_row(text, &at, step, allow_nonfinite)?;
            all_or_none(&mut has_step, row.step.is_some(), &at, "`step`")?;
            all_or_none(
                &mut has_uid,
                row.session.is_some(),
                &at,
                "`uid` (verl V1's key)",
            )?;
            each(row, &at)
        })?;
        if rows == 0 {
            return Err(
                Error::data(format!("{}: empty file, no JSON lines", path.display()))
                    .with_hint("a step without rows leaves an empty file; remove it"),
            );
        }
    }
    Ok(())
}

/// The spooled columns of the passes, `BATCH_ROWS` rows at a time.
#[derive(Default)]
struct SpoolBatch {
    uid: Vec<String>,
    /// `session_id` and `output_index` (the V1 writer only).
    session: Vec<i64>,
    index: Vec<i64>,
    /// Each row's one mask value: 1, or 0 for V1 padding rows.
    mask: Vec<i8>,
    score: Vec<f64>,
    step: Vec<i64>,
}

impl SpoolBatch {
    fn push(&mut self, row: Row<'_>) {
        self.mask.push(if row.padding { 0 } else { 1 });
        self.uid.push(row.group);
        if let Some((session, index)) = row.session {
            self.session.push(session);
            self.index.push(index);
        }
        self.score.push(row.score);
        self.step.extend(row.step);
    }

    fn schema(with_step: bool, writer: Writer) -> SchemaRef {
        let mut fields = vec![Field::new("uid", DataType::Utf8, false)];
        if writer == Writer::V1 {
            fields.push(Field::new("session_id", DataType::Int64, false));
            fields.push(Field::new("output_index", DataType::Int64, false));
        }
        fields.push(Field::new(
            "response_mask",
            DataType::List(Arc::new(Field::new("item", DataType::Int8, true))),
            false,
        ));
        fields.push(Field::new("score", DataType::Float64, false));
        if with_step {
            fields.push(Field::new("step", DataType::Int64, false));
        }
        let metadata = HashMap::from([(SEQUENCE_LEVEL_KEY.to_string(), writer.tag().to_string())]);
        Arc::new(Schema::new_with_metadata(fields, metadata))
    }

    fn take(&mut self, schema: &SchemaRef) -> Result<RecordBatch> {
        let rows = self.uid.len();
        let mask = ListArray::new(
            Arc::new(Field::new("item", DataType::Int8, true)),
            OffsetBuffer::from_lengths(std::iter::repeat_n(1, rows)),
            Arc::new(Int8Array::from(std::mem::take(&mut self.mask))),
            None,
        );
        let mut columns: Vec<ArrayRef> =
            vec![Arc::new(StringArray::from(std::mem::take(&mut self.uid)))];
        if schema.column_with_name("session_id").is_some() {
            columns.push(Arc::new(Int64Array::from(std::mem::take(
                &mut self.session,
            ))));
            columns.push(Arc::new(Int64Array::from(std::mem::take(&mut self.index))));
        }
        columns.push(Arc::new(mask));
        columns.push(Arc::new(Float64Array::from(std::mem::take(
            &mut self.score,
        ))));
        if schema.column_with_name("step").is_some() {
            columns.push(Arc::new(Int64Array::from(std::mem::take(&mut self.step))));
        }
        RecordBatch::try_new(schema.clone(), columns)
            .map_err(|e| Error::data("cannot spool the JSONL rows").with_source(e))
    }
}

/// Read IN (`path`, named `name` in messages) once: check every line, spool what the passes
/// need into a temporary Parquet file in `dir`, and find the fields' kinds for `run`'s output.
pub fn spool(
    path: &Path,
    name: &str,
    allow_nonfinite: bool,
    dir: &Path,
) -> Result<(NamedTempFile, JsonlInput)> {
    let files = files(path, name)?;
    let fail = |what: &str| Error::data(format!("{name}: {what}"));
    let (spool, handle) = crate::ipc::spool_file(dir, name)?;
    let mut sink = Some(BufWriter::new(handle));
    let mut writer: Option<(ArrowWriter<BufWriter<File>>, SchemaRef)> = None;
    let mut batch = SpoolBatch::default();
    let mut fields: Vec<(String, FieldKind)> = Vec::new();
    let mut rows = 0usize;
    let mut flush = |batch: &mut SpoolBatch,
                     writer: &mut Option<(ArrowWriter<BufWriter<File>>, SchemaRef)>,
                     with_step: bool,
                     kind: Writer|
     -> Result<()> {
        if writer.is_none() {
            let schema = SpoolBatch::schema(with_step, kind);
            let props = WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::default()))
                .set_max_row_group_row_count(Some(BATCH_ROWS))
                .set_key_value_metadata(Some(vec![KeyValue::new(
                    SEQUENCE_LEVEL_KEY.to_string(),
                    kind.tag().to_string(),
                )]))
                .build();
            let sink = sink.take().expect("one writer");
            let w = ArrowWriter::try_new(sink, schema.clone(), Some(props))
                .map_err(|e| fail("cannot spool").with_source(e))?;
            *writer = Some((w, schema));
        }
        let (w, schema) = writer.as_mut().expect("created above");
        let record = batch.take(schema)?;
        w.write(&record)
            .map_err(|e| fail("cannot spool").with_source(e))
    };
    // every line alike (for_each_row checks it): the first line decides
    let (mut with_step, mut kind) = (false, Writer::Legacy);
    for_each_row(&files, allow_nonfinite, |row, _| {
        for f in &row.fields {
            let kind = FieldKind::of(&f.value);
            match fields.iter_mut().find(|(k, _)| *k == f.key) {
                Some((_, k)) => *k = k.merge(kind),
                None => fields.push((f.key.clone(), kind)),
            }
        }
        with_step = row.step.is_some();
        if row.session.is_some() {
            kind = Writer::V1;
        }
        batch.push(row);
        rows += 1;
        if batch.uid.len() == BATCH_ROWS {
            flush(&mut batch, &mut writer, with_step, kind)?;
        }
        Ok(())
    })?;
    if !batch.uid.is_empty() {
        flush(&mut batch, &mut writer, with_step, kind)?;
    }
    let (w, _) = writer.expect("at least one row: empty files are refused");
    w.close().map_err(|e| fail("cannot spool").with_source(e))?;
    Ok((
        spool,
        JsonlInput {
            files,
            fields,
            rows,
            allow_nonfinite,
        },
    ))
}

/// The dump's fields as Arrow columns (in `input.fields` order and kinds), read again from
/// the files: `each` gets up to `BATCH_ROWS` rows at a time, in file order.
pub fn field_batches(
    input: &JsonlInput,
    mut each: impl FnMut(Vec<ArrayRef>) -> Result<()>,
) -> Result<()> {
    let position: HashMap<&str, usize> = input
        .fields
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (k.as_str(), i))
        .collect();
    let mut builders: Vec<FieldBuilder> = input
        .fields
        .iter()
        .map(|&(_, kind)| FieldBuilder::new(kind))
        .collect();
    let changed = |at: &str| Error::data(format!("{at}: the file changed while advcalc read it"));
    let mut pending = 0usize;
    for_each_row(&input.files, input.allow_nonfinite, |row, at| {
        let mut slots: Vec<Option<&json_line::Field<'_>>> = vec![None; builders.len()];
        for f in &row.fields {
            let &i = position.get(f.key.as_str()).ok_or_else(|| changed(at))?;
            slots[i] = Some(f);
        }
        for (builder, slot) in builders.iter_mut().zip(slots) {
            if !builder.append(slot) {
                return Err(changed(at));
            }
        }
        pending += 1;
        if pending == BATCH_ROWS {
            pending = 0;
            each(builders.iter_mut().map(FieldBuilder::finish).collect())?;
        }
        Ok(())
    })?;
    if pending > 0 {
        each(builders.iter_mut().map(FieldBuilder::finish).collect())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::ParquetInput;
    use arrow_array::Array;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    const VERL_LINE: &str =
        r#"{"input": "q1", "output": "a", "gts": "2", "score": 1.0, "step": 3, "acc": true}"#;

    #[test]
    fn kinds_merge_to_the_widest() {
        use FieldKind::*;
        assert_eq!(Null.merge(Int), Int);
        assert_eq!(Int.merge(Float), Float);
        assert_eq!(Float.merge(Null), Float);
        assert_eq!(Str.merge(Int), Json);
        assert_eq!(Bool.merge(Int), Json);
        assert_eq!(Json.merge(Null), Json);
        assert_eq!(Null.data_type(), DataType::Utf8);
    }

    #[test]
    fn spools_the_engine_columns_and_marks_them_sequence_level() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "{VERL_LINE}\n{}\n\n",
            r#"{"input": "q1", "output": "b", "gts": null, "score": 0, "step": 3, "acc": false, "extra": [1]}"#
        );
        let path = write(dir.path(), "3.jsonl", &text);
        let (spool, input) = spool(&path, "IN", false, dir.path()).unwrap();
        assert_eq!(input.rows, 2);
        let kinds: Vec<(&str, FieldKind)> =
            input.fields.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        use FieldKind::*;
        assert_eq!(
            kinds,
            [
                ("input", Str),
                ("output", Str),
                ("gts", Str),
                ("score", Float),
                ("step", Int),
                ("acc", Bool),
                ("extra", Json)
            ]
        );
        let parquet = ParquetInput::open(spool.path()).unwrap();
        let schema = parquet.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["uid", "response_mask", "score", "step"]);
        assert!(schema.metadata().contains_key(SEQUENCE_LEVEL_KEY));
        let batch = parquet.read_row_group(0, None).unwrap();
        let score = batch
            .column(2)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(score.values().to_vec(), [1.0, 0.0]);
        let mut seen = Vec::new();
        field_batches(&input, |columns| {
            seen.push(columns);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.len(), 1);
        let extra = seen[0][6].as_any().downcast_ref::<StringArray>().unwrap();
        assert!(extra.is_null(0));
        assert_eq!(extra.value(1), "[1]");
    }

    #[test]
    fn a_directory_is_read_in_step_order_of_the_names() {
        let dir = tempfile::tempdir().unwrap();
        for step in [10, 2, 1] {
            let line = VERL_LINE.replace("\"step\": 3", &format!("\"step\": {step}"));
            write(dir.path(), &format!("{step}.jsonl"), &format!("{line}\n"));
        }
        write(dir.path(), "notes.txt", "not data");
        let names: Vec<String> = files(dir.path(), "IN")
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["1.jsonl", "2.jsonl", "10.jsonl"]);
        assert!(directory_has_jsonl(dir.path(), "IN").unwrap());
    }

    fn error_of(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "3.jsonl", text);
        spool(&path, "IN", false, dir.path())
            .unwrap_err()
            .to_string()
            .replace(&dir.path().display().to_string(), "D")
    }

    #[test]
    fn each_fault_names_the_file_and_line() {
        let ok = format!("{VERL_LINE}\n");
        for (bad, message) in [
            ("{\"input\": \"q\",", "D/3.jsonl line 2: not a JSON object"),
            (
                r#"{"input": "q", "step": 3}"#,
                "D/3.jsonl line 2: no `score`",
            ),
            (
                r#"{"score": 1, "step": 3}"#,
                "D/3.jsonl line 2: no `input` (the prompt text, which groups the rows)",
            ),
            (
                r#"{"input": "q", "score": "1.0"}"#,
                "D/3.jsonl line 2: `score` is \"1.0\", not a number",
            ),
            (
                r#"{"input": "q", "score": null}"#,
                "D/3.jsonl line 2: `score` is null, not a number",
            ),
            (
                r#"{"input": 7, "score": 1}"#,
                "D/3.jsonl line 2: `input` is 7, not a string",
            ),
            (
                r#"{"input": "q", "score": 1, "step": 4}"#,
                "D/3.jsonl line 2: `step` is 4, but the file name says step 3",
            ),
            (
                r#"{"input": "q", "score": 1, "step": 3.0}"#,
                "D/3.jsonl line 2: `step` is 3.0, not an integer",
            ),
        ] {
            assert_eq!(error_of(&format!("{ok}{bad}\n")), message, "{bad}");
        }
        assert!(
            error_of(&format!("{ok}{}\n", r#"{"input": "q", "score": NaN}"#))
                .starts_with("D/3.jsonl line 2: `score` is NaN (pass --allow-nonfinite")
        );
        assert_eq!(error_of(""), "D/3.jsonl: empty file, no JSON lines");
        assert_eq!(error_of("\n"), "D/3.jsonl: empty file, no JSON lines");
        let invalid = {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("3.jsonl");
            std::fs::write(&path, b"{\"input\": \"\xff\", \"score\": 1}\n").unwrap();
            spool(&path, "IN", false, dir.path())
                .unwrap_err()
                .to_string()
        };
        assert!(
            invalid.ends_with("3.jsonl line 1: not valid UTF-8"),
            "{invalid}"
        );
    }

    #[test]
    fn v1_keys_split_as_verl_splits_them() {
        // `key.rsplit("_", 2)`: the uid keeps its own underscores
        assert_eq!(
            split_v1_key("gsm8k_train_12_3_0"),
            Some(("gsm8k_train_12", 3, 0))
        );
        assert_eq!(split_v1_key("u1_0_1"), Some(("u1", 0, 1)));
        assert_eq!(split_v1_key("_0_1"), Some(("", 0, 1)));
        assert_eq!(split_v1_key("u1_0"), None);
        assert_eq!(split_v1_key("u1_a_0"), None);
        assert_eq!(split_v1_key("u1_0_x"), None);
        let pad = "pad0123456789abcdef0123456789abcdef";
        assert!(is_v1_padding(pad, 0, 0.0));
        assert!(!is_v1_padding(pad, 1, 0.0));
        assert!(!is_v1_padding(pad, 0, 1.0));
        assert!(!is_v1_padding("pad_alpha", 0, 0.0));
        assert!(!is_v1_padding(
            &pad.to_uppercase().replace("PAD", "pad"),
            0,
            0.0
        ));
    }

    #[test]
    fn steps_are_all_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "all.jsonl",
            "{\"input\": \"q\", \"score\": 1, \"step\": 1}\n{\"input\": \"q\", \"score\": 1}\n",
        );
        let e = spool(&path, "IN", false, dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("all.jsonl line 2: no `step`, while the lines before have one"),
            "{e}"
        );
    }

    #[test]
    fn directories_empty_or_mixed_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            files(dir.path(), "IN").unwrap_err().to_string(),
            "IN: is a directory with no .jsonl files in it"
        );
        write(dir.path(), "1.jsonl", VERL_LINE);
        write(dir.path(), "2.parquet", "");
        let e = files(dir.path(), "IN").unwrap_err().to_string();
        assert!(e.starts_with("IN: the directory mixes JSONL ("), "{e}");
        assert!(e.contains("2.parquet"), "{e}");
    }
}
