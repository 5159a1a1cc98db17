//! Parquet output: row groups are encoded on worker threads and appended in input order to a
//! temporary file beside the destination, which is renamed into place only when complete.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowRowGroupWriterFactory, compute_leaves};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{WriterProperties, WriterVersion};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use tempfile::NamedTempFile;

use crate::error::{Error, Result};
use crate::io::schema::OUTPUT_COLUMNS;

const TEMP_PREFIX: &str = ".advcalc-";
const TEMP_SUFFIX: &str = ".parquet.tmp";

/// Delete temporary outputs left in `dir` by advcalc runs that were killed (their process is
/// gone). Only on systems with `/proc`; elsewhere leftovers stay, named `.advcalc-PID-*.tmp`.
fn remove_stale_temporaries(dir: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(TEMP_PREFIX) else {
            continue;
        };
        if !name.ends_with(TEMP_SUFFIX) {
            continue;
        }
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A row group encoded into column chunks, ready to append.
pub struct EncodedRowGroup(Vec<ArrowColumnChunk>);

pub struct ParquetOutput {
    dest: PathBuf,
    tmp: NamedTempFile,
    writer: SerializedFileWriter<BufWriter<File>>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    force: bool,
    row_groups: usize,
}

impl ParquetOutput {
    /// Start writing `dest`; checks that it may be written before any work is done.
    pub fn create(dest: &Path, schema: SchemaRef, force: bool) -> Result<Self> {
        let name = dest.display().to_string();
        check_destination(dest, force)?;
        let dir = parent_dir(dest);
        remove_stale_temporaries(&dir);
        let mut builder = tempfile::Builder::new();
        // The pid in the name lets a later run tell a killed run's leftovers from a live one's.
        let prefix = format!("{TEMP_PREFIX}{}-", std::process::id());
        builder.prefix(&prefix).suffix(TEMP_SUFFIX);
        // tempfile creates 0600 files; the output should get the usual umask-based mode.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let tmp = builder.tempfile_in(&dir).map_err(|e| {
            Error::data(format!(
                "{name}: cannot create a temporary file in {}",
                dir.display()
            ))
            .with_source(e)
        })?;
        let handle = tmp
            .as_file()
            .try_clone()
            .map_err(|e| Error::data(format!("{name}: cannot write")).with_source(e))?;
        let writer = ArrowWriter::try_new(
            BufWriter::new(handle),
            schema.clone(),
            Some(properties(&schema)),
        )
        .map_err(|e| {
            Error::data(format!("{name}: cannot start the Parquet writer")).with_source(e)
        })?;
        let (writer, factory) = writer.into_serialized_writer().map_err(|e| {
            Error::data(format!("{name}: cannot start the Parquet writer")).with_source(e)
        })?;
        Ok(Self {
            dest: dest.to_path_buf(),
            tmp,
            writer,
            factory,
            schema,
            force,
            row_groups: 0,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Encode and compress one row group; safe to call from many threads at once.
    pub fn encode(&self, row_group: usize, batch: &RecordBatch) -> Result<EncodedRowGroup> {
        let context = || {
            Error::data(format!(
                "{}: cannot encode row group {row_group}",
                self.dest.display()
            ))
        };
        let mut writers = self
            .factory
            .create_column_writers(row_group)
            .map_err(|e| context().with_source(e))?;
        let mut next = writers.iter_mut();
        for (field, column) in self.schema.fields().iter().zip(batch.columns()) {
            for leaf in compute_leaves(field, column).map_err(|e| context().with_source(e))? {
                let writer = next.next().ok_or_else(context)?;
                writer.write(&leaf).map_err(|e| context().with_source(e))?;
            }
        }
        let chunks = writers
            .into_iter()
            .map(|w| w.close())
            .collect::<parquet::errors::Result<Vec<_>>>()
            .map_err(|e| context().with_source(e))?;
        Ok(EncodedRowGroup(chunks))
    }

    /// Append the next row group (in output order).
    pub fn append(&mut self, encoded: EncodedRowGroup) -> Result<()> {
        let name = self.dest.display().to_string();
        let io = |e: parquet::errors::ParquetError| {
            Error::data(format!("{name}: write failed")).with_source(e)
        };
        let mut rg = self.writer.next_row_group().map_err(io)?;
        for chunk in encoded.0 {
            chunk.append_to_row_group(&mut rg).map_err(io)?;
        }
        rg.close().map_err(io)?;
        self.row_groups += 1;
        Ok(())
    }

    /// Write the footer, sync, and rename the temporary file onto the destination.
    pub fn finish(self) -> Result<()> {
        let name = self.dest.display().to_string();
        let io = |e: std::io::Error| Error::data(format!("{name}: write failed")).with_source(e);
        let buf = self
            .writer
            .into_inner()
            .map_err(|e| Error::data(format!("{name}: write failed")).with_source(e))?;
        let file = buf.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        let persisted = if self.force {
            self.tmp.persist(&self.dest)
        } else {
            self.tmp.persist_noclobber(&self.dest)
        };
        persisted.map_err(|e| {
            Error::data(format!(
                "{name}: cannot move the finished output into place"
            ))
            .with_source(e.error)
        })?;
        Ok(())
    }
}

/// zstd, and for the float columns advcalc adds: no dictionary (random floats overflow it)
/// and byte-stream-split, which compresses float mantissas better (reference scale §4.2).
fn properties(schema: &SchemaRef) -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(None);
    for name in OUTPUT_COLUMNS {
        if schema.index_of(name).is_ok() {
            let path = ColumnPath::new(vec![name.to_string(), "list".into(), "item".into()]);
            builder = builder
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path, Encoding::BYTE_STREAM_SPLIT);
        }
    }
    builder.build()
}

fn parent_dir(dest: &Path) -> PathBuf {
    match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Refuse a destination that cannot or must not be written, before any work starts.
pub fn check_destination(dest: &Path, force: bool) -> Result<()> {
    let name = dest.display().to_string();
    let dir = parent_dir(dest);
    if !dir.is_dir() {
        return Err(Error::data(format!(
            "{name}: directory {} does not exist",
            dir.display()
        )));
    }
    if dest.is_dir() {
        return Err(Error::usage(format!("{name}: is a directory")));
    }
    if dest.exists() && !force {
        return Err(Error::usage(format!(
            "{name}: already exists (pass --force to overwrite it)"
        )));
    }
    Ok(())
}

/// Whether two paths name the same file (the output may not exist yet).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| -> Option<PathBuf> {
        if let Ok(c) = p.canonicalize() {
            return Some(c);
        }
        let dir = parent_dir(p).canonicalize().ok()?;
        Some(dir.join(p.file_name()?))
    };
    match (canon(a), canon(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}
