//! The output record batch of one row group: the input columns, then the computed columns
//! as `list<float32>` sharing the input rows' offsets, with the child field name and
//! nullability of the input's `response_mask` (`InputColumns::float_list_field`).

use std::sync::Arc;

use arrow::array::{ArrayRef, Float32Array, ListArray, RecordBatch};
use arrow::buffer::{OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, SchemaRef};

use crate::data::TokenOutputs;
use crate::error::{Error, Result};
use crate::io::schema::InputColumns;

/// The computed columns of a row group, in the order of `computed_schema`; `input` is the
/// decoded (projected) row group, which holds the original mask for `loss_mask`.
pub fn assemble(
    input: &RecordBatch,
    columns: &InputColumns,
    output_schema: &SchemaRef,
    offsets: &[usize],
    outputs: TokenOutputs,
    file: &str,
) -> Result<RecordBatch> {
    let offsets = offset_buffer(offsets, file)?;
    let list = |values: ScalarBuffer<f32>| -> Result<ArrayRef> {
        let DataType::List(item) = columns.float_list_field("x").data_type().clone() else {
            unreachable!("float_list_field is a list")
        };
        ListArray::try_new(
            item,
            offsets.clone(),
            Arc::new(Float32Array::new(values, None)),
            None,
        )
        .map(|a| Arc::new(a) as ArrayRef)
        .map_err(|e| Error::data(format!("{file}: cannot build an output column")).with_source(e))
    };
    let advantages = list(outputs.advantages.into())?;
    let returns = match outputs.returns {
        Some(r) => list(r.into())?,
        None => advantages.clone(),
    };
    let rewards = list(outputs.token_level_rewards)?;
    let weights = outputs
        .rollout_is_weights
        .map(|w| list(w.into()))
        .transpose()?;
    let mask_name = columns.schema.field(columns.mask).name();
    let new_mask = match outputs.response_mask {
        Some(values) => {
            let floats = list(values)?;
            let original = columns.schema.field(columns.mask).data_type();
            Some(arrow::compute::cast(&floats, original).map_err(|e| {
                Error::data(format!(
                    "{file}: cannot write the rejected `{mask_name}` back as {original}"
                ))
                .with_source(e)
            })?)
        }
        None => None,
    };
    let arrays = output_schema
        .fields()
        .iter()
        .map(|field| {
            let name = field.name().as_str();
            let computed = match name {
                "token_level_rewards" => Some(&rewards),
                "advantages" => Some(&advantages),
                "returns" => Some(&returns),
                "rollout_is_weights" => weights.as_ref(),
                n if n == mask_name => new_mask.as_ref(),
                _ => None,
            };
            // `loss_mask` keeps the original mask when the input has none (verl's convention)
            let source = if name == "loss_mask" && !columns.has_loss_mask {
                mask_name
            } else {
                name
            };
            match computed {
                // `token_level_rewards` copied from the scores keeps their list type (a
                // large list from polars, say): the values are the same, only offsets widen
                Some(array) if array.data_type() != field.data_type() => {
                    arrow::compute::cast(array, field.data_type()).map_err(|e| {
                        Error::data(format!(
                            "{file}: cannot write `{name}` as {}",
                            field.data_type()
                        ))
                        .with_source(e)
                    })
                }
                Some(array) => Ok(array.clone()),
                None => input.column_by_name(source).cloned().ok_or_else(|| {
                    Error::data(format!("{file}: `{source}` missing from a row group"))
                }),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(output_schema.clone(), arrays).map_err(|e| {
        Error::data(format!("{file}: cannot assemble an output row group")).with_source(e)
    })
}

fn offset_buffer(offsets: &[usize], file: &str) -> Result<OffsetBuffer<i32>> {
    let converted = offsets
        .iter()
        .map(|&o| i32::try_from(o))
        .collect::<std::result::Result<Vec<i32>, _>>()
        .map_err(|_| {
            Error::data(format!(
                "{file}: a row group holds more than 2^31 tokens; rewrite the input with smaller row groups"
            ))
        })?;
    Ok(OffsetBuffer::new(converted.into()))
}
