//! open-instruct's `--save_traces` shards through the real binary: advcalc's advantages on the
//! fixture runs equal open-instruct's own (expected.json, written by open-instruct's code at
//! the pinned commit; fixtures/trainers/dumps/README.md), and a malformed line names itself.

mod common;

use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type};
use common::*;

fn fixture(run: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/trainers/dumps/open-instruct")
        .join(run)
}

/// open-instruct's advantage of (step, sample_idx), from expected.json.
fn expected(run: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(fixture(run).join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("expected.json parses")
}

fn ints(batch: &RecordBatch, name: &str) -> Vec<i64> {
    let col = batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"));
    col.as_primitive::<Int64Type>().values().to_vec()
}

/// `advcalc run` on a fixture run; every row checked against open-instruct's advantages.
fn run_matches(run: &str, extra: &[&str], normalization: &str) {
    let want = expected(run);
    assert_eq!(want["advantage_normalization_type"], normalization);
    let n = want["num_samples_per_prompt_rollout"].as_i64().expect("n");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = fixture(run);
    let mut args = vec!["run", dir.to_str().expect("utf-8 path"), "out.parquet"];
    args.extend(extra);
    let out = run_in(tmp.path(), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let got = read_parquet(&tmp.path().join("out.parquet"));
    assert_eq!(got.num_rows(), 24);
    let steps = ints(&got, "step");
    let samples = ints(&got, "sample_idx");
    let prompts = ints(&got, "prompt_idx");
    let uids = got
        .column_by_name("uid")
        .expect("uid")
        .as_string::<i32>()
        .clone();
    let logged = got
        .column_by_name("trainer_advantage")
        .expect("trainer_advantage")
        .as_primitive::<Float64Type>()
        .clone();
    let advantages = lists_f32(&got, "advantages");
    let mask = lists_f32(&got, "response_mask");
    for i in 0..got.num_rows() {
        let (step, sample) = (steps[i], samples[i]);
        // step kept 0-based as written; the group is (step, prompt_idx)
        assert!(step == 0 || step == 1, "row {i}: step {step}");
        assert_eq!(prompts[i], sample / n);
        assert_eq!(uids.value(i), format!("{step}:{}", sample / n), "row {i}");
        let x = want["steps"][step.to_string()]["advantage"][sample as usize]
            .as_f64()
            .unwrap_or_else(|| panic!("expected.json has no step {step} sample {sample}"));
        assert!(!logged.is_null(i));
        assert_eq!(logged.value(i), x, "row {i}: logged advantage");
        assert!(!mask[i].is_empty() && mask[i].iter().all(|&m| m == 1.0));
        assert_eq!(advantages[i].len(), mask[i].len());
        for (t, &a) in advantages[i].iter().enumerate() {
            let d = (a as f64 - x).abs();
            assert!(
                d <= 1e-6 + 1e-5 * x.abs(),
                "{run} step {step} sample {sample} token {t}: advcalc {a}, open-instruct {x}"
            );
        }
    }
}

#[test]
fn standard_run_matches_open_instructs_advantages() {
    run_matches("run1", &[], "standard");
}

#[test]
fn centered_run_matches_with_no_norm_adv_by_std() {
    run_matches("run_centered", &["--no-norm-adv-by-std"], "centered");
}

#[test]
fn inspect_reads_each_run() {
    for run in ["run1", "run_centered"] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = fixture(run);
        let out = run_in(tmp.path(), &["inspect", dir.to_str().expect("utf-8 path")]);
        assert_eq!(out.status.code(), Some(0), "{run}: {}", stderr(&out));
    }
}

#[test]
fn a_malformed_line_names_its_file_line_and_field() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = fixture("run1").join("run1_rollouts_000000.jsonl");
    let text = std::fs::read_to_string(src).expect("shard");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[4] = lines[4].replacen(r#""reward": 1.0"#, r#""reward": "x""#, 1);
    lines[4] = lines[4].replacen(r#""reward": 0.0"#, r#""reward": "x""#, 1);
    assert!(lines[4].contains(r#""reward": "x""#));
    let shard = tmp.path().join("bad_rollouts_000000.jsonl");
    std::fs::write(&shard, lines.join("\n") + "\n").expect("write");
    let out = run_in(
        tmp.path(),
        &["run", shard.to_str().expect("utf-8 path"), "out.parquet"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.contains("bad_rollouts_000000.jsonl line 5") && first.contains("`reward`"),
        "{first}"
    );
    assert!(!tmp.path().join("out.parquet").exists());
}

#[test]
fn interleaved_steps_are_refused_with_a_hint() {
    // the writer's 2 threads can interleave two steps' lines: step 1's first line before
    // step 0's last
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = fixture("run1").join("run1_rollouts_000000.jsonl");
    let text = std::fs::read_to_string(src).expect("shard");
    let mut lines: Vec<&str> = text.lines().collect();
    lines.swap(11, 12);
    let shard = tmp.path().join("run1_rollouts_000000.jsonl");
    std::fs::write(&shard, lines.join("\n") + "\n").expect("write");
    let out = run_in(
        tmp.path(),
        &[
            "run",
            tmp.path().to_str().expect("utf-8 path"),
            "out.parquet",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.contains("run1_rollouts_000000.jsonl line 13")
            && first.contains("a line of step 0 after step 1's lines"),
        "{first}"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("hint: sort the lines by (step, sample_idx)")),
        "{err}"
    );
}

/// A `reward` that is not a float32 number (Python's json writes NaN as the bare `NaN`;
/// numbers beyond float32 or float64) is refused naming the file, the line and the field as
/// written, not the spool's column and row.
#[test]
fn a_non_finite_reward_names_its_file_line_and_field() {
    for (value, said) in [
        ("NaN", "`reward` is NaN (pass --allow-nonfinite"),
        ("-Infinity", "`reward` is -Infinity (pass --allow-nonfinite"),
        ("1e300", "`reward` is 1e300, which overflows float32"),
        ("1e400", "`reward` is 1e400, which overflows float64"),
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let src = fixture("run1").join("run1_rollouts_000000.jsonl");
        let text = std::fs::read_to_string(src).expect("shard");
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let before = lines[4].clone();
        lines[4] = lines[4].replacen(r#""reward": 1.0"#, &format!(r#""reward": {value}"#), 1);
        lines[4] = lines[4].replacen(r#""reward": 0.0"#, &format!(r#""reward": {value}"#), 1);
        assert_ne!(lines[4], before);
        let shard = tmp.path().join("run1_rollouts_000000.jsonl");
        std::fs::write(&shard, lines.join("\n") + "\n").expect("write");
        let out = run_in(
            tmp.path(),
            &["run", "run1_rollouts_000000.jsonl", "out.parquet"],
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: run1_rollouts_000000.jsonl line 5: ") && first.contains(said),
            "{value}: {first}"
        );
        assert!(!tmp.path().join("out.parquet").exists());
    }
}
