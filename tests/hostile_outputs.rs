//! Hostile paths (issue #36): whatever a user or a script passes as `--metrics`, OUT or
//! `-o`, and however IN's directories link, advcalc never overwrites IN, never replaces a
//! device or a FIFO, never reads a file twice through a symlink loop, and never leaves a
//! stale output behind `--resume`. Each case runs the real binary and checks the exit code,
//! the message and that the files around it are as they were.
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::fs::{FileTypeExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/demo.parquet");

/// A directory with `in.parquet` (the demo dump, 256 rows).
fn with_input() -> (tempfile::TempDir, Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(DEMO).unwrap();
    std::fs::write(tmp.path().join("in.parquet"), &bytes).unwrap();
    (tmp, bytes)
}

/// A dataset `base/` of two step files (the demo dump each).
fn with_dataset(dir: &Path) -> PathBuf {
    let base = dir.join("base");
    std::fs::create_dir(&base).unwrap();
    for step in 0..2 {
        std::fs::copy(DEMO, base.join(format!("step={step}.parquet"))).unwrap();
    }
    base
}

fn grpo(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["run", "-e", "grpo"];
    all.extend_from_slice(args);
    run_in(dir, &all)
}

fn usage_error(out: &Output, says: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    assert!(stderr(out).contains(says), "{}", stderr(out));
}

fn rows(path: &Path) -> usize {
    read_parquet(path).num_rows()
}

#[test]
fn metrics_never_overwrites_in_however_it_is_spelled() {
    let (tmp, bytes) = with_input();
    let d = tmp.path();
    symlink("in.parquet", d.join("alias.parquet")).unwrap();
    for (metrics, says) in [
        ("in.parquet", "is IN"),
        ("./in.parquet", "is IN"),
        ("alias.parquet", "is IN"),
    ] {
        for cmd in ["run", "loss"] {
            let out = run_in(
                d,
                &[
                    cmd,
                    "-e",
                    "grpo",
                    "in.parquet",
                    "o.parquet",
                    "--metrics",
                    metrics,
                ],
            );
            usage_error(&out, says);
            assert_eq!(
                std::fs::read(d.join("in.parquet")).unwrap(),
                bytes,
                "{metrics}"
            );
            assert!(!d.join("o.parquet").exists());
        }
    }
    // OUT itself: refused before any work, not "cannot move the output into place" after it
    let out = grpo(d, &["in.parquet", "o.parquet", "--metrics", "o.parquet"]);
    usage_error(&out, "is OUT");
    let out = grpo(
        d,
        &["-f", "in.parquet", "o.parquet", "--metrics", "o.parquet"],
    );
    usage_error(&out, "is OUT");
    assert!(!d.join("o.parquet").exists());
    assert!(leftovers(d).is_empty());
}

#[test]
fn metrics_is_create_only_unless_forced_and_written_whole() {
    let (tmp, _) = with_input();
    let d = tmp.path();
    std::fs::write(d.join("m.json"), b"earlier").unwrap();
    let out = grpo(d, &["in.parquet", "o.parquet", "--metrics", "m.json"]);
    usage_error(&out, "--metrics m.json: already exists");
    assert_eq!(std::fs::read(d.join("m.json")).unwrap(), b"earlier");
    assert!(!d.join("o.parquet").exists());
    let out = grpo(d, &["-f", "in.parquet", "o.parquet", "--metrics", "m.json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("m.json")).unwrap()).unwrap();
    assert_eq!(json["advcalc/rows"], 256);
    assert!(leftovers(d).is_empty(), "{:?}", leftovers(d));
}

#[test]
fn metrics_dash_is_stdout() {
    let (tmp, _) = with_input();
    let d = tmp.path();
    let out = grpo(d, &["-q", "in.parquet", "o.parquet", "--metrics", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["advcalc/rows"], 256);
    assert!(!d.join("-").exists());
    // with OUT on stdout too, the two would interleave
    let out = grpo(d, &["-q", "in.parquet", "-", "--metrics", "-"]);
    usage_error(&out, "OUT `-` already writes to stdout");
    assert!(out.stdout.is_empty());
}

#[test]
fn metrics_inside_a_dataset_in_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    with_dataset(d);
    let out = grpo(d, &["base", "adv", "--metrics", "base/step=9.parquet"]);
    usage_error(&out, "lies inside IN");
    assert!(!d.join("base/step=9.parquet").exists());
    assert!(!d.join("adv").exists());
    let out = grpo(d, &["base/*.parquet", "adv", "--metrics", "base/m.json"]);
    usage_error(&out, "lies inside IN");
    assert!(!d.join("base/m.json").exists());
    // the report's page alike
    let out = run_in(d, &["report", "-e", "grpo", "base", "-o", "base/r.html"]);
    usage_error(&out, "lies inside IN");
    assert!(!d.join("base/r.html").exists());
}

#[test]
fn metrics_into_a_fifo_or_a_device_is_streamed_not_replaced() {
    let (tmp, _) = with_input();
    let d = tmp.path();
    let fifo = d.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let out = grpo(d, &["-q", "in.parquet", "o.parquet", "--metrics", "fifo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&reader.join().unwrap()).unwrap();
    assert_eq!(json["advcalc/rows"], 256);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // a character device, reached through a link: written into, never replaced
    symlink("/dev/null", d.join("null")).unwrap();
    let out = grpo(d, &["-q", "in.parquet", "o2.parquet", "--metrics", "null"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(d.join("null").is_symlink());
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
}

#[test]
fn a_device_or_fifo_as_out_is_refused_never_replaced() {
    let (tmp, _) = with_input();
    let d = tmp.path();
    let c = std::ffi::CString::new(d.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    // a link to /dev/null: were it replaced, the link would become a file (never /dev/null)
    symlink("/dev/null", d.join("null")).unwrap();
    for (target, kind) in [("fifo", "is a FIFO"), ("null", "is a character device")] {
        for force in [&[][..], &["-f"][..]] {
            let mut args = force.to_vec();
            args.extend(["in.parquet", target]);
            usage_error(&grpo(d, &args), kind);
            let mut args = vec!["report", "-e", "grpo", "in.parquet", "-o", target];
            args.extend(force);
            usage_error(&run_in(d, &args), kind);
        }
    }
    assert!(
        std::fs::metadata(d.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(d.join("null").is_symlink());
    assert!(leftovers(d).is_empty());
}

#[test]
fn out_with_a_trailing_slash_is_refused_before_the_work() {
    let (tmp, _) = with_input();
    let d = tmp.path();
    let out = grpo(d, &["in.parquet", "o.parquet/"]);
    usage_error(&out, "ends in `/`");
    assert!(leftovers(d).is_empty());
    assert!(!d.join("o.parquet").exists());
}

#[test]
fn a_symlink_loop_is_read_once_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let base = with_dataset(d);
    symlink(".", base.join("loop")).unwrap();
    // a second link to a step file is one file, not two
    symlink("step=0.parquet", base.join("step=9.parquet")).unwrap();
    let out = grpo(d, &["base", "adv"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("base/loop (a link to .)"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("512 rows in 2 batches from 2 files"),
        "{}",
        stderr(&out)
    );
    let mut written: Vec<String> = std::fs::read_dir(d.join("adv"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["step=0.parquet", "step=1.parquet"]);
    assert_eq!(rows(&d.join("adv/step=0.parquet")), 256);
    // the glob and inspect walk the same way
    let out = grpo(d, &["-f", "base/**/*.parquet", "adv2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("512 rows in 2 batches"),
        "{}",
        stderr(&out)
    );
    let out = run_in(d, &["inspect", "--json", "base"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let notes = json["notes"].to_string();
    assert!(notes.contains("base/loop"), "{notes}");
}

#[test]
fn a_dataset_in_that_links_into_out_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let base = with_dataset(d);
    std::fs::create_dir(d.join("adv")).unwrap();
    symlink("../adv", base.join("outputs")).unwrap();
    let out = grpo(d, &["base", "adv"]);
    usage_error(&out, "overlaps OUT");
    assert_eq!(std::fs::read_dir(d.join("adv")).unwrap().count(), 0);
}

#[test]
fn a_dataset_in_reached_through_a_link_inside_out_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    with_dataset(d);
    std::fs::create_dir(d.join("adv")).unwrap();
    symlink("../base", d.join("adv/dumps")).unwrap();
    let out = grpo(d, &["adv/dumps", "adv"]);
    usage_error(&out, "IN's directory is inside OUT");
    assert_eq!(std::fs::read_dir(d.join("adv")).unwrap().count(), 1);
}

#[test]
fn resume_refuses_an_output_whose_input_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let base = with_dataset(d);
    let out = grpo(d, &["-q", "base", "adv"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // a user file in OUT is theirs, and not an output
    std::fs::write(d.join("adv/notes.parquet"), b"mine").unwrap();
    std::fs::remove_file(base.join("step=1.parquet")).unwrap();
    let out = grpo(d, &["-q", "--resume", "base", "adv"]);
    usage_error(
        &out,
        "1 output whose input is no longer in IN: adv/step=1.parquet",
    );
    assert!(d.join("adv/step=1.parquet").exists());
    std::fs::remove_file(d.join("adv/step=1.parquet")).unwrap();
    let out = grpo(d, &["-q", "--resume", "base", "adv"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn threads_are_capped_with_a_note() {
    let (tmp, _) = with_input();
    let out = grpo(tmp.path(), &["-j", "5000", "in.parquet", "o.parquet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let cores = std::thread::available_parallelism().unwrap().get();
    assert!(
        stderr(&out).contains(&format!("5000 threads asked for, {} used", 4 * cores)),
        "{}",
        stderr(&out)
    );
}

/// The `advcalc: N rows ...` summary line of a run.
fn summary(out: &Output) -> String {
    stderr(out)
        .lines()
        .find(|l| l.starts_with("advcalc: "))
        .unwrap_or_default()
        .split(" -> ")
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_symlink_loop_in_a_trainers_dump_is_read_once() {
    let dumps = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trainers/dumps");
    for run in [
        "trl/run1",
        "nemo-rl/run1",
        "prime-rl/run1",
        "open-instruct/run1",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        copy_dir(&dumps.join(run), &d.join("dump"));
        let _ = std::fs::remove_file(d.join("dump/expected.json"));
        let clean = run_in(d, &["run", "dump", "clean.parquet"]);
        assert!(clean.status.success(), "{run}: {}", stderr(&clean));
        symlink(".", d.join("dump/loop")).unwrap();
        let looped = run_in(d, &["run", "dump", "looped.parquet"]);
        assert!(looped.status.success(), "{run}: {}", stderr(&looped));
        assert_eq!(summary(&looped), summary(&clean), "{run}");
        assert!(
            stderr(&looped).contains("dump/loop (a link to .)"),
            "{run}: {}",
            stderr(&looped)
        );
        assert_eq!(
            rows(&d.join("looped.parquet")),
            rows(&d.join("clean.parquet")),
            "{run}"
        );
    }
}
