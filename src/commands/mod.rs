//! The commands: clients of the engine that read a whole input and report or write.
//!
//! Each public module is one command's entry point, its options and what it returns:
//! [`inspect`], [`compare`], [`report`], [`config`], [`estimators`] and [`losses`]. `run` is
//! [`crate::run`] / [`crate::run_with`] at the crate root, and a dataset's share run apart is
//! [`crate::dataset::run_files`]. Everything else here (the passes over a dump, the findings,
//! the page's parts) is internal.
//!
//! The commands never import each other: what two of them share (the passes, the comparison,
//! the inspect checks) is the `analysis` layer, which imports none of them; `run` and a
//! dataset run share their options, OUT's provenance and pass 2's encoding through
//! `run_options`, `provenance` and `encode`.

pub(crate) mod analysis;
pub mod compare;
pub mod config;
pub(crate) mod dataset;
pub(crate) mod encode;
pub mod estimators;
pub mod inspect;
pub mod losses;
pub(crate) mod numbers;
pub(crate) mod provenance;
pub mod report;
pub(crate) mod run;
pub(crate) mod run_options;
