//! The commands, the fifth floor of the workspace (`docs/architecture.md`): clients of the
//! engine that read a whole input and report or write.
//!
//! Each command is one module: its entry point, its options and what it returns:
//! [`run`] (and a dataset run, [`dataset`]), [`inspect`], [`compare`], [`report`],
//! [`config`], [`estimators`] and [`losses`]; `advcalc` re-exports them as its API. The rest
//! (the passes over a dump, the findings, the page's parts) serves them.
//!
//! The commands never import each other: what two of them share (the passes, the comparison,
//! the inspect checks) is the `analysis` layer, which imports none of them; `run` and a
//! dataset run share their options, OUT's provenance and pass 2's encoding through
//! `run_options`, `provenance` and `encode`.

pub mod analysis;
pub mod check;
pub mod compare;
pub mod config;
pub mod dataset;
pub mod encode;
pub mod estimators;
pub mod inspect;
pub mod losses;
pub mod numbers;
pub mod part_passes;
pub mod provenance;
pub mod report;
pub mod run;
pub mod run_options;
pub mod view;

// The floors below under their own names (not re-exported; the configuration crate is
// `advcalc_config` and the estimators `advcalc_maths::estimators`, as `config` and
// `estimators` here are the `advcalc config` and `advcalc estimators` commands).
use advcalc_engine as engine;
use advcalc_io as io;
use advcalc_maths::{data, error, loss, shaping};
#[cfg(test)]
#[path = "../../advcalc-maths/src/test_support.rs"]
mod test_support;
