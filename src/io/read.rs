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

use arrow::compute::concat_batches;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};

use crate::error::{Error, Result};
use crate::io::positional::PositionalFile;

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

    /// The file and footer, for splicing column chunks into the output unchanged.
    pub fn copy_source(&self) -> crate::io::write::CopySource {
        crate::io::write::CopySource {
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

    pub fn schema(&self) -> arrow::datatypes::SchemaRef {
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
        let decoded = self.decode_caught(index, columns);
        // Which column is damaged: found by decoding the columns one at a time, which costs
        // nothing unless decoding has already failed.
        let column = match &decoded {
            Ok(Ok(_)) => None,
            _ => self.failing_column(index, columns),
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
        index: usize,
        columns: Option<&[usize]>,
    ) -> std::thread::Result<
        std::result::Result<RecordBatch, Box<dyn std::error::Error + Send + Sync>>,
    > {
        DECODING.with(|d| d.set(true));
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.decode_row_group(index, columns)
        }));
        DECODING.with(|d| d.set(false));
        decoded
    }

    /// The first of `columns` (all when `None`) that fails to decode on its own.
    fn failing_column(&self, index: usize, columns: Option<&[usize]>) -> Option<String> {
        let schema = self.metadata.schema();
        let all: Vec<usize> = match columns {
            Some(c) => c.to_vec(),
            None => (0..schema.fields().len()).collect(),
        };
        if let [only] = all[..] {
            return Some(schema.field(only).name().clone());
        }
        all.into_iter()
            .find(|&c| !matches!(self.decode_caught(index, Some(&[c])), Ok(Ok(_))))
            .map(|c| schema.field(c).name().clone())
    }

    fn decode_row_group(
        &self,
        index: usize,
        columns: Option<&[usize]>,
    ) -> std::result::Result<RecordBatch, Box<dyn std::error::Error + Send + Sync>> {
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.file.clone(),
            self.metadata.clone(),
        )
        .with_row_groups(vec![index]);
        // Bounded, so that a footer claiming absurd row counts cannot make us preallocate.
        let rows = self
            .metadata
            .metadata()
            .row_group(index)
            .num_rows()
            .clamp(1, 1 << 16) as usize;
        builder = builder.with_batch_size(rows);
        if let Some(columns) = columns {
            let mask =
                ProjectionMask::roots(self.metadata.parquet_schema(), columns.iter().copied());
            builder = builder.with_projection(mask);
        }
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
