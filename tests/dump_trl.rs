//! TRL's completions dump, as TRL 1.16.0's own `GRPOTrainer.log` wrote it
//! (`fixtures/trainers/dumps/trl/`): `run` and `inspect` read the run's directory with no
//! conversion, and the advantages equal the ones TRL computed (the `advantage` lists of
//! expected.json, written by the generator from TRL's own code, never by advcalc).

mod common;

use std::path::{Path, PathBuf};

use arrow::array::AsArray;
use arrow::datatypes::{Float64Type, Int64Type};
use common::{advcalc, assert_close, lists_f32, read_parquet, stderr};
use serde_json::Value;

fn fixture(run: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/trainers/dumps/trl")
        .join(run)
}

/// TRL's advantages, file by file in step order, and the settings the file does not record.
fn expected(run: &str) -> (Vec<f64>, Vec<i64>, Value) {
    let text = std::fs::read_to_string(fixture(run).join("expected.json")).unwrap();
    let e: Value = serde_json::from_str(&text).unwrap();
    let files = e["files"].as_object().unwrap();
    let mut names: Vec<&String> = files.keys().collect();
    names.sort();
    let (mut adv, mut steps) = (Vec::new(), Vec::new());
    for name in names {
        let f = &files[name];
        for a in f["advantage"].as_array().unwrap() {
            adv.push(a.as_f64().unwrap());
            steps.push(f["step"].as_i64().unwrap());
        }
    }
    (adv, steps, e)
}

fn weights(e: &Value) -> String {
    let w: Vec<String> = e["reward_weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_f64().unwrap().to_string())
        .collect();
    format!("algorithm.trl.reward_weights=[{}]", w.join(","))
}

#[test]
fn run_on_the_run_directory_gives_trls_advantages() {
    for run in ["run1", "run_chat"] {
        let (expected, steps, e) = expected(run);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.parquet");
        let done = advcalc()
            .arg("run")
            .arg(fixture(run))
            .arg(&out)
            .args(["--set", &weights(&e)])
            .output()
            .unwrap();
        assert!(done.status.success(), "{run}: {}", stderr(&done));
        let err = stderr(&done);
        // the reader says what it inferred; the defaults are TRL's algorithm and convention;
        // the row without a reward is TRL's own NaN, which its convention turns into 0
        assert!(err.contains("group size 4 inferred"), "{err}");
        assert!(err.contains("1 TRL row(s) have no reward"), "{err}");
        let b = read_parquet(&out);
        let adv: Vec<f32> = lists_f32(&b, "advantages")
            .into_iter()
            .map(|row| {
                assert_eq!(row.len(), 1, "sequence-level: one token per row");
                row[0]
            })
            .collect();
        // TRL computes in float32, advcalc in f64 written as float32
        assert_close(run, &adv, &expected, 1e-6, 1e-6);
        let logged = b.column_by_name("trainer_advantage").unwrap();
        let logged = logged.as_primitive::<Float64Type>();
        for (i, &x) in expected.iter().enumerate() {
            assert_eq!(logged.value(i), x, "{run} row {i}: the logged advantage");
        }
        let step = b
            .column_by_name("step")
            .unwrap()
            .as_primitive::<Int64Type>();
        assert_eq!(step.values().to_vec(), steps);
        // step 1 holds one prompt twice: two groups of 4 (rows 0-3 and 8-11), not one of 8
        let uid = b.column_by_name("uid").unwrap();
        let uid = uid.as_string::<i32>();
        assert_ne!(uid.value(0), uid.value(8));
        // the dump's own columns stay, TRL's `step` under its kept name
        for col in [
            "prompt",
            "completion",
            "length_reward",
            "advantage",
            "trainer_step",
        ] {
            assert!(b.column_by_name(col).is_some(), "{run}: {col}");
        }
        let provenance = b.schema().metadata().clone();
        assert_eq!(provenance["advcalc.convention"], "trl");
        assert_eq!(provenance["advcalc.estimator"], "grpo");
    }
}

#[test]
fn inspect_checks_the_logged_advantages() {
    let (_, _, e) = expected("run1");
    let done = advcalc()
        .arg("inspect")
        .arg("--json")
        .arg(fixture("run1"))
        .args(["--set", &weights(&e)])
        .output()
        .unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    let report: Value = serde_json::from_slice(&done.stdout).unwrap();
    let check = &report["logged_advantages"];
    assert_eq!(check["trainer"], "trl");
    assert_eq!(check["compared"], 36);
    assert_eq!(check["differing"], 0);
    assert!(check["max_abs_difference"].as_f64().unwrap() < 1e-6);

    // a wrong group size: every group moves, and the check names the size that fits
    let done = advcalc()
        .arg("inspect")
        .arg(fixture("run1"))
        .args(["--set", &weights(&e), "--set", "algorithm.group_size=6"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&done.stdout);
    assert!(text.contains("warning: logged_advantages_differ"), "{text}");
    assert!(text.contains("set algorithm.group_size=4"), "{text}");

    // without the weights: the check says they are assumed
    let done = advcalc()
        .arg("inspect")
        .arg(fixture("run1"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&done.stdout);
    assert!(
        text.contains("reward_weights are not in the file"),
        "{text}"
    );
}

/// `advcalc run IN OUT --set SET` on a TRL dump: the one advantage per row it wrote.
fn run_advantages(input: &Path, out: &Path, set: &str) -> Vec<f32> {
    let done = advcalc()
        .arg("run")
        .arg(input)
        .arg(out)
        .args(["--set", set])
        .output()
        .unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    lists_f32(&read_parquet(out), "advantages")
        .into_iter()
        .map(|r| r[0])
        .collect()
}

#[test]
fn one_file_and_a_glob_read_as_the_directory_does() {
    let (expected, _, e) = expected("run1");
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("run1").join("completions/completions_00002.parquet");
    let adv = run_advantages(&file, &dir.path().join("one.parquet"), &weights(&e));
    assert_close("step 2", &adv, &expected[12..24], 1e-6, 1e-6);

    let glob = fixture("run1").join("completions/completions_0000[23].parquet");
    let adv = run_advantages(&glob, &dir.path().join("glob.parquet"), &weights(&e));
    assert_close("steps 2-3", &adv, &expected[12..], 1e-6, 1e-6);
}

#[test]
fn bad_dumps_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    // a group size that does not divide a file's rows
    let done = advcalc()
        .arg("run")
        .arg(fixture("run1"))
        .arg(dir.path().join("o.parquet"))
        .args(["--set", "algorithm.group_size=5"])
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(1));
    let err = stderr(&done);
    assert!(
        err.contains("completions_00001.parquet: 12 rows is not a multiple of the group size 5"),
        "{err}"
    );
    assert!(!dir.path().join("o.parquet").exists());
    // more weights than reward columns
    let done = advcalc()
        .arg("run")
        .arg(fixture("run1"))
        .arg(dir.path().join("o.parquet"))
        .args(["--set", "algorithm.trl.reward_weights=[1,1,1]"])
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(2), "{}", stderr(&done));
    assert!(stderr(&done).contains("3 weights"), "{}", stderr(&done));
    // a token-level estimator on sequence-level data
    let done = advcalc()
        .arg("run")
        .args(["-e", "gae"])
        .arg(fixture("run1"))
        .arg(dir.path().join("o.parquet"))
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(1), "{}", stderr(&done));
    assert!(
        stderr(&done).contains("a TRL dump has one score per row"),
        "{}",
        stderr(&done)
    );
    // under another convention the NaN of a row without a reward is a fault, as anywhere
    let done = advcalc()
        .arg("run")
        .args(["--convention", "verl"])
        .arg(fixture("run1"))
        .arg(dir.path().join("o.parquet"))
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(1), "{}", stderr(&done));
    assert!(stderr(&done).contains("NaN"), "{}", stderr(&done));
    // a trainer's format is input only
    let done = advcalc()
        .arg("run")
        .arg(fixture("run1"))
        .arg(dir.path().join("o.x"))
        .args(["--output-format", "trl"])
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(2), "{}", stderr(&done));
    assert!(
        stderr(&done).contains("not a TRL dump"),
        "{}",
        stderr(&done)
    );
    // a file that is not TRL's
    let bad = dir.path().join("completions");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("completions_00001.parquet"), b"not parquet").unwrap();
    let done = advcalc()
        .arg("run")
        .arg(dir.path())
        .arg(dir.path().join("o.parquet"))
        .output()
        .unwrap();
    assert_eq!(done.status.code(), Some(1), "{}", stderr(&done));
    assert!(
        stderr(&done).contains("completions_00001.parquet"),
        "{}",
        stderr(&done)
    );
}

/// run1's completions file `file` as one batch.
fn completions(file: &str) -> arrow::array::RecordBatch {
    read_parquet(&fixture("run1").join("completions").join(file))
}

/// `batch` with the float column `name`'s values replaced by `value(row, old)` (its type
/// kept: the files of a run share their columns).
fn with_values(
    batch: &arrow::array::RecordBatch,
    name: &str,
    value: impl Fn(usize, Option<f64>) -> Option<f64>,
) -> arrow::array::RecordBatch {
    use arrow::array::{Array, Float64Array};
    let i = batch.schema().index_of(name).unwrap();
    let old = batch.column(i);
    let as_f64 = arrow::compute::cast(old, &arrow::datatypes::DataType::Float64).unwrap();
    let as_f64 = as_f64.as_primitive::<Float64Type>();
    let new: Float64Array = (0..as_f64.len())
        .map(|r| value(r, (!as_f64.is_null(r)).then(|| as_f64.value(r))))
        .collect();
    let new = arrow::compute::cast(&new, old.data_type()).unwrap();
    let mut columns = batch.columns().to_vec();
    columns[i] = new;
    arrow::array::RecordBatch::try_new(batch.schema(), columns).unwrap()
}

/// A TRL output_dir in `dir` holding `files` as `completions/NAME`.
fn trl_dir(dir: &Path, files: &[(&str, arrow::array::RecordBatch)]) -> PathBuf {
    let out = dir.join("trl_run");
    std::fs::create_dir_all(out.join("completions")).unwrap();
    for (name, batch) in files {
        common::write_parquet(&out.join("completions").join(name), batch, 1024);
    }
    out
}

/// `advcalc run IN OUT ARGS` expected to fail: its exit code and stderr, and that nothing was
/// written at OUT.
fn refused(input: &Path, args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.parquet");
    let done = advcalc()
        .arg("run")
        .arg(input)
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    assert!(!out.exists(), "OUT written: {}", stderr(&done));
    (done.status.code(), stderr(&done))
}

const WEIGHTS: &str = "algorithm.trl.reward_weights=[1.0,0.5]";

/// TRL's rewards are a float32 tensor (`rewards_per_func`): an infinite reward, or one beyond
/// float32, makes its whole group's advantages NaN (then 0 by `nan_to_num`) there. Refused
/// naming the file, the row and the reward column, unless --allow-nonfinite.
#[test]
fn a_reward_that_is_not_a_float32_number_is_refused_naming_file_row_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    for (value, said) in [
        (f64::INFINITY, "`length_reward` is inf"),
        (f64::NEG_INFINITY, "`length_reward` is -inf"),
        (1e308, "`length_reward` is 1e308, which overflows float32"),
    ] {
        let batch = with_values(
            &completions("completions_00001.parquet"),
            "length_reward",
            |r, v| {
                if r == 1 { Some(value) } else { v }
            },
        );
        let run = trl_dir(tmp.path(), &[("completions_00001.parquet", batch)]);
        let (code, err) = refused(&run, &["--set", WEIGHTS]);
        assert_eq!(code, Some(1), "{err}");
        let first = err.lines().next().unwrap();
        assert!(
            first.contains("completions/completions_00001.parquet row 2: ") && first.contains(said),
            "{first}"
        );
        assert!(first.contains("--allow-nonfinite"), "{first}");
        // with --allow-nonfinite it runs, as TRL would (NaN in the group)
        let out = tmp.path().join("allowed.parquet");
        let _ = std::fs::remove_file(&out);
        let done = advcalc()
            .arg("run")
            .arg(&run)
            .arg(&out)
            .args(["--set", WEIGHTS, "--allow-nonfinite", "-q"])
            .output()
            .unwrap();
        assert!(done.status.success(), "{}", stderr(&done));
    }
    // two finite rewards whose weighted sum overflows float32 as TRL sums them
    let batch = with_values(
        &completions("completions_00001.parquet"),
        "length_reward",
        |r, v| {
            if r == 1 { Some(3e38) } else { v }
        },
    );
    let batch = with_values(&batch, "keyword_reward", |r, v| {
        if r == 1 { Some(3e38) } else { v }
    });
    let run = trl_dir(tmp.path(), &[("completions_00001.parquet", batch)]);
    let (code, err) = refused(&run, &["--set", "algorithm.trl.reward_weights=[1.0,1.0]"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("completions_00001.parquet row 2: the reward Σ wᵢ·rᵢ (`length_reward` 3e38 × 1.0 + `keyword_reward` 3e38 × 1.0) overflows float32"),
        "{err}"
    );
}

/// TRL's group mean and std are float32 (`torch.nanmean`, trl's `nanstd`): rewards that fit
/// float32 but whose group sum, or squared deviations, do not give NaN or 0 advantages in
/// TRL, where advcalc's float64 would give others without a word.
#[test]
fn rewards_whose_float32_group_statistics_overflow_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for (big, said) in [
        (3e38, "its rewards sum to"),
        (
            1e20,
            "its rewards' squared deviations from their mean sum to",
        ),
    ] {
        // rows 5 and 6 (the second group of 4) are `big`
        let batch = with_values(
            &completions("completions_00001.parquet"),
            "length_reward",
            |r, v| {
                if r == 4 || r == 5 { Some(big) } else { v }
            },
        );
        let batch = with_values(&batch, "keyword_reward", |r, v| {
            if r == 4 || r == 5 { None } else { v }
        });
        let run = trl_dir(tmp.path(), &[("completions_00001.parquet", batch)]);
        let (code, err) = refused(&run, &["--set", WEIGHTS, "--set", "algorithm.group_size=4"]);
        assert_eq!(code, Some(1), "{err}");
        let first = err.lines().next().unwrap();
        assert!(
            first.contains("completions_00001.parquet rows 5-8 (a group of 4): ")
                && first.contains(said)
                && first.contains("overflows float32"),
            "{first}"
        );
        // inspect reads it, and says so
        let done = advcalc()
            .arg("inspect")
            .arg(&run)
            .args(["--set", WEIGHTS, "--set", "algorithm.group_size=4"])
            .output()
            .unwrap();
        assert!(done.status.success(), "{}", stderr(&done));
        let text = String::from_utf8_lossy(&done.stdout).into_owned() + &stderr(&done);
        assert!(
            text.contains("1 TRL group(s) have rewards whose group mean or std overflows float32"),
            "{text}"
        );
    }
}

/// TRL refuses num_generations < 2 (GRPOConfig: "GRPO requires at least 2 generations per
/// prompt to calculate the advantages"): a file that misses one row, whose prompt runs give
/// a group size of 1, is an error with a hint, never groups of one whose advantages are all 0.
#[test]
fn a_group_size_of_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let batch = completions("completions_00001.parquet");
    let short = batch.slice(0, batch.num_rows() - 1);
    let run = trl_dir(tmp.path(), &[("completions_00001.parquet", short)]);
    let (code, err) = refused(&run, &["--set", WEIGHTS]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("group size of 1"), "{err}");
    assert!(err.contains("TRL requires num_generations >= 2"), "{err}");
    assert!(
        err.contains("hint: pass --set algorithm.group_size=N"),
        "{err}"
    );
    // given as 1: a usage error naming the key
    let (code, err) = refused(
        &fixture("run1"),
        &["--set", WEIGHTS, "--set", "algorithm.group_size=1"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("algorithm.group_size is 1, but TRL requires num_generations >= 2"),
        "{err}"
    );
}

/// A reward weight that is NaN or inf (or beyond TRL's float32 tensor) would turn every score
/// it touches into NaN: refused naming the key, exit 2.
#[test]
fn non_finite_reward_weights_are_refused() {
    for (weights, said) in [
        (
            "[.nan,1]",
            "algorithm.trl.reward_weights (from --set): expected a list of finite numbers, found `nan`",
        ),
        (
            "[1,.inf]",
            "algorithm.trl.reward_weights (from --set): expected a list of finite numbers, found `inf`",
        ),
        (
            "[1e39,1]",
            "algorithm.trl.reward_weights: 1e39 overflows float32",
        ),
    ] {
        let (code, err) = refused(
            &fixture("run1"),
            &["--set", &format!("algorithm.trl.reward_weights={weights}")],
        );
        assert_eq!(code, Some(2), "{weights}: {err}");
        assert!(err.contains(said), "{weights}: {err}");
    }
}

/// Under a convention other than TRL's, a row no reward function scored (NaN) is refused
/// naming its file and row, not the spool's column and row.
#[test]
fn an_unscored_row_under_another_convention_names_its_file_and_row() {
    let (code, err) = refused(
        &fixture("run1"),
        &["--set", WEIGHTS, "--convention", "verl"],
    );
    assert_eq!(code, Some(1), "{err}");
    let first = err.lines().next().unwrap();
    assert!(first.contains("completions_0000"), "{first}");
    assert!(first.contains(".parquet row "), "{first}");
    assert!(
        first.contains("no reward function scored the row"),
        "{first}"
    );
    assert!(first.contains("NaN"), "{first}");
}

/// Completions files of two runs: the message names the columns that differ.
#[test]
fn columns_that_differ_between_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let second = completions("completions_00002.parquet");
    let schema = second.schema();
    let fields: Vec<arrow::datatypes::Field> = schema
        .fields()
        .iter()
        .map(|f| {
            if f.name() == "keyword_reward" {
                f.as_ref().clone().with_name("format_reward")
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    let renamed = arrow::array::RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new_with_metadata(
            fields,
            schema.metadata().clone(),
        )),
        second.columns().to_vec(),
    )
    .unwrap();
    let run = trl_dir(
        tmp.path(),
        &[
            (
                "completions_00001.parquet",
                completions("completions_00001.parquet"),
            ),
            ("completions_00002.parquet", renamed),
        ],
    );
    let (code, err) = refused(&run, &["--set", WEIGHTS]);
    assert_eq!(code, Some(1), "{err}");
    let first = err.lines().next().unwrap();
    assert!(
        first.contains("completions_00002.parquet: its columns differ from "),
        "{first}"
    );
    assert!(first.contains("`format_reward` not in "), "{first}");
    assert!(first.contains("no `keyword_reward`"), "{first}");
}
