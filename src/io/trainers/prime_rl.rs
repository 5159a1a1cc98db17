//! prime-rl's `rollouts/step_N/train/effective/traces.jsonl` (reader not written yet).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::json_line;
use crate::io::trainers::{DumpRow, LineReader, LogProbColumns, Trainer};

/// The file name of the older layout (`rollouts/step_N/train_rollouts.jsonl`).
pub const OLD_FILE: &str = "train_rollouts.jsonl";

/// The dump's files at `path`, in reading order.
pub fn files(path: &Path, name: &str) -> Result<Vec<PathBuf>> {
    let _ = path;
    Err(Error::usage(format!(
        "{name}: the {} reader is not written yet",
        Trainer::PrimeRl.title()
    )))
}

#[derive(Default)]
pub struct Reader {}

impl LineReader for Reader {
    const LOG_PROBS: LogProbColumns = LogProbColumns {
        rollout: false,
        old: false,
    };

    fn file(&mut self, _path: &Path, _name: &str) -> Result<()> {
        Ok(())
    }

    fn row(&mut self, _fields: &[json_line::Field<'_>], at: &str) -> Result<DumpRow> {
        Err(Error::usage(format!("{at}: not written yet")))
    }
}
