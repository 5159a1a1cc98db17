//! Parquet output: row groups are encoded on worker threads and appended in input order to a
//! temporary file beside the destination, which is renamed into place only when complete
//! (`io::atomic`).

use std::path::{Path, PathBuf};

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use arrow_array::{Array, ArrayRef, ListArray};
use arrow_schema::{Schema, SchemaRef};
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves,
};
use parquet::arrow::{ArrowSchemaConverter, add_encoded_arrow_schema_to_metadata};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{ColumnChunkMetaData, KeyValue, ParquetMetaData};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};
use parquet::schema::types::{
    ColumnDescPtr, SchemaDescPtr, SchemaDescriptor, Type as SchemaType, TypePtr,
};
use tempfile::NamedTempFile;

use crate::atomic::{check_destination, parent_dir, persist, temporary_output};
use crate::error::{Error, Result};
use crate::float_lists::{self, EncodedChunk};
use crate::positional::PositionalFile;
use crate::schema::{LOSS_COLUMNS, OUTPUT_COLUMNS};
use crate::splice::{PlaceholderSource, Splice, SpliceWriter, Splices};

/// A row group's computed columns, encoded into column chunks, ready to append.
pub struct EncodedRowGroup {
    chunks: Vec<ComputedChunk>,
    /// IN, with this row group's copied chunks fetched when IN is an object (by the worker
    /// that encoded it, so the fetches of several row groups overlap each other and the
    /// maths); a local IN is the file itself, copied by the kernel as it is appended.
    copied: PositionalFile,
}

/// One computed column chunk: the float lists advcalc adds from `io::float_lists`, any other
/// computed column from parquet's Arrow writer.
enum ComputedChunk {
    Arrow(ArrowColumnChunk),
    FloatList(EncodedChunk),
}

impl ComputedChunk {
    fn compressed_size(&self) -> u64 {
        match self {
            ComputedChunk::Arrow(c) => c.close().metadata.compressed_size() as u64,
            ComputedChunk::FloatList(c) => c.close.metadata.compressed_size() as u64,
        }
    }

    fn append_to(
        self,
        rg: &mut SerializedRowGroupWriter<'_, SpliceWriter>,
    ) -> parquet::errors::Result<()> {
        match self {
            ComputedChunk::Arrow(c) => c.append_to_row_group(rg),
            ComputedChunk::FloatList(c) => rg.append_column(&c.data, c.close),
        }
    }
}

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
    /// Per output root column: written by `io::float_lists` when its array allows.
    hand_encoded: Vec<bool>,
    output_descr: SchemaDescPtr,
    /// IN and its footer, for the copied chunks' byte ranges.
    input: PositionalFile,
    input_metadata: Arc<ParquetMetaData>,
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
        Self::create_with_metadata(dest, schema, sources, input, force, Vec::new())
    }

    /// `create`, with `key_value_metadata` written into OUT's footer as key-value pairs (in
    /// this order, before `ARROW:schema`) and into the Arrow schema stored there, where they
    /// replace the input's schema metadata of the same keys; so they are also the schema
    /// metadata of an Arrow IPC OUT, which is exported from this file. `ARROW:schema` itself
    /// is reserved.
    pub fn create_with_metadata(
        dest: &Path,
        schema: SchemaRef,
        sources: Vec<ColumnSource>,
        input: CopySource,
        force: bool,
        key_value_metadata: Vec<(String, String)>,
    ) -> Result<Self> {
        let name = dest.display().to_string();
        if key_value_metadata
            .iter()
            .any(|(k, _)| k == parquet::arrow::ARROW_SCHEMA_META_KEY)
        {
            return Err(Error::usage(format!(
                "{name}: the key-value metadata key {} is reserved for the Arrow schema",
                parquet::arrow::ARROW_SCHEMA_META_KEY
            )));
        }
        check_destination(dest, force)?;
        let dir = parent_dir(dest);
        let tmp = temporary_output(&dir, &name)?;
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
        let mut props = properties(&converted, &sources, &key_value_metadata);
        let mut stored = schema.metadata().clone();
        stored.extend(key_value_metadata);
        add_encoded_arrow_schema_to_metadata(
            &Schema::new_with_metadata(schema.fields().clone(), stored),
            &mut props,
        );
        let root = Arc::new(root);
        let descr = Arc::new(SchemaDescriptor::new(root.clone()));
        let splices = Splices::default();
        let writer = SerializedFileWriter::new(
            SpliceWriter::new(handle, input.file.clone(), splices.clone()),
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
                hand_encoded: float_list_columns(&descr, &sources),
                output_descr: descr.clone(),
                sources: sources.clone(),
                leaves: leaves.clone(),
                input: input.file.clone(),
                input_metadata: input.metadata.clone(),
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

    /// The encoder and the sink, owned apart (a dataset's outputs are opened by the worker
    /// that first needs one and finished by the one that appends its last row group).
    pub fn into_parts(self) -> (OutputEncoder, OutputSink) {
        (self.encoder, self.sink)
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
        // IN an object: this row group's copied chunks (side by side: one GET)
        let copied = self
            .input
            .prefetched(|| copied_ranges(&self.sources, &self.input_metadata, row_group))?;
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
        // the float lists encoded so far: a column equal to one of them (GRPO's returns are
        // its advantages) reuses its bytes
        let mut encoded: Vec<(&ArrayRef, usize)> = Vec::new();
        for ((i, field), column) in computed.zip(batch.columns()) {
            if let Some(chunk) = self
                .float_list(i, column, &encoded, &chunks)
                .map_err(|e| context().with_source(e))?
            {
                encoded.push((column, chunks.len()));
                chunks.push(ComputedChunk::FloatList(chunk));
                continue;
            }
            let leaves = compute_leaves(field, column).map_err(|e| context().with_source(e))?;
            for (leaf, &index) in leaves.into_iter().zip(&self.leaves[i]) {
                let mut writer = writers[index].take().ok_or_else(context)?;
                writer.write(&leaf).map_err(|e| context().with_source(e))?;
                chunks.push(ComputedChunk::Arrow(
                    writer.close().map_err(|e| context().with_source(e))?,
                ));
            }
        }
        Ok(EncodedRowGroup { chunks, copied })
    }

    /// Output column `root` through `io::float_lists`, where it is one of the float lists
    /// advcalc adds (the columns `properties` gives byte-stream-split) without nulls; the
    /// bytes of an equal column encoded before, under this column's name.
    fn float_list(
        &self,
        root: usize,
        column: &ArrayRef,
        encoded: &[(&ArrayRef, usize)],
        chunks: &[ComputedChunk],
    ) -> parquet::errors::Result<Option<EncodedChunk>> {
        let (true, &[leaf]) = (self.hand_encoded[root], &self.leaves[root][..]) else {
            return Ok(None);
        };
        let Some(list) = column.as_list_opt::<i32>() else {
            return Ok(None);
        };
        let Some(values) = list.values().as_primitive_opt::<Float32Type>() else {
            return Ok(None);
        };
        if list.null_count() > 0 || values.null_count() > 0 {
            return Ok(None);
        }
        let offsets = list.value_offsets();
        let (first, last) = (offsets[0] as usize, offsets[offsets.len() - 1] as usize);
        let values = &values.values()[first..last];
        let descr = self.output_descr.column(leaf);
        for &(earlier, k) in encoded {
            if let (ComputedChunk::FloatList(chunk), Some(other)) =
                (&chunks[k], earlier.as_list_opt::<i32>())
                && same_float_list(list, other)
                // the same levels mean the same bytes: both lists under one convention
                && chunk.close.metadata.column_descr().max_def_level() == descr.max_def_level()
                && chunk.close.metadata.column_descr().max_rep_level() == descr.max_rep_level()
            {
                return Ok(Some(EncodedChunk {
                    data: chunk.data.clone(),
                    close: ColumnCloseResult {
                        metadata: relabel(&chunk.close.metadata, descr)?,
                        bloom_filter: None,
                        column_index: None,
                        offset_index: chunk.close.offset_index.clone(),
                        ..chunk.close
                    },
                }));
            }
        }
        float_lists::encode(&self.output_descr, leaf, offsets, values)
    }
}

/// The same rows of the same float32 bits (NaN payloads and −0.0 included).
fn same_float_list(a: &ListArray, b: &ListArray) -> bool {
    fn rows(l: &ListArray) -> Option<(&[i32], &[f32])> {
        let o = l.value_offsets();
        let v = l.values().as_primitive_opt::<Float32Type>()?.values();
        Some((o, &v[o[0] as usize..o[o.len() - 1] as usize]))
    }
    let (Some((oa, va)), Some((ob, vb))) = (rows(a), rows(b)) else {
        return false;
    };
    oa.len() == ob.len()
        && oa
            .windows(2)
            .zip(ob.windows(2))
            .all(|(x, y)| x[1] - x[0] == y[1] - y[0])
        && va.len() == vb.len()
        // one buffer (GRPO's returns are built on its advantages' values) needs no compare
        && (std::ptr::eq(va.as_ptr(), vb.as_ptr())
            || va.iter().zip(vb).all(|(x, y)| x.to_bits() == y.to_bits()))
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
        // the copied chunks' bytes: an object IN's fetched by `encode`
        self.writer.inner_mut().set_source(encoded.copied);
        let mut computed = encoded.chunks.into_iter();
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
                        at += chunk.compressed_size();
                        chunk.append_to(&mut rg).map_err(io)?;
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
        let leaves = self.writer.schema_descr().num_columns();
        let buf = self
            .writer
            .into_inner()
            .map_err(|e| Error::data(format!("{name}: write failed")).with_source(e))?;
        let mut file = buf.into_file().map_err(io)?;
        // float columns under the order IN's writer used, so readers keep their statistics
        crate::column_orders::type_defined_floats(&mut file, leaves).map_err(io)?;
        file.sync_all().map_err(io)?;
        persist(self.tmp, &self.dest, self.force, &name)
    }
}

/// The byte ranges in IN of row group `index`'s column chunks that OUT copies (`sources`).
fn copied_ranges(
    sources: &[ColumnSource],
    metadata: &ParquetMetaData,
    index: usize,
) -> Vec<std::ops::Range<u64>> {
    let descr = metadata.file_metadata().schema_descr();
    let row_group = metadata.row_group(index);
    let copied = |leaf: &usize| {
        sources.iter().any(|s| match s {
            ColumnSource::Copy(r) | ColumnSource::Alias(r) => {
                descr.get_column_root_idx(*leaf) == *r
            }
            ColumnSource::Computed => false,
        })
    };
    (0..descr.num_columns())
        .filter(copied)
        .map(|leaf| {
            let (start, len) = row_group.column(leaf).byte_range();
            start..start + len
        })
        .collect()
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
/// `io::float_lists` writes those float columns with the same encodings; these properties
/// serve the arrays it declines (nulls, large lists) and every other computed column.
/// `converted` is Arrow's conversion of the output schema: the computed columns' leaves are
/// found there, under the list child name the input's convention gives them.
fn properties(
    converted: &SchemaDescriptor,
    sources: &[ColumnSource],
    key_value_metadata: &[(String, String)],
) -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(None);
    if !key_value_metadata.is_empty() {
        builder = builder.set_key_value_metadata(Some(
            key_value_metadata
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                .collect(),
        ));
    }
    let float_lists = float_list_columns(converted, sources);
    for leaf in 0..converted.num_columns() {
        if float_lists[converted.get_column_root_idx(leaf)] {
            let path = converted.column(leaf).path().clone();
            builder = builder
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_statistics_enabled(path.clone(), EnabledStatistics::None)
                .set_column_encoding(path, Encoding::BYTE_STREAM_SPLIT);
        }
    }
    builder.build()
}

/// Per root column of `schema`: one of the float lists advcalc computes (the columns with
/// byte-stream-split, which `io::float_lists` writes when their arrays allow).
fn float_list_columns(schema: &SchemaDescriptor, sources: &[ColumnSource]) -> Vec<bool> {
    schema
        .root_schema()
        .get_fields()
        .iter()
        .enumerate()
        .map(|(root, f)| {
            sources.get(root) == Some(&ColumnSource::Computed)
                && (OUTPUT_COLUMNS.contains(&f.name()) || LOSS_COLUMNS.contains(&f.name()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::ParquetInput;
    use crate::schema::float_list_field;
    use arrow_array::builder::{Float32Builder, Int8Builder, ListBuilder};
    use arrow_array::{ArrayRef, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::fs::File;

    /// A row group of `rows` rows: uid, response_mask (with a dictionary: few values), and
    /// rm_scores, as arrow-rs writes them.
    fn input_rows(first: usize, rows: usize) -> RecordBatch {
        let mut mask = ListBuilder::new(Int8Builder::new());
        let mut scores = ListBuilder::new(Float32Builder::new());
        let mut uids = Vec::new();
        for i in first..first + rows {
            let len = 3 + i % 5;
            mask.append_value((0..len).map(|t| Some(((i + t) % 3 != 0) as i8)));
            scores.append_value((0..len).map(|t| Some((i * 7 + t) as f32 / 3.0)));
            uids.push(format!("u{}", i / 4));
        }
        RecordBatch::try_from_iter(vec![
            ("uid", Arc::new(StringArray::from(uids)) as ArrayRef),
            ("response_mask", Arc::new(mask.finish()) as ArrayRef),
            ("rm_scores", Arc::new(scores.finish()) as ArrayRef),
        ])
        .unwrap()
    }

    /// The computed column of a row group: list<float32> with the mask's offsets.
    fn advantages(input: &RecordBatch, field: &arrow_schema::Field) -> ArrayRef {
        use arrow_array::cast::AsArray;
        use arrow_array::{Array, Float32Array, ListArray};
        let mask = input.column(1).as_list::<i32>();
        let n = mask.values().len();
        let values = Float32Array::from_iter_values((0..n).map(|i| (i as f32 * 0.37).sin()));
        let DataType::List(item) = field.data_type().clone() else {
            unreachable!()
        };
        Arc::new(ListArray::try_new(item, mask.offsets().clone(), Arc::new(values), None).unwrap())
    }

    use arrow_schema::DataType;

    const ROW_GROUPS: [(usize, usize); 3] = [(0, 40), (40, 1), (41, 23)];

    /// What the splicer (io/splice.rs and `OutputSink::append`) assumes of parquet's writer:
    /// `next_row_group` and `close` write nothing; `append_column` writes the copied chunk's
    /// `compressed_size` bytes, read with `get_read` from its first page, at the position
    /// `bytes_written` gave, and maps its page offsets by the same shift; an encoded chunk
    /// takes exactly its `compressed_size` bytes; nothing pads chunks apart. If an upgrade
    /// of parquet changes any of it, this test fails: the spliced output must be laid out
    /// chunk after chunk from byte 4, hold IN's bytes for the copied chunks, and the same
    /// bytes for every chunk as a plain re-encode of the whole output by parquet's own
    /// `ArrowWriter` (the computed chunk, which `io::float_lists` encodes, by its values).
    #[test]
    fn splice_layout_matches_a_plain_re_encode() {
        let dir = tempfile::tempdir().unwrap();
        let in_path = dir.path().join("in.parquet");
        let batches: Vec<RecordBatch> = ROW_GROUPS
            .iter()
            .map(|&(first, rows)| input_rows(first, rows))
            .collect();
        // IN with the settings OUT uses for every column but the computed ones.
        let plain_props = WriterProperties::builder()
            .set_writer_version(WriterVersion::PARQUET_1_0)
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(None)
            .build();
        let mut w = ArrowWriter::try_new(
            File::create(&in_path).unwrap(),
            batches[0].schema(),
            Some(plain_props),
        )
        .unwrap();
        for b in &batches {
            w.write(b).unwrap();
            w.flush().unwrap();
        }
        w.close().unwrap();

        let input = ParquetInput::open(&in_path).unwrap();
        let in_schema = input.schema();
        let mask = in_schema.field(1).clone();
        let mut fields: Vec<arrow_schema::FieldRef> = in_schema.fields().to_vec();
        fields.push(Arc::new(mask.clone().with_name("loss_mask")));
        fields.push(Arc::new(float_list_field("advantages", &mask)));
        let schema = Arc::new(Schema::new(fields));
        use ColumnSource::*;
        let sources = vec![Copy(0), Copy(1), Copy(2), Alias(1), Computed];
        let full = |b: &RecordBatch| {
            let mut columns = b.columns().to_vec();
            columns.push(b.column(1).clone());
            columns.push(advantages(b, schema.field(4)));
            RecordBatch::try_new(schema.clone(), columns).unwrap()
        };

        // OUT through the splicer
        let out_path = dir.path().join("out.parquet");
        let mut out = ParquetOutput::create(
            &out_path,
            schema.clone(),
            sources.clone(),
            input.copy_source(),
            false,
        )
        .unwrap();
        let (encoder, sink) = out.split();
        for (rg, b) in batches.iter().enumerate() {
            let computed = RecordBatch::try_new(
                encoder.computed_schema().clone(),
                vec![advantages(b, schema.field(4))],
            )
            .unwrap();
            let encoded = encoder.encode(rg, &computed).unwrap();
            sink.append(rg, encoded).unwrap();
        }
        out.finish().unwrap();

        // the same output re-encoded by parquet's ArrowWriter with OUT's settings
        let plain_path = dir.path().join("plain.parquet");
        let converted = ArrowSchemaConverter::new().convert(&schema).unwrap();
        let mut w = ArrowWriter::try_new(
            File::create(&plain_path).unwrap(),
            schema.clone(),
            Some(properties(&converted, &sources, &[])),
        )
        .unwrap();
        for b in &batches {
            w.write(&full(b)).unwrap();
            w.flush().unwrap();
        }
        w.close().unwrap();

        let bytes = |p: &Path| std::fs::read(p).unwrap();
        let (inb, outb, plainb) = (bytes(&in_path), bytes(&out_path), bytes(&plain_path));
        let footer = |p: &Path| {
            SerializedFileReader::new(File::open(p).unwrap())
                .unwrap()
                .metadata()
                .clone()
        };
        let (inm, outm, plainm) = (footer(&in_path), footer(&out_path), footer(&plain_path));
        let range = |c: &ColumnChunkMetaData| {
            let (start, len) = c.byte_range();
            start as usize..(start + len) as usize
        };
        let input_column = [Some(0), Some(1), Some(2), Some(1), None];
        let mut at = 4;
        assert_eq!(outm.num_row_groups(), ROW_GROUPS.len());
        for rg in 0..ROW_GROUPS.len() {
            let (o, p) = (outm.row_group(rg), plainm.row_group(rg));
            assert_eq!(o.num_columns(), 5);
            assert_eq!(o.num_rows(), p.num_rows());
            for (c, source) in input_column.iter().enumerate() {
                let (oc, pc) = (o.column(c), p.column(c));
                let r = range(oc);
                assert_eq!(
                    r.start, at,
                    "row group {rg} column {c}: not right after the last"
                );
                at = r.end;
                assert_eq!(oc.column_path(), pc.column_path());
                // the computed chunk is io::float_lists' own encoding: its values are
                // checked by reading OUT back below
                if source.is_none() {
                    continue;
                }
                assert_eq!(
                    outb[r.clone()],
                    plainb[range(pc)],
                    "row group {rg} column {c}: bytes differ from a plain re-encode"
                );
                assert_eq!(oc.compressed_size(), pc.compressed_size());
                assert_eq!(
                    oc.data_page_offset() - r.start as i64,
                    pc.data_page_offset() - range(pc).start as i64
                );
                if let Some(i) = source {
                    let ic = inm.row_group(rg).column(*i);
                    assert_eq!(outb[r.clone()], inb[range(ic)], "row group {rg} column {c}");
                    assert_eq!(oc.num_values(), ic.num_values());
                    assert_eq!(
                        oc.dictionary_page_offset().map(|d| d - r.start as i64),
                        ic.dictionary_page_offset()
                            .map(|d| d - range(ic).start as i64)
                    );
                }
            }
        }
        // then the computed chunks' page indexes, then the footer
        let tail = outb.len() - 8;
        let declared = u32::from_le_bytes(outb[tail..tail + 4].try_into().unwrap()) as usize;
        assert!(at <= tail - declared);

        // and OUT reads back as the output batch
        let out_input = ParquetInput::open(&out_path).unwrap();
        for (rg, b) in batches.iter().enumerate() {
            let read = out_input.read_row_group(rg, None).unwrap();
            assert_eq!(read.columns(), full(b).columns(), "row group {rg}");
        }
    }

    /// A trip wire: the splicer's assumptions were checked (the test above, and by reading
    /// parquet's `SerializedRowGroupWriter::append_column`) against this version only.
    #[test]
    fn parquet_is_the_version_the_splicer_was_checked_against() {
        assert_eq!(
            parquet::file::properties::DEFAULT_CREATED_BY,
            "parquet-rs version 60.1.0",
            "parquet was upgraded: re-read SerializedRowGroupWriter::append_column against \
             io/splice.rs's assumptions, run splice_layout_matches_a_plain_re_encode, then \
             move the pins in Cargo.toml and this test"
        );
    }

    #[test]
    fn key_value_metadata_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let in_path = dir.path().join("in.parquet");
        let batch = input_rows(0, 5);
        let props = WriterProperties::builder()
            .set_key_value_metadata(Some(vec![
                KeyValue::new("source".into(), "rollouts-17".to_string()),
                KeyValue::new("empty".into(), None),
            ]))
            .build();
        let mut w =
            ArrowWriter::try_new(File::create(&in_path).unwrap(), batch.schema(), Some(props))
                .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let input = ParquetInput::open(&in_path).unwrap();
        assert_eq!(
            input.key_value_metadata(),
            vec![
                ("source".to_string(), "rollouts-17".to_string()),
                ("empty".to_string(), String::new())
            ]
        );

        let schema = input.schema();
        let sources = vec![
            ColumnSource::Copy(0),
            ColumnSource::Copy(1),
            ColumnSource::Copy(2),
        ];
        let given = vec![
            ("advcalc.b".to_string(), "2".to_string()),
            ("advcalc.a".to_string(), "1".to_string()),
            // replaces the input's value in the stored Arrow schema
            ("source".to_string(), "rewritten".to_string()),
        ];
        let reserved = ParquetOutput::create_with_metadata(
            &dir.path().join("never.parquet"),
            schema.clone(),
            sources.clone(),
            input.copy_source(),
            false,
            vec![("ARROW:schema".into(), "x".into())],
        );
        assert!(reserved.is_err());
        let out_path = dir.path().join("out.parquet");
        let mut out = ParquetOutput::create_with_metadata(
            &out_path,
            schema.clone(),
            sources,
            input.copy_source(),
            false,
            given.clone(),
        )
        .unwrap();
        let (encoder, sink) = out.split();
        let none = RecordBatch::try_new_with_options(
            encoder.computed_schema().clone(),
            vec![],
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(5)),
        )
        .unwrap();
        let encoded = encoder.encode(0, &none).unwrap();
        sink.append(0, encoded).unwrap();
        out.finish().unwrap();

        // in OUT's footer, in order
        let output = ParquetInput::open(&out_path).unwrap();
        assert_eq!(output.key_value_metadata(), given);
        // and in its Arrow schema
        let metadata = output.schema().metadata().clone();
        assert_eq!(metadata["advcalc.a"], "1");
        assert_eq!(metadata["source"], "rewritten");

        // an Arrow IPC OUT carries them as schema metadata
        for (file, format) in [
            ("out.arrow", crate::format::Format::ArrowFile),
            ("out.arrows", crate::format::Format::ArrowStream),
        ] {
            let ipc_path = dir.path().join(file);
            crate::ipc::export_parquet(&out_path, &ipc_path, format, false).unwrap();
            // and an Arrow IPC IN's schema metadata is the input's key-value metadata
            let source = crate::input_source::InputSource::resolve(&ipc_path, None).unwrap();
            let spooled = crate::input::Input::open(&source, false, &Default::default()).unwrap();
            let mut seen = spooled.parquet.key_value_metadata();
            seen.sort();
            let mut expected = given.clone();
            expected.sort();
            assert_eq!(seen, expected, "{file}");
        }
    }
}
