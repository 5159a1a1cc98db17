//! NeMo-RL's `train_data_step{N}.jsonl` through the real binary: the committed fixture
//! (`fixtures/trainers/dumps/nemo-rl/run1`, written by NeMo-RL's own logger, with NeMo-RL's own
//! advantages and groups in `expected.json`) read as a log dir, an `exp_NNN` directory and one
//! file; a malformed line and a log dir of two runs are refused.

mod common;

use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type};
use common::{advcalc, check_close, copy_dir, lists_f32, read_parquet, stderr};
use serde_json::Value;

/// float32 tolerance: NeMo-RL computes in float32, advcalc in float64 rounded to float32.
const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-5;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trainers/dumps/nemo-rl/run1")
}

/// expected.json's rows, in reading order (steps by N, rows by idx), with their step.
fn expected() -> Vec<(i64, Value)> {
    let text = std::fs::read_to_string(fixture().join("expected.json")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    let steps = json["steps"].as_object().unwrap();
    let mut files: Vec<(i64, &Vec<Value>)> = steps
        .iter()
        .map(|(file, rows)| {
            let n = file
                .strip_prefix("train_data_step")
                .and_then(|r| r.strip_suffix(".jsonl"))
                .unwrap()
                .parse()
                .unwrap();
            (n, rows.as_array().unwrap())
        })
        .collect();
    files.sort_by_key(|(n, _)| *n);
    files
        .into_iter()
        .flat_map(|(n, rows)| rows.iter().map(move |r| (n, r.clone())))
        .collect()
}

fn run(input: &Path, out: &Path) -> std::process::Output {
    advcalc()
        .arg("run")
        .arg(input)
        .arg(out)
        .output()
        .expect("advcalc runs")
}

/// Every row of `out` against expected.json's rows `rows`.
fn check_rows(out: &RecordBatch, rows: &[(i64, Value)]) {
    assert_eq!(out.num_rows(), rows.len());
    let advantages = lists_f32(out, "advantages");
    let masks = out
        .column_by_name("response_mask")
        .unwrap()
        .as_list::<i32>();
    let uids = out.column_by_name("uid").unwrap().as_string::<i32>();
    let steps = out
        .column_by_name("step")
        .unwrap()
        .as_primitive::<Int64Type>();
    let logged = out
        .column_by_name("trainer_advantage")
        .unwrap()
        .as_primitive::<Float64Type>();
    let idx = out
        .column_by_name("idx")
        .unwrap()
        .as_primitive::<Int64Type>();
    for (i, (step, want)) in rows.iter().enumerate() {
        let what = format!("step {step} idx {}", want["idx"]);
        assert_eq!(steps.value(i), *step, "{what}: step");
        assert_eq!(idx.value(i), want["idx"].as_i64().unwrap(), "{what}: idx");
        let group = want["group"].as_i64().unwrap();
        assert_eq!(uids.value(i), format!("{step}:{group}"), "{what}: uid");
        let mask: Vec<i8> = masks
            .value(i)
            .as_primitive::<arrow::datatypes::Int8Type>()
            .values()
            .to_vec();
        // the response: from the first trained token to input_lengths
        let response =
            want["input_length"].as_i64().unwrap() - want["prompt_length"].as_i64().unwrap();
        assert_eq!(mask.len() as i64, response, "{what}: response length");
        let trained = mask.iter().filter(|&&m| m == 1).count() as i64;
        assert_eq!(
            trained,
            want["num_loss_tokens"].as_i64().unwrap(),
            "{what}: trained tokens"
        );
        let nemo = want["advantage"].as_f64().unwrap();
        assert!(!logged.is_null(i), "{what}: no logged advantage");
        assert_eq!(logged.value(i), nemo, "{what}: trainer_advantage");
        let on_trained: Vec<f32> = advantages[i]
            .iter()
            .zip(&mask)
            .filter(|(_, m)| **m == 1)
            .map(|(a, _)| *a)
            .collect();
        assert_eq!(advantages[i].len(), mask.len(), "{what}: advantages length");
        let expected = vec![nemo; on_trained.len()];
        check_close(
            &format!("{what}: advantages"),
            &on_trained,
            &expected,
            ATOL,
            RTOL,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn run_gives_nemo_rl_numbers_on_the_log_dir() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.parquet");
    let o = run(&fixture(), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    // the overlong row of step 2 is computed in its group, and said so
    assert!(
        err.contains("1 NeMo-RL row(s) have sample_loss_mask 0"),
        "{err}"
    );
    let batch = read_parquet(&out);
    let rows = expected();
    assert_eq!(rows.len(), 16);
    check_rows(&batch, &rows);
    // the overlong-filtered row (step 2) keeps its field as written
    let masked = rows
        .iter()
        .position(|(_, r)| r["sample_loss_mask"].as_f64() == Some(0.0))
        .expect("the fixture has an overlong row");
    // (the spool passes a field holding a list through as its JSON text)
    let sample = batch
        .column_by_name("sample_loss_mask")
        .expect("sample_loss_mask passes through");
    // unwrapped from NeMo's batch of one: a float column
    assert_eq!(sample.as_primitive::<Float64Type>().value(masked), 0.0);
    assert_eq!(rows[masked].0, 2);
}

#[test]
fn an_exp_directory_and_one_file_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("exp.parquet");
    let o = run(&fixture().join("exp_001"), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    check_rows(&read_parquet(&out), &expected());
    let out = dir.path().join("one.parquet");
    let o = run(&fixture().join("exp_001/train_data_step2.jsonl"), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let step2: Vec<(i64, Value)> = expected().into_iter().filter(|(n, _)| *n == 2).collect();
    check_rows(&read_parquet(&out), &step2);
}

#[test]
fn inspect_reads_the_dump() {
    let o = advcalc().arg("inspect").arg(fixture()).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_batch_dimension_of_two_is_refused_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("run1");
    copy_dir(&fixture(), &copy);
    let file = copy.join("exp_001/train_data_step2.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(lines[2].contains(r#""rewards": [1.0]"#) || lines[2].contains(r#""rewards": [0.0]"#));
    lines[2] = lines[2]
        .replace(r#""rewards": [1.0]"#, r#""rewards": [1.0, 2.0]"#)
        .replace(r#""rewards": [0.0]"#, r#""rewards": [1.0, 2.0]"#);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let out = dir.path().join("out.parquet");
    let o = run(&copy, &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("train_data_step2.jsonl line 3"), "{err}");
    assert!(err.contains("`rewards`"), "{err}");
    assert!(!out.exists());
}

#[test]
fn two_runs_under_one_log_dir_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("run1");
    copy_dir(&fixture(), &copy);
    copy_dir(&copy.join("exp_001"), &copy.join("exp_002"));
    let out = dir.path().join("out.parquet");
    let o = run(&copy, &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("exp_001") && err.contains("exp_002"), "{err}");
    assert!(err.contains("exp_NNN"), "{err}");
}

/// A field whose kind changes after the first chunk of lines (1024), and fields that first
/// appear there: the spool is written again with every line's kinds, as one read of every
/// line gives them.
#[test]
fn fields_whose_kind_changes_late_are_typed_by_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("exp_001");
    std::fs::create_dir_all(&exp).unwrap();
    let text = std::fs::read_to_string(fixture().join("exp_001/train_data_step1.jsonl")).unwrap();
    let template: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let n = 1100;
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let line = template[i % template.len()].trim_end();
            let line = &line[..line.len() - 1];
            // `idx`: integers, then a float; `late`: from line 1051 on; `nulls`: null, then 7
            let idx = if i < 1030 {
                i.to_string()
            } else {
                format!("{i}.5")
            };
            let late = if i >= 1050 { r#", "late": "x""# } else { "" };
            let nulls = if i < 1040 { "null" } else { "7" };
            // the fixture's own idx is replaced (a key given twice keeps its last value)
            format!(r#"{line}, "idx": {idx}{late}, "nulls": {nulls}}}"#)
        })
        .collect();
    std::fs::write(exp.join("train_data_step1.jsonl"), lines.join("\n") + "\n").unwrap();
    let out = dir.path().join("out.parquet");
    let o = advcalc()
        .args(["run", "-q", "--allow-nonfinite"])
        .arg(&exp)
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let batch = read_parquet(&out);
    assert_eq!(batch.num_rows(), n);
    let idx = batch.column_by_name("idx").unwrap();
    let idx = idx.as_primitive::<Float64Type>();
    assert_eq!(
        (idx.value(0), idx.value(1029), idx.value(1030)),
        (0.0, 1029.0, 1030.5)
    );
    let late = batch.column_by_name("late").unwrap().as_string::<i32>();
    assert_eq!((late.null_count(), late.value(1050)), (1050, "x"));
    let nulls = batch.column_by_name("nulls").unwrap();
    let nulls = nulls.as_primitive::<Int64Type>();
    assert_eq!((nulls.null_count(), nulls.value(1040)), (1040, 7));
    // the columns before the changed ones are as the fixture's lines give them
    let rewards = batch.column_by_name("rewards").unwrap();
    assert_eq!(rewards.len(), n);
}

/// The fixture copied into `dir`, with line `line` (counted from 1) of `train_data_step2.jsonl`
/// changed by `edit`; the copy's `exp_001`.
fn edited_copy(dir: &Path, line: usize, edit: impl Fn(&str) -> String) -> PathBuf {
    let copy = dir.join("run1");
    copy_dir(&fixture(), &copy);
    let file = copy.join("exp_001/train_data_step2.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let before = lines[line - 1].clone();
    lines[line - 1] = edit(&before);
    assert_ne!(lines[line - 1], before, "the edit changes the line");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    copy.join("exp_001")
}

/// A reward that is not a float32 number (NaN, as Python's json writes it; a number beyond
/// float32 or float64) is refused naming the file, the line and the field as written, not
/// the spool's column and row.
#[test]
fn a_non_finite_reward_names_the_file_line_and_field() {
    for (value, said) in [
        ("NaN", "`rewards` is NaN (pass --allow-nonfinite"),
        ("Infinity", "`rewards` is Infinity (pass --allow-nonfinite"),
        (
            "1e300",
            "`rewards` is 1e300, which overflows float32 (pass --allow-nonfinite",
        ),
        (
            "-1e400",
            "`rewards` is -1e400, which overflows float64 (pass --allow-nonfinite",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let exp = edited_copy(dir.path(), 3, |l| {
            l.replace(r#""rewards": [1.0]"#, &format!(r#""rewards": [{value}]"#))
                .replace(r#""rewards": [0.0]"#, &format!(r#""rewards": [{value}]"#))
        });
        let out = dir.path().join("out.parquet");
        let o = run(&exp, &out);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let err = stderr(&o);
        let first = err.lines().next().unwrap();
        assert!(
            first.starts_with("error: ")
                && first.contains("exp_001/train_data_step2.jsonl line 3: "),
            "{first}"
        );
        assert!(first.contains(said), "{value}: {first}");
        assert!(!out.exists());
        // inspect counts them instead
        let o = advcalc().arg("inspect").arg(&exp).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// NeMo-RL writes every row of a step's training batch into its file: a 0-byte
/// `train_data_stepN.jsonl` is a write cut short, refused naming it (not a step left out).
#[test]
fn an_empty_step_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("run1");
    copy_dir(&fixture(), &copy);
    std::fs::write(copy.join("exp_001/train_data_step2.jsonl"), b"").unwrap();
    let out = dir.path().join("out.parquet");
    let o = run(&copy, &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with("error: ")
            && err
                .lines()
                .next()
                .unwrap()
                .ends_with("exp_001/train_data_step2.jsonl: empty file, no JSON lines"),
        "{err}"
    );
    assert!(!out.exists());
}

/// verl's JSONL files (`{global_steps}.jsonl`) beside NeMo-RL's step files: refused naming
/// both, as two trainers' dumps are, never read as the NeMo-RL dump alone.
#[test]
fn verl_jsonl_beside_a_nemo_rl_dump_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("run1");
    copy_dir(&fixture(), &copy);
    std::fs::write(
        copy.join("exp_001/7.jsonl"),
        "{\"input\": \"q\", \"output\": \"a\", \"gts\": null, \"score\": 1.0, \"step\": 7}\n",
    )
    .unwrap();
    let out = dir.path().join("out.parquet");
    let o = run(&copy, &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    let first = err.lines().next().unwrap();
    assert!(first.contains("holds both a NeMo-RL dump ("), "{first}");
    assert!(
        first.contains("train_data_step1.jsonl) and verl JSONL files ("),
        "{first}"
    );
    assert!(first.contains("exp_001/7.jsonl)"), "{first}");
    assert!(err.contains("--input-format nemo-rl"), "{err}");
    assert!(!out.exists());
    // --input-format reads the NeMo-RL files alone
    let o = advcalc()
        .args(["run", "-q", "--input-format", "nemo-rl"])
        .arg(&copy)
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    check_rows(&read_parquet(&out), &expected());
}

/// A non-finite log-prob, refused by the passes (rollout correction reads it), names the
/// user's file, line and field as well as the spool's column and row.
#[test]
fn a_non_finite_log_prob_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let exp = edited_copy(dir.path(), 3, |l| {
        l.replacen("-8.593721389770508", "NaN", 1)
    });
    let out = dir.path().join("out.parquet");
    let o = advcalc()
        .args(["run", "-e", "grpo", "--set"])
        .arg("algorithm.rollout_correction.rollout_is=token")
        .arg(&exp)
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let first = stderr(&o).lines().next().unwrap().to_string();
    assert!(
        first.starts_with("error: ")
            && first.contains("exp_001/train_data_step2.jsonl line 3: `generation_logprobs`: "),
        "{first}"
    );
    assert!(
        first.contains("`rollout_log_probs`") && first.contains("NaN"),
        "{first}"
    );
    assert!(!out.exists());
    // compare and report read the same rows
    let set = "algorithm.rollout_correction.rollout_is=token";
    for args in [
        vec!["compare", "-e", "grpo,rloo", "--set", set],
        vec!["report", "-e", "grpo", "--set", set, "-o"],
    ] {
        let mut cmd = advcalc();
        cmd.args(&args);
        if args[0] == "report" {
            cmd.arg(dir.path().join("r.html"));
        }
        let o = cmd.arg(&exp).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let first = stderr(&o).lines().next().unwrap().to_string();
        assert!(
            first.contains("exp_001/train_data_step2.jsonl line 3: `generation_logprobs`: "),
            "{args:?}: {first}"
        );
    }
}
