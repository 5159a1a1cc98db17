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
        let name = path.display().to_string();
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
            starts.push(last + rg.num_rows().max(0) as usize);
        }
        starts
    }

    /// Decode one row group, keeping only the given root columns (all when `None`).
    pub fn read_row_group(&self, index: usize, columns: Option<&[usize]>) -> Result<RecordBatch> {
        let context = || Error::data(format!("{}: cannot decode row group {index}", self.name));
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.file.clone(),
            self.metadata.clone(),
        )
        .with_row_groups(vec![index]);
        let rows = self.metadata.metadata().row_group(index).num_rows().max(1) as usize;
        builder = builder.with_batch_size(rows);
        if let Some(columns) = columns {
            let mask =
                ProjectionMask::roots(self.metadata.parquet_schema(), columns.iter().copied());
            builder = builder.with_projection(mask);
        }
        let schema = builder.schema().clone();
        let reader = builder.build().map_err(|e| context().with_source(e))?;
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| context().with_source(e))?;
        match batches.len() {
            1 => Ok(batches
                .into_iter()
                .next()
                .unwrap_or_else(|| RecordBatch::new_empty(schema))),
            _ => concat_batches(&schema, &batches).map_err(|e| context().with_source(e)),
        }
    }
}
