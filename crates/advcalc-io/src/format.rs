//! File formats: Parquet, Arrow IPC files (`.arrow`, `.feather`, `.ipc`), Arrow IPC streams
//! (`.arrows`, and `-` for stdin/stdout) and, as input only, verl's JSONL dumps (`.jsonl`,
//! or a directory of them) and other trainers' dumps (`io::trainers`), chosen by extension or
//! layout unless overridden.

use std::path::Path;

/// The name that means stdin (for IN) or stdout (for OUT).
pub const STDIO: &str = "-";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Parquet,
    /// Arrow IPC file format (random access, a footer).
    ArrowFile,
    /// Arrow IPC stream format (what flows through a pipe).
    ArrowStream,
    /// verl's text dumps (`rollout_data_dir`): one JSON object per row, one score per row.
    /// Input only (`io::jsonl`).
    Jsonl,
    /// Another trainer's rollout dump (`io::trainers`): a file, a run's directory or a glob.
    /// Input only.
    Trainer(crate::trainers::Trainer),
}

impl Format {
    /// The format of `path`: `explicit` if given, else `-` is a stream, else by extension
    /// (anything unknown is Parquet).
    pub fn of(path: &Path, explicit: Option<Format>) -> Format {
        if let Some(f) = explicit {
            return f;
        }
        if is_stdio(path) {
            return Format::ArrowStream;
        }
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("arrow" | "feather" | "ipc") => Format::ArrowFile,
            Some("arrows") => Format::ArrowStream,
            Some("jsonl") => Format::Jsonl,
            _ => Format::Parquet,
        }
    }
}

pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == STDIO
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_extension() {
        assert_eq!(Format::of(Path::new("a.parquet"), None), Format::Parquet);
        assert_eq!(Format::of(Path::new("a.Arrow"), None), Format::ArrowFile);
        assert_eq!(Format::of(Path::new("a.feather"), None), Format::ArrowFile);
        assert_eq!(Format::of(Path::new("a.arrows"), None), Format::ArrowStream);
        assert_eq!(Format::of(Path::new("-"), None), Format::ArrowStream);
        assert_eq!(
            Format::of(Path::new("-"), Some(Format::ArrowFile)),
            Format::ArrowFile
        );
        assert_eq!(Format::of(Path::new("dump"), None), Format::Parquet);
        assert_eq!(Format::of(Path::new("3.JSONL"), None), Format::Jsonl);
    }
}
