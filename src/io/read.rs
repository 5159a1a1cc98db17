//! Parquet input: the footer is read once, then any thread decodes any row group with the
//! projection its pass needs.

use std::fs::File;
use std::path::Path;

use arrow::compute::concat_batches;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};

use crate::error::{Error, Result};
use crate::io::positional::PositionalFile;

/// An open Parquet file.
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
        let metadata =
            ArrowReaderMetadata::load(&file, ArrowReaderOptions::new()).map_err(|e| {
                Error::data(format!("{name}: not a readable Parquet file")).with_source(e)
            })?;
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
        let context = || Error::data(format!("{}: cannot decode row group {index}", self.name));
        // The Parquet decoder can panic on some malformed files; that is bad input, not a bug
        // of ours, so it becomes a data error like any other decoding failure.
        DECODING.with(|d| d.set(true));
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.decode_row_group(index, columns)
        }));
        DECODING.with(|d| d.set(false));
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
