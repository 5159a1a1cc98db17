//! The engine: one pipeline's two passes over row groups (design §5), the plan between them,
//! row-group parallelism and in-order output.

pub mod job;
pub mod metrics;
pub mod ordered;
pub mod passes;
pub mod pipeline;
pub mod plan;
pub mod progress;
pub mod row_stats;
pub mod token_outputs;
