//! advcalc's maths, the bottom floor of the workspace: what verl 0.9.1 computes between the
//! reward and the policy update, on plain slices and scalars. No Arrow, Parquet, JSON or
//! command line here: the I/O layer converts at the edges (`docs/architecture.md`).
//!
//! - [`data`]: the plain types every layer shares (a decoded row group, a group label, ...);
//! - [`shaping`]: stages 1–3: score placement, KL in the reward, rollout correction;
//! - [`estimators`]: one file per estimator (file = CLI name), the registry, shared helpers;
//! - [`loss`]: stage 5, verl's actor loss per token, aggregation, metrics;
//! - [`settings`](mod@settings): how a setting is declared beside what reads it (`settings!`);
//! - [`error`]: the one error type, whose kind decides the exit code.

pub mod data;
pub mod error;
pub mod estimators;
pub mod loss;
pub mod nearest;
pub mod settings;
pub mod shaping;
#[cfg(test)]
mod test_support;

pub use error::{Error, ErrorKind, Result};
