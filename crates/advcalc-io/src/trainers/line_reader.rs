//! The JSONL readers' frame: [`LineReader`] (one row per line, in file order), the lines
//! read in chunks and parsed on every thread into a [`Line`], the passthrough fields' JSON
//! typing, and the helpers the readers take fields and lists with.

use std::path::{Path, PathBuf};

use super::{BATCH_ROWS, DumpRow, LogProbColumns, Trainer};
use crate::error::{Error, Result};
use crate::json_fields::FieldKind;
use crate::json_line;

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
pub(super) struct RawLine {
    /// The index of its file.
    pub(super) file: usize,
    /// "FILE line N", for messages.
    pub(super) at: String,
    text: String,
}

/// Call `each` with the non-blank lines of `files`, in order, up to `BATCH_ROWS` at a time.
pub(super) fn for_each_chunk(
    files: &[PathBuf],
    mut each: impl FnMut(&[RawLine]) -> Result<()>,
) -> Result<()> {
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
    pub(super) fn parsed(
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
pub(super) fn parse_line(raw: &RawLine, shallow: bool) -> Result<Vec<json_line::Field<'_>>> {
    let parsed = if shallow {
        json_line::parse_object_shallow(&raw.text)
    } else {
        json_line::parse_object(&raw.text)
    };
    parsed.map_err(|e| Error::data(format!("{}: not a JSON object", raw.at)).with_source(e))
}

/// The kinds of the dump's passthrough fields over every line (nested values only
/// bracket-matched: the conversion checks every line).
pub(super) fn field_kinds<R: LineReader>(files: &[PathBuf]) -> Result<Vec<(String, FieldKind)>> {
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
pub(super) fn merge_kinds(kinds: &mut Vec<(String, FieldKind)>, line: Vec<(String, FieldKind)>) {
    for (key, kind) in line {
        match kinds.iter_mut().find(|(k, _)| *k == key) {
            Some((_, k)) => *k = k.merge(kind),
            None => kinds.push((key, kind)),
        }
    }
}

/// A line's fields as the passthrough columns hold them: unwrapped from a batch of one when
/// the writer batches ([`LineReader::BATCHED`]).
pub(super) fn passthrough_fields<'a, R: LineReader>(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
