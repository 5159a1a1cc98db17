//! The small plain types every layer shares: a decoded row group, the token column roles,
//! group labels, a row group's computed token columns and the shared float values they hold.
//! No Arrow arrays, no Parquet: the I/O layer converts at its edge (`io/convert.rs`).

mod float_buffer;
mod group_key;
mod row_group;
mod token_outputs;
mod token_role;

pub use float_buffer::FloatBuffer;
pub use group_key::GroupKey;
pub use row_group::{PositiveLogProbs, RowGroup, TokenColumn, token_position};
pub use token_outputs::{LossColumns, TokenOutputs};
pub use token_role::TokenRole;
