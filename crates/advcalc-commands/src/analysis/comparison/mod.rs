//! The comparison `compare` prints and `report` draws: the summaries (`summary`, with
//! `spearman`) built from the variants' per-row sums (`collect`), and their JSON and tables
//! (`render`).

pub mod render;
pub mod spearman;
pub mod summary;

pub use summary::{Comparison, PairSummary, VariantSummary};
