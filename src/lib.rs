//! advcalc: advantages and returns for logged LLM RL rollouts, with verl 0.9.1's numbers.
//!
//! The library's API is small:
//! - [`Config`]: verl's `algorithm:` section (a trainer YAML, `--set` overrides, flags),
//!   parsed once and validated ([`Config::load`] from [`ConfigSources`]);
//! - [`Engine`]: a configuration bound to an input schema, whose methods are the two passes
//!   on Arrow record batches ([`Engine::row_stats`], [`Engine::plan`],
//!   [`Engine::token_outputs`]) and [`Engine::compute`] for a whole input in memory; the
//!   plan between the passes shards by step ([`PlanShard`]), and the statistics and shards
//!   serialise to bytes, so the passes can run in other processes or on other machines;
//! - [`run`] (the CLI's file-to-file job: Parquet or Arrow IPC, streamed by row group, written
//!   atomically) and the other commands in [`commands`];
//! - [`input`] (one input read as the CLI reads it, for a client that holds it in memory) and
//!   [`dataset`] (a dataset's files, and a share of them run apart, for a runner that spreads
//!   them over processes);
//! - [`cli::main`]: the `advcalc` command line, for the binary and the Python package's script;
//! - [`Error`]: one error type whose [`ErrorKind`] maps to the CLI's exit codes.
//!
//! The maths (estimators, shaping) works on plain slices; `docs/architecture.md` has the code
//! map and the rules.

#![warn(missing_docs)]

pub mod cli;
/// The commands besides [`run`]: each an entry point, its options and what it returns
/// (`advcalc-commands`' modules).
pub mod commands {
    pub use advcalc_commands::{check, compare, config, estimators, inspect, losses, report, view};
}
pub use advcalc_config as config;
pub mod dataset;
pub mod input;
pub use advcalc_io::interrupt;

/// Object storage (the `cloud` feature): what the Python package's runners need to put an
/// output they wrote locally at an object URL as `run` puts its OUT: visible only when
/// complete, create-only unless forced (`docs/object-storage.md`).
#[cfg(feature = "cloud")]
pub mod object {
    pub use crate::io::object::sink::{PutPolicy, upload};
    pub use crate::io::object::url::parse_object;
}

#[cfg(test)]
#[path = "../crates/advcalc-maths/src/test_support.rs"]
mod test_support;

pub use advcalc_maths::error;
// The lower floors' modules under their own names (not re-exported: the tests, benchmarks
// and fuzz targets use those crates themselves).
pub use advcalc_commands::run::{DatasetOptions, RunOptions, RunSummary, run, run_with};
use advcalc_engine as engine;
use advcalc_io as io;
pub use advcalc_maths::error::{Error, ErrorKind, Result};
use advcalc_maths::{estimators, shaping};
pub use config::{AlgoConfig, Config, ConfigSources};
pub use engine::exchange::Exchange;
pub use engine::job::Plan;
pub use engine::kept::DEFAULT_MEMORY;
pub use engine::passes::{thread_count, thread_pool};
pub use engine::pipeline::Constants;
pub use engine::shard::PlanShard;
pub use engine::{Computed, Engine};
pub use estimators::{Estimator, RowStats};
pub use io::format::Format;
pub use io::trainers::{DumpOptions, Trainer};
pub use shaping::scores::Layout;
