//! The output record batch of one row group: the input columns, then the computed columns
//! as `list<float32>` with the input rows' offsets, with the child field name and
//! nullability of the input's `response_mask` (`InputColumns::float_list_field`); a rejected
//! mask goes back in the input mask's own type (`io/convert.rs` builds each list).

use arrow_array::RecordBatch;
use arrow_buffer::ScalarBuffer;
use arrow_schema::SchemaRef;

use crate::convert;
use crate::data::TokenOutputs;
use crate::error::{Error, Result};
use crate::schema::InputColumns;

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
    if offsets.last().is_some_and(|&o| i32::try_from(o).is_err()) {
        return Err(Error::data(format!(
            "{file}: a row group holds more than 2^31 tokens; rewrite the input with smaller row groups"
        )));
    }
    let advantages: ScalarBuffer<f32> = outputs.advantages.into();
    let returns = outputs.returns.map(ScalarBuffer::from);
    let weights = outputs.rollout_is_weights.map(ScalarBuffer::from);
    // the rewards and a rewritten mask may share the input's buffers: handed over, not copied
    let rewards = convert::from_shared(&outputs.token_level_rewards);
    let rejected_mask = outputs.response_mask.as_ref().map(convert::from_shared);
    let (pg_losses, grad_weights, kl_losses) = match outputs.loss {
        Some(l) => (
            Some(ScalarBuffer::from(l.pg_losses)),
            Some(ScalarBuffer::from(l.grad_weights)),
            l.kl_losses.map(ScalarBuffer::from),
        ),
        None => (None, None, None),
    };
    let mask_name = columns.schema.field(columns.mask).name();
    let arrays = output_schema
        .fields()
        .iter()
        .map(|field| {
            let name = field.name().as_str();
            let computed = match name {
                "token_level_rewards" => Some(&rewards),
                "advantages" => Some(&advantages),
                "returns" => Some(returns.as_ref().unwrap_or(&advantages)),
                "rollout_is_weights" => weights.as_ref(),
                "pg_losses" => pg_losses.as_ref(),
                "grad_weights" => grad_weights.as_ref(),
                "kl_losses" => kl_losses.as_ref(),
                // the mask after rejection, written back in the input's type
                n if n == mask_name => rejected_mask.as_ref(),
                _ => None,
            };
            // `loss_mask` keeps the original mask when the input has none (verl's convention)
            let source = if name == "loss_mask" && !columns.has_loss_mask {
                mask_name
            } else {
                name
            };
            match computed {
                // each in its output field's type: `token_level_rewards` copied from the
                // scores keeps their list type (a large list from polars, say)
                Some(values) => convert::list_of(field.data_type(), offsets, values.clone())
                    .map_err(|e| {
                        Error::data(format!(
                            "{file}: cannot write `{name}` as {}",
                            field.data_type()
                        ))
                        .with_source(e)
                    }),
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
