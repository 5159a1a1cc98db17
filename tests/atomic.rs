//! Atomic output under faults: a run killed with SIGKILL while writing leaves the previous OUT
//! intact and no output; its temporary file is removed by the next run in that directory.

mod common;

use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use common::*;

fn temporaries(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".advcalc-"))
        .collect()
}

#[test]
fn sigkill_mid_write_keeps_the_previous_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // ~1.6M tokens in 16 row groups: long enough to be caught while writing.
    let rows = 16_000;
    let len = 100;
    let uids: Vec<String> = (0..rows).map(|i| format!("u{}", i / 8)).collect();
    let uid_refs: Vec<&str> = uids.iter().map(String::as_str).collect();
    let masks: Vec<Vec<i8>> = (0..rows).map(|_| vec![1; len]).collect();
    let scores: Vec<Vec<f32>> = (0..rows)
        .map(|i| {
            let mut r = vec![0.0; len];
            r[len - 1] = (i % 3) as f32;
            r
        })
        .collect();
    let batch = RecordBatch::try_from_iter(vec![
        ("uid", strings(&uid_refs)),
        ("response_mask", i8_lists(&masks)),
        ("rm_scores", f32_lists(&scores)),
        ("values", f32_lists(&scores)),
    ])
    .unwrap();
    write_parquet(&dir.join("in.parquet"), &batch, 1000);
    std::fs::write(dir.join("out.parquet"), b"previous result").unwrap();

    let mut child = advcalc()
        .current_dir(dir)
        .args([
            "run",
            "-q",
            "-f",
            "-e",
            "grpo",
            "--threads",
            "1",
            "in.parquet",
            "out.parquet",
        ])
        .spawn()
        .unwrap();
    let start = Instant::now();
    while temporaries(dir).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "advcalc finished before it could be killed"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no temporary file appeared"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        child.try_wait().unwrap().is_none(),
        "advcalc finished before it could be killed"
    );
    child.kill().unwrap(); // SIGKILL on unix
    child.wait().unwrap();

    assert_eq!(
        std::fs::read(dir.join("out.parquet")).unwrap(),
        b"previous result"
    );
    assert_eq!(temporaries(dir).len(), 1, "the killed run's temporary file");

    // The next run in the directory removes the dead run's leftover and completes.
    let out = run_in(
        dir,
        &["run", "-q", "-f", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(temporaries(dir).is_empty(), "{:?}", temporaries(dir));
    assert_eq!(read_parquet(&dir.join("out.parquet")).num_rows(), rows);
}
