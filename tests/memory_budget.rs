//! `--memory`: pass 1's decoded row groups kept for pass 2 within a budget, the rest read
//! again. The output must not change by a byte with the budget or the thread count: all kept,
//! some kept (the budget holds fewer row groups than the file has), none kept (0, and a
//! budget smaller than any row group), on GRPO and on the full chain (KL, rejection, IS, GAE),
//! for a file and for a dataset.

mod common;

use std::path::{Path, PathBuf};

use common::{run_in, stderr};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet")
}

/// The benchmark's full chain (KL in the reward, token IS and rejection, GAE).
const FULL_CHAIN: &str = include_str!("../bench/full_chain.yaml");

/// The demo's 4 row groups hold about 14k tokens each: decoded, the full chain's projection
/// (uid, the mask, five float columns) takes about 320 KB per row group, GRPO's (uid, mask,
/// scores) about 77 KB (pyarrow's `nbytes`; Arrow's capacities add a little). So `100K`
/// keeps one GRPO row group and no full-chain one, `700K` keeps every GRPO row group and two
/// full-chain ones, `1K` and `0` keep nothing, `1G` everything.
const BUDGETS: [&str; 5] = ["0", "1K", "100K", "700K", "1G"];

/// Run `algo` on IN with every thread count and budget; every output equals the first.
fn same_bytes_for_every_budget(algo: &[&str], input: &Path, dataset: bool) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("full.yaml"), FULL_CHAIN).unwrap();
    let mut reference: Option<(String, Vec<Vec<u8>>)> = None;
    for threads in ["1", "2", "3"] {
        for budget in BUDGETS {
            let out = format!(
                "out-{threads}-{budget}{}",
                if dataset { "" } else { ".parquet" }
            );
            let mut args = vec!["run", "-q", "--threads", threads, "--memory", budget];
            args.extend(algo);
            args.extend([input.to_str().unwrap(), out.as_str()]);
            let run = run_in(tmp.path(), &args);
            assert!(run.status.success(), "{args:?}: {}", stderr(&run));
            let bytes = outputs(&tmp.path().join(&out));
            match &reference {
                None => reference = Some((out, bytes)),
                Some((first, expected)) => {
                    assert!(bytes == *expected, "{out} differs from {first} ({algo:?})")
                }
            }
        }
    }
}

/// The bytes of OUT (a file, or a dataset's output files in name order).
fn outputs(path: &Path) -> Vec<Vec<u8>> {
    if path.is_file() {
        return vec![std::fs::read(path).unwrap()];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

#[test]
fn grpo_output_is_the_same_for_every_budget_and_thread_count() {
    same_bytes_for_every_budget(&["-e", "grpo"], &demo(), false);
}

#[test]
fn full_chain_output_is_the_same_for_every_budget_and_thread_count() {
    same_bytes_for_every_budget(&["--config", "full.yaml"], &demo(), false);
}

#[test]
fn a_dataset_output_is_the_same_for_every_budget_and_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let steps = tmp.path().join("steps");
    std::fs::create_dir(&steps).unwrap();
    // two files of the demo, each its own step (and training batch)
    for step in 0..2 {
        std::fs::copy(demo(), steps.join(format!("step={step}.parquet"))).unwrap();
    }
    same_bytes_for_every_budget(&["--config", "full.yaml"], &steps, true);
}

#[test]
fn a_bad_budget_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in ["lots", "1X", "1.2.3M", ""] {
        let out = run_in(
            tmp.path(),
            &[
                "run",
                "-e",
                "grpo",
                "--memory",
                bad,
                demo().to_str().unwrap(),
                "out.parquet",
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "--memory {bad}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("is not a size"),
            "--memory {bad}: {}",
            stderr(&out)
        );
        assert!(!tmp.path().join("out.parquet").exists());
    }
}
