//! A dataset: IN as a directory or a glob of Parquet (or Arrow IPC) files, read as one input
//! (`docs/datasets.md`). The files are found, ordered (by step, then by relative path), given
//! their step (a `step` column, else `step=N` in the path), checked to share one schema, and
//! cut into units — (file, row group) pairs in dataset order — that the passes read exactly
//! as they read the row groups of one file. A single file is a dataset of one part. With the
//! `cloud` feature, a prefix or a glob in object storage is a dataset of objects
//! (`Dataset::open_objects`, listed by `io::object::list`).

use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use tempfile::NamedTempFile;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::ipc;
use crate::read::ParquetInput;
use crate::walk::Visited;

/// Extensions of the files a directory or glob contributes (without `--input-format`).
pub const DATA_EXTENSIONS: &[&str] = &["parquet", "arrow", "feather", "ipc", "arrows"];

/// Whether a file (or object key) named `name` has one of the [`DATA_EXTENSIONS`], in any
/// case.
pub fn has_data_extension(name: &str) -> bool {
    name.rsplit('/')
        .next()
        .and_then(|f| f.rsplit_once('.'))
        .is_some_and(|(_, e)| DATA_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// One file of a dataset.
pub struct Part {
    /// Its path relative to the dataset's base directory: where its output goes under OUT.
    pub rel: PathBuf,
    /// Its path as found (the base directory joined with `rel`).
    pub path: PathBuf,
    /// Its name in messages (the path as found).
    pub name: String,
    /// `step=N` in its path (a hive directory `step=N/` or the file name), if any.
    pub path_step: Option<i64>,
    pub format: Format,
    /// The Parquet file the passes read (an Arrow IPC file's spool).
    pub input: ParquetInput,
    /// Dataset index of its first row, and its rows.
    pub first_row: usize,
    pub rows: usize,
    /// What the file looked like when it was opened, to notice a change before pass 2.
    pub identity: Option<FileIdentity>,
    /// An object of a dataset in object storage: where it is, and the ETag it was read at.
    #[cfg(feature = "cloud")]
    pub object: Option<ObjectPart>,
    /// The temporary Parquet copy of an Arrow IPC file, removed on drop.
    _spool: Option<NamedTempFile>,
}

/// An object of a dataset in object storage (`Dataset::open_objects`).
#[cfg(feature = "cloud")]
pub struct ObjectPart {
    pub store: crate::object::store::Store,
    pub key: object_store::path::Path,
    pub size: u64,
    /// Its ETag when listed, which the bytes read had (opaque: compared as a string).
    pub e_tag: Option<String>,
    /// Its version, where the bucket is versioned.
    pub version: Option<String>,
    /// The object as opened (its local copy), kept for the passes.
    _input: Box<crate::input::Input>,
}

/// Size, modification time and inode of a file, as opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileIdentity {
    pub len: u64,
    pub modified: Option<SystemTime>,
    pub ino: u64,
}

impl FileIdentity {
    pub fn of(path: &Path) -> std::io::Result<FileIdentity> {
        let meta = std::fs::metadata(path)?;
        #[cfg(unix)]
        let ino = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let ino = 0;
        Ok(FileIdentity {
            len: meta.len(),
            modified: meta.modified().ok(),
            ino,
        })
    }
}

impl Part {
    /// Refuse to go on when the file vanished or changed since it was opened (pass 1 read
    /// it): pass 2 would mix two versions of it.
    pub fn check_unchanged(&self) -> Result<()> {
        #[cfg(feature = "cloud")]
        if let Some(object) = &self.object {
            return object.check_unchanged(&self.name);
        }
        let Some(opened) = &self.identity else {
            return Ok(());
        };
        match FileIdentity::of(&self.path) {
            Err(e) => Err(Error::data(format!(
                "{}: vanished between the passes (pass 1 read it)",
                self.name
            ))
            .with_source(e)
            .with_hint("keep the dataset's files in place while advcalc runs, then run again")),
            Ok(now) if now != *opened => {
                let how = if now.len < opened.len {
                    format!("truncated from {} to {} bytes", opened.len, now.len)
                } else if now.ino != opened.ino {
                    "replaced by another file".to_string()
                } else {
                    "modified".to_string()
                };
                Err(Error::data(format!(
                    "{}: changed between the passes ({how} after pass 1 read it)",
                    self.name
                ))
                .with_hint("keep the dataset's files in place while advcalc runs, then run again"))
            }
            Ok(_) => Ok(()),
        }
    }
}

#[cfg(feature = "cloud")]
impl ObjectPart {
    /// [`Part::check_unchanged`] for an object: one HEAD, its ETag against the one read.
    fn check_unchanged(&self, name: &str) -> Result<()> {
        use object_store::ObjectStoreExt;
        let hint = "keep the dataset's objects in place while advcalc runs, then run again";
        let now = crate::object::runtime::block_on(self.store.head(&self.key));
        match now {
            Err(object_store::Error::NotFound { .. }) => Err(Error::data(format!(
                "{name}: vanished between the passes (pass 1 read it)"
            ))
            .with_hint(hint)),
            Err(e) => Err(crate::object::store_error(
                name,
                "cannot check it before pass 2",
                e,
            )),
            Ok(meta) if self.e_tag.is_some() && meta.e_tag != self.e_tag => {
                Err(Error::data(format!(
                    "{name}: changed between the passes (its ETag is {}, pass 1 read {})",
                    meta.e_tag.as_deref().unwrap_or("missing"),
                    self.e_tag.as_deref().unwrap_or_default()
                ))
                .with_hint(hint))
            }
            Ok(_) => Ok(()),
        }
    }
}

/// A (file, row group) pair: what the passes read in parallel and merge in order.
#[derive(Debug, Clone, Copy)]
pub struct Unit {
    pub part: usize,
    pub row_group: usize,
    /// Dataset index of the row group's first row.
    pub start: usize,
}

/// IN as the passes see it: one or more Parquet files read as one input.
pub struct Dataset {
    /// IN as given.
    pub name: String,
    /// Whether IN is a directory or glob (OUT is then a directory mirroring it).
    pub is_dataset: bool,
    /// The directory the parts' relative paths start from (a dataset's only).
    pub base: Option<PathBuf>,
    pub parts: Vec<Part>,
    /// What the user should know about how IN was read (paths a walk skipped).
    pub notes: Vec<String>,
    units: Vec<Unit>,
    rows: usize,
}

/// Whether `s` holds glob characters (a path that is not an existing file is then a dataset:
/// `InputSource::resolve`).
pub fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

impl Dataset {
    /// One file as a dataset of one part (`run`, `inspect` and `compare` on a file).
    pub fn single(input: &ParquetInput) -> Dataset {
        let starts = input.row_group_starts();
        let rows = starts[starts.len() - 1];
        let part = Part {
            rel: PathBuf::from(input.name()),
            path: PathBuf::from(input.name()),
            name: input.name().to_string(),
            path_step: None,
            format: Format::Parquet,
            input: input.clone(),
            first_row: 0,
            rows,
            identity: None,
            #[cfg(feature = "cloud")]
            object: None,
            _spool: None,
        };
        let mut d = Dataset {
            name: input.name().to_string(),
            is_dataset: false,
            base: None,
            parts: vec![part],
            notes: Vec::new(),
            units: Vec::new(),
            rows: 0,
        };
        d.index();
        d
    }

    /// Open the dataset IN names (a directory or a glob), in dataset order, every file's
    /// footer read and its schema checked against the first file's.
    pub fn open(path: &Path, format: Option<Format>) -> Result<Dataset> {
        let name = path.display().to_string();
        let mut visited = Visited::default();
        let (base, found) = if path.is_dir() {
            (
                path.to_path_buf(),
                walk(path, &name, format, &|_| true, &mut visited)?,
            )
        } else {
            let pattern = path.to_string_lossy().into_owned();
            let (base, rest) = split_glob(&pattern);
            if !base.is_dir() {
                return Err(Error::data(format!(
                    "{name}: no such file, and the glob's directory {} does not exist",
                    base.display()
                )));
            }
            let rest: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
            let files = walk(
                &base,
                &name,
                format,
                &|rel| glob_matches(&rest, rel),
                &mut visited,
            )?;
            (base, files)
        };
        if found.is_empty() {
            // verl's JSONL files one directory down: said where they are
            if path.is_dir()
                && let Some(e) = crate::jsonl::nested_jsonl(path, &name)?
            {
                return Err(e);
            }
            return Err(Error::data(if path.is_dir() {
                format!("{name}: is a directory with no .jsonl, Parquet or Arrow files in it")
            } else {
                format!("{name}: the glob matches no Parquet or Arrow file")
            })
            .with_hint(
                "give a directory or a quoted glob of .parquet/.arrow files, one file per step",
            ));
        }
        let mut keyed = Vec::new();
        for rel in found {
            let step = path_step(&rel)
                .map_err(|e| Error::data(format!("{}: {e}", base.join(&rel).display())))?;
            keyed.push((step, rel));
        }
        sort_by_step(&mut keyed);
        let mut d = Self::from_files(name, base, keyed, format)?;
        d.notes = visited.notes;
        Ok(d)
    }

    /// Open the dataset in object storage `url` names (a prefix or a glob under one): one
    /// listing (`io::object::list`), then each object opened as IN of one object is
    /// (`Input::open`), in dataset order, with [`Dataset::open`]'s checks. Each part records
    /// the ETag (and version) it was read at, which the outputs' provenance keeps.
    #[cfg(feature = "cloud")]
    pub fn open_objects(
        url: &crate::object::list::DatasetUrl,
        format: Option<Format>,
    ) -> Result<Dataset> {
        use crate::object::{list, store::store_for};
        let name = url.url.clone();
        refuse_object_format(&name, format)?;
        let store = store_for(&url.base)?;
        let listed = list::list(&store, url, format.is_some())?;
        if listed.is_empty() {
            return Err(Error::data(match url.pattern {
                None => format!("{name}: is a prefix with no Parquet or Arrow objects under it"),
                Some(_) => format!("{name}: the glob matches no Parquet or Arrow object"),
            })
            .with_hint(
                "give a prefix ending in / or a quoted glob of .parquet/.arrow objects, one object per step",
            ));
        }
        let mut keyed = Self::object_steps(url, listed)?;
        // as a local dataset's: relative paths compared by component
        keyed.sort_by(|(sa, a), (sb, b)| {
            step_order(sa, sb).then_with(|| Path::new(&a.rel).cmp(Path::new(&b.rel)))
        });
        Self::open_listed(name, &store, url, keyed, format)
    }

    /// The dataset of the objects `rels` under the prefix `base` (a [`DatasetUrl`] without
    /// a glob), in the order given, opened as [`Dataset::open_objects`] opens a listed
    /// dataset's, with its checks, but with no listing: a runner's share of a dataset in
    /// object storage (one step's objects: `advcalc.ray`). `name` names the dataset. Each
    /// part records the ETag (and version) its first request saw.
    ///
    /// [`DatasetUrl`]: crate::object::list::DatasetUrl
    #[cfg(feature = "cloud")]
    pub fn from_objects(
        name: String,
        base: &crate::object::list::DatasetUrl,
        rels: Vec<String>,
        format: Option<Format>,
    ) -> Result<Dataset> {
        use crate::object::{list::Listed, store::store_for};
        if base.pattern.is_some() {
            return Err(Error::usage(format!(
                "{}: the base of a dataset's objects is a prefix, not a glob",
                base.url
            )));
        }
        refuse_object_format(&name, format)?;
        if rels.is_empty() {
            return Err(Error::usage(format!("{name}: no objects given")));
        }
        let store = store_for(&base.base)?;
        let prefix = match base.base.key.as_ref() {
            "" => String::new(),
            k => format!("{k}/"),
        };
        let listed = rels
            .into_iter()
            .map(|rel| {
                let key =
                    object_store::path::Path::parse(format!("{prefix}{rel}")).map_err(|e| {
                        Error::usage(format!("{}{rel}: not an object key", base.base_url))
                            .with_source(e)
                    })?;
                Ok(Listed {
                    key,
                    rel,
                    size: 0,
                    e_tag: None,
                    version: None,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let keyed = Self::object_steps(base, listed)?;
        Self::open_listed(name, &store, base, keyed, format)
    }

    /// Each object with the step of its relative key (`step=N`).
    #[cfg(feature = "cloud")]
    fn object_steps(
        url: &crate::object::list::DatasetUrl,
        listed: Vec<crate::object::list::Listed>,
    ) -> Result<Vec<(Option<i64>, crate::object::list::Listed)>> {
        let mut keyed = Vec::with_capacity(listed.len());
        for l in listed {
            let rel = PathBuf::from(&l.rel);
            let step = path_step(&rel)
                .map_err(|e| Error::data(format!("{}{}: {e}", url.base_url, l.rel)))?;
            keyed.push((step, l));
        }
        Ok(keyed)
    }

    /// The objects `keyed` under `url`'s prefix, in that order, each opened as IN of one
    /// object is (`Input::open_source`), with [`Dataset::open`]'s checks.
    #[cfg(feature = "cloud")]
    fn open_listed(
        name: String,
        store: &crate::object::store::Store,
        url: &crate::object::list::DatasetUrl,
        keyed: Vec<(Option<i64>, crate::object::list::Listed)>,
        format: Option<Format>,
    ) -> Result<Dataset> {
        use crate::input::Input;
        use crate::object::source::ObjectSource;
        use rayon::prelude::*;
        // fetched in parallel: each is a round trip or more to the store
        let parts = keyed
            .into_par_iter()
            .map(|(path_step, l)| {
                crate::interrupt::check()?;
                let part_name = format!("{}{}", url.base_url, l.rel);
                let file_format = format.unwrap_or_else(|| Format::of(Path::new(&l.rel), None));
                // the listed key itself (a URL rebuilt from it would be decoded again)
                let source =
                    ObjectSource::open_in(store.clone(), l.key.clone(), &part_name)?;
                // what the listing said is what is read: the object has that ETag still (every
                // read is pinned to the ETag this HEAD gave)
                let (size, e_tag) = (source.size(), source.etag().map(str::to_string));
                let version = source.version().map(str::to_string);
                if l.e_tag.is_some() && e_tag != l.e_tag {
                    return Err(Error::data(format!(
                        "{part_name}: changed while the dataset was opened (its ETag was {} when listed, {} now)",
                        l.e_tag.as_deref().unwrap_or_default(),
                        e_tag.as_deref().unwrap_or("missing")
                    ))
                    .with_hint("keep the dataset's objects in place while advcalc runs, then run again"));
                }
                let input = Input::open_source(
                    source,
                    Some(file_format),
                    false,
                    &crate::trainers::DumpOptions::default(),
                )?;
                Ok(Part {
                    rel: PathBuf::from(&l.rel),
                    path: PathBuf::from(&part_name),
                    name: part_name,
                    path_step,
                    format: file_format,
                    input: input.parquet.clone(),
                    first_row: 0,
                    rows: 0,
                    identity: None,
                    object: Some(ObjectPart {
                        store: store.clone(),
                        key: l.key,
                        size,
                        e_tag: e_tag.or(l.e_tag),
                        version: version.or(l.version),
                        _input: Box::new(input),
                    }),
                    _spool: None,
                })
            })
            .collect::<Result<Vec<Part>>>()?;
        check_schemas(&parts)?;
        check_steps(&parts)?;
        let mut d = Dataset {
            name,
            is_dataset: true,
            base: None,
            parts,
            notes: Vec::new(),
            units: Vec::new(),
            rows: 0,
        };
        d.index();
        Ok(d)
    }

    /// The dataset of the files `rel` under `base`, in the order given (a runner's share of
    /// a dataset, e.g. one step's files: `advcalc.ray`), each with the step of its path, with
    /// [`Dataset::open`]'s checks (one schema, steps in paths). `name` names the dataset.
    pub fn from_files(
        name: String,
        base: PathBuf,
        keyed: Vec<(Option<i64>, PathBuf)>,
        format: Option<Format>,
    ) -> Result<Dataset> {
        let mut parts = Vec::with_capacity(keyed.len());
        for (path_step, rel) in keyed {
            crate::interrupt::check()?;
            let full = base.join(&rel);
            let part_name = full.display().to_string();
            let file_format = format.unwrap_or_else(|| Format::of(&full, None));
            let identity = FileIdentity::of(&full).ok();
            let spool = match file_format {
                Format::Parquet => None,
                Format::Jsonl => {
                    return Err(Error::usage(format!(
                        "{name}: --input-format jsonl reads a directory of .jsonl files, not a dataset"
                    )));
                }
                Format::Trainer(t) => {
                    return Err(Error::usage(format!(
                        "{name}: --input-format {} reads one run's dump, not a dataset",
                        t.name()
                    )));
                }
                f => Some(ipc::spool_to_parquet(
                    &full,
                    f,
                    &part_name,
                    &std::env::temp_dir(),
                )?),
            };
            let input =
                ParquetInput::open_named(spool.as_ref().map_or(&full, |s| s.path()), &part_name)?;
            parts.push(Part {
                rel,
                path: full,
                name: part_name,
                path_step,
                format: file_format,
                input,
                first_row: 0,
                rows: 0,
                identity,
                #[cfg(feature = "cloud")]
                object: None,
                _spool: spool,
            });
        }
        check_schemas(&parts)?;
        check_steps(&parts)?;
        let mut d = Dataset {
            name,
            is_dataset: true,
            base: Some(base),
            parts,
            notes: Vec::new(),
            units: Vec::new(),
            rows: 0,
        };
        d.index();
        Ok(d)
    }

    fn index(&mut self) {
        let mut at = 0;
        self.units.clear();
        for (p, part) in self.parts.iter_mut().enumerate() {
            part.first_row = at;
            let starts = part.input.row_group_starts();
            for (rg, start) in starts[..starts.len() - 1].iter().enumerate() {
                self.units.push(Unit {
                    part: p,
                    row_group: rg,
                    start: at + start,
                });
            }
            part.rows = starts[starts.len() - 1];
            at += part.rows;
        }
        self.rows = at;
    }

    /// The first file's schema, which every file shares.
    pub fn schema(&self) -> SchemaRef {
        self.parts[0].input.schema()
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn units(&self) -> &[Unit] {
        &self.units
    }

    pub fn part(&self, unit: usize) -> &Part {
        &self.parts[self.units[unit].part]
    }

    /// Decode one unit's row group with `columns` (all when `None`).
    pub fn read_unit(&self, unit: usize, columns: Option<&[usize]>) -> Result<RecordBatch> {
        let u = self.units[unit];
        self.parts[u.part]
            .input
            .read_row_group(u.row_group, columns)
    }

    /// The steps in the files' paths, when the files have no `step` column.
    pub fn has_path_steps(&self) -> bool {
        self.parts.iter().any(|p| p.path_step.is_some())
    }
}

/// Files with a step first, by step; then the others (each set by relative path after).
fn step_order(a: &Option<i64>, b: &Option<i64>) -> std::cmp::Ordering {
    let key = |s: &Option<i64>| s.map_or((1, 0), |s| (0, s));
    key(a).cmp(&key(b))
}

fn sort_by_step(keyed: &mut [(Option<i64>, PathBuf)]) {
    keyed.sort_by(|(sa, ra), (sb, rb)| step_order(sa, sb).then_with(|| ra.cmp(rb)));
}

/// `--input-format` values that read something other than a dataset of objects.
#[cfg(feature = "cloud")]
fn refuse_object_format(name: &str, format: Option<Format>) -> Result<()> {
    match format {
        Some(Format::Jsonl) => {
            return Err(Error::usage(format!(
                "{name}: --input-format jsonl reads a directory of .jsonl files, not a dataset"
            )));
        }
        Some(Format::Trainer(t)) => {
            return Err(Error::usage(format!(
                "{name}: --input-format {} reads one run's dump, not a dataset",
                t.name()
            )));
        }
        _ => {}
    }
    Ok(())
}

/// The part of a glob before its first component with a glob character, and the rest.
pub fn split_glob(pattern: &str) -> (PathBuf, String) {
    let mut base = PathBuf::new();
    let mut rest = Vec::new();
    let mut in_rest = false;
    for comp in pattern.split('/') {
        if in_rest || is_glob(comp) {
            in_rest = true;
            rest.push(comp);
        } else if comp.is_empty() && base.as_os_str().is_empty() {
            base.push("/");
        } else {
            base.push(comp);
        }
    }
    if base.as_os_str().is_empty() {
        base.push(".");
    }
    (base, rest.join("/"))
}

/// Every data file under `dir` (recursively; hidden names and names starting with `_`, such
/// as `_SUCCESS` or a writer's temporary files, skipped) whose relative path `keep` accepts.
/// Symlinks are followed, each real directory and file read once (`visited` notes the rest);
/// entries are taken in name order, so which of two paths to one file is kept never depends
/// on the file system's listing order.
fn walk(
    dir: &Path,
    name: &str,
    format: Option<Format>,
    keep: &dyn Fn(&Path) -> bool,
    visited: &mut Visited,
) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    visited.first(dir);
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let entries = std::fs::read_dir(dir.join(&rel)).map_err(|e| {
            Error::data(format!(
                "{name}: cannot read the directory {}",
                dir.join(&rel).display()
            ))
            .with_source(e)
        })?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| {
                Error::data(format!("{name}: cannot read the directory")).with_source(e)
            })?;
            names.push(entry.file_name());
        }
        names.sort();
        let mut dirs = Vec::new();
        for file_name in names {
            let s = file_name.to_string_lossy();
            if s.starts_with('.') || s.starts_with('_') {
                continue;
            }
            let child = rel.join(&file_name);
            let full = dir.join(&child);
            if full.is_dir() {
                if visited.first(&full) {
                    dirs.push(child);
                }
            } else if full.is_file() {
                let data = format.is_some() || has_data_extension(&s);
                if data && keep(&child) && visited.first(&full) {
                    out.push(child);
                }
            }
        }
        // depth first, in name order
        stack.extend(dirs.into_iter().rev());
    }
    Ok(out)
}

/// Every Parquet or Arrow file under `dir`, relative to it, in name order (each real file
/// once): what a dataset's OUT directory holds.
pub fn data_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let name = dir.display().to_string();
    let mut files = walk(dir, &name, None, &|_| true, &mut Visited::default())?;
    files.sort();
    Ok(files)
}

/// The real (canonical) directories a walk of `dir` enters, `dir` first: where a dataset's
/// files can come from once its symlinks are followed.
pub fn real_directories(dir: &Path) -> Vec<PathBuf> {
    let mut visited = Visited::default();
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if !visited.first(&d) {
            continue;
        }
        if let Ok(c) = d.canonicalize() {
            out.push(c);
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let hidden = entry.file_name().to_string_lossy().starts_with(['.', '_']);
            if !hidden && entry.path().is_dir() {
                stack.push(entry.path());
            }
        }
    }
    out
}

/// Whether `rel`'s components match the glob's (`*`, `?`, `[a-z]` within a component,
/// `**` for any number of components).
pub fn glob_matches(pattern: &[&str], rel: &Path) -> bool {
    let comps: Vec<String> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    fn go(p: &[&str], c: &[String]) -> bool {
        match p.split_first() {
            None => c.is_empty(),
            Some((&"**", rest)) => (0..=c.len()).any(|k| go(rest, &c[k..])),
            Some((first, rest)) => {
                !c.is_empty()
                    && component_matches(first.as_bytes(), c[0].as_bytes())
                    && go(rest, &c[1..])
            }
        }
    }
    go(pattern, &comps)
}

fn component_matches(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|k| component_matches(rest, &s[k..])),
        Some((b'?', rest)) => !s.is_empty() && component_matches(rest, &s[1..]),
        Some((b'[', rest)) => {
            let Some(close) = rest.iter().skip(1).position(|&b| b == b']').map(|i| i + 1) else {
                return !s.is_empty() && s[0] == b'[' && component_matches(rest, &s[1..]);
            };
            let (set, after) = (&rest[..close], &rest[close + 1..]);
            let (negate, set) = match set.first() {
                Some(b'!' | b'^') => (true, &set[1..]),
                _ => (false, set),
            };
            let Some(&c) = s.first() else { return false };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    hit |= set[i] <= c && c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == c;
                    i += 1;
                }
            }
            hit != negate && component_matches(after, &s[1..])
        }
        Some((&b, rest)) => s.first() == Some(&b) && component_matches(rest, &s[1..]),
    }
}

/// The step `rel` names: a directory `step=N` (hive partitioning) or `step=N` in the file
/// name (the verl hook's `step=N.parquet`), delimited by anything but a letter, digit or `_`.
/// Two different steps in one path are an error.
pub fn path_step(rel: &Path) -> std::result::Result<Option<i64>, String> {
    let mut found: Option<i64> = None;
    for comp in rel.components() {
        let Component::Normal(s) = comp else { continue };
        let s = s.to_string_lossy();
        for step in steps_in(&s) {
            match found {
                Some(f) if f != step => {
                    return Err(format!("its path names two steps, {f} and {step}"));
                }
                _ => found = Some(step),
            }
        }
    }
    Ok(found)
}

fn steps_in(s: &str) -> Vec<i64> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while let Some(k) = s[i..].find("step=") {
        let at = i + k;
        let mut end = at + 5;
        if end < b.len() && b[end] == b'-' {
            end += 1;
        }
        let digits = end;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        let before_ok = at == 0 || !word(b[at - 1]);
        let after_ok = end == b.len() || !b[end].is_ascii_alphanumeric();
        if before_ok
            && after_ok
            && end > digits
            && let Ok(n) = s[at + 5..end].parse()
        {
            out.push(n);
        }
        i = at + 5;
    }
    out
}

/// Every file's schema must be the first file's: the same columns, in the same order, with
/// the same types and nullability (each output file is spliced from its own input under one
/// output schema).
fn check_schemas(parts: &[Part]) -> Result<()> {
    let Some(first) = parts.first() else {
        return Ok(());
    };
    let a = first.input.schema();
    for part in &parts[1..] {
        let b = part.input.schema();
        let differ = |what: String| {
            Err(Error::data(format!(
                "{}: {what} (the files of a dataset share one schema)",
                part.name
            ))
            .with_hint("write every file of the dataset with the same columns and types"))
        };
        for (i, fb) in b.fields().iter().enumerate() {
            match a.fields().iter().position(|f| f.name() == fb.name()) {
                None => {
                    return differ(format!("column `{}` is not in {}", fb.name(), first.name));
                }
                Some(j) => {
                    let fa = a.field(j);
                    if fa.data_type() != fb.data_type() {
                        return differ(format!(
                            "column `{}` is {}, but {} in {}",
                            fb.name(),
                            fb.data_type(),
                            fa.data_type(),
                            first.name
                        ));
                    }
                    if fa.is_nullable() != fb.is_nullable() {
                        let n = |x: bool| if x { "nullable" } else { "not nullable" };
                        return differ(format!(
                            "column `{}` is {}, but {} in {}",
                            fb.name(),
                            n(fb.is_nullable()),
                            n(fa.is_nullable()),
                            first.name
                        ));
                    }
                    if i != j {
                        return differ(format!(
                            "column `{}` is column {i}, but column {j} in {}",
                            fb.name(),
                            first.name
                        ));
                    }
                }
            }
        }
        if let Some(fa) = a
            .fields()
            .iter()
            .find(|fa| b.field_with_name(fa.name()).is_err())
        {
            return differ(format!(
                "no column `{}`, which {} has",
                fa.name(),
                first.name
            ));
        }
    }
    Ok(())
}

/// Without a `step` column, the steps come from the paths: all files have one, or none
/// (then the dataset is one batch, as a file without a `step` column is).
fn check_steps(parts: &[Part]) -> Result<()> {
    let has_column = parts[0].input.schema().field_with_name("step").is_ok();
    if has_column {
        return Ok(());
    }
    let with = parts.iter().find(|p| p.path_step.is_some());
    let without = parts.iter().find(|p| p.path_step.is_none());
    if let (Some(w), Some(wo)) = (with, without) {
        return Err(Error::data(format!(
            "{}: no step (no `step` column, no step=N in its path), while {} is step {}",
            wo.name,
            w.name,
            w.path_step.unwrap_or_default()
        ))
        .with_hint("name every file (or its directory) step=N, or add a `step` column"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_from_paths() {
        let s = |p: &str| path_step(Path::new(p));
        assert_eq!(s("step=12.parquet"), Ok(Some(12)));
        assert_eq!(s("step=3/part-0.parquet"), Ok(Some(3)));
        assert_eq!(s("run/step=3/step=3.parquet"), Ok(Some(3)));
        assert_eq!(s("x_step=3.parquet"), Ok(None));
        assert_eq!(s("step=3a.parquet"), Ok(None));
        assert_eq!(s("step=3-part1.parquet"), Ok(Some(3)));
        assert_eq!(s("part.parquet"), Ok(None));
        assert!(s("step=1/step=2.parquet").is_err());
    }

    #[test]
    fn globs() {
        let m = |p: &str, r: &str| {
            let pat: Vec<&str> = p.split('/').collect();
            glob_matches(&pat, Path::new(r))
        };
        assert!(m("*.parquet", "step=1.parquet"));
        assert!(!m("*.parquet", "a/step=1.parquet"));
        assert!(m("**/*.parquet", "a/b/step=1.parquet"));
        assert!(m("**/*.parquet", "step=1.parquet"));
        assert!(m("step=[0-9].parquet", "step=7.parquet"));
        assert!(!m("step=[!0-9].parquet", "step=7.parquet"));
        assert!(m("step=?.parquet", "step=7.parquet"));
        assert!(m("step=*/*", "step=7/x.parquet"));
        let (base, rest) = split_glob("dumps/run1/step=*.parquet");
        assert_eq!(
            (base, rest.as_str()),
            (PathBuf::from("dumps/run1"), "step=*.parquet")
        );
        let (base, rest) = split_glob("*.parquet");
        assert_eq!((base, rest.as_str()), (PathBuf::from("."), "*.parquet"));
    }
}
