//! advcalc: advantages and returns for logged LLM RL rollouts, matching verl 0.9.1.
//!
//! The estimator maths (`estimators`, `sessions`, `scores`, `dispatch`) works on plain
//! slices and scalars; `io` converts Parquet/Arrow at the edges; `driver` runs the two
//! passes. See `docs/architecture.md` for the code map.

pub mod commands;
pub mod config;
pub mod data;
pub mod engine;
pub mod error;
pub mod estimators;
pub mod io;
pub mod shaping;
#[cfg(test)]
mod test_support;

pub use commands::run::{RunOptions, RunSummary, run};
pub use config::{AlgoConfig, Config, ConfigSources};
pub use error::{Error, ErrorKind, Result};
