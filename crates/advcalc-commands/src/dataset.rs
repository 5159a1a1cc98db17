//! `run` on a dataset (`docs/datasets.md`): IN a directory or a glob of Parquet (or Arrow
//! IPC) files, read as one input in dataset order; OUT a directory that mirrors IN's files.
//! With the `cloud` feature IN may be a prefix or a glob in object storage, and then OUT a
//! prefix too, each output put whole by one create-only PUT; `--resume` keeps an output of
//! an object only while the object's ETag is the one its provenance recorded.
//!
//! Pass 1 reads every (file, row group) unit in parallel and merges the statistics in dataset
//! order, so the numbers are those of the concatenated file; the plan is made once. Pass 2
//! computes the units in parallel with the same bounded look-ahead as one file and appends
//! them in order, each file's output opened by the first worker that needs it and renamed
//! into place (atomically) when its last row group is appended. `--resume` keeps the
//! outputs a finished run of the same configuration left (their provenance matches: same
//! configuration, same input file, same plan for its rows) and redoes the others.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tempfile::NamedTempFile;

use crate::encode::encode_row_group;
use crate::engine::Engine;
use crate::engine::kept::{DEFAULT_MEMORY, Kept};
use crate::engine::metrics;
use crate::engine::ordered::produce_in_parallel_consume_in_order;
use crate::engine::passes::{prepare_jobs_keeping, thread_pool};
use crate::engine::progress::Progress;
use crate::error::{Error, Reason, Result};
use crate::io::atomic::{canonical, parent_dir, remove_stale_temporaries, temporary_result};
use crate::io::dataset::{Dataset, Part};
use crate::io::format::{Format, is_stdio};
use crate::io::ipc;
use crate::io::read::ParquetInput;
use crate::io::write::{OutputEncoder, OutputSink, ParquetOutput};
use crate::provenance::{PROVENANCE_PREFIX, provenance_of};
use crate::run_options::{DatasetOptions, RunOptions, RunSummary, metrics_force};
use advcalc_config::Config;

/// The provenance keys that say which configuration (and advcalc) made an output: an output
/// that differs in any of them is refused by `--resume`, never mixed with this run's.
const CONFIGURATION_KEYS: &[&str] = &["version", "estimator", "convention", "config"];

/// What happens to one file's output.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fate {
    /// Written (it did not exist, `--force`, or `--resume` found it stale).
    Write,
    /// `--resume`: kept if its plan fingerprint matches this run's after pass 1 (the
    /// output's stored provenance).
    KeepIfSamePlan(Vec<(String, String)>),
}

/// Where the outputs go: a local directory, or a prefix in object storage.
enum OutRoot {
    Local(PathBuf),
    #[cfg(feature = "cloud")]
    Object {
        store: crate::io::object::store::Store,
        /// The prefix's key (empty: the bucket) and its URL, ending in `/`.
        prefix: object_store::path::Path,
        base_url: String,
        /// The keys under the prefix (one listing), to know which outputs exist.
        /// Each one's ETag: a `--resume` redo replaces only the object it judged.
        existing: std::collections::HashMap<String, Option<String>>,
        /// Where each output is written before it is put.
        spool: tempfile::TempDir,
    },
}

/// One output: a local file, or an object written from a local file by one create-only PUT.
enum Dest {
    Local(PathBuf),
    #[cfg(feature = "cloud")]
    Object {
        store: crate::io::object::store::Store,
        key: object_store::path::Path,
        url: String,
        exists: bool,
        /// The existing object's ETag, as listed.
        e_tag: Option<String>,
        /// The local file it is written to first.
        local: PathBuf,
    },
}

impl Dest {
    fn name(&self) -> String {
        match self {
            Dest::Local(path) => path.display().to_string(),
            #[cfg(feature = "cloud")]
            Dest::Object { url, .. } => url.clone(),
        }
    }

    /// The local file the output is written to (the output itself, or an object's spool).
    fn path(&self) -> &Path {
        match self {
            Dest::Local(path) => path,
            #[cfg(feature = "cloud")]
            Dest::Object { local, .. } => local,
        }
    }

    /// The output's path when it is a local file.
    fn local(&self) -> Option<&Path> {
        match self {
            Dest::Local(path) => Some(path),
            #[cfg(feature = "cloud")]
            Dest::Object { .. } => None,
        }
    }

    fn exists(&self) -> bool {
        match self {
            Dest::Local(path) => path.exists(),
            #[cfg(feature = "cloud")]
            Dest::Object { exists, .. } => *exists,
        }
    }
}

impl OutRoot {
    /// The output of `part` (the `p`th): OUT joined with its relative path.
    #[cfg_attr(not(feature = "cloud"), allow(unused_variables))]
    fn dest(&self, p: usize, part: &Part) -> Dest {
        match self {
            OutRoot::Local(out) => Dest::Local(out.join(&part.rel)),
            #[cfg(feature = "cloud")]
            OutRoot::Object {
                store,
                prefix,
                base_url,
                existing,
                spool,
            } => {
                let rel = part.rel.to_string_lossy();
                let key = match prefix.as_ref() {
                    "" => rel.to_string(),
                    k => format!("{k}/{rel}"),
                };
                let file = part.rel.file_name().unwrap_or_default();
                Dest::Object {
                    store: store.clone(),
                    exists: existing.contains_key(&key),
                    e_tag: existing.get(&key).cloned().flatten(),
                    // the key as it is (`Path::from` would percent-encode `[`, `%`, ...), as
                    // the listing gives keys and a single object's URL names one
                    key: object_store::path::Path::parse(&key)
                        .unwrap_or_else(|_| object_store::path::Path::from(key.as_str())),
                    url: format!("{base_url}{rel}"),
                    local: spool.path().join(p.to_string()).join(file),
                }
            }
        }
    }
}

/// An output being written: opened by the first worker that needs it.
#[derive(Default)]
enum Slot {
    #[default]
    Closed,
    Open {
        encoder: Arc<OutputEncoder>,
        sink: Box<OutputSink>,
        /// The Parquet result of an Arrow IPC output, exported when finished.
        result: Option<NamedTempFile>,
    },
    Done,
}

/// `run` on the dataset IN names into the directory OUT (reached through
/// [`crate::run::run_with`]).
pub fn run(config: &Config, opts: &RunOptions, dopts: &DatasetOptions) -> Result<RunSummary> {
    check_options(opts, dopts)?;
    #[cfg(feature = "cloud")]
    if let Some(root) = object_out_root(opts, None)? {
        let dataset = Dataset::open(&opts.input, opts.input_format)?;
        return run_into(config, opts, dopts, dataset, &root);
    }
    check_local_out(opts)?;
    run_opened(
        config,
        opts,
        dopts,
        Dataset::open(&opts.input, opts.input_format)?,
    )
}

/// `--output-format` and `--resume` with `--force`: refused for any dataset.
fn check_options(opts: &RunOptions, dopts: &DatasetOptions) -> Result<()> {
    if opts.output_format.is_some() {
        return Err(Error::usage(
            "--output-format: a dataset's outputs keep their input files' names and formats",
        ));
    }
    if dopts.resume && opts.force {
        return Err(Error::usage(
            "--resume keeps finished outputs and --force redoes them: pass one of them",
        ));
    }
    Ok(())
}

/// A local OUT of a dataset: a directory (created if missing) whose parent exists.
fn check_local_out(opts: &RunOptions) -> Result<()> {
    let out = &opts.output;
    let out_name = out.display().to_string();
    if is_stdio(out) {
        return Err(Error::usage(
            "OUT: a dataset's OUT is a directory that mirrors IN's files, not stdout",
        )
        .with_hint("give a directory (created if missing)"));
    }
    if out.exists() && !out.is_dir() {
        return Err(Error::usage(format!(
            "{out_name}: is a file; a dataset's OUT is a directory that mirrors IN's files"
        ))
        .with_hint("give a directory (created if missing)"));
    }
    let parent = parent_dir(out);
    if !parent.is_dir() {
        return Err(Error::data(format!(
            "{out_name}: directory {} does not exist",
            parent.display()
        )));
    }
    Ok(())
}

/// `run` on a dataset in object storage (`url`: a prefix or a glob under one) into OUT, a
/// local directory or a prefix in object storage (`s3://bucket/adv/`, the trailing `/`
/// optional). Each output object is written complete by one create-only PUT (an
/// overwriting one with `--force`; where `--resume` redoes an existing output, one
/// conditional on the ETag it was judged by).
#[cfg(feature = "cloud")]
pub fn run_objects(
    config: &Config,
    opts: &RunOptions,
    dopts: &DatasetOptions,
    url: &crate::io::object::list::DatasetUrl,
) -> Result<RunSummary> {
    check_options(opts, dopts)?;
    let root = objects_out_root(opts, url)?;
    run_into(
        config,
        opts,
        dopts,
        Dataset::open_objects(url, opts.input_format)?,
        &root,
    )
}

/// [`run_objects`] on a dataset of objects already opened (`Dataset::from_objects`: the
/// Python package's per-step tasks run their steps' objects with it) under the prefix `url`:
/// OUT checked and listed as `run_objects` does, each output put as it puts them
/// (create-only unless `--force`).
#[cfg(feature = "cloud")]
pub fn run_objects_opened(
    config: &Config,
    opts: &RunOptions,
    dopts: &DatasetOptions,
    url: &crate::io::object::list::DatasetUrl,
    dataset: Dataset,
) -> Result<RunSummary> {
    check_options(opts, dopts)?;
    let root = objects_out_root(opts, url)?;
    run_into(config, opts, dopts, dataset, &root)
}

/// OUT of a dataset in object storage under `url`: a prefix apart from it, or a local
/// directory.
#[cfg(feature = "cloud")]
fn objects_out_root(
    opts: &RunOptions,
    url: &crate::io::object::list::DatasetUrl,
) -> Result<OutRoot> {
    Ok(match object_out_root(opts, Some(url))? {
        Some(root) => root,
        None => {
            check_local_out(opts)?;
            OutRoot::Local(opts.output.clone())
        }
    })
}

/// OUT of a dataset as a prefix in object storage (`s3://bucket/adv/`, the trailing `/`
/// optional), with the outputs already there (one listing); `None` when OUT is local. `input`
/// is IN's prefix when IN is in object storage too: OUT must lie apart from it.
#[cfg(feature = "cloud")]
fn object_out_root(
    opts: &RunOptions,
    input: Option<&crate::io::object::list::DatasetUrl>,
) -> Result<Option<OutRoot>> {
    use crate::io::dataset::is_glob;
    use crate::io::object::{list::list_prefix, store::store_for, url::parse};
    let out_str = opts.output.to_str().unwrap_or_default();
    if !crate::io::object::url::looks_like_url(out_str) {
        return Ok(None);
    }
    if is_glob(out_str) {
        return Err(Error::usage(format!(
            "{out_str}: a dataset's OUT is a prefix that mirrors IN's files, not a glob"
        ))
        .with_hint("give a prefix, e.g. s3://bucket/adv/"));
    }
    let Some(out) = parse(out_str)? else {
        return Ok(None);
    };
    if let Some(url) = input {
        let dir = |k: &str| match k {
            "" => String::new(),
            k => format!("{k}/"),
        };
        let (inp, outp) = (dir(url.base.key.as_ref()), dir(out.key.as_ref()));
        if out.same_bucket(&url.base) && (inp.starts_with(&outp) || outp.starts_with(&inp)) {
            return Err(Error::usage(format!(
                "{out_str}: OUT overlaps IN's prefix ({}); a dataset's OUT must be apart from IN",
                url.base_url
            ))
            .with_hint("write to a prefix outside IN, e.g. beside it"));
        }
    }
    let store = store_for(&out)?;
    let existing = list_prefix(&store, &out.key, out_str)?
        .into_iter()
        .map(|m| (m.location.as_ref().to_string(), m.e_tag))
        .collect();
    let spool = crate::io::atomic::temporary_dir(out_str)?;
    Ok(Some(OutRoot::Object {
        store,
        prefix: out.key.clone(),
        base_url: if out_str.ends_with('/') {
            out_str.to_string()
        } else {
            format!("{out_str}/")
        },
        existing,
        spool,
    }))
}

/// [`run`] on a dataset already opened (`Dataset::from_files`: the Python package's per-step
/// tasks run their step's files with it), OUT already checked to be a directory or missing.
pub fn run_opened(
    config: &Config,
    opts: &RunOptions,
    dopts: &DatasetOptions,
    dataset: Dataset,
) -> Result<RunSummary> {
    check_overlap(&dataset, &opts.output)?;
    run_into(
        config,
        opts,
        dopts,
        dataset,
        &OutRoot::Local(opts.output.clone()),
    )
}

/// [`run_opened`] into `root`.
fn run_into(
    config: &Config,
    opts: &RunOptions,
    dopts: &DatasetOptions,
    dataset: Dataset,
    root: &OutRoot,
) -> Result<RunSummary> {
    let dests: Vec<Dest> = dataset
        .parts
        .iter()
        .enumerate()
        .map(|(p, part)| root.dest(p, part))
        .collect();
    let mut fates = Vec::with_capacity(dests.len());
    for (part, dest) in dataset.parts.iter().zip(&dests) {
        fates.push(fate(config, part, dest, opts.force, dopts.resume)?);
    }
    if dopts.resume {
        refuse_orphans(root, &dests)?;
    }

    let engine = Engine::new(config, dataset.schema(), &dataset.name)?
        .with_layout(opts.layout)
        .allow_nonfinite(opts.allow_nonfinite)
        .with_metrics(opts.metrics.is_some());
    thread_pool(opts.threads)?.install(|| {
        let job = engine.job();
        let progress = Progress::new(dataset.rows() as u64, opts.progress);
        let projection = job.columns.projection(job.metrics);
        // pass 1's decoded units, kept for pass 2 within the memory budget
        let decoded = Kept::new(dataset.units().len(), opts.memory.unwrap_or(DEFAULT_MEMORY));
        let mut prepared = prepare_jobs_keeping(
            &dataset,
            std::slice::from_ref(&job),
            &projection,
            &progress,
            &decoded,
        )?;
        let prepared = prepared.pop().expect("one job");

        // What each output records, and which of the outputs `--resume` keeps.
        let provenance: Vec<Vec<(String, String)>> = dataset
            .parts
            .iter()
            .map(|p| {
                let mut kv = provenance_of(config, &p.name, input_bytes(p), p.rows);
                kv.extend(object_provenance(p, root));
                kv.push((format!("{PROVENANCE_PREFIX}dataset"), dataset.name.clone()));
                kv.push((
                    format!("{PROVENANCE_PREFIX}plan"),
                    format!(
                        "{:016x}",
                        prepared.fingerprint(p.first_row..p.first_row + p.rows)
                    ),
                ));
                kv
            })
            .collect();
        let write: Vec<bool> = fates
            .iter()
            .zip(&provenance)
            .map(|(fate, kv)| match fate {
                Fate::Write => true,
                Fate::KeepIfSamePlan(stored) => {
                    let plan = |kv: &[(String, String)]| {
                        kv.iter()
                            .find(|(k, _)| k == &format!("{PROVENANCE_PREFIX}plan"))
                            .map(|(_, v)| v.clone())
                    };
                    plan(stored).is_none() || plan(stored) != plan(kv)
                }
            })
            .collect();
        let kept = write.iter().filter(|w| !**w).count();

        progress.pass("writing");
        let mut metric_parts = prepared.metric_parts.clone();
        for (p, part) in dataset.parts.iter().enumerate() {
            if !write[p] && opts.metrics.is_none() {
                progress.inc(part.rows);
            }
        }
        let (output_schema, sources) = job.output_layout();
        // Every output directory, created, and cleared of this host's dead runs' leftovers.
        for (p, dest) in dests.iter().enumerate() {
            if write[p] {
                let dir = parent_dir(dest.path());
                std::fs::create_dir_all(&dir).map_err(|e| {
                    Error::data(format!("{}: cannot create the directory", dir.display()))
                        .with_source(e)
                })?;
                if dest.local().is_some() {
                    remove_stale_temporaries(&dir);
                }
            }
        }
        let open = |p: usize| -> Result<Slot> {
            let part = &dataset.parts[p];
            part.check_unchanged()?;
            let result = match part.format {
                Format::Parquet => None,
                _ => Some(temporary_result()?),
            };
            let output = ParquetOutput::create_with_metadata(
                result.as_ref().map_or(dests[p].path(), |r| r.path()),
                output_schema.clone(),
                sources.clone(),
                part.input.copy_source(),
                true,
                provenance[p].clone(),
            )?;
            let (encoder, sink) = output.into_parts();
            Ok(Slot::Open {
                encoder: Arc::new(encoder),
                sink: Box::new(sink),
                result,
            })
        };
        let finish = |p: usize, slot: Slot| -> Result<()> {
            let part = &dataset.parts[p];
            let Slot::Open {
                encoder,
                sink,
                result,
            } = slot
            else {
                return Ok(());
            };
            drop(encoder);
            // the file pass 1 read must still be the one pass 2 read
            part.check_unchanged()?;
            sink.finish()?;
            if let Some(result) = result {
                ipc::export_parquet(result.path(), dests[p].path(), part.format, true)?;
            }
            #[cfg(feature = "cloud")]
            if let Dest::Object {
                store,
                key,
                url,
                exists,
                e_tag,
                local,
            } = &dests[p]
            {
                use crate::io::object::sink::{PutPolicy, upload_to};
                // create-only unless it is to be replaced; a `--resume` redo replaces only the
                // object it judged stale: a writer that raced in is refused either way
                let policy = PutPolicy {
                    force: opts.force || (*exists && e_tag.is_none()),
                    replacing: e_tag.clone().filter(|_| *exists),
                    ..Default::default()
                };
                upload_to(store, key, url, local, &policy)?;
                let _ = std::fs::remove_file(local);
            }
            Ok(())
        };
        // Files without row groups have nothing to wait for.
        for (p, part) in dataset.parts.iter().enumerate() {
            if write[p] && part.input.num_row_groups() == 0 {
                finish(p, open(p)?)?;
            }
        }
        let slots: Vec<Mutex<Slot>> = dataset.parts.iter().map(|_| Mutex::default()).collect();
        let lock = |p: usize| slots[p].lock().unwrap_or_else(|e| e.into_inner());
        let units: Vec<usize> = (0..dataset.units().len())
            .filter(|&u| write[dataset.units()[u].part] || opts.metrics.is_some())
            .collect();
        let all = dataset.units();
        produce_in_parallel_consume_in_order(
            units.len(),
            2 * rayon::current_num_threads(),
            |i| {
                let u = units[i];
                let unit = all[u];
                let part = dataset.part(u);
                let job = job.at(part);
                if !write[unit.part] {
                    let batch = decoded.take(&dataset, u, &projection)?;
                    // kept by --resume: its rows still count in the metrics
                    let outputs = job.row_group_outputs(&batch, unit.start, &prepared)?;
                    progress.inc(batch.num_rows());
                    return Ok((
                        None,
                        metrics::advantage_parts(
                            &outputs.group,
                            &outputs.mask,
                            &outputs.outputs.advantages,
                        ),
                    ));
                }
                let encoder = {
                    let mut slot = lock(unit.part);
                    if matches!(*slot, Slot::Closed) {
                        *slot = open(unit.part)?;
                    }
                    match &*slot {
                        Slot::Open { encoder, .. } => encoder.clone(),
                        _ => {
                            return Err(Error::data(format!(
                                "{}: internal error: output closed early",
                                part.name
                            )));
                        }
                    }
                };
                let batch = decoded.take(&dataset, u, &projection)?;
                let (encoded, parts) = encode_row_group(
                    &job,
                    &batch,
                    unit.start,
                    &prepared,
                    &encoder,
                    unit.row_group,
                    opts.metrics.is_some(),
                )?;
                progress.inc(batch.num_rows());
                Ok((Some(encoded), parts))
            },
            |i, (encoded, parts)| {
                metrics::merge(&mut metric_parts, parts);
                let unit = all[units[i]];
                let Some(encoded) = encoded else {
                    return Ok(());
                };
                let mut slot = lock(unit.part);
                let Slot::Open { sink, .. } = &mut *slot else {
                    return Err(Error::data("internal error: appending to a closed output"));
                };
                sink.append(unit.row_group, encoded)?;
                if unit.row_group + 1 == dataset.parts[unit.part].input.num_row_groups() {
                    let done = std::mem::replace(&mut *slot, Slot::Done);
                    drop(slot);
                    finish(unit.part, done)?;
                }
                Ok(())
            },
        )?;
        if let Some(path) = &opts.metrics {
            let json = metrics::to_json(&job, &prepared, &metric_parts);
            let text = serde_json::to_string_pretty(&json).unwrap_or_default();
            crate::io::whole_file::write_side_output(
                path,
                (text + "\n").as_bytes(),
                metrics_force(opts, dopts),
                "--metrics",
            )?;
        }
        progress.finish();
        let mut warnings = prepared.warnings.clone();
        // the loss stage's findings and view need every row's pass 2 (none kept by --resume)
        let loss = (kept == 0)
            .then(|| job.loss_report(&prepared, &metric_parts))
            .flatten()
            .map(|(w, json, table)| {
                warnings.extend(w);
                (json, table)
            });
        Ok(RunSummary {
            rows: dataset.rows(),
            row_groups: dataset.units().len(),
            files: dataset.parts.len(),
            kept,
            training_batches: prepared.training_batches.len(),
            warnings,
            notes: dataset
                .notes
                .iter()
                .chain(&prepared.notes)
                .cloned()
                .collect(),
            length_bias: loss,
        })
    })
}

/// OUT must not lie inside IN (its outputs would become inputs of the next run) nor IN
/// inside OUT.
fn check_overlap(dataset: &Dataset, out: &Path) -> Result<()> {
    let Some(base) = &dataset.base else {
        return Ok(());
    };
    let (Some(inp), Some(outp)) = (canonical(base), canonical(out)) else {
        return Ok(());
    };
    let say = |what: &str| {
        Err(Error::usage(format!(
            "{}: {what} ({}); a dataset's OUT must be apart from IN",
            out.display(),
            base.display()
        ))
        .with_hint("write to a directory outside IN, e.g. beside it"))
    };
    if outp == inp {
        return say("OUT is IN's directory");
    }
    if outp.starts_with(&inp) {
        return say("OUT is inside IN's directory");
    }
    // also as spelled: IN reached through a link inside OUT (`adv/dumps -> ../dumps`) is
    // inside OUT for anyone who walks OUT
    if inp.starts_with(&outp) || lexical(base).starts_with(lexical(out)) {
        return say("IN's directory is inside OUT");
    }
    // IN's walk follows symlinks: a link in IN to OUT, or to a directory inside it, would
    // read outputs as inputs
    if let Some(dir) = crate::io::dataset::real_directories(base)
        .into_iter()
        .find(|d| d.starts_with(&outp) || outp.starts_with(d) && *d != inp)
    {
        return Err(Error::usage(format!(
            "{}: IN links to {}, which overlaps OUT; a dataset's OUT must be apart from \
             every directory IN reads",
            out.display(),
            dir.display()
        ))
        .with_hint("write to a directory outside IN and every directory IN links to"));
    }
    Ok(())
}

/// `--resume` mirrors IN into OUT: an output of an earlier run whose input is no longer in
/// IN (removed or renamed) would be left in OUT as if current, so the run is refused, naming
/// it. Only advcalc's own dataset outputs count (their provenance has `advcalc.dataset`);
/// other files in OUT are the user's and left alone.
fn refuse_orphans(root: &OutRoot, dests: &[Dest]) -> Result<()> {
    let ours = |kv: &[(String, String)]| {
        kv.iter()
            .any(|(k, _)| *k == format!("{PROVENANCE_PREFIX}dataset"))
    };
    let mut orphans = Vec::new();
    match root {
        OutRoot::Local(out) => {
            if !out.is_dir() {
                return Ok(());
            }
            let wanted: std::collections::HashSet<PathBuf> =
                dests.iter().map(|d| d.path().to_path_buf()).collect();
            for rel in crate::io::dataset::data_files(out)? {
                let path = out.join(&rel);
                if !wanted.contains(&path) && stored_provenance(&path).is_ok_and(|kv| ours(&kv)) {
                    orphans.push(path.display().to_string());
                }
            }
        }
        #[cfg(feature = "cloud")]
        OutRoot::Object {
            store,
            base_url,
            prefix,
            existing,
            ..
        } => {
            let wanted: std::collections::HashSet<String> = dests
                .iter()
                .filter_map(|d| match d {
                    Dest::Object { key, .. } => Some(key.as_ref().to_string()),
                    Dest::Local(_) => None,
                })
                .collect();
            let mut keys: Vec<&String> = existing.keys().filter(|k| !wanted.contains(*k)).collect();
            keys.sort();
            for key in keys {
                let is_data = crate::io::dataset::has_data_extension(key);
                let rel = key
                    .strip_prefix(prefix.as_ref())
                    .unwrap_or(key)
                    .trim_start_matches('/');
                let url = format!("{base_url}{rel}");
                let Ok(path) = object_store::path::Path::parse(key) else {
                    continue;
                };
                if is_data && stored_object_provenance(store, &path, &url).is_ok_and(|kv| ours(&kv))
                {
                    orphans.push(url);
                }
            }
        }
    }
    if orphans.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = orphans.iter().take(5).map(String::as_str).collect();
    let more = match orphans.len() {
        n if n > 5 => format!(" and {} more", n - 5),
        _ => String::new(),
    };
    Err(Error::usage(format!(
        "--resume: OUT holds {} output{} whose input is no longer in IN: {}{more}",
        orphans.len(),
        if orphans.len() == 1 { "" } else { "s" },
        shown.join(", ")
    ))
    .with_hint(
        "remove them from OUT (or put their inputs back), then resume; --resume never keeps \
         an output whose input is gone",
    ))
}

/// `p` made absolute without resolving links: `.` dropped, `..` taken off the path.
fn lexical(p: &Path) -> PathBuf {
    let abs = std::env::current_dir().map_or_else(|_| p.to_path_buf(), |d| d.join(p));
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Decide what to do with one output before any pass: refuse what must not be touched.
fn fate(config: &Config, part: &Part, dest: &Dest, force: bool, resume: bool) -> Result<Fate> {
    let name = dest.name();
    if let Dest::Local(path) = dest
        && path.is_dir()
    {
        return Err(Error::usage(format!(
            "{name}: is a directory, where the output of {} goes",
            part.name
        )));
    }
    if !dest.exists() || force {
        return Ok(Fate::Write);
    }
    if !resume {
        return Err(Error::usage(format!("{name}: already exists"))
            .with_hint("pass --resume to finish an interrupted run (keeping the finished files), or --force to redo every file"));
    }
    let stored = match dest {
        Dest::Local(path) => stored_provenance(path),
        #[cfg(feature = "cloud")]
        Dest::Object {
            store, key, url, ..
        } => stored_object_provenance(store, key, url),
    }
    .map_err(|e| {
        // an output that could not be read may well be one of ours: say so, not "foreign"
        if e.reason() == Reason::Storage {
            let hint = e
                .hint()
                .unwrap_or("check that it can be read, then run again")
                .to_string();
            return Error::data(format!(
                "{name}: exists, and --resume cannot read it to tell whether it is finished"
            ))
            .with_hint(hint)
            .with_source(e);
        }
        Error::usage(format!(
            "{name}: exists but is not an output of advcalc run (no readable advcalc.* provenance); --resume does not overwrite it"
        ))
        .with_source(e)
        .with_hint("remove it, or rerun with --force to redo every file")
    })?;
    let get = |kv: &[(String, String)], k: &str| {
        let key = format!("{PROVENANCE_PREFIX}{k}");
        kv.iter().find(|(x, _)| *x == key).map(|(_, v)| v.clone())
    };
    let ours = provenance_of(config, &part.name, None, part.rows);
    for k in CONFIGURATION_KEYS {
        if get(&stored, k) != get(&ours, k) {
            let what = match *k {
                "config" => "its resolved configuration (advcalc.config) differs".to_string(),
                k => format!(
                    "its advcalc.{k} is {}, this run's {}",
                    get(&stored, k).unwrap_or_else(|| "missing".into()),
                    get(&ours, k).unwrap_or_default()
                ),
            };
            return Err(Error::usage(format!(
                "{name}: written by a different configuration ({what}); --resume never mixes outputs of two configurations"
            ))
            .with_hint("resume with the configuration that wrote OUT (`advcalc inspect` on an output shows it), write to another OUT, or pass --force (without --resume) to redo every file"));
        }
    }
    // The same configuration: keep it only if it was made from this very input, after it
    // was last changed (and, after pass 1, from the same plan).
    let same_input = get(&stored, "input").as_deref() == Some(part.name.as_str())
        && get(&stored, "input_rows") == Some(part.rows.to_string())
        && get(&stored, "input_bytes") == input_bytes(part).map(|n| n.to_string())
        && get(&stored, "dataset").is_some();
    Ok(if same_input && made_from_current(part, dest, &stored) {
        Fate::KeepIfSamePlan(stored)
    } else {
        Fate::Write
    })
}

/// Whether the output was made from the input as it is now: for an object, the ETag the
/// output recorded is the object's ETag now (opaque strings; never Last-Modified, which
/// two clocks write); for a local file, the output is newer than it.
fn made_from_current(part: &Part, dest: &Dest, stored: &[(String, String)]) -> bool {
    #[cfg(feature = "cloud")]
    if let Some(object) = &part.object {
        let key = format!("{PROVENANCE_PREFIX}input_etag");
        let recorded = stored.iter().find(|(k, _)| *k == key).map(|(_, v)| v);
        return object.e_tag.is_some() && recorded == object.e_tag.as_ref();
    }
    #[cfg(feature = "cloud")]
    if let Dest::Object { .. } = dest {
        // a local input's output in object storage: made from the input as it is now if it
        // recorded the input's modification time, to the nanosecond
        let key = format!("{PROVENANCE_PREFIX}input_mtime");
        let recorded = stored.iter().find(|(k, _)| *k == key).map(|(_, v)| v);
        return recorded.is_some() && recorded == mtime_ns(part).as_ref();
    }
    let _ = stored;
    let Some(dest) = dest.local() else {
        return false;
    };
    match (
        std::fs::metadata(dest).and_then(|m| m.modified()),
        part.identity.as_ref().and_then(|s| s.modified),
    ) {
        (Ok(out), Some(inp)) => out >= inp,
        _ => false,
    }
}

/// A local input file's modification time in nanoseconds since the epoch.
#[cfg(feature = "cloud")]
fn mtime_ns(part: &Part) -> Option<String> {
    let modified = part.identity.as_ref()?.modified?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(since.as_nanos().to_string())
}

/// The size of a part's input file or object, as its output's provenance records it.
fn input_bytes(part: &Part) -> Option<u64> {
    #[cfg(feature = "cloud")]
    if let Some(object) = &part.object {
        return Some(object.size);
    }
    part.identity.as_ref().map(|s| s.len)
}

/// An object input's ETag and version (`advcalc.input_etag`, `advcalc.input_version`), which
/// `--resume` compares with the object's own; for a local input written to an object, the
/// input's modification time (`advcalc.input_mtime`, nanoseconds), since the object's own
/// Last-Modified comes from another clock.
fn object_provenance(part: &Part, root: &OutRoot) -> Vec<(String, String)> {
    #[cfg(feature = "cloud")]
    if let OutRoot::Object { .. } = root
        && part.object.is_none()
    {
        let key = format!("{PROVENANCE_PREFIX}input_mtime");
        return mtime_ns(part).map(|t| (key, t)).into_iter().collect();
    }
    let _ = root;
    #[cfg(feature = "cloud")]
    if let Some(object) = &part.object {
        let mut kv = Vec::new();
        let key = |k: &str| format!("{PROVENANCE_PREFIX}{k}");
        if let Some(e_tag) = &object.e_tag {
            kv.push((key("input_etag"), e_tag.clone()));
        }
        if let Some(version) = &object.version {
            kv.push((key("input_version"), version.clone()));
        }
        return kv;
    }
    let _ = part;
    Vec::new()
}

/// [`stored_provenance`] of an output object: its footer by one suffix GET (an Arrow IPC
/// output is read whole).
#[cfg(feature = "cloud")]
fn stored_object_provenance(
    store: &crate::io::object::store::Store,
    key: &object_store::path::Path,
    url: &str,
) -> Result<Vec<(String, String)>> {
    use crate::io::object::source::ObjectSource;
    let source = ObjectSource::open_in(store.clone(), key.clone(), url)?;
    let kv = match Format::of(Path::new(url), None) {
        Format::Parquet => ParquetInput::open_object(source)?.key_value_metadata(),
        _ => crate::io::ipc::object_schema_metadata(&source)?,
    };
    only_provenance(kv, url)
}

/// The `advcalc.*` key-value metadata of an output file (Parquet footer, or an Arrow IPC
/// file's schema metadata).
fn stored_provenance(path: &Path) -> Result<Vec<(String, String)>> {
    let name = path.display().to_string();
    // a file that does not open is unreadable, which says nothing of what it holds
    std::fs::File::open(path).map_err(|e| {
        Error::data(format!("{name}: cannot open"))
            .with_source(e)
            .with_reason(Reason::Storage)
    })?;
    let kv = match Format::of(path, None) {
        Format::Parquet => ParquetInput::open(path)?.key_value_metadata(),
        _ => {
            let file = std::fs::File::open(path)
                .map_err(|e| Error::data(format!("{name}: cannot open")).with_source(e))?;
            ipc_schema_metadata(file, &name)?
        }
    };
    only_provenance(kv, &name)
}

/// An Arrow IPC file's schema metadata.
fn ipc_schema_metadata(
    file: impl std::io::Read + std::io::Seek,
    name: &str,
) -> Result<Vec<(String, String)>> {
    let reader = arrow_ipc::reader::FileReader::try_new(file, None).map_err(|e| {
        Error::data(format!("{name}: not a readable Arrow IPC file")).with_source(e)
    })?;
    Ok(reader
        .schema()
        .metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
}

/// The `advcalc.*` entries of `kv`; none is an error (not an output of `advcalc run`).
fn only_provenance(kv: Vec<(String, String)>, name: &str) -> Result<Vec<(String, String)>> {
    let kv: Vec<_> = kv
        .into_iter()
        .filter(|(k, _)| k.starts_with(PROVENANCE_PREFIX))
        .collect();
    if kv.is_empty() {
        return Err(Error::data(format!("{name}: no advcalc.* provenance")));
    }
    Ok(kv)
}
