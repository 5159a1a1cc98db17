//! IN in any format, as the Parquet file the passes read (an Arrow IPC input is spooled
//! into a temporary Parquet file first, since every pass reads the input again).

use std::path::Path;

use tempfile::NamedTempFile;

use crate::error::Result;
use crate::io::format::{Format, is_stdio};
use crate::io::ipc;
use crate::io::read::ParquetInput;

pub struct Input {
    pub parquet: ParquetInput,
    /// The temporary Parquet copy of an Arrow IPC input, removed on drop.
    _spool: Option<NamedTempFile>,
}

impl Input {
    /// Open IN (`-`: stdin), its format from `format` or the extension.
    pub fn open(path: &Path, format: Option<Format>) -> Result<Self> {
        let format = Format::of(path, format);
        let name = if is_stdio(path) {
            "<stdin>".to_string()
        } else {
            path.display().to_string()
        };
        let spool = match format {
            Format::Parquet => None,
            format => Some(ipc::spool_to_parquet(
                path,
                format,
                &name,
                &std::env::temp_dir(),
            )?),
        };
        let parquet = ParquetInput::open_named(spool.as_ref().map_or(path, |s| s.path()), &name)?;
        Ok(Input {
            parquet,
            _spool: spool,
        })
    }
}
