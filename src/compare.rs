//! `advcalc compare`: several estimators (or configs) on one dump, side by side.

use std::path::PathBuf;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::io::format::Format;
use crate::scores::Layout;

/// One column of the comparison: a label and the configuration it runs.
#[derive(Debug, Clone)]
pub struct Variant {
    pub label: String,
    pub config: Config,
}

/// How to compare, beyond the variants.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    pub input: PathBuf,
    pub input_format: Option<Format>,
    pub layout: Layout,
    pub threads: Option<usize>,
    pub progress: bool,
    pub allow_nonfinite: bool,
    /// A row is correct when its score is above this.
    pub correct_above: f64,
}

pub fn compare(_variants: &[Variant], _opts: &CompareOptions) -> Result<()> {
    Err(Error::usage("advcalc compare is not implemented yet"))
}
