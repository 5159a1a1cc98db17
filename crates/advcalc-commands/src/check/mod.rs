//! `advcalc check LOG DUMPS`: a run's logged metrics, step by step, against the same metrics
//! recomputed from its dumps (docs/check.md). The work is the analysis layer's
//! (`analysis::log_check`), which `view --log` shares.

pub use crate::analysis::log_check::{
    CheckOptions, CheckReport, Compared, RTOL, check, likely_alternatives,
};
