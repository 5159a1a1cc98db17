//! Arrow IPC at the edges. The two passes need to read their input twice and write Parquet
//! row groups, so an IPC input (a file, or a stream on stdin) is first spooled, batch by
//! batch, into a temporary Parquet file; an IPC output is written from the finished Parquet
//! result, batch by batch. Memory stays bounded by one batch in both directions.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_ipc::writer::{FileWriter, StreamWriter};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use tempfile::NamedTempFile;

use crate::atomic;
use crate::error::{Error, Result};
use crate::format::{Format, is_stdio};

/// Rows per spooled row group: the unit of parallel work, small enough to bound memory.
const SPOOL_ROWS: usize = 1024;

/// Copy an Arrow IPC input into a temporary Parquet file in `dir`; `name` is IN for messages.
pub fn spool_to_parquet(
    input: &Path,
    format: Format,
    name: &str,
    dir: &Path,
) -> Result<NamedTempFile> {
    let fail = |what: &str| Error::data(format!("{name}: {what}"));
    let reader: Box<dyn RecordBatchReader> = match format {
        Format::ArrowFile => {
            if is_stdio(input) {
                return Err(Error::usage(
                    "stdin can only carry an Arrow IPC stream (--input-format arrows), not a file",
                ));
            }
            let file = File::open(input).map_err(|e| fail("cannot open").with_source(e))?;
            Box::new(
                FileReader::try_new(BufReader::new(file), None)
                    .map_err(|e| fail("not a readable Arrow IPC file").with_source(e))?,
            )
        }
        Format::ArrowStream => {
            let source: Box<dyn Read> = if is_stdio(input) {
                Box::new(std::io::stdin().lock())
            } else {
                Box::new(File::open(input).map_err(|e| fail("cannot open").with_source(e))?)
            };
            Box::new(
                StreamReader::try_new(BufReader::new(source), None)
                    .map_err(|e| fail("not a readable Arrow IPC stream").with_source(e))?,
            )
        }
        Format::Parquet | Format::Jsonl | Format::Trainer(_) => {
            return Err(fail("is not Arrow IPC, nothing to spool"));
        }
    };
    let (spool, handle) = spool_file(dir, name)?;
    // The stream's schema metadata becomes the spooled file's key-value metadata, where
    // `ParquetInput::key_value_metadata` finds a Parquet input's.
    let mut metadata: Vec<KeyValue> = reader
        .schema()
        .metadata()
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    metadata.sort_by(|a, b| a.key.cmp(&b.key));
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(SPOOL_ROWS))
        .set_key_value_metadata((!metadata.is_empty()).then_some(metadata))
        .build();
    let mut writer = ArrowWriter::try_new(BufWriter::new(handle), reader.schema(), Some(props))
        .map_err(|e| fail("cannot spool").with_source(e))?;
    for batch in reader {
        crate::interrupt::check()?;
        let batch = batch.map_err(|e| fail("cannot read a record batch").with_source(e))?;
        writer
            .write(&batch)
            .map_err(|e| fail("cannot spool").with_source(e))?;
    }
    writer
        .close()
        .map_err(|e| fail("cannot spool").with_source(e))?;
    Ok(spool)
}

/// Write the finished Parquet result `parquet` to `output` as Arrow IPC: to stdout, or to a
/// temporary file beside `output` renamed into place at the end.
pub fn export_parquet(parquet: &Path, output: &Path, format: Format, force: bool) -> Result<()> {
    let name = output.display().to_string();
    let fail = |what: &str| Error::data(format!("{name}: {what}"));
    let file = File::open(parquet).map_err(|e| fail("cannot read the result").with_source(e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| fail("cannot read the result").with_source(e))?;
    // The builder's schema, with the schema metadata (the result's key-value metadata); the
    // reader's own leaves it out.
    let schema = builder.schema().clone();
    let reader = builder
        .with_batch_size(SPOOL_ROWS)
        .build()
        .map_err(|e| fail("cannot read the result").with_source(e))?;
    let batches = reader.map(|b| {
        crate::interrupt::check()?;
        b.and_then(|b| b.with_schema(schema.clone()))
            .map_err(|e| fail("cannot read the result").with_source(e))
    });
    if is_stdio(output) {
        if format == Format::ArrowFile {
            return Err(Error::usage(
                "stdout can only carry an Arrow IPC stream (--output-format arrows), not a file",
            ));
        }
        let stdout = std::io::stdout().lock();
        return match write_stream(BufWriter::new(stdout), &schema, batches) {
            Ok(()) => Ok(()),
            // the consumer closed the pipe (`advcalc run ... - | head`): the normal end of a
            // pipeline, as the SIGPIPE convention has it, not an error
            Err(WriteError::Sink(e)) if is_broken_pipe(&e) => Ok(()),
            Err(WriteError::Sink(e)) => Err(fail("cannot write to standard output").with_source(e)),
            Err(WriteError::Input(e)) => Err(e),
        };
    }
    // Named like the Parquet output's temporary files, and cleaned up the same way.
    let tmp = atomic::temporary_in(&atomic::parent_dir(output), ".arrow.tmp")
        .map_err(|e| fail("cannot create a temporary file").with_source(e))?;
    let handle = tmp
        .as_file()
        .try_clone()
        .map_err(|e| fail("cannot write").with_source(e))?;
    let written = match format {
        Format::ArrowStream => write_stream(BufWriter::new(handle), &schema, batches),
        _ => write_file(BufWriter::new(handle), &schema, batches),
    };
    written.map_err(|e| match e {
        WriteError::Sink(e) => fail("write failed").with_source(e),
        WriteError::Input(e) => e,
    })?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| fail("write failed").with_source(e))?;
    atomic::persist(tmp, output, force, &name)
}

/// Why writing IPC stopped: the batches to write failed, or the sink did.
enum WriteError {
    Input(Error),
    Sink(arrow_schema::ArrowError),
}

fn is_broken_pipe(e: &arrow_schema::ArrowError) -> bool {
    matches!(e, arrow_schema::ArrowError::IoError(_, io) if io.kind() == std::io::ErrorKind::BrokenPipe)
}

fn write_stream<W: Write>(
    sink: W,
    schema: &arrow_schema::SchemaRef,
    batches: impl Iterator<Item = Result<RecordBatch>>,
) -> std::result::Result<(), WriteError> {
    let mut writer = StreamWriter::try_new(sink, schema).map_err(WriteError::Sink)?;
    for batch in batches {
        writer
            .write(&batch.map_err(WriteError::Input)?)
            .map_err(WriteError::Sink)?;
    }
    writer.finish().map_err(WriteError::Sink)
}

fn write_file<W: Write>(
    sink: W,
    schema: &arrow_schema::SchemaRef,
    batches: impl Iterator<Item = Result<RecordBatch>>,
) -> std::result::Result<(), WriteError> {
    let mut writer = FileWriter::try_new(sink, schema).map_err(WriteError::Sink)?;
    for batch in batches {
        writer
            .write(&batch.map_err(WriteError::Input)?)
            .map_err(WriteError::Sink)?;
    }
    writer.finish().map_err(WriteError::Sink)
}

/// A temporary Parquet file in `dir` for an input read again by every pass (removed on drop),
/// and a second handle on it to write through. `name` names the input in messages.
pub fn spool_file(dir: &Path, name: &str) -> Result<(NamedTempFile, std::fs::File)> {
    let fail = |what: &str| Error::data(format!("{name}: {what}"));
    let spool = tempfile::Builder::new()
        .prefix(".advcalc-spool-")
        .suffix(".parquet")
        .tempfile_in(dir)
        .map_err(|e| fail("cannot create a spool file").with_source(e))?;
    let handle = spool
        .as_file()
        .try_clone()
        .map_err(|e| fail("cannot spool").with_source(e))?;
    Ok((spool, handle))
}

/// An Arrow IPC file object's schema metadata, read from its footer alone: the last 10 bytes
/// (the footer's length and `ARROW1`), then the footer (two ranged GETs, however large the
/// file): what `--resume` reads of an existing output in object storage.
#[cfg(feature = "cloud")]
pub fn object_schema_metadata(
    source: &crate::object::source::ObjectSource,
) -> Result<Vec<(String, String)>> {
    const MAGIC: &[u8] = b"ARROW1";
    let name = source.name();
    let not_ipc = |why: &str| Error::data(format!("{name}: not a readable Arrow IPC file ({why})"));
    let size = source.size();
    // the file's leading magic (padded to 8), its trailing length and magic
    if size < 8 + 10 {
        return Err(not_ipc("too short"));
    }
    let tail = source.read_at(size - 10..size)?;
    if &tail[4..] != MAGIC {
        return Err(not_ipc("no ARROW1 at its end"));
    }
    let length = i32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let length = u64::try_from(length)
        .ok()
        .filter(|&n| n > 0 && n <= size - 10 - 8)
        .ok_or_else(|| not_ipc("a footer length outside the file"))?;
    let footer = source.read_at(size - 10 - length..size - 10)?;
    let footer = arrow_ipc::root_as_footer(&footer).map_err(|e| not_ipc(&e.to_string()))?;
    let schema = footer
        .schema()
        .ok_or_else(|| not_ipc("no schema in its footer"))?;
    let schema =
        arrow_ipc::convert::try_fb_to_schema(schema).map_err(|e| not_ipc(&e.to_string()))?;
    Ok(schema
        .metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
}

#[cfg(all(test, feature = "cloud"))]
mod object_tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;
    use crate::object::source::ObjectSource;
    use crate::object::testing::{Counting, put};

    fn ipc_file(rows: usize) -> Vec<u8> {
        let schema = Arc::new(Schema::new_with_metadata(
            vec![Field::new("x", DataType::Int64, false)],
            std::collections::HashMap::from([(
                "advcalc.estimator".to_string(),
                "grpo".to_string(),
            )]),
        ));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(0..rows as i64))],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = FileWriter::try_new(&mut out, &schema).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        out
    }

    #[test]
    fn an_ipc_objects_metadata_is_read_from_its_footer_alone() {
        let store = Arc::new(Counting::default());
        let big = ipc_file(1 << 20);
        put(&store, "out/a.arrow", &big);
        let before = store.counts();
        let source =
            ObjectSource::open_in(store.clone(), "out/a.arrow".into(), "s3://b/out/a.arrow")
                .unwrap();
        let kv = object_schema_metadata(&source).unwrap();
        assert_eq!(kv, vec![("advcalc.estimator".into(), "grpo".into())]);
        let after = store.counts();
        // a HEAD, the tail and the footer: not the 8 MiB of data
        assert_eq!(
            (after.heads - before.heads, after.gets - before.gets),
            (1, 2)
        );
        assert!(store.bytes_got() < 4096, "{} bytes read", store.bytes_got());

        // not IPC: an error naming the object, no panic
        put(
            &store,
            "out/b.arrow",
            b"PAR1 not an arrow file at all, just text PAR1",
        );
        let source =
            ObjectSource::open_in(store.clone(), "out/b.arrow".into(), "s3://b/out/b.arrow")
                .unwrap();
        let e = object_schema_metadata(&source).unwrap_err().to_string();
        assert!(
            e.starts_with("s3://b/out/b.arrow: not a readable Arrow IPC file"),
            "{e}"
        );
        // a damaged footer length
        let mut bad = big.clone();
        let n = bad.len();
        bad[n - 10..n - 6].copy_from_slice(&i32::MAX.to_le_bytes());
        put(&store, "out/c.arrow", &bad);
        let source =
            ObjectSource::open_in(store.clone(), "out/c.arrow".into(), "s3://b/out/c.arrow")
                .unwrap();
        assert!(object_schema_metadata(&source).is_err());
    }
}
