//! IN in any format, as the Parquet file the passes read (an Arrow IPC input, a verl JSONL
//! dump or another trainer's dump is spooled into a temporary Parquet file first, since every
//! pass reads the input again).

use std::path::Path;

use tempfile::NamedTempFile;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::input_source::InputSource;
use crate::ipc;
use crate::jsonl::{self, JsonlInput};
use crate::read::ParquetInput;
use crate::trainers::{self, DumpOptions, TrainerInput};

pub struct Input {
    pub parquet: ParquetInput,
    /// A verl JSONL dump (sequence-level data): its files and fields, which `run` writes
    /// back out with the advantages (`io::sequence_output`).
    pub jsonl: Option<JsonlInput>,
    /// Another trainer's dump: which, its files, and what its reader assumed.
    pub trainer: Option<TrainerInput>,
    /// The temporary Parquet copy of an Arrow IPC or JSONL input, and the local copy of an
    /// object that is not Parquet, removed on drop.
    _spool: Vec<Spool>,
}

/// What an input keeps on local disk while it is read.
enum Spool {
    File(#[allow(dead_code)] NamedTempFile),
    /// A directory holding an object's local copy under the object's own file name (trainer
    /// dumps are told, and their steps read, by their names).
    #[cfg(feature = "cloud")]
    Dir(#[allow(dead_code)] tempfile::TempDir),
}

impl Input {
    /// Open IN, one file as `source` names it (`InputSource::resolve`): read in place when it
    /// is Parquet, else spooled into a temporary Parquet file. `allow_nonfinite` lets a JSONL
    /// dump's NaN and ±inf scores through (`--allow-nonfinite`); otherwise the reader refuses
    /// them, naming the line. Another trainer's dump is read with `dump` (what the dump does
    /// not record). A dataset is not one file: [`open`] opens it.
    pub fn open(source: &InputSource, allow_nonfinite: bool, dump: &DumpOptions) -> Result<Self> {
        let name = source.name();
        let (path, format) = match source {
            #[cfg(feature = "cloud")]
            InputSource::Object { url, format } => {
                return Self::open_object(url, *format, allow_nonfinite, dump);
            }
            InputSource::Dataset { .. } => {
                return Err(Error::usage(format!(
                    "{name}: a dataset (a directory or a glob), not one file"
                ))
                .with_hint("give one file of it"));
            }
            #[cfg(feature = "cloud")]
            InputSource::ObjectDataset { .. } => {
                return Err(Error::usage(format!(
                    "{name}: a dataset (a prefix or a glob), not one object"
                ))
                .with_hint("give one object of it"));
            }
            InputSource::Stdin { format } => (Path::new(crate::format::STDIO), *format),
            InputSource::File { path, format } => (path.as_path(), *format),
            InputSource::Jsonl { path } => (path.as_path(), Format::Jsonl),
            InputSource::TrainerDump { path, trainer } => {
                (path.as_path(), Format::Trainer(*trainer))
            }
        };
        Self::open_as(path, name, format, allow_nonfinite, dump)
    }

    /// IN an object (`s3://…`), opened by one HEAD; messages name the URL
    /// ([`Input::open_source`]).
    #[cfg(feature = "cloud")]
    fn open_object(
        url: &crate::object::url::ObjectUrl,
        format: Option<Format>,
        allow_nonfinite: bool,
        dump: &DumpOptions,
    ) -> Result<Self> {
        let source = crate::object::source::ObjectSource::open(url)?;
        Self::open_source(source, format, allow_nonfinite, dump)
    }

    /// An object opened for reading (its HEAD made) as IN; messages name it as `source`
    /// does. A Parquet object is read in place (`ParquetInput::open_object`: the footer by
    /// one GET, the column chunks by ranged GETs, at most one each, all pinned to the ETag
    /// the HEAD gave). Any other format (Arrow IPC, JSONL, a trainer's dump) is fetched whole
    /// (one GET pinned to that ETag) into a temporary directory under the object's own file
    /// name, and read as that local file.
    #[cfg(feature = "cloud")]
    pub fn open_source(
        source: crate::object::source::ObjectSource,
        format: Option<Format>,
        allow_nonfinite: bool,
        dump: &DumpOptions,
    ) -> Result<Self> {
        let name = source.name().to_string();
        let key: &str = source.key().as_ref();
        let file_name = match key.rsplit('/').next() {
            Some(f) if !f.is_empty() => f.to_string(),
            _ => "object".to_string(),
        };
        // a trainer's dump file is told by its name (TRL's completions_NNNNN.parquet is
        // Parquet, but not one the passes read as it is): fetched and read as a local one
        let local_format = match format {
            Some(f) => f,
            None => trainers::by_file_name(&file_name)
                .map_or_else(|| Format::of(Path::new(&file_name), None), Format::Trainer),
        };
        if local_format == Format::Parquet {
            return Ok(Input {
                parquet: ParquetInput::open_object(source)?,
                jsonl: None,
                trainer: None,
                _spool: Vec::new(),
            });
        }
        let dir = crate::atomic::temporary_dir(&name)?;
        let local = dir.path().join(&file_name);
        let io = |e: std::io::Error| {
            Error::data(format!("{name}: cannot write the local copy")).with_source(e)
        };
        let file = std::fs::File::create(&local).map_err(io)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        source.download_to(&mut out)?;
        std::io::Write::flush(&mut out).map_err(io)?;
        drop(out);
        let mut input = Self::open_as(&local, name, local_format, allow_nonfinite, dump)?;
        input._spool.push(Spool::Dir(dir));
        Ok(input)
    }

    /// [`Input::open`] on the local file or directory `path` of the resolved `format`,
    /// naming it `name` in messages.
    fn open_as(
        path: &Path,
        name: String,
        format: Format,
        allow_nonfinite: bool,
        dump: &DumpOptions,
    ) -> Result<Self> {
        let (spool, jsonl) = match format {
            Format::Parquet => (None, None),
            Format::Trainer(t) => {
                let (spool, trainer) =
                    trainers::spool(t, path, &name, dump, allow_nonfinite, &std::env::temp_dir())?;
                let parquet = ParquetInput::open_named(spool.path(), &name)?;
                return Ok(Input {
                    parquet,
                    jsonl: None,
                    trainer: Some(trainer),
                    _spool: vec![Spool::File(spool)],
                });
            }
            Format::Jsonl => {
                let (spool, jsonl) =
                    jsonl::spool(path, &name, allow_nonfinite, &std::env::temp_dir())?;
                (Some(spool), Some(jsonl))
            }
            format => (
                Some(ipc::spool_to_parquet(
                    path,
                    format,
                    &name,
                    &std::env::temp_dir(),
                )?),
                None,
            ),
        };
        let parquet = ParquetInput::open_named(spool.as_ref().map_or(path, |s| s.path()), &name)?;
        Ok(Input {
            parquet,
            jsonl,
            trainer: None,
            _spool: spool.into_iter().map(Spool::File).collect(),
        })
    }
}

/// IN as the passes read it: one file (kept open with its spool and, for a JSONL dump, its
/// fields) as a dataset of one part, or a dataset of several files (`io::dataset`).
pub struct Opened {
    pub dataset: crate::dataset::Dataset,
    /// The file, when IN is one file (not a directory of Parquet/Arrow files or a glob).
    pub file: Option<Input>,
}

impl Input {
    /// Whether the input's NaN scores are its trainer's own, which `config`'s convention
    /// handles (`TrainerInput::own_nan_scores`): then they need no `--allow-nonfinite`.
    pub fn own_nan_scores(&self, config: &crate::config::Config) -> bool {
        self.trainer
            .as_ref()
            .is_some_and(|t| t.own_nan_scores(config.algorithm.ext.convention))
    }

    /// `e`, with the user's file, line and field in front when it is about a row of a
    /// trainer's dump (`TrainerInput::locate_error`): the passes name the spool's rows.
    pub fn locate_error(&self, e: crate::error::Error) -> crate::error::Error {
        match &self.trainer {
            Some(dump) => dump.locate_error(e),
            None => e,
        }
    }
}

impl Opened {
    /// [`Input::own_nan_scores`] under every one of `configs` (compare's and report's variants).
    pub fn own_nan_scores<'a>(
        &self,
        mut configs: impl Iterator<Item = &'a crate::config::Config>,
    ) -> bool {
        self.file
            .as_ref()
            .is_some_and(|f| configs.all(|c| f.own_nan_scores(c)))
    }

    /// [`Input::locate_error`] for a file IN; a dataset's errors name their files already.
    pub fn locate_error(&self, e: crate::error::Error) -> crate::error::Error {
        match &self.file {
            Some(f) => f.locate_error(e),
            None => e,
        }
    }
}

/// Open IN as `source` names it: a dataset (a directory or a glob, a prefix or a glob in
/// object storage) part by part (`Dataset::open`, `Dataset::open_objects`), anything else as
/// one file ([`Input::open`]).
pub fn open(source: &InputSource, allow_nonfinite: bool, dump: &DumpOptions) -> Result<Opened> {
    use crate::dataset::Dataset;
    match source {
        #[cfg(feature = "cloud")]
        InputSource::ObjectDataset { url, format } => Ok(Opened {
            dataset: Dataset::open_objects(url, *format)?,
            file: None,
        }),
        InputSource::Dataset { path, format } => Ok(Opened {
            dataset: Dataset::open(path, *format)?,
            file: None,
        }),
        _ => {
            let file = Input::open(source, allow_nonfinite, dump)?;
            Ok(Opened {
                dataset: Dataset::single(&file.parquet),
                file: Some(file),
            })
        }
    }
}
