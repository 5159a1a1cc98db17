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

use crate::error::{Error, Result};
use crate::io::atomic;
use crate::io::format::{Format, is_stdio};

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
