//! The one analysis layer under the commands: what more than one of `inspect`, `compare` and
//! `report` computes, so that no command imports another (each imports this; this imports
//! none of them).
//!
//! - the passes: the variants and how to read them, each variant's statistics pass and
//!   per-row sums (`collect`), one configuration's advantage statistics per step (`steps`);
//! - the comparison `compare` prints and `report` draws (`comparison`), from per-row sums of
//!   one row group's outputs (`sums`), advantage statistics over valid tokens (`tokens`) and
//!   group pass-rate buckets (`buckets`);
//! - the inspect checks, tallies and findings that `inspect` prints and `report` runs on its
//!   own pass (`inspection`);
//! - numerically fragile groups and their findings (`fragile`), another trainer's logged
//!   advantages against advcalc's (`logged`), a run's logged metrics against its dumps
//!   (`log_check`), the text table `compare` and `check` print (`table`), and the finding a
//!   command reports ([`Warning`]).

pub mod buckets;
pub mod collect;
pub mod comparison;
pub mod fragile;
pub mod inspection;
pub mod log_check;
pub mod logged;
pub mod steps;
pub mod sums;
pub mod table;
pub mod tokens;

/// A finding that is likely a mistake: a stable snake_case code and a one-line explanation.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// Stable across releases (docs/inspect.md lists them), e.g. `masked_reward`.
    pub code: &'static str,
    /// What was found, why it matters and what to do; may be reworded.
    pub message: String,
}
