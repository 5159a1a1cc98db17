//! `advcalc inspect`: the checklist an engineer runs on a dump before blaming the optimiser.

use std::path::PathBuf;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::io::format::Format;
use crate::scores::Layout;

/// How to inspect, beyond the algorithm configuration.
#[derive(Debug, Clone)]
pub struct InspectOptions {
    pub input: PathBuf,
    pub input_format: Option<Format>,
    pub layout: Layout,
    /// Worker threads; `None` means one per core.
    pub threads: Option<usize>,
    pub progress: bool,
    /// An estimator was asked for (`-e`, or a config naming one): check its advantages too.
    pub estimator_given: bool,
}

/// The findings, per step.
#[derive(Debug, Clone, Default)]
pub struct Report {}

impl Report {
    /// The report as JSON (the stable, documented form: docs/inspect.md).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// The report as aligned tables for a terminal.
    pub fn render(&self) -> String {
        String::new()
    }

    /// How many warnings the report raises.
    pub fn warnings(&self) -> usize {
        0
    }
}

pub fn inspect(_config: &Config, _opts: &InspectOptions) -> Result<Report> {
    Err(Error::usage("advcalc inspect is not implemented yet"))
}
