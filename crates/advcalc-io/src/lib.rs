//! The I/O layer, the third floor of the workspace (`docs/architecture.md`): Parquet row
//! groups in (Arrow IPC, verl's JSONL dumps and other trainers' dumps spooled into Parquet
//! first), plain slices to the pipeline, Arrow arrays out; atomic writes; object storage
//! behind the `cloud` feature. It knows the configuration (what a trainer's dump reader takes
//! from it) and the maths' plain types, nothing above.

pub mod assemble;
pub mod atomic;
pub mod column_orders;
pub mod columns;
pub mod convert;
pub mod dataset;
pub mod decode;
pub mod float_lists;
pub mod format;
pub mod input;
pub mod input_source;
pub mod interrupt;
pub mod ipc;
pub mod json_fields;
pub mod json_line;
pub mod jsonl;
pub mod list_chunk;
pub mod location;
pub mod logs;
#[cfg(feature = "cloud")]
pub mod object;
pub mod positional;
pub mod read;
pub mod schema;
pub mod sequence_output;
pub mod splice;
pub mod tokenizer;
pub mod trainers;
pub mod walk;
pub mod whole_file;
pub mod write;

// The floors below under their own names (not re-exported).
use advcalc_config as config;
use advcalc_maths::{data, error, estimators};
