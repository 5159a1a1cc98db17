//! Pass 2's step on one row group, shared by `run` on one file and on a dataset.

use crate::engine::job::{GroupOutputs, Job, Plan};
use crate::engine::metrics;
use crate::error::Result;
use crate::io::write::{EncodedRowGroup, OutputEncoder};

/// Pass 2 on one row group: its token outputs assembled and encoded (on the worker thread),
/// with its `--metrics` parts when asked.
pub fn encode_row_group(
    job: &Job<'_>,
    batch: &arrow_array::RecordBatch,
    first_row: usize,
    prepared: &Plan,
    encoder: &OutputEncoder,
    row_group: usize,
    with_metrics: bool,
) -> Result<(EncodedRowGroup, metrics::Parts)> {
    let done = job.row_group_outputs(batch, first_row, prepared)?;
    encode_outputs(job, batch, done, encoder, row_group, with_metrics)
}

/// A row group's computed outputs assembled with its input columns and encoded (on the
/// worker thread), with its `--metrics` parts when asked.
pub fn encode_outputs(
    job: &Job<'_>,
    batch: &arrow_array::RecordBatch,
    done: GroupOutputs,
    encoder: &OutputEncoder,
    row_group: usize,
    with_metrics: bool,
) -> Result<(EncodedRowGroup, metrics::Parts)> {
    let (out, parts) = job.assembled(batch, done, encoder.computed_schema(), with_metrics)?;
    Ok((encoder.encode(row_group, &out)?, parts))
}
