//! Parquet input: the footer is read once, then any thread decodes any row group with the
//! projection its pass needs.
//!
//! Every size the file declares about itself is checked against the file before anything is
//! allocated for it: the footer's metadata length when opening, every column chunk's byte
//! range right after (`check_chunk_ranges`), and, while decoding, each page through the
//! positional reader, which refuses reads past the end of the file (parquet itself bounds
//! a page by its column chunk).

use std::fs::File;
use std::path::Path;

use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::{ChunkReader, Length};

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_select::concat::concat_batches;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};

use crate::error::{Error, Result};
use crate::list_chunk;
use crate::positional::PositionalFile;

/// An open Parquet file (cloning shares the open file and its footer).
#[derive(Clone)]
pub struct ParquetInput {
    name: String,
    file: PositionalFile,
    metadata: ArrowReaderMetadata,
}

impl ParquetInput {
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_named(path, &path.display().to_string())
    }

    /// Open `path`, naming it `name` in messages (a spooled stream is named after IN).
    pub fn open_named(path: &Path, name: &str) -> Result<Self> {
        let name = name.to_string();
        if path.is_dir() {
            return Err(Error::data(format!(
                "{name}: is a directory, not a Parquet file"
            )));
        }
        let file = File::open(path)
            .map_err(|e| Error::data(format!("{name}: cannot open")).with_source(e))?;
        let file = PositionalFile::new(file)
            .map_err(|e| Error::data(format!("{name}: cannot open")).with_source(e))?;
        let data_end = check_footer(&file, &name)?;
        let metadata =
            ArrowReaderMetadata::load(&file, ArrowReaderOptions::new()).map_err(|e| {
                Error::data(format!("{name}: not a readable Parquet file")).with_source(e)
            })?;
        check_chunk_ranges(metadata.metadata(), data_end, &name)?;
        Ok(Self {
            name,
            file,
            metadata,
        })
    }

    /// Open an object (`ObjectSource`, opened by its HEAD) read in place: the footer by one
    /// suffix GET, then each row group's column chunks by ranged GETs (at most one each) as
    /// they are read (`PositionalFile::prefetched`), all pinned to the ETag the HEAD gave.
    /// Messages name the object's URL.
    #[cfg(feature = "cloud")]
    pub fn open_object(source: crate::object::source::ObjectSource) -> Result<Self> {
        use parquet::file::metadata::ParquetMetaDataReader;
        let name = source.name().to_string();
        let size = source.size();
        let bytes = source.parquet_metadata_bytes()?;
        let parsed = ParquetMetaDataReader::decode_metadata(&bytes)
            .and_then(|m| ArrowReaderMetadata::try_new(Arc::new(m), ArrowReaderOptions::new()))
            .map_err(|e| {
                Error::data(format!("{name}: not a readable Parquet file")).with_source(e)
            })?;
        // `parquet_metadata_bytes` checked that magic, metadata and length fit the object
        check_chunk_ranges(parsed.metadata(), size - 8 - bytes.len() as u64, &name)?;
        Ok(Self {
            name,
            file: PositionalFile::object(source),
            metadata: parsed,
        })
    }

    /// The object this input is read from, if it is one (its size, ETag and version go into
    /// OUT's provenance).
    #[cfg(feature = "cloud")]
    pub fn object(&self) -> Option<&crate::object::source::ObjectSource> {
        self.file.object_source()
    }

    /// The file and footer, for splicing column chunks into the output unchanged.
    pub fn copy_source(&self) -> crate::write::CopySource {
        crate::write::CopySource {
            file: self.file.clone(),
            metadata: self.metadata.metadata().clone(),
        }
    }

    /// The input file's own key-value metadata (its footer's, in file order), without
    /// `ARROW:schema`, the Arrow writer's encoding of the schema (OUT gets its own). A key
    /// without a value reads as an empty string. An Arrow IPC input's schema metadata is
    /// carried here too (`io::ipc` writes it into the spooled file's footer).
    pub fn key_value_metadata(&self) -> Vec<(String, String)> {
        self.metadata
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .into_iter()
            .flatten()
            .filter(|kv| kv.key != parquet::arrow::ARROW_SCHEMA_META_KEY)
            .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
            .collect()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn schema(&self) -> arrow_schema::SchemaRef {
        self.metadata.schema().clone()
    }

    pub fn num_row_groups(&self) -> usize {
        self.metadata.metadata().num_row_groups()
    }

    /// Global index of the first row of each row group, plus the total row count at the end.
    pub fn row_group_starts(&self) -> Vec<usize> {
        let mut starts = vec![0usize];
        for rg in self.metadata.metadata().row_groups() {
            let last = *starts.last().unwrap_or(&0);
            starts.push(last.saturating_add(rg.num_rows().max(0) as usize));
        }
        starts
    }

    /// Decode one row group, keeping only the given root columns (all when `None`).
    pub fn read_row_group(&self, index: usize, columns: Option<&[usize]>) -> Result<RecordBatch> {
        // every pass starts each row group here: the place to stop when asked to
        crate::interrupt::check()?;
        // An object's column chunks, fetched ahead (chunks side by side by one GET); a local
        // file is read as it is decoded.
        let file = self.file.prefetched(|| self.chunk_ranges(index, columns))?;
        let decoded = self.decode_caught(&file, index, columns);
        // Which column is damaged: found by decoding the columns one at a time, which costs
        // nothing unless decoding has already failed.
        let column = match &decoded {
            Ok(Ok(_)) => None,
            _ => self.failing_column(&file, index, columns),
        };
        let context = || {
            Error::data(match &column {
                Some(c) => format!("{}: cannot decode row group {index}, column {c}", self.name),
                None => format!("{}: cannot decode row group {index}", self.name),
            })
        };
        let declared = self.metadata.metadata().row_group(index).num_rows();
        match decoded {
            // Row indices come from the footer's counts; a file that disagrees is malformed.
            Ok(Ok(batch)) if batch.num_rows() as i64 != declared => Err(Error::data(format!(
                "{}: row group {index} holds {} rows but its footer says {declared}",
                self.name,
                batch.num_rows()
            ))),
            Ok(result) => result.map_err(|e| context().with_boxed_source(e)),
            Err(payload) => {
                let reason = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown".into());
                Err(context().with_source(MalformedData(reason)))
            }
        }
    }

    /// Decode, with the decoder's panics caught: the Parquet decoder can panic on some
    /// malformed files; that is bad input, not a bug of ours, so it becomes a data error like
    /// any other decoding failure.
    fn decode_caught(
        &self,
        file: &PositionalFile,
        index: usize,
        columns: Option<&[usize]>,
    ) -> std::thread::Result<
        std::result::Result<RecordBatch, Box<dyn std::error::Error + Send + Sync>>,
    > {
        DECODING.with(|d| d.set(true));
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.decode_row_group(file, index, columns)
        }));
        DECODING.with(|d| d.set(false));
        decoded
    }

    /// The first of `columns` (all when `None`) that fails to decode on its own.
    fn failing_column(
        &self,
        file: &PositionalFile,
        index: usize,
        columns: Option<&[usize]>,
    ) -> Option<String> {
        let schema = self.metadata.schema();
        let all: Vec<usize> = match columns {
            Some(c) => c.to_vec(),
            None => (0..schema.fields().len()).collect(),
        };
        if let [only] = all[..] {
            return Some(schema.field(only).name().clone());
        }
        all.into_iter()
            .find(|&c| !matches!(self.decode_caught(file, index, Some(&[c])), Ok(Ok(_))))
            .map(|c| schema.field(c).name().clone())
    }

    /// Decode row group `index` with the given root columns (all when `None`): the list
    /// columns `io::list_chunk` handles straight from their pages, the rest with parquet's
    /// reader; the batch is the one parquet's reader alone would give.
    fn decode_row_group(
        &self,
        file: &PositionalFile,
        index: usize,
        columns: Option<&[usize]>,
    ) -> std::result::Result<RecordBatch, Box<dyn std::error::Error + Send + Sync>> {
        let schema = self.metadata.schema();
        let mut roots: Vec<usize> = match columns {
            Some(c) => c.to_vec(),
            None => (0..schema.fields().len()).collect(),
        };
        roots.sort_unstable();
        roots.dedup();
        let parquet_schema = self.metadata.parquet_schema();
        let row_group = self.metadata.metadata().row_group(index);
        let mut direct = Vec::new();
        let mut rest = Vec::new();
        for &root in &roots {
            let mut leaves = (0..parquet_schema.num_columns())
                .filter(|&l| parquet_schema.get_column_root_idx(l) == root);
            let array = match (leaves.next(), leaves.next()) {
                (Some(leaf), None) => list_chunk::read(file, row_group, leaf, schema.field(root))?,
                _ => None,
            };
            match array {
                Some(array) => direct.push((root, array)),
                None => rest.push(root),
            }
        }
        let projected = Arc::new(schema.project(&roots)?);
        if rest.is_empty() {
            let rows = usize::try_from(row_group.num_rows())?;
            let columns = direct.into_iter().map(|(_, a)| a).collect();
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            return Ok(RecordBatch::try_new_with_options(
                projected, columns, &options,
            )?);
        }
        let read = self.decode_with_parquet(file, index, &rest)?;
        let mut direct = direct.into_iter().peekable();
        let mut read = read.columns().iter().cloned();
        let columns = roots
            .iter()
            .map(|&root| match direct.next_if(|(r, _)| *r == root) {
                Some((_, array)) => Ok(array),
                None => read
                    .next()
                    .ok_or("parquet's reader gave fewer columns than were asked for"),
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(projected, columns)?)
    }

    /// Decode the given root columns (sorted) of row group `index` with parquet's reader.
    fn decode_with_parquet(
        &self,
        file: &PositionalFile,
        index: usize,
        columns: &[usize],
    ) -> std::result::Result<RecordBatch, Box<dyn std::error::Error + Send + Sync>> {
        let mut builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file.clone(), self.metadata.clone())
                .with_row_groups(vec![index]);
        // Bounded, so that a footer claiming absurd row counts cannot make us preallocate.
        let rows = self
            .metadata
            .metadata()
            .row_group(index)
            .num_rows()
            .clamp(1, 1 << 16) as usize;
        builder = builder.with_batch_size(rows);
        let mask = ProjectionMask::roots(self.metadata.parquet_schema(), columns.iter().copied());
        builder = builder.with_projection(mask);
        let schema = builder.schema().clone();
        let reader = builder.build()?;
        let batches = reader.collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(match batches.len() {
            1 => batches
                .into_iter()
                .next()
                .unwrap_or_else(|| RecordBatch::new_empty(schema)),
            _ => concat_batches(&schema, &batches)?,
        })
    }

    /// Decode with parquet's reader alone (tests compare `io::list_chunk` with it).
    #[cfg(test)]
    fn decode_reference(&self, index: usize) -> RecordBatch {
        let all: Vec<usize> = (0..self.metadata.schema().fields().len()).collect();
        self.decode_with_parquet(&self.file, index, &all).unwrap()
    }

    /// The byte ranges of row group `index`'s column chunks of the given root columns (all
    /// when `None`), in file order.
    fn chunk_ranges(&self, index: usize, columns: Option<&[usize]>) -> Vec<std::ops::Range<u64>> {
        let descr = self.metadata.parquet_schema();
        let row_group = self.metadata.metadata().row_group(index);
        (0..descr.num_columns())
            .filter(|&leaf| columns.is_none_or(|c| c.contains(&descr.get_column_root_idx(leaf))))
            .map(|leaf| {
                let (start, len) = row_group.column(leaf).byte_range();
                start..start + len
            })
            .collect()
    }
}

/// The length of the file's footer checked against the file, before parquet allocates a
/// buffer of the declared size; returns where the footer starts (the end of the data).
fn check_footer(file: &PositionalFile, name: &str) -> Result<u64> {
    let len = file.len();
    let unreadable = || Error::data(format!("{name}: not a readable Parquet file"));
    // Shorter files, or ones without the magic number, are parquet's to refuse.
    if len < 12 {
        return Ok(0);
    }
    let tail = file
        .get_bytes(len - 8, 8)
        .map_err(|e| unreadable().with_source(e))?;
    if &tail[4..] != b"PAR1" {
        return Ok(0);
    }
    let declared = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as u64;
    // magic, metadata, length, magic
    if declared + 12 > len {
        return Err(Error::data(format!(
            "{name}: not a readable Parquet file: its footer declares {declared} bytes of \
             metadata, more than the file's {len} bytes"
        )));
    }
    Ok(len - 8 - declared)
}

/// Every column chunk's byte range (`start`, `total_compressed_size`) inside the data part
/// of the file (`4..data_end`), so that neither the decoder nor the chunk copies of the
/// output ever read or allocate for bytes the file does not have.
fn check_chunk_ranges(metadata: &ParquetMetaData, data_end: u64, name: &str) -> Result<()> {
    if data_end == 0 {
        return Ok(());
    }
    for (r, rg) in metadata.row_groups().iter().enumerate() {
        for column in rg.columns() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or_else(|| column.data_page_offset());
            let size = column.compressed_size();
            let end = u64::try_from(start)
                .ok()
                .zip(u64::try_from(size).ok())
                .and_then(|(s, n)| s.checked_add(n));
            let inside = start >= 4 && end.is_some_and(|e| e <= data_end);
            if !inside {
                return Err(Error::data(format!(
                    "{name}: row group {r}, column {}: the column chunk declares {size} bytes \
                     at offset {start}, outside the file's data (bytes 4 to {data_end})",
                    column.column_path().string()
                )));
            }
        }
    }
    Ok(())
}

thread_local! {
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is inside the Parquet decoder, where a panic means malformed input
/// and is caught; a panic hook uses it to stay quiet about those.
pub fn decoding() -> bool {
    DECODING.with(|d| d.get())
}

/// The decoder gave up on malformed data (it panicked; the message is its reason).
#[derive(Debug)]
struct MalformedData(String);

impl std::fmt::Display for MalformedData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed data: {}", self.0)
    }
}

impl std::error::Error for MalformedData {}

#[cfg(test)]
/// `io::list_chunk` against parquet's reader on files of every layout and encoding it reads, and
/// on those it declines.
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use arrow_array::builder::{
        Float32Builder, Float64Builder, Int8Builder, Int64Builder, LargeListBuilder, ListBuilder,
    };
    use arrow_array::{ArrayRef, RecordBatch};
    use arrow_schema::{DataType, Field};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, Encoding, ZstdLevel};
    use parquet::file::properties::{WriterProperties, WriterVersion};

    use crate::list_chunk;
    use crate::read::ParquetInput;

    /// Row `i`'s length: empty rows, rows of one, long rows spanning pages.
    fn len(i: usize) -> usize {
        match i % 7 {
            0 => 0,
            1 => 1,
            2 => 700,
            _ => (i * 37) % 90,
        }
    }

    fn floats(rows: usize, nulls: Option<usize>, item_nulls: bool) -> ArrayRef {
        let mut b = ListBuilder::new(Float32Builder::new());
        for i in 0..rows {
            if nulls.is_some_and(|n| i % n == n - 1) {
                b.append(false);
                continue;
            }
            for t in 0..len(i) {
                if item_nulls && t == 3 {
                    b.values().append_null();
                } else {
                    // few distinct values, so the dictionary holds
                    b.values()
                        .append_value(((i * 31 + t * 7) % 200) as f32 * -0.25);
                }
            }
            b.append(true);
        }
        Arc::new(b.finish())
    }

    fn batch(rows: usize) -> RecordBatch {
        let mut mask = ListBuilder::new(Int8Builder::new());
        let mut wide = LargeListBuilder::new(Float64Builder::new());
        let mut ids = ListBuilder::new(Int64Builder::new());
        for i in 0..rows {
            for t in 0..len(i) {
                mask.values().append_value(((i + t) % 3 != 0) as i8);
                wide.values().append_value((i as f64).sqrt() * t as f64);
                ids.values().append_value((i * 1000 + t) as i64);
            }
            mask.append(true);
            wide.append(true);
            ids.append(true);
        }
        // a list with a non-nullable list and item
        let strict_item = Arc::new(Field::new("element", DataType::Float32, false));
        let strict_values = floats(rows, None, false);
        let strict_values = strict_values
            .as_any()
            .downcast_ref::<arrow_array::ListArray>()
            .unwrap()
            .clone();
        let (_, offsets, values, _) = strict_values.into_parts();
        let strict = arrow_array::ListArray::new(strict_item.clone(), offsets, values, None);
        RecordBatch::try_from_iter_with_nullable(vec![
            ("scores", floats(rows, None, false), true),
            ("mask", Arc::new(mask.finish()) as ArrayRef, true),
            ("wide", Arc::new(wide.finish()) as ArrayRef, true),
            ("ids", Arc::new(ids.finish()) as ArrayRef, true),
            ("strict", Arc::new(strict) as ArrayRef, false),
            ("null_lists", floats(rows, Some(5), false), true),
            ("null_items", floats(rows, None, true), true),
        ])
        .unwrap()
    }

    fn write(path: &Path, batch: &RecordBatch, props: WriterProperties) {
        let file = std::fs::File::create(path).unwrap();
        let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
        // three row groups of different sizes
        w.write(&batch.slice(0, 50)).unwrap();
        w.flush().unwrap();
        w.write(&batch.slice(50, batch.num_rows() - 50)).unwrap();
        w.close().unwrap();
    }

    /// Every row group decodes to parquet's own batch; returns which columns the fast
    /// reader took (by name).
    fn check(path: &Path) -> Vec<String> {
        let input = ParquetInput::open(path).unwrap();
        let schema = input.schema();
        let mut taken = Vec::new();
        for rg in 0..input.num_row_groups() {
            let ours = input.read_row_group(rg, None).unwrap();
            let theirs = input.decode_reference(rg);
            // the fields (the file's key-value metadata, pandas' say, is the schema's own)
            assert_eq!(
                ours.schema().fields(),
                theirs.schema().fields(),
                "{}",
                path.display()
            );
            for (c, field) in schema.fields().iter().enumerate() {
                assert_eq!(
                    ours.column(c).to_data(),
                    theirs.column(c).to_data(),
                    "{} row group {rg} column {}",
                    path.display(),
                    field.name()
                );
            }
            // and with a projection (of files with a third column)
            if schema.fields().len() > 2 {
                let some = input.read_row_group(rg, Some(&[2, 0])).unwrap();
                assert_eq!(some.num_columns(), 2);
                assert_eq!(some.column(0).to_data(), theirs.column(0).to_data());
            }
            let metadata = input.metadata.metadata().row_group(rg);
            for (c, field) in schema.fields().iter().enumerate() {
                let leaf = (0..metadata.num_columns())
                    .find(|&l| metadata.schema_descr().get_column_root_idx(l) == c);
                if let Some(leaf) = leaf
                    && list_chunk::read(&input.file, metadata, leaf, field)
                        .unwrap()
                        .is_some()
                    && !taken.contains(field.name())
                {
                    taken.push(field.name().clone());
                }
            }
        }
        taken
    }

    #[test]
    fn every_encoding_and_page_layout_gives_parquets_arrays() {
        let dir = tempfile::tempdir().unwrap();
        let batch = batch(400);
        let base = || {
            WriterProperties::builder()
                .set_data_page_row_count_limit(64)
                .set_write_batch_size(32)
        };
        let variants: Vec<(&str, WriterProperties)> = vec![
            ("dictionary v1", base().build()),
            (
                "dictionary v2 zstd",
                base()
                    .set_writer_version(WriterVersion::PARQUET_2_0)
                    .set_compression(Compression::ZSTD(ZstdLevel::default()))
                    .build(),
            ),
            (
                "plain snappy",
                base()
                    .set_dictionary_enabled(false)
                    .set_compression(Compression::SNAPPY)
                    .build(),
            ),
            (
                "byte stream split v2",
                base()
                    .set_dictionary_enabled(false)
                    .set_encoding(Encoding::BYTE_STREAM_SPLIT)
                    .set_writer_version(WriterVersion::PARQUET_2_0)
                    .build(),
            ),
            (
                "dictionary overflowing to plain",
                base().set_dictionary_page_size_limit(64).build(),
            ),
            (
                "large pages",
                WriterProperties::builder()
                    .set_dictionary_enabled(false)
                    .build(),
            ),
        ];
        for (name, props) in variants {
            let path = dir
                .path()
                .join(format!("{}.parquet", name.replace(' ', "_")));
            write(&path, &batch, props);
            let taken = check(&path);
            // the token layouts are read here; null lists and null items are declined
            assert_eq!(taken, ["scores", "mask", "wide", "ids", "strict"], "{name}");
        }
    }

    #[test]
    fn every_committed_fixture_gives_parquets_arrays() {
        // the workspace's fixtures, two floors up
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut files = Vec::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "parquet") {
                    files.push(path);
                }
            }
        }
        assert!(files.len() > 100, "the fixtures were not found");
        let mut taken = 0;
        for path in files {
            // fixtures of malformed files are the error tests' business
            if ParquetInput::open(&path).is_err() {
                continue;
            }
            taken += check(&path).len();
        }
        assert!(taken > 100, "the fast reader took only {taken} columns");
    }
}
