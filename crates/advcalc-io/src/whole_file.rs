//! Small files read or written whole, at a local path or (with the `cloud` feature) an object
//! URL: a `--config` file, `report`'s page, `--metrics`' JSON. Written whole either way: a
//! local file through a temporary file renamed into place, an object by one PUT, create-only
//! unless forced, so a reader never sees half of one.

use std::io::Write;
use std::path::Path;

use crate::atomic::{parent_dir, persist, temporary_output};
use crate::error::{Error, Result};

/// The text of the file or object `path` (`what` says what it is, for messages).
pub fn read_to_string(path: &Path, what: &str) -> Result<String> {
    #[cfg(not(feature = "cloud"))]
    crate::location::refuse_object_url(path)?;
    #[cfg(feature = "cloud")]
    if let Some(url) = crate::location::object_url(path)? {
        let source = crate::object::source::ObjectSource::open(&url)?;
        // grown as it comes: a HEAD may announce any size
        let mut bytes = Vec::new();
        source.download_to(&mut bytes)?;
        return String::from_utf8(bytes).map_err(|e| {
            Error::usage(format!("{url}: cannot read {what}: not UTF-8 text")).with_source(e)
        });
    }
    let name = path.display().to_string();
    std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read {what} {name}")).with_source(e))
}

/// Refuse, before any work starts, a destination that cannot or must not be written: for an
/// object, one that exists (unless `force`; the create-only PUT refuses a racing writer too).
pub fn check_destination(path: &Path, force: bool) -> Result<()> {
    #[cfg(not(feature = "cloud"))]
    crate::location::refuse_object_url(path)?;
    #[cfg(feature = "cloud")]
    if let Some(url) = crate::location::object_url(path)? {
        if !force {
            let store = crate::object::store::store_for(&url)?;
            crate::object::sink::refuse_existing(&store, &url.key, &url.url)?;
        }
        return Ok(());
    }
    crate::atomic::check_destination(path, force)
}

/// Write `bytes` as the whole of `path` (over an existing file or object only with `force`).
pub fn write(path: &Path, bytes: &[u8], force: bool, what: &str) -> Result<()> {
    #[cfg(not(feature = "cloud"))]
    crate::location::refuse_object_url(path)?;
    #[cfg(feature = "cloud")]
    if let Some(url) = crate::location::object_url(path)? {
        let store = crate::object::store::store_for(&url)?;
        let bytes = bytes::Bytes::copy_from_slice(bytes);
        let mode = crate::object::sink::PutPolicy {
            force,
            ..Default::default()
        }
        .mode();
        crate::object::sink::put_bytes(&store, &url.key, &url.url, bytes, mode)?;
        return Ok(());
    }
    let name = path.display().to_string();
    let mut tmp = temporary_output(&parent_dir(path), &name)?;
    let io = |e: std::io::Error| Error::data(format!("{name}: cannot write {what}")).with_source(e);
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    persist(tmp, path, force, &name)
}

/// Refuse, before any work starts, a side output (`what`: `--metrics`) at `path` that would
/// lose data: one that is IN or lies inside a dataset IN (`inputs`), one that is another
/// output of the run (`outputs`: OUT), a block device or socket, `-` when OUT already writes to
/// stdout, or an existing file or object without `force`. [`write_side_output`] writes it.
pub fn check_side_output(
    path: &Path,
    force: bool,
    what: &str,
    inputs: &[&Path],
    outputs: &[&Path],
) -> Result<()> {
    use crate::format::is_stdio;
    let name = path.display().to_string();
    if is_stdio(path) {
        if outputs.iter().any(|o| is_stdio(o)) {
            return Err(
                Error::usage(format!("{what} -: OUT `-` already writes to stdout"))
                    .with_hint(format!("give {what} a file name")),
            );
        }
        return Ok(());
    }
    for input in inputs.iter().filter(|p| !is_stdio(p)) {
        let how = if crate::location::same_location(path, input) {
            "is IN, which it would overwrite"
        } else if crate::location::within(path, input) {
            "lies inside IN, where it would become an input of the next run"
        } else {
            continue;
        };
        return Err(
            Error::usage(format!("{what} {name}: {how} ({})", input.display()))
                .with_hint(format!("give {what} a path outside IN")),
        );
    }
    for output in outputs.iter().filter(|p| !is_stdio(p)) {
        if crate::location::same_location(path, output) {
            return Err(
                Error::usage(format!("{what} {name}: is OUT, which the run writes"))
                    .with_hint(format!("give {what} a path of its own")),
            );
        }
    }
    match special_file(path) {
        Some(Special::Stream(_)) => return Ok(()),
        Some(Special::Other(kind)) => return Err(neither_written_nor_replaced(what, path, kind)),
        None => {}
    }
    if !force && crate::location::object_scheme(&name).is_none() && path.exists() {
        return Err(Error::usage(format!("{what} {name}: already exists"))
            .with_hint("pass --force to overwrite it"));
    }
    check_destination(path, force)
}

/// A side output at a block device or socket: refused.
fn neither_written_nor_replaced(what: &str, path: &Path, kind: &str) -> Error {
    Error::usage(format!(
        "{what} {}: is a {kind}, which advcalc neither writes into nor replaces",
        path.display()
    ))
    .with_hint(format!("give {what} a file name"))
}

/// Write a side output that [`check_side_output`] accepted: `-` to stdout, a character
/// device or FIFO as a stream, anything else whole (create-only unless `force`).
pub fn write_side_output(path: &Path, bytes: &[u8], force: bool, what: &str) -> Result<()> {
    let io = |e: std::io::Error| {
        Error::data(format!("{}: cannot write {what}", path.display())).with_source(e)
    };
    if crate::format::is_stdio(path) {
        let mut out = std::io::stdout().lock();
        return out.write_all(bytes).and_then(|()| out.flush()).map_err(io);
    }
    match special_file(path) {
        Some(Special::Stream(_)) => std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(io),
        Some(Special::Other(kind)) => Err(neither_written_nor_replaced(what, path, kind)),
        None => write(path, bytes, force, what),
    }
}

/// What kind of special file a local path is.
pub enum Special {
    /// A character device or a FIFO (named): something a stream can be written into.
    Stream(&'static str),
    /// A block device or a socket (named).
    Other(&'static str),
}

/// The kind of special file `path` is (its links followed), or `None` for a regular file, a
/// directory, an object URL or a path that does not exist.
pub fn special_file(path: &Path) -> Option<Special> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = std::fs::metadata(path).ok()?.file_type();
        if t.is_char_device() {
            return Some(Special::Stream("character device"));
        }
        if t.is_fifo() {
            return Some(Special::Stream("FIFO"));
        }
        if t.is_block_device() {
            return Some(Special::Other("block device"));
        }
        if t.is_socket() {
            return Some(Special::Other("socket"));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_file_is_written_whole_and_not_clobbered_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("page.html");
        check_destination(&p, false).unwrap();
        write(&p, b"one", false, "x").unwrap();
        assert_eq!(read_to_string(&p, "the page").unwrap(), "one");
        assert!(check_destination(&p, false).is_err());
        assert!(write(&p, b"two", false, "x").is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        write(&p, b"two", true, "x").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        // only the file itself is left in the directory: no temporary
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(feature = "cloud")]
    #[test]
    fn an_object_is_put_whole_and_not_clobbered_unless_forced() {
        use crate::object::store::{Store, register};
        let mem: Store = std::sync::Arc::new(object_store::memory::InMemory::new());
        register("s3://advcalc-whole-file", mem);
        let p = Path::new("s3://advcalc-whole-file/dir/metrics.json");
        check_destination(p, false).unwrap();
        write(p, b"{}", false, "x").unwrap();
        assert_eq!(read_to_string(p, "the metrics").unwrap(), "{}");
        let e = check_destination(p, false).unwrap_err();
        assert!(format!("{e:#}").contains("already exists"), "{e:#}");
        let e = write(p, b"[]", false, "x").unwrap_err();
        assert!(format!("{e:#}").contains("already exists"), "{e:#}");
        write(p, b"[]", true, "x").unwrap();
        assert_eq!(read_to_string(p, "the metrics").unwrap(), "[]");
        let missing = Path::new("s3://advcalc-whole-file/none.yaml");
        let e = read_to_string(missing, "config file").unwrap_err();
        assert!(format!("{e:#}").contains("s3://advcalc-whole-file/none.yaml"));
    }
}
