//! Parquet output: row groups are encoded on worker threads and appended in input order to a
//! temporary file beside the destination, which is renamed into place only when complete.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves,
};
use parquet::arrow::{ArrowSchemaConverter, add_encoded_arrow_schema_to_metadata};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{
    ColumnDescPtr, ColumnPath, SchemaDescPtr, SchemaDescriptor, Type as SchemaType, TypePtr,
};
use tempfile::NamedTempFile;

use crate::error::{Error, Result};
use crate::io::positional::PositionalFile;
use crate::io::schema::OUTPUT_COLUMNS;
use crate::io::splice::{PlaceholderSource, Splice, SpliceWriter, Splices};

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
        // Parquet outputs end in TEMP_SUFFIX, Arrow IPC outputs in `.arrow.tmp`.
        if !name.ends_with(".tmp") {
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

/// A row group's computed columns, encoded into column chunks, ready to append.
pub struct EncodedRowGroup(Vec<ArrowColumnChunk>);

/// Where an output column comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnSource {
    /// Copied byte for byte from the input column with this root index: never decoded,
    /// never re-encoded.
    Copy(usize),
    /// Copied byte for byte from the input column with this root index into an output column
    /// of another name and the same type: `loss_mask` from `response_mask`, and
    /// `token_level_rewards` from float32 `rm_scores` when nothing changes them.
    Alias(usize),
    /// Computed (or rewritten) by advcalc and encoded here.
    Computed,
}

/// The input's Parquet type of a list column, under another name.
fn renamed(t: &SchemaType, name: &str) -> parquet::errors::Result<SchemaType> {
    let info = t.get_basic_info();
    if !t.is_group() {
        return Err(parquet::errors::ParquetError::General(format!(
            "cannot rename the primitive column {}",
            info.name()
        )));
    }
    let mut b = SchemaType::group_type_builder(name)
        .with_fields(t.get_fields().to_vec())
        .with_converted_type(info.converted_type())
        .with_logical_type(info.logical_type_ref().cloned());
    if info.has_repetition() {
        b = b.with_repetition(info.repetition());
    }
    if info.has_id() {
        b = b.with_id(Some(info.id()));
    }
    b.build()
}

/// The input side of the copies: its file and footer.
pub struct CopySource {
    pub file: PositionalFile,
    pub metadata: Arc<ParquetMetaData>,
}

/// An output file being written: an encoder that worker threads share, and a sink that
/// appends row groups in order — separate, so that appending one window of row groups can
/// overlap with encoding the next.
pub struct ParquetOutput {
    encoder: OutputEncoder,
    sink: OutputSink,
}

/// Encodes the computed columns of a row group (shared by worker threads).
pub struct OutputEncoder {
    dest: PathBuf,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// The computed columns only, in output order: what `encode` takes.
    computed_schema: SchemaRef,
    sources: Vec<ColumnSource>,
    /// Parquet leaf indices of each output root column.
    leaves: Vec<Vec<usize>>,
}

/// Appends row groups, in order, to the temporary file, and renames it at the end.
pub struct OutputSink {
    dest: PathBuf,
    output_descr: SchemaDescPtr,
    tmp: NamedTempFile,
    writer: SerializedFileWriter<SpliceWriter>,
    /// The copied chunks' byte ranges, announced to the writer before each append.
    splices: Splices,
    /// IN for parquet's `append_column`: placeholder bytes the writer replaces.
    placeholders: PlaceholderSource,
    sources: Vec<ColumnSource>,
    leaves: Vec<Vec<usize>>,
    input: CopySource,
    force: bool,
    /// Bytes already handed to the kernel's writeback (`start_writeback`).
    written_back: u64,
}

impl ParquetOutput {
    /// Start writing `dest`; checks that it may be written before any work is done.
    /// `sources` says, per field of `schema`, whether it is copied from the input or computed.
    pub fn create(
        dest: &Path,
        schema: SchemaRef,
        sources: Vec<ColumnSource>,
        input: CopySource,
        force: bool,
    ) -> Result<Self> {
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
        let start = |e: parquet::errors::ParquetError| {
            Error::data(format!("{name}: cannot start the Parquet writer")).with_source(e)
        };
        // The Parquet schema: the input's own types for copied columns (so their chunks can be
        // spliced in unchanged), Arrow's conversion for the computed ones.
        let converted = ArrowSchemaConverter::new()
            .convert(&schema)
            .map_err(start)?;
        let input_root = input
            .metadata
            .file_metadata()
            .schema_descr()
            .root_schema_ptr();
        let fields: Vec<TypePtr> = sources
            .iter()
            .enumerate()
            .map(|(i, source)| {
                Ok(match source {
                    ColumnSource::Copy(j) => input_root.get_fields()[*j].clone(),
                    ColumnSource::Alias(j) => Arc::new(renamed(
                        &input_root.get_fields()[*j],
                        schema.field(i).name(),
                    )?),
                    ColumnSource::Computed => converted.root_schema().get_fields()[i].clone(),
                })
            })
            .collect::<parquet::errors::Result<_>>()
            .map_err(start)?;
        let mut fields = fields;
        let root = SchemaType::group_type_builder(converted.root_schema().name())
            .with_fields(std::mem::take(&mut fields))
            .build()
            .map_err(start)?;
        let mut props = properties(&schema);
        add_encoded_arrow_schema_to_metadata(&schema, &mut props);
        let root = Arc::new(root);
        let descr = Arc::new(SchemaDescriptor::new(root.clone()));
        let splices = Splices::default();
        let writer = SerializedFileWriter::new(
            SpliceWriter::new(handle, input.file.file(), splices.clone()),
            root,
            Arc::new(props),
        )
        .map_err(start)?;
        let placeholders = PlaceholderSource(input.file.clone());
        let factory = ArrowRowGroupWriterFactory::new(&writer, schema.clone());
        let mut leaves = vec![Vec::new(); schema.fields().len()];
        for leaf in 0..descr.num_columns() {
            leaves[descr.get_column_root_idx(leaf)].push(leaf);
        }
        let computed_schema = Arc::new(Schema::new_with_metadata(
            schema
                .fields()
                .iter()
                .zip(&sources)
                .filter(|(_, s)| **s == ColumnSource::Computed)
                .map(|(f, _)| f.clone())
                .collect::<Vec<_>>(),
            schema.metadata().clone(),
        ));
        Ok(Self {
            encoder: OutputEncoder {
                dest: dest.to_path_buf(),
                factory,
                schema,
                computed_schema,
                sources: sources.clone(),
                leaves: leaves.clone(),
            },
            sink: OutputSink {
                output_descr: descr.clone(),
                dest: dest.to_path_buf(),
                tmp,
                writer,
                splices,
                placeholders,
                sources,
                leaves,
                input,
                force,
                written_back: 0,
            },
        })
    }

    /// The shared encoder and the in-order sink, to use at the same time.
    pub fn split(&mut self) -> (&OutputEncoder, &mut OutputSink) {
        (&self.encoder, &mut self.sink)
    }

    pub fn finish(self) -> Result<()> {
        self.sink.finish()
    }
}

impl OutputEncoder {
    /// The schema of the batches `encode` takes: the computed columns, in output order.
    pub fn computed_schema(&self) -> &SchemaRef {
        &self.computed_schema
    }

    /// Encode and compress one row group's computed columns; safe to call from many threads.
    pub fn encode(&self, row_group: usize, batch: &RecordBatch) -> Result<EncodedRowGroup> {
        let context = || {
            Error::data(format!(
                "{}: cannot encode row group {row_group}",
                self.dest.display()
            ))
        };
        let mut writers: Vec<Option<ArrowColumnWriter>> = self
            .factory
            .create_column_writers(row_group)
            .map_err(|e| context().with_source(e))?
            .into_iter()
            .map(Some)
            .collect();
        let mut chunks = Vec::new();
        let computed = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(i, _)| self.sources[*i] == ColumnSource::Computed);
        for ((i, field), column) in computed.zip(batch.columns()) {
            let leaves = compute_leaves(field, column).map_err(|e| context().with_source(e))?;
            for (leaf, &index) in leaves.into_iter().zip(&self.leaves[i]) {
                let mut writer = writers[index].take().ok_or_else(context)?;
                writer.write(&leaf).map_err(|e| context().with_source(e))?;
                chunks.push(writer.close().map_err(|e| context().with_source(e))?);
            }
        }
        Ok(EncodedRowGroup(chunks))
    }
}

impl OutputSink {
    /// Append row group `index` (in output order): copied chunks straight from the input
    /// file, computed chunks from `encoded`.
    pub fn append(&mut self, index: usize, encoded: EncodedRowGroup) -> Result<()> {
        let name = self.dest.display().to_string();
        let io = |e: parquet::errors::ParquetError| {
            Error::data(format!("{name}: write failed")).with_source(e)
        };
        let input_rg = self.input.metadata.row_group(index);
        let input_descr = self.input.metadata.file_metadata().schema_descr();
        let mut computed = encoded.0.into_iter();
        // Where each chunk lands in the output stream: copied chunks are announced to the
        // writer as splices of IN (io/splice.rs).
        let mut at = self.writer.bytes_written() as u64;
        let mut rg = self.writer.next_row_group().map_err(io)?;
        for (root, source) in self.sources.iter().enumerate() {
            match source {
                ColumnSource::Copy(input_root) | ColumnSource::Alias(input_root) => {
                    let leaves = (0..input_descr.num_columns())
                        .filter(|&l| input_descr.get_column_root_idx(l) == *input_root);
                    for (k, leaf) in leaves.enumerate() {
                        let column = input_rg.column(leaf);
                        let metadata = match source {
                            // The same chunk under the output column's descriptor (its path).
                            ColumnSource::Alias(_) => {
                                let descr = self.output_descr.column(self.leaves[root][k]);
                                relabel(column, descr).map_err(io)?
                            }
                            _ => column.clone(),
                        };
                        let len = column.compressed_size() as u64;
                        let from = column
                            .dictionary_page_offset()
                            .unwrap_or_else(|| column.data_page_offset())
                            as u64;
                        self.splices
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push_back(Splice { at, len, from });
                        at += len;
                        let close = ColumnCloseResult {
                            bytes_written: column.compressed_size() as u64,
                            rows_written: input_rg.num_rows() as u64,
                            metadata,
                            bloom_filter: None,
                            column_index: None,
                            offset_index: None,
                        };
                        rg.append_column(&self.placeholders, close).map_err(io)?;
                    }
                }
                ColumnSource::Computed => {
                    for _ in &self.leaves[root] {
                        let chunk = computed.next().ok_or_else(|| {
                            Error::data(format!("{name}: a computed column chunk is missing"))
                        })?;
                        at += chunk.close().metadata.compressed_size() as u64;
                        chunk.append_to_row_group(&mut rg).map_err(io)?;
                    }
                }
            }
        }
        rg.close().map_err(io)?;
        self.start_writeback()
            .map_err(|e| Error::data(format!("{name}: write failed")).with_source(e))?;
        // Every announced splice was written where it was announced.
        let pending = self.splices.lock().map_or(1, |s| s.len());
        if self.writer.bytes_written() as u64 != at || pending != 0 {
            return Err(Error::data(format!(
                "{name}: internal error: row group {index} was not laid out as announced"
            )));
        }
        Ok(())
    }

    /// Hand what is written so far to the kernel's writeback without waiting for it, so the
    /// disk works while the next row groups are computed and the final `fsync` has little
    /// left to wait for.
    fn start_writeback(&mut self) -> std::io::Result<()> {
        self.writer.flush()?;
        let end = self.writer.bytes_written() as u64;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let fd = self.tmp.as_file().as_raw_fd();
            // SAFETY: a plain system call on a file descriptor we own; advisory only, so an
            // error (a file system without support) changes nothing but timing.
            unsafe {
                libc::sync_file_range(
                    fd,
                    self.written_back as libc::off64_t,
                    (end - self.written_back) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                );
            }
        }
        self.written_back = end;
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
        let file = buf.into_file().map_err(io)?;
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

/// A column chunk's metadata under another column descriptor (same physical layout).
fn relabel(
    column: &ColumnChunkMetaData,
    descr: ColumnDescPtr,
) -> parquet::errors::Result<ColumnChunkMetaData> {
    let mut b = ColumnChunkMetaData::builder(descr)
        .set_compression_codec(column.compression_codec())
        .set_encodings_mask(*column.encodings_mask())
        .set_total_compressed_size(column.compressed_size())
        .set_total_uncompressed_size(column.uncompressed_size())
        .set_num_values(column.num_values())
        .set_data_page_offset(column.data_page_offset())
        .set_dictionary_page_offset(column.dictionary_page_offset())
        .set_unencoded_byte_array_data_bytes(column.unencoded_byte_array_data_bytes());
    if let Some(statistics) = column.statistics() {
        b = b.set_statistics(statistics.clone());
    }
    if let Some(stats) = column.page_encoding_stats() {
        b = b.set_page_encoding_stats(stats.clone());
    }
    b.build()
}

/// zstd (level 1), and for the float columns advcalc adds: no dictionary (random floats
/// overflow it) and byte-stream-split, which compresses float mantissas better (reference
/// scale §4.2); no statistics for them, which nobody filters on. Chosen by measurement on the
/// benchmark dump (`docs/benchmarks.md`): dictionary or plain encodings were slower, and the
/// `loss_mask` copy keeps the dictionary, which was cheaper than the alternatives.
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
                .set_column_statistics_enabled(path.clone(), EnabledStatistics::None)
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
