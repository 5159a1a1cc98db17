//! The analysis inspect and compare both report, neither command's own: numerically fragile
//! groups and their findings (`fragile`), advantage statistics over valid tokens (`tokens`),
//! per-row sums of one row group's outputs (`sums`), group pass-rate buckets (`buckets`),
//! another trainer's logged advantages against advcalc's (`logged`), and the finding a
//! command reports ([`Warning`]).

pub(crate) mod buckets;
pub(crate) mod fragile;
pub mod logged;
pub(crate) mod sums;
pub(crate) mod tokens;

/// A finding that is likely a mistake: a stable snake_case code and a one-line explanation.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// Stable across releases (docs/inspect.md lists them), e.g. `masked_reward`.
    pub code: &'static str,
    /// What was found, why it matters and what to do; may be reworded.
    pub message: String,
}
