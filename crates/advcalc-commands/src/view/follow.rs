//! `--follow`: the view watches IN's directory (the steps a trainer or the hook writes) and
//! rebuilds its snapshot when a file lands. Polling, not inotify: it works the same on the
//! network file systems training clusters share, and a step a minute needs no more. The
//! input is read again once the listing has changed and then held still for one poll (a file
//! written in place is not read at every growth); a file that cannot be read yet leaves the
//! last snapshot shown, with a note, until the next change.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};

use super::server::Shared;

/// How often the directory is listed: a landed step shows within two of these (seen, then
/// still), the rebuild and the page's own poll (`view.js`, 0.5 s): under 2 s on steps of a
/// few thousand rows.
const POLL: Duration = Duration::from_millis(250);

/// Directory levels walked below IN (`step=N/` layouts nest one or two).
const DEPTH: usize = 4;

/// `--follow` needs a directory.
pub fn check(input: &Path) -> Result<()> {
    if input.is_dir() {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "{}: --follow watches a directory of steps, and this is not one",
            input.display()
        ))
        .with_hint("give the directory the trainer writes its steps to (verl's rollout_data_dir, the hook's directory)"))
    }
}

/// Rebuild whenever the directory's files change, until the view stops.
pub(super) fn watch(shared: &Shared) {
    let dir = shared.opts.read.input.clone();
    // what the shown snapshot read (about: the listing when its read began), and the last poll's
    let mut read = listing(&dir);
    let mut seen = read.clone();
    while !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(POLL);
        let now = listing(&dir);
        if now != read && now == seen {
            read = now.clone();
            shared.refresh();
        }
        seen = now;
    }
}

/// Every visible file under `dir` (depth-limited, symlinked directories not entered), with
/// its size and modification time, sorted.
fn listing(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue; // temporary files of atomic writers (advcalc's own among them)
            }
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() && depth < DEPTH {
                todo.push((e.path(), depth + 1));
            } else if let Ok(m) = e.metadata()
                && m.is_file()
            {
                out.push((e.path(), m.len(), m.modified().ok()));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_landed_file_changes_the_listing_and_a_hidden_temporary_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("step=1")).unwrap();
        std::fs::write(dir.path().join("step=1/a.parquet"), b"x").unwrap();
        let before = listing(dir.path());
        assert_eq!(before.len(), 1);
        std::fs::write(dir.path().join(".b.parquet.tmp"), b"partial").unwrap();
        assert_eq!(listing(dir.path()), before);
        std::fs::rename(
            dir.path().join(".b.parquet.tmp"),
            dir.path().join("step=1/b.parquet"),
        )
        .unwrap();
        assert_eq!(listing(dir.path()).len(), 2);
    }

    #[test]
    fn follow_refuses_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.parquet");
        std::fs::write(&f, b"x").unwrap();
        let e = check(&f).unwrap_err();
        assert!(
            e.to_string().contains("--follow watches a directory"),
            "{e}"
        );
        assert!(check(dir.path()).is_ok());
    }
}
