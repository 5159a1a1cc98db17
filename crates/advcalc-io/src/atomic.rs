//! Atomic output files, the policy every output follows (Parquet, Arrow IPC, the report's
//! page, a dataset's files): the destination is checked before any work starts, the output
//! is written to a temporary file beside it, named `.advcalc-HOST-KEY-PID-…` so that a later
//! run on this host removes only the leftovers of this host's dead runs, and the finished,
//! synced file is renamed into place. What goes into the file is its writer's business
//! (`io::write` for Parquet).

use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::error::{Error, Result};

const TEMP_PREFIX: &str = ".advcalc-";
const TEMP_SUFFIX: &str = ".parquet.tmp";

/// Where a temporary file comes from: this host's name (for people reading the directory)
/// and a key for this kernel boot and PID namespace. A process id only means something
/// there: on a directory shared between machines or containers, another host's live run
/// has a process id that may be dead here, or alive as an unrelated process.
struct HostKey {
    host: String,
    /// 16 hex digits of a hash of the host name, the kernel's boot id and the PID
    /// namespace; `None` where they cannot be read (no `/proc`), and then no temporary
    /// file is ever removed.
    key: Option<String>,
}

fn host_key() -> &'static HostKey {
    static HOST_KEY: std::sync::OnceLock<HostKey> = std::sync::OnceLock::new();
    HOST_KEY.get_or_init(|| {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let host = read("/proc/sys/kernel/hostname")
            .or_else(|| std::env::var("HOSTNAME").ok())
            .or_else(|| std::env::var("COMPUTERNAME").ok())
            .unwrap_or_default();
        let boot = read("/proc/sys/kernel/random/boot_id").filter(|b| !b.is_empty());
        let pid_namespace = std::fs::read_link("/proc/self/ns/pid")
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        let key = boot.zip(pid_namespace).map(|(boot, ns)| {
            format!(
                "{:016x}",
                fnv1a([host.as_str(), &boot, &ns].join("\0").as_bytes())
            )
        });
        let mut host: String = host
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
                _ => '_',
            })
            .take(64)
            .collect();
        if host.is_empty() {
            host = "host".into();
        }
        HostKey { host, key }
    })
}

/// FNV-1a, 64 bits: a hash that does not change with the toolchain.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The start of the names of temporary outputs that process `pid` of this host writes:
/// `.advcalc-HOST-KEY-PID-` (then tempfile's random part and `.parquet.tmp` or `.arrow.tmp`).
pub fn temp_prefix_for(pid: u32) -> String {
    let o = host_key();
    format!(
        "{TEMP_PREFIX}{}-{}-{pid}-",
        o.host,
        o.key.as_deref().unwrap_or("nokey")
    )
}

/// The start of this process's temporary output names.
pub fn temp_prefix() -> String {
    temp_prefix_for(std::process::id())
}

/// A temporary file for an output in `dir`, after removing this host's dead runs' leftovers
/// there: renamed onto the output once complete. `name` names the output in messages.
pub fn temporary_output(dir: &Path, name: &str) -> Result<NamedTempFile> {
    temporary_in(dir, TEMP_SUFFIX).map_err(|e| {
        Error::data(format!(
            "{name}: cannot create a temporary file in {}",
            dir.display()
        ))
        .with_source(e)
    })
}

/// The temporary Parquet result an output of another format is exported from (Arrow IPC,
/// a JSONL dump's sequence-level output): in the system's temporary directory, removed on
/// drop.
pub fn temporary_result() -> Result<NamedTempFile> {
    tempfile::Builder::new()
        .prefix(".advcalc-result-")
        .suffix(".parquet")
        .tempfile_in(std::env::temp_dir())
        .map_err(|e| Error::data("cannot create a temporary result file").with_source(e))
}

/// A temporary file in `dir` named `.advcalc-HOST-KEY-PID-…` and ending in `suffix` (every
/// output's temporary file: Parquet's `.parquet.tmp`, Arrow IPC's `.arrow.tmp`), after
/// removing this host's dead runs' leftovers there.
pub fn temporary_in(dir: &Path, suffix: &str) -> std::io::Result<NamedTempFile> {
    remove_stale_temporaries(dir);
    let mut builder = tempfile::Builder::new();
    // Host, boot, PID namespace and pid in the name let a later run tell a killed run's
    // leftovers from a live one's, and from other hosts' (`remove_stale_temporaries`).
    let prefix = temp_prefix();
    builder.prefix(&prefix).suffix(suffix);
    // tempfile creates 0600 files; the output should get the usual umask-based mode.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    builder.tempfile_in(dir)
}

/// Delete temporary outputs left in `dir` by advcalc runs of this host (same host name, boot
/// and PID namespace, `HostKey`) that were killed: their process is gone. Another host's or
/// container's files, and those of earlier boots, are never touched, whatever their process
/// id; nor is anything where `/proc` cannot tell (the leftovers stay, to remove by hand).
pub fn remove_stale_temporaries(dir: &Path) {
    let o = host_key();
    let Some(key) = &o.key else { return };
    let own = format!("{TEMP_PREFIX}{}-{key}-", o.host);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(&own) else {
            continue;
        };
        // Parquet outputs end in TEMP_SUFFIX, Arrow IPC outputs in `.arrow.tmp`, the local
        // results of an object OUT are directories ending in `.dir.tmp` (`temporary_dir`).
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !(name.ends_with(".tmp") && is_file || name.ends_with(".dir.tmp") && is_dir) {
            continue;
        }
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = if is_dir {
                std::fs::remove_dir_all(entry.path())
            } else {
                std::fs::remove_file(entry.path())
            };
        }
    }
}

/// A temporary directory in the system's temporary directory, named as this process's
/// temporary outputs are (`.advcalc-HOST-KEY-PID-….dir.tmp`), after removing this host's dead
/// runs' leftovers there: where the result for an object OUT is written before it is put, so
/// a run killed before its upload leaves nothing a later run does not clean up.
pub fn temporary_dir(name: &str) -> Result<tempfile::TempDir> {
    let dir = std::env::temp_dir();
    remove_stale_temporaries(&dir);
    tempfile::Builder::new()
        .prefix(&temp_prefix())
        .suffix(".dir.tmp")
        .tempdir_in(&dir)
        .map_err(|e| {
            Error::data(format!(
                "{name}: cannot create a temporary directory in {}",
                dir.display()
            ))
            .with_source(e)
        })
}

/// Rename a finished, synced temporary file onto its output (over an existing one only with
/// `force`).
pub fn persist(tmp: NamedTempFile, dest: &Path, force: bool, name: &str) -> Result<()> {
    let persisted = if force {
        tmp.persist(dest)
    } else {
        tmp.persist_noclobber(dest)
    };
    persisted.map_err(|e| {
        Error::data(format!(
            "{name}: cannot move the finished output into place"
        ))
        .with_source(e.error)
    })?;
    Ok(())
}

/// The directory `dest` is in (`.` for a bare file name): where its temporary file goes.
pub fn parent_dir(dest: &Path) -> PathBuf {
    match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Refuse a destination that cannot or must not be written, before any work starts.
pub fn check_destination(dest: &Path, force: bool) -> Result<()> {
    let name = dest.display().to_string();
    let dir = parent_dir(dest);
    if !dir.is_dir() {
        return Err(Error::data(format!(
            "{name}: directory {} does not exist",
            dir.display()
        )));
    }
    if dest.is_dir() {
        return Err(Error::usage(format!("{name}: is a directory")));
    }
    if name.ends_with(std::path::MAIN_SEPARATOR) {
        // the rename at the end would fail, after all the work
        return Err(Error::usage(format!(
            "{name}: ends in `{}` but names a file to write, not a directory",
            std::path::MAIN_SEPARATOR
        ))
        .with_hint("leave out the trailing slash (a directory OUT is for a dataset IN)"));
    }
    if let Some(special) = crate::whole_file::special_file(dest) {
        // a rename would replace the device or FIFO itself (`/dev/null` with a file)
        let (crate::whole_file::Special::Stream(kind) | crate::whole_file::Special::Other(kind)) =
            special;
        return Err(Error::usage(format!(
            "{name}: is a {kind}, not a file: advcalc writes its outputs whole and never \
             replaces one"
        ))
        .with_hint(
            "give a file path (`run` and `loss` stream OUT `-`, an Arrow IPC stream, to stdout)",
        ));
    }
    if dest.exists() && !force {
        return Err(Error::usage(format!("{name}: already exists"))
            .with_hint("pass --force to overwrite it"));
    }
    Ok(())
}

/// Whether two paths name the same file (the output may not exist yet).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (canonical(a), canonical(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// `p` made absolute with its links resolved; for a path that does not exist yet, its
/// directory's canonical form joined with its file name. `None` when neither can be had.
pub fn canonical(p: &Path) -> Option<PathBuf> {
    if let Ok(c) = p.canonicalize() {
        return Some(c);
    }
    let dir = parent_dir(p).canonicalize().ok()?;
    Some(dir.join(p.file_name()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn only_this_hosts_dead_runs_temporaries_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let o = host_key();
        let key = o
            .key
            .as_deref()
            .expect("a boot id and a PID namespace under /proc");
        // i32::MAX is above any pid_max: the process is dead
        let dead = i32::MAX as u32;
        let live = std::os::unix::process::parent_id();
        let names = [
            (format!("{}x1.parquet.tmp", temp_prefix_for(dead)), false),
            (format!("{}x2.arrow.tmp", temp_prefix_for(dead)), false),
            (format!("{}x3.parquet.tmp", temp_prefix_for(live)), true),
            (format!("{}x4.parquet.tmp", temp_prefix()), true),
            // another host, a dead-looking pid
            (
                format!(".advcalc-elsewhere-0123456789abcdef-{dead}-x5.parquet.tmp"),
                true,
            ),
            // this host's name, another boot or container
            (
                format!(".advcalc-{}-ffffffffffffffff-{dead}-x6.parquet.tmp", o.host),
                true,
            ),
            // the old naming, without a host
            (format!(".advcalc-{dead}-x7.parquet.tmp"), true),
            (format!("{}x8.parquet", temp_prefix_for(dead)), true),
        ];
        assert_ne!(key, "ffffffffffffffff");
        for (name, _) in &names {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        // an object OUT's local result directory: a dead run's removed with what it holds,
        // a live one's kept, and a file named like a directory is not one
        let dirs = [
            (format!("{}y1.dir.tmp", temp_prefix_for(dead)), false),
            (format!("{}y2.dir.tmp", temp_prefix_for(live)), true),
            (format!("{}y3.tmp", temp_prefix_for(dead)), true),
        ];
        for (name, _) in &dirs {
            std::fs::create_dir(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(name).join("out.parquet"), b"x").unwrap();
        }
        remove_stale_temporaries(dir.path());
        for (name, kept) in names.iter().chain(&dirs) {
            assert_eq!(dir.path().join(name).exists(), *kept, "{name}");
        }
    }
}
