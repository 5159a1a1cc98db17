//! Faults as well as bad input: SIGINT (Ctrl-C) and SIGTERM (`timeout`, Ray, Kubernetes,
//! Slurm) delivered to a run that is writing stop it promptly, leave no temporary file
//! (beside OUT, or the stream spool in $TMPDIR), leave the previous OUT untouched, and exit
//! 130 / 143 as shells expect.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Wait until the run writes its temporary OUT, then deliver `signal`; returns the exit code,
/// stderr and how long the run took to stop.
fn interrupt_mid_write(
    mut child: Child,
    dir: &Path,
    signal: libc::c_int,
) -> (Option<i32>, String, Duration) {
    wait_until_writing(&mut child, dir);
    let sent = Instant::now();
    // SAFETY: kill sends a signal to our own child process; no memory is involved.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        sent.elapsed(),
    )
}

#[test]
fn sigint_and_sigterm_mid_write_leave_nothing_behind() {
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write_parquet(&dir.join("in.parquet"), &large_batch(), 1000);
        std::fs::write(dir.join("out.parquet"), b"previous result").unwrap();
        let child = advcalc()
            .current_dir(dir)
            .args(["run", "-q", "-f", "-e", "gae", "--threads", "1"])
            .args(["in.parquet", "out.parquet"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (exit, err, took) = interrupt_mid_write(child, dir, signal);
        assert_eq!(exit, Some(code), "signal {signal}: {err}");
        assert_eq!(
            err.trim(),
            format!("error: interrupted by signal {}", code - 128)
        );
        assert!(
            took < Duration::from_secs(2),
            "{signal}: stopped after {took:?}"
        );
        assert_eq!(
            std::fs::read(dir.join("out.parquet")).unwrap(),
            b"previous result"
        );
        assert!(
            leftovers(dir).is_empty(),
            "signal {signal}: {:?}",
            leftovers(dir)
        );
    }
}

/// An Arrow stream on stdin is spooled into $TMPDIR for the two passes; a SIGTERM removes the
/// spool too.
#[test]
fn sigterm_removes_the_stream_spool() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spool_dir = dir.join("tmp");
    std::fs::create_dir(&spool_dir).unwrap();
    let batch = large_batch();
    let mut stream = arrow::ipc::writer::StreamWriter::try_new(
        std::fs::File::create(dir.join("in.arrows")).unwrap(),
        &batch.schema(),
    )
    .unwrap();
    for start in (0..batch.num_rows()).step_by(1000) {
        stream.write(&batch.slice(start, 1000)).unwrap();
    }
    stream.finish().unwrap();
    let child = advcalc()
        .current_dir(dir)
        .env("TMPDIR", &spool_dir)
        .args([
            "run",
            "-q",
            "-e",
            "gae",
            "--threads",
            "1",
            "-",
            "out.parquet",
        ])
        .stdin(std::fs::File::open(dir.join("in.arrows")).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (exit, err, _) = interrupt_mid_write(child, dir, libc::SIGTERM);
    assert_eq!(exit, Some(143), "{err}");
    assert!(!dir.join("out.parquet").exists());
    assert!(leftovers(dir).is_empty(), "{:?}", leftovers(dir));
    let spooled: Vec<_> = std::fs::read_dir(&spool_dir).unwrap().flatten().collect();
    assert!(spooled.is_empty(), "{spooled:?}");
}

/// However many threads are asked for (`-j 5000` once ran 382 s and ignored SIGTERM for
/// minutes), the pool is capped and a SIGTERM stops the run as promptly as with one.
#[test]
fn sigterm_is_honoured_at_any_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_parquet(&dir.join("in.parquet"), &large_batch(), 1000);
    let child = advcalc()
        .current_dir(dir)
        .args(["run", "-e", "gae", "--threads", "5000"])
        .args(["in.parquet", "out.parquet"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (exit, err, took) = interrupt_mid_write(child, dir, libc::SIGTERM);
    assert_eq!(exit, Some(143), "{err}");
    assert!(err.contains("5000 threads asked for"), "{err}");
    assert!(took < Duration::from_secs(2), "stopped after {took:?}");
    assert!(!dir.join("out.parquet").exists());
    assert!(leftovers(dir).is_empty(), "{:?}", leftovers(dir));
}
