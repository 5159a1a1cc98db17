//! advcalc: advantages and returns for logged LLM RL rollouts, matching verl 0.9.1.
//!
//! The estimator maths (`estimators`, `sessions`, `scores`, `dispatch`) works on plain
//! slices and scalars; `io` converts Parquet/Arrow at the edges; `driver` runs the two
//! passes. See `docs/architecture.md` for the code map.

pub mod catalog;
pub mod cli;
pub mod compare;
pub mod config;
pub mod dispatch;
pub mod driver;
pub mod error;
pub mod estimators;
pub mod groups;
pub mod inspect;
pub mod io;
pub mod job;
pub mod metrics;
pub mod ordered;
pub mod outputs;
pub mod pipeline;
pub mod progress;
pub mod scores;
pub mod sessions;
pub mod shaping;
pub mod statistics;
pub mod stats;

pub use config::{AlgoConfig, Config, ConfigSources};
pub use driver::{RunOptions, RunSummary, run};
pub use error::{Error, ErrorKind, Result};
