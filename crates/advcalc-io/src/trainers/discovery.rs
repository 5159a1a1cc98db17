//! Telling another trainer's dump by its layout ([`detect`]: a file's name, a directory
//! searched [`MAX_DEPTH`] deep, a glob) and finding its files in natural order.

use std::path::{Path, PathBuf};

use super::{Trainer, by_file_name};
use crate::error::{Error, Result};
use crate::walk::Visited;

/// The trainer whose dump `path` is: `explicit` (`--input-format`) when given, else by the
/// layout (a dump file's name, or a directory holding them); `None`: not another trainer's
/// dump. A directory holding files of two trainers is an error naming both.
pub fn detect(path: &Path, explicit: Option<Trainer>) -> Result<Option<Trainer>> {
    if explicit.is_some() {
        return Ok(explicit);
    }
    let name = path.display().to_string();
    if let Some(files) = glob_files(path, &name)? {
        let mut found = files
            .iter()
            .filter_map(|f| by_file_name(&f.file_name()?.to_string_lossy()));
        let first = found.next();
        // every file of one trainer's dump, or not a dump glob (a dataset's)
        return Ok(first.filter(|t| {
            found.all(|u| u == *t)
                && files.iter().all(|f| {
                    t.names_a_dump_file(&f.file_name().unwrap_or_default().to_string_lossy())
                })
        }));
    }
    if path.is_file() {
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
        return Ok(by_file_name(&file.unwrap_or_default()));
    }
    if !path.is_dir() {
        return Ok(None);
    }
    let mut found: Vec<(Trainer, PathBuf)> = Vec::new();
    // verl's own JSONL dump files (`{global_steps}.jsonl`), which no trainer's reader reads
    let mut verl: Option<PathBuf> = None;
    scan(path, 0, &mut Visited::default(), &mut |file: &Path| {
        let f = file.file_name().map(|f| f.to_string_lossy().into_owned());
        let f = f.unwrap_or_default();
        if let Some(t) = by_file_name(&f)
            && !found.iter().any(|(k, _)| *k == t)
        {
            found.push((t, file.to_path_buf()));
        }
        if verl.is_none() && is_verl_step_file(&f) {
            verl = Some(file.to_path_buf());
        }
    })
    .map_err(|e| Error::data(format!("{name}: cannot read the directory")).with_source(e))?;
    match found.as_slice() {
        [] => Ok(None),
        // the trainer's reader would leave verl's files unread: refused as two trainers are
        [(t, f)] => match verl {
            None => Ok(Some(*t)),
            Some(v) => Err(Error::data(format!(
                "{name}: holds both a {} dump ({}) and verl JSONL files ({})",
                t.title(),
                f.display(),
                v.display()
            ))
            .with_hint(format!(
                "give the directory of one of them, or pass --input-format {} to read only the {} files",
                t.name(),
                t.title()
            ))),
        },
        [(a, fa), (b, fb), ..] => Err(Error::data(format!(
            "{name}: holds both a {} dump ({}) and a {} dump ({})",
            a.title(),
            fa.display(),
            b.title(),
            fb.display()
        ))
        .with_hint("give the directory of one run, or pass --input-format")),
    }
}

/// Whether `file` (a file name) is named as verl names its JSONL dump files,
/// `{global_steps}.jsonl`.
fn is_verl_step_file(file: &str) -> bool {
    file.strip_suffix(".jsonl")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The files a glob IN matches, in natural order (`step_2` before `step_10`); `None` when IN
/// is not a glob (it exists, or has no glob character).
pub(super) fn glob_files(path: &Path, name: &str) -> Result<Option<Vec<PathBuf>>> {
    use crate::dataset::{glob_matches, is_glob, split_glob};
    let pattern = path.to_string_lossy().into_owned();
    if path.exists() || !is_glob(&pattern) {
        return Ok(None);
    }
    let (base, rest) = split_glob(&pattern);
    if !base.is_dir() {
        return Ok(Some(Vec::new()));
    }
    let rest: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let mut files = find_files(&base, name, &|f| {
        f.strip_prefix(&base)
            .is_ok_and(|rel| glob_matches(&rest, rel))
    })?;
    files.sort_by_key(|f| natural_key(f));
    Ok(Some(files))
}

/// A path's sort key with its digit runs compared as numbers.
fn natural_key(path: &Path) -> Vec<(String, u64)> {
    let s = path.to_string_lossy();
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut n = c.to_digit(10).unwrap_or(0) as u64;
            while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                n = n.saturating_mul(10).saturating_add(d as u64);
                chars.next();
            }
            key.push((std::mem::take(&mut text), n));
        } else {
            text.push(c);
        }
    }
    key.push((text, u64::MAX));
    key
}

/// Directories deeper than this below IN are not searched for a dump's files.
const MAX_DEPTH: usize = 5;

/// Call `each` with every file under `dir` (hidden names skipped), to [`MAX_DEPTH`], in name
/// order; symlinks followed, each real directory and file once (`visited` notes the rest).
fn scan(
    dir: &Path,
    depth: usize,
    visited: &mut Visited,
    each: &mut dyn FnMut(&Path),
) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    if depth == 0 {
        visited.first(dir);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if visited.first(&path) {
                scan(&path, depth + 1, visited, each)?;
            }
        } else if path.is_file() && visited.first(&path) {
            each(&path);
        }
    }
    Ok(())
}

/// Every file under `dir` whose name `keep` accepts, sorted by path (to `MAX_DEPTH`).
pub fn find_files(dir: &Path, name: &str, keep: &dyn Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    scan(dir, 0, &mut Visited::default(), &mut |f| {
        if keep(f) {
            out.push(f.to_path_buf());
        }
    })
    .map_err(|e| Error::data(format!("{name}: cannot read the directory")).with_source(e))?;
    Ok(out)
}

/// The notes of a walk of the dump directory `dir` (or a glob's): what [`find_files`] skipped
/// as a second path to a directory or file it had read.
pub(super) fn walk_notes(path: &Path) -> Vec<String> {
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else {
        crate::dataset::split_glob(&path.to_string_lossy()).0
    };
    let mut visited = Visited::default();
    if dir.is_dir() {
        let _ = scan(&dir, 0, &mut visited, &mut |_| {});
    }
    visited.notes
}

/// The number a file or directory name carries after `prefix` (`step_12` → 12).
pub fn number_after(name: &str, prefix: &str, suffix: &str) -> Option<i64> {
    name.strip_prefix(prefix)?
        .strip_suffix(suffix)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verl_dump_files_are_told_by_their_names() {
        assert!(is_verl_step_file("12.jsonl"));
        assert!(is_verl_step_file("012.jsonl"));
        assert!(!is_verl_step_file(".jsonl"));
        assert!(!is_verl_step_file("train_data_step1.jsonl"));
        assert!(!is_verl_step_file("12.parquet"));
    }

    #[test]
    fn natural_order_compares_numbers() {
        let mut v = [
            PathBuf::from("r/step_10/a.jsonl"),
            PathBuf::from("r/step_2/a.jsonl"),
            PathBuf::from("r/step_1/b.jsonl"),
        ];
        v.sort_by_key(|p| natural_key(p));
        assert_eq!(v[0], PathBuf::from("r/step_1/b.jsonl"));
        assert_eq!(v[2], PathBuf::from("r/step_10/a.jsonl"));
    }
}
