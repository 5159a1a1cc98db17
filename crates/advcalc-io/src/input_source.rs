//! What IN is, decided once: the IN argument and `--input-format` resolved into one typed
//! source (a local file of a format, standard input, verl's JSONL dump, another trainer's
//! dump, a dataset, an object or a dataset in object storage) that the readers and the
//! commands consume. Every "is it a dataset? a dump? JSONL?" question is answered here, from
//! one look at the path, and nowhere else.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{Format, is_stdio};
use crate::trainers::{self, Trainer};

/// IN, resolved ([`InputSource::resolve`]).
#[derive(Debug, Clone, PartialEq)]
pub enum InputSource {
    /// `-`: Parquet or Arrow IPC (a stream unless `--input-format` says otherwise) on stdin.
    Stdin { format: Format },
    /// One local file: Parquet, or an Arrow IPC file or stream.
    File { path: PathBuf, format: Format },
    /// verl's JSONL dump: a `.jsonl` file, or a directory of them (`rollout_data_dir`).
    Jsonl { path: PathBuf },
    /// Another trainer's dump: one of its files, a run's directory or a glob of its files.
    TrainerDump { path: PathBuf, trainer: Trainer },
    /// A dataset: a directory, or a glob, of Parquet or Arrow IPC files; `format`:
    /// `--input-format`, which then applies to every file.
    Dataset {
        path: PathBuf,
        format: Option<Format>,
    },
    /// One object (`s3://bucket/key`, ...); `format`: `--input-format`.
    #[cfg(feature = "cloud")]
    Object {
        url: crate::object::url::ObjectUrl,
        format: Option<Format>,
    },
    /// A prefix or a glob in object storage, read as a dataset.
    #[cfg(feature = "cloud")]
    ObjectDataset {
        url: crate::object::list::DatasetUrl,
        format: Option<Format>,
    },
}

impl InputSource {
    /// `path` as one Parquet or Arrow IPC file, local or an object, without looking for a
    /// dataset, a glob or a trainer's dump in it: a file a runner already listed as one file of
    /// a dataset (`advcalc.ray`), whose object key may hold `*`, `?` or `[`.
    pub fn one_file(path: &Path, format: Option<Format>) -> Result<InputSource> {
        #[cfg(not(feature = "cloud"))]
        crate::location::refuse_object_url(path)?;
        #[cfg(feature = "cloud")]
        if let Some(url) = path
            .to_str()
            .map(crate::object::url::parse_object)
            .transpose()?
            .flatten()
        {
            return Ok(InputSource::Object { url, format });
        }
        Ok(InputSource::File {
            path: path.to_path_buf(),
            format: Format::of(path, format),
        })
    }

    /// What `path` names, with `format` (`--input-format`) when given. In this order: an
    /// object URL (a prefix or a glob is a dataset; without the `cloud` feature any URL is a
    /// usage error naming it); `-`; another trainer's dump (`format` names the trainer, or its
    /// layout tells it: `docs/trainers.md`); a directory (of `.jsonl` files: verl's dump;
    /// otherwise a dataset); a glob that is not an existing file (a dataset); a file, its
    /// format from `format`, else its extension.
    pub fn resolve(path: &Path, format: Option<Format>) -> Result<InputSource> {
        #[cfg(not(feature = "cloud"))]
        crate::location::refuse_object_url(path)?;
        #[cfg(feature = "cloud")]
        {
            if let Some(url) = crate::object::list::dataset_url_of(path)? {
                return Ok(InputSource::ObjectDataset { url, format });
            }
            if let Some(url) = crate::location::object_url(path)? {
                return Ok(InputSource::Object { url, format });
            }
        }
        if is_stdio(path) {
            return match Format::of(path, format) {
                Format::Jsonl => Err(Error::usage(
                    "JSONL is read from a file or a directory, not from stdin",
                )
                .with_hint("give the file (or verl's rollout_data_dir) as IN")),
                Format::Trainer(t) => Err(Error::usage(format!(
                    "{} dump is read from a file or a directory, not from stdin",
                    t.a_title()
                ))
                .with_hint("give the dump's file or the run's directory as IN")),
                format => Ok(InputSource::Stdin { format }),
            };
        }
        let path_buf = path.to_path_buf();
        let explicit = match format {
            Some(Format::Trainer(t)) => return Ok(Self::dump(path_buf, t)),
            Some(_) => true,
            None => false,
        };
        if !explicit && let Some(trainer) = trainers::detect(path, None)? {
            return Ok(Self::dump(path_buf, trainer));
        }
        if path.is_dir() {
            let jsonl = match format {
                Some(f) => f == Format::Jsonl,
                None => crate::jsonl::directory_has_jsonl(path, &path.display().to_string())?,
            };
            return Ok(if jsonl {
                InputSource::Jsonl { path: path_buf }
            } else {
                InputSource::Dataset {
                    path: path_buf,
                    format,
                }
            });
        }
        if !path.exists() && crate::dataset::is_glob(&path.to_string_lossy()) {
            return Ok(InputSource::Dataset {
                path: path_buf,
                format,
            });
        }
        Ok(match Format::of(path, format) {
            Format::Jsonl => InputSource::Jsonl { path: path_buf },
            Format::Trainer(t) => Self::dump(path_buf, t),
            format => InputSource::File {
                path: path_buf,
                format,
            },
        })
    }

    /// `trainer`'s dump at `path` (a file, a directory or a glob of its files).
    pub fn dump(path: PathBuf, trainer: Trainer) -> InputSource {
        InputSource::TrainerDump { path, trainer }
    }

    /// Whether IN is read as a dataset of files (or objects), each its own part.
    pub fn is_dataset(&self) -> bool {
        match self {
            InputSource::Dataset { .. } => true,
            #[cfg(feature = "cloud")]
            InputSource::ObjectDataset { .. } => true,
            _ => false,
        }
    }

    /// Whether IN is verl's JSONL dump (only `run` writes its output back as JSONL fields).
    pub fn is_jsonl(&self) -> bool {
        matches!(self, InputSource::Jsonl { .. })
    }

    /// The trainer whose dump IN is: for an object, told by its key's file name as a local
    /// file is by its own (the object is fetched only when it is opened).
    pub fn trainer(&self) -> Option<Trainer> {
        match self {
            InputSource::TrainerDump { trainer, .. } => Some(*trainer),
            #[cfg(feature = "cloud")]
            InputSource::Object { url, format } => match format {
                Some(Format::Trainer(t)) => Some(*t),
                Some(_) => None,
                None => {
                    let key: &str = url.key.as_ref();
                    trainers::by_file_name(key.rsplit('/').next().unwrap_or_default())
                }
            },
            _ => None,
        }
    }

    /// IN's name in messages: the path or URL as given, `<stdin>` for `-`.
    pub fn name(&self) -> String {
        match self {
            InputSource::Stdin { .. } => "<stdin>".to_string(),
            InputSource::File { path, .. }
            | InputSource::Jsonl { path }
            | InputSource::TrainerDump { path, .. }
            | InputSource::Dataset { path, .. } => path.display().to_string(),
            #[cfg(feature = "cloud")]
            InputSource::Object { url, .. } => url.url.clone(),
            #[cfg(feature = "cloud")]
            InputSource::ObjectDataset { url, .. } => url.url.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
    }

    fn resolve(path: &Path, format: Option<Format>) -> InputSource {
        InputSource::resolve(path, format).unwrap()
    }

    #[test]
    fn a_file_is_told_by_its_extension_unless_the_format_is_given() {
        let demo = fixtures().join("demo.parquet");
        assert_eq!(
            resolve(&demo, None),
            InputSource::File {
                path: demo.clone(),
                format: Format::Parquet
            }
        );
        let arrow = Path::new("missing.arrow");
        assert_eq!(
            resolve(arrow, None),
            InputSource::File {
                path: arrow.into(),
                format: Format::ArrowFile
            }
        );
        assert_eq!(
            resolve(arrow, Some(Format::Parquet)),
            InputSource::File {
                path: arrow.into(),
                format: Format::Parquet
            }
        );
        assert!(resolve(Path::new("3.jsonl"), None).is_jsonl());
    }

    #[test]
    fn stdin_is_a_stream_and_never_a_dump() {
        assert_eq!(
            resolve(Path::new("-"), None),
            InputSource::Stdin {
                format: Format::ArrowStream
            }
        );
        for format in [Format::Jsonl, Format::Trainer(Trainer::Trl)] {
            let e = InputSource::resolve(Path::new("-"), Some(format)).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::Usage);
            assert!(format!("{e}").contains("not from stdin"), "{e}");
        }
    }

    #[test]
    fn directories_are_datasets_jsonl_dumps_or_trainer_dumps() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            fixtures().join("demo.parquet"),
            dir.path().join("a.parquet"),
        )
        .unwrap();
        let source = resolve(dir.path(), None);
        assert!(
            source.is_dataset() && source.trainer().is_none(),
            "{source:?}"
        );
        // the same directory named JSONL by --input-format is read as verl's dump
        assert!(resolve(dir.path(), Some(Format::Jsonl)).is_jsonl());
        std::fs::write(dir.path().join("1.jsonl"), "").unwrap();
        assert!(resolve(dir.path(), None).is_jsonl());

        let trl = fixtures().join("trainers/dumps/trl/run1");
        let source = resolve(&trl, None);
        assert_eq!(source.trainer(), Some(Trainer::Trl), "{source:?}");
        assert!(!source.is_dataset());
        let forced = resolve(dir.path(), Some(Format::Trainer(Trainer::NemoRl)));
        assert_eq!(forced.trainer(), Some(Trainer::NemoRl));
    }

    #[test]
    fn a_glob_that_is_not_a_file_is_a_dataset() {
        let glob = fixtures().join("no-such-dir/*.parquet");
        assert!(resolve(&glob, None).is_dataset());
    }
}
