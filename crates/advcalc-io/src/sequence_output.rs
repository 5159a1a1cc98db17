//! `run`'s OUT for sequence-level input (verl's JSONL dumps, `io::jsonl`): the dump's own
//! fields, typed as `io::jsonl` found them, and one `float32` `advantage` per row, taken from
//! the passes' Parquet result (whose one-token rows hold it). No synthesized column (`uid`,
//! the one-token mask, the token lists) reaches OUT. A field already named `advantage` is
//! replaced in place, as `run` replaces a Parquet input's `advantages`.
//!
//! Written like every output: Parquet into a temporary file beside OUT renamed into place at
//! the end, or Arrow IPC through `io::ipc::export_parquet`; the key-value metadata is the
//! run's provenance.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use arrow_array::{Array, ArrayRef, Float32Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::atomic::{parent_dir, persist, temporary_output};
use crate::error::{Error, Result};
use crate::format::Format;
use crate::ipc;
use crate::jsonl::{JsonlInput, field_batches};

/// The per-row output column.
pub const ADVANTAGE: &str = "advantage";

/// Write OUT (`format`) from the dump `input` and the passes' Parquet `result`, with
/// `metadata` (the provenance) as its key-value metadata.
pub fn write(
    input: &JsonlInput,
    result: &Path,
    output: &Path,
    format: Format,
    force: bool,
    metadata: Vec<(String, String)>,
) -> Result<()> {
    let name = output.display().to_string();
    let advantages = advantages(result, &name)?;
    if advantages.len() != input.rows {
        return Err(Error::data(format!(
            "{name}: IN changed while advcalc read it ({} rows, then {})",
            input.rows,
            advantages.len()
        )));
    }
    if format != Format::Parquet {
        // Arrow IPC is exported from a finished Parquet file, like any other output.
        let tmp = crate::atomic::temporary_result()?;
        write_parquet(input, &advantages, tmp.as_file(), &name, metadata)?;
        return ipc::export_parquet(tmp.path(), output, format, force);
    }
    let tmp = temporary_output(&parent_dir(output), &name)?;
    write_parquet(input, &advantages, tmp.as_file(), &name, metadata)?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| Error::data(format!("{name}: write failed")).with_source(e))?;
    persist(tmp, output, force, &name)
}

/// Every row's advantage: the one value of its `advantages` list in the result.
fn advantages(result: &Path, name: &str) -> Result<Vec<f32>> {
    let fail = || Error::data(format!("{name}: cannot read the result"));
    let file = File::open(result).map_err(|e| fail().with_source(e))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| fail().with_source(e))?;
    let index = builder
        .schema()
        .index_of("advantages")
        .map_err(|e| fail().with_source(e))?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), [index]);
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(|e| fail().with_source(e))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| fail().with_source(e))?;
        let lists = batch.column(0).as_list::<i32>();
        let values = lists.values().as_primitive::<Float32Type>();
        for (i, &end) in lists.value_offsets()[1..].iter().enumerate() {
            // one token per row; its advantage is the row's
            let start = lists.value_offsets()[i];
            out.push(if end > start {
                values.value(end as usize - 1)
            } else {
                f32::NAN
            });
        }
    }
    Ok(out)
}

/// OUT's schema: the dump's fields, then `advantage` (in place of a field of that name).
fn schema(input: &JsonlInput, metadata: &[(String, String)]) -> SchemaRef {
    let advantage = Field::new(ADVANTAGE, DataType::Float32, false);
    let mut fields: Vec<Field> = input
        .fields
        .iter()
        .map(|(key, kind)| {
            if key == ADVANTAGE {
                advantage.clone()
            } else {
                Field::new(key, kind.data_type(), true)
            }
        })
        .collect();
    if !input.fields.iter().any(|(k, _)| k == ADVANTAGE) {
        fields.push(advantage);
    }
    Arc::new(Schema::new_with_metadata(
        fields,
        metadata
            .iter()
            .cloned()
            .collect::<std::collections::HashMap<_, _>>(),
    ))
}

fn write_parquet(
    input: &JsonlInput,
    advantages: &[f32],
    file: &File,
    name: &str,
    metadata: Vec<(String, String)>,
) -> Result<()> {
    let fail = |e: parquet::errors::ParquetError| {
        Error::data(format!("{name}: write failed")).with_source(e)
    };
    let schema = schema(input, &metadata);
    let replaced = input.fields.iter().position(|(k, _)| k == ADVANTAGE);
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_key_value_metadata(Some(
            metadata
                .into_iter()
                .map(|(k, v)| KeyValue::new(k, v))
                .collect(),
        ))
        .build();
    let handle = file
        .try_clone()
        .map_err(|e| Error::data(format!("{name}: write failed")).with_source(e))?;
    let mut writer =
        ArrowWriter::try_new(BufWriter::new(handle), schema.clone(), Some(props)).map_err(fail)?;
    let mut row = 0usize;
    field_batches(input, |mut columns| {
        crate::interrupt::check()?;
        let rows = columns.first().map_or(0, |c| c.len());
        if row + rows > advantages.len() {
            return Err(Error::data(format!(
                "{name}: IN changed while advcalc read it (more rows than before)"
            )));
        }
        let advantage: ArrayRef =
            Arc::new(Float32Array::from(advantages[row..row + rows].to_vec()));
        row += rows;
        match replaced {
            Some(i) => columns[i] = advantage,
            None => columns.push(advantage),
        }
        let batch = RecordBatch::try_new(schema.clone(), columns)
            .map_err(|e| Error::data(format!("{name}: write failed")).with_source(e))?;
        writer.write(&batch).map_err(fail)
    })?;
    writer.close().map_err(fail)?;
    Ok(())
}
