//! The I/O layer: Parquet row groups in (Arrow IPC, verl's JSONL dumps and other trainers'
//! dumps spooled into Parquet first), plain slices to the pipeline, Arrow arrays out.

pub mod assemble;
pub mod atomic;
pub mod columns;
pub mod convert;
pub mod dataset;
pub mod decode;
pub mod float_lists;
pub mod format;
pub mod input;
pub mod ipc;
pub mod json_fields;
pub mod json_line;
pub mod jsonl;
pub mod list_chunk;
pub mod location;
#[cfg(feature = "cloud")]
pub mod object;
pub mod positional;
pub mod read;
pub mod schema;
pub mod sequence_output;
pub mod splice;
pub mod trainers;
pub mod walk;
pub mod whole_file;
pub mod write;
