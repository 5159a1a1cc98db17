//! Directory walks that read each real directory and file once. Symlinks are followed (a
//! dataset of links to step files is common), so a link back up the tree (`ln -s . loop`)
//! would otherwise read every file again at each level until the kernel's ELOOP, multiplying
//! rows and group sizes without an error. A directory or file already reached by another
//! path, identified by device and inode, is skipped with a note naming it.

use std::collections::HashSet;
use std::path::Path;

/// The directories and files a walk has entered, and the notes on what it skipped.
#[derive(Debug, Default)]
pub struct Visited {
    seen: HashSet<(u64, u64)>,
    /// One line per skipped path: what it is a second path to.
    pub notes: Vec<String>,
}

impl Visited {
    /// Whether the walk should enter (or read) `path`: `false` when its target (links
    /// followed) was already reached by another path, after a note naming both. A path whose
    /// identity cannot be read is entered: the read that follows reports its error.
    pub fn first(&mut self, path: &Path) -> bool {
        let Some(id) = identity(path) else {
            return true;
        };
        if self.seen.insert(id) {
            return true;
        }
        let what = if path.is_dir() { "directory" } else { "file" };
        let link = if path.is_symlink() {
            match std::fs::read_link(path) {
                Ok(t) => format!(" (a link to {})", t.display()),
                Err(_) => " (a link)".to_string(),
            }
        } else {
            String::new()
        };
        self.notes.push(format!(
            "{}{link}: a {what} already read by another path (a symlink loop or a second \
             link): skipped, so each file is read once",
            path.display()
        ));
        false
    }
}

/// The device and inode of `path`'s target.
#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

/// Without inodes: the canonical path, hashed.
#[cfg(not(unix))]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::hash::{Hash, Hasher};
    let c = path.canonicalize().ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    c.hash(&mut h);
    Some((0, h.finish()))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_loop_and_a_second_link_are_skipped_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("a")).unwrap();
        std::fs::write(d.join("a/f.parquet"), b"x").unwrap();
        std::os::unix::fs::symlink("..", d.join("a/loop")).unwrap();
        std::os::unix::fs::symlink("a", d.join("b")).unwrap();
        std::os::unix::fs::symlink("a/f.parquet", d.join("g.parquet")).unwrap();
        let mut v = Visited::default();
        assert!(v.first(d));
        assert!(v.first(&d.join("a")));
        assert!(v.first(&d.join("a/f.parquet")));
        assert!(!v.first(&d.join("a/loop")));
        assert!(!v.first(&d.join("b")));
        assert!(!v.first(&d.join("g.parquet")));
        assert_eq!(v.notes.len(), 3);
        assert!(
            v.notes[0].contains("a/loop (a link to ..)"),
            "{}",
            v.notes[0]
        );
        assert!(
            v.notes[0].contains("directory already read"),
            "{}",
            v.notes[0]
        );
        assert!(v.notes[2].contains("a file already read"), "{}", v.notes[2]);
        // a path that does not exist is entered (its read fails with its own error)
        assert!(v.first(&d.join("none")));
    }
}
