//! The I/O layer: Parquet row groups in, plain slices to the pipeline, Arrow arrays out.

pub mod assemble;
pub mod columns;
pub mod decode;
pub mod format;
pub mod input;
pub mod ipc;
pub mod positional;
pub mod read;
pub mod schema;
pub mod splice;
pub mod write;
