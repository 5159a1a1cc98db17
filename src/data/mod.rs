//! The small plain types every layer shares: a decoded row group, the token column roles,
//! group labels and a row group's computed token columns. No Arrow arrays, no Parquet.

mod group_key;
mod row_group;
mod token_outputs;
mod token_role;

pub use group_key::GroupKey;
pub use row_group::{PositiveLogProbs, RowGroup, TokenColumn, token_position};
pub use token_outputs::{LossColumns, TokenOutputs};
pub use token_role::TokenRole;
