//! Datasets through the real binary (`docs/datasets.md`): a directory or glob of step files
//! run as one input (the concatenated file's numbers), OUT mirroring IN, `--resume` after a
//! kill, `inspect` and `compare` on a dataset, and the faults of `docs/errors.md`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow::compute::concat_batches;
use common::*;

/// A deterministic pseudo-random number in [0, 1).
fn unit(i: usize, salt: usize) -> f32 {
    let x = (i as u64)
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add((salt as u64).wrapping_mul(1_442_695_040_888_963_407));
    ((x >> 33) % 10_000) as f32 / 10_000.0
}

/// One step's rows: uids scattered (groups of 4 not adjacent), tool spans (mask 0), a score
/// on the last token, log-probs and values; with a `step` column when `with_step`.
fn step_batch(step: i64, rows: usize, with_step: bool) -> RecordBatch {
    let s = step as usize;
    let uids: Vec<String> = (0..rows)
        .map(|i| format!("q{}", (i * 7) % (rows / 4)))
        .collect();
    let uid_refs: Vec<&str> = uids.iter().map(String::as_str).collect();
    let lens: Vec<usize> = (0..rows).map(|i| 3 + (i + s) % 6).collect();
    let masks: Vec<Vec<i8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &l)| (0..l).map(|t| i8::from(!(t == 1 && i % 3 == 0))).collect())
        .collect();
    let scores: Vec<Vec<f32>> = lens
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let mut r = vec![0.0; l];
            r[l - 1] = (unit(i, s) * 3.0).floor() / 2.0;
            r
        })
        .collect();
    let lp = |salt: usize| -> Vec<Vec<f32>> {
        lens.iter()
            .enumerate()
            .map(|(i, &l)| (0..l).map(|t| -0.1 - unit(i * 31 + t, s + salt)).collect())
            .collect()
    };
    let mut cols: Vec<(&str, ArrayRef)> = vec![
        ("uid", strings(&uid_refs)),
        ("response_mask", i8_lists(&masks)),
        ("rm_scores", f32_lists(&scores)),
        ("old_log_probs", f32_lists(&lp(100))),
        ("ref_log_prob", f32_lists(&lp(200))),
        ("values", f32_lists(&lp(300))),
    ];
    if with_step {
        cols.push(("step", Arc::new(Int64Array::from(vec![step; rows]))));
    }
    RecordBatch::try_from_iter(cols).unwrap()
}

/// `dir/in/step=1.parquet` and `step=2.parquet`: eight rows each (`step_batch`), written
/// `rows_per_group` rows a row group.
fn two_steps_in(dir: &Path, rows_per_group: usize) {
    std::fs::create_dir(dir.join("in")).unwrap();
    for s in 1..=2 {
        write_parquet(
            &dir.join(format!("in/step={s}.parquet")),
            &step_batch(s, 8, true),
            rows_per_group,
        );
    }
}

/// advcalc's temporary files anywhere under `dir`.
fn leftovers_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            found.extend(leftovers_under(&p));
        } else if e.file_name().to_string_lossy().starts_with(".advcalc-") {
            found.push(p);
        }
    }
    found
}

/// Wait until a spawned run has a temporary output under `out` (pass 2 is writing).
fn wait_for_temporary(child: &mut std::process::Child, out: &Path) {
    let start = std::time::Instant::now();
    while leftovers_under(out).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "advcalc finished before it was caught writing"
        );
        assert!(
            start.elapsed().as_secs() < 120,
            "no temporary file appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

fn slice_rows(batch: &RecordBatch, range: std::ops::Range<usize>) -> RecordBatch {
    batch.slice(range.start, range.len())
}

const OUTPUTS: [&str; 4] = [
    "token_level_rewards",
    "advantages",
    "returns",
    "response_mask",
];

/// Each output file equals the concatenated run's rows for it, bit for bit.
fn assert_same_as_concatenation(whole: &RecordBatch, outs: &[(PathBuf, usize)]) {
    let mut at = 0;
    for (path, rows) in outs {
        let got = read_parquet(path);
        assert_eq!(got.num_rows(), *rows, "{}", path.display());
        let want = slice_rows(whole, at..at + rows);
        for col in OUTPUTS {
            assert_eq!(
                lists_f32(&got, col),
                lists_f32(&want, col),
                "{} column {col}",
                path.display()
            );
        }
        at += rows;
    }
    assert_eq!(at, whole.num_rows());
}

/// verl's hook layout (`step=N.parquet` with a `step` column): the same numbers as the
/// concatenated file with an adaptive KL controller carried across steps and per-step
/// whitening (gae); files in step order (10 after 3), OUT mirroring the names, the metrics
/// the same.
#[test]
fn step_files_give_the_concatenated_files_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("in")).unwrap();
    let steps = [1i64, 2, 3, 10];
    let batches: Vec<RecordBatch> = steps.iter().map(|&s| step_batch(s, 24, true)).collect();
    for (s, b) in steps.iter().zip(&batches) {
        write_parquet(&dir.join(format!("in/step={s}.parquet")), b, 5);
    }
    let whole = concat_batches(&batches[0].schema(), &batches).unwrap();
    write_parquet(&dir.join("all.parquet"), &whole, 7);
    let config = [
        "-e",
        "gae",
        "--set",
        "algorithm.use_kl_in_reward=true",
        "--set",
        "algorithm.kl_ctrl.type=adaptive",
        "--set",
        "algorithm.kl_ctrl.kl_coef=0.2",
        "--set",
        "algorithm.kl_ctrl.target_kl=0.01",
        "--set",
        "algorithm.kl_ctrl.horizon=50",
    ];
    let run = |args: &[&str]| {
        let out = run_in(dir, &[&["run", "-q"], &config[..], args].concat());
        assert!(out.status.success(), "{}", stderr(&out));
    };
    run(&["--metrics", "all.json", "all.parquet", "all-out.parquet"]);
    run(&["--metrics", "ds.json", "--threads", "2", "in", "out"]);
    assert_eq!(
        files_under(&dir.join("out")),
        [
            "step=1.parquet",
            "step=10.parquet",
            "step=2.parquet",
            "step=3.parquet"
        ]
    );
    let whole_out = read_parquet(&dir.join("all-out.parquet"));
    let outs: Vec<(PathBuf, usize)> = steps
        .iter()
        .map(|s| (dir.join(format!("out/step={s}.parquet")), 24))
        .collect();
    assert_same_as_concatenation(&whole_out, &outs);
    let metrics = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap()
    };
    // the same metrics, up to the order of the sums (they are merged per row group, and the
    // files' row groups are not the concatenated file's)
    let (a, b) = (metrics("all.json"), metrics("ds.json"));
    let (a, b) = (a.as_array().unwrap(), b.as_array().unwrap());
    assert_eq!(a.len(), steps.len());
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x.as_object().unwrap(), y.as_object().unwrap());
        assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>());
        for (k, v) in x {
            let (v, w) = (v.as_f64().unwrap(), y[k].as_f64().unwrap());
            assert_close(k, &[w], &[v], 1e-12, 1e-9);
        }
    }
    // a quoted glob is the same dataset
    run(&["in/step=*.parquet", "out-glob"]);
    for s in steps {
        let name = format!("step={s}.parquet");
        assert_eq!(
            lists_f32(
                &read_parquet(&dir.join("out-glob").join(&name)),
                "advantages"
            ),
            lists_f32(&read_parquet(&dir.join("out").join(&name)), "advantages"),
        );
    }
    // every input column is kept, the provenance names the file and the dataset
    let out = read_parquet(&dir.join("out/step=2.parquet"));
    assert!(out.schema().field_with_name("step").is_ok());
    let meta = out.schema().metadata().clone();
    assert_eq!(meta["advcalc.input"], "in/step=2.parquet");
    assert_eq!(meta["advcalc.dataset"], "in");
    assert_eq!(meta["advcalc.input_rows"], "24");
}

/// Hive partitions without a `step` column: the step comes from `step=N/`, and a group
/// whose rows are split across two files of one step gets the numbers of the whole group
/// (worked by hand), while the same uid in another step is another group.
#[test]
fn hive_partitions_take_the_step_from_the_path_and_groups_span_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let part = |path: &str, uids: &[&str], scores: &[f32]| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let masks: Vec<Vec<i8>> = scores.iter().map(|_| vec![1, 1]).collect();
        let s: Vec<Vec<f32>> = scores.iter().map(|&x| vec![0.0, x]).collect();
        let b = RecordBatch::try_from_iter(vec![
            ("uid", strings(uids)),
            ("response_mask", i8_lists(&masks)),
            ("rm_scores", f32_lists(&s)),
        ])
        .unwrap();
        write_parquet(&p, &b, 1);
    };
    part("in/step=1/a.parquet", &["q", "r"], &[1.0, 2.0]);
    part("in/step=1/b.parquet", &["q", "q", "r"], &[0.0, 1.0, 2.0]);
    part("in/step=2/a.parquet", &["q", "q"], &[0.0, 1.0]);
    // not data: skipped
    std::fs::write(dir.join("in/_SUCCESS"), b"").unwrap();
    std::fs::write(dir.join("in/step=1/.a.parquet.tmp-1"), b"partial").unwrap();
    let out = run_in(dir, &["run", "-e", "grpo", "in", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("advcalc: 7 rows in 2 batches from 3 files -> out (grpo)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        files_under(&dir.join("out")),
        ["step=1/a.parquet", "step=1/b.parquet", "step=2/a.parquet"]
    );
    let adv = |p: &str| -> Vec<f32> {
        lists_f32(&read_parquet(&dir.join("out").join(p)), "advantages")
            .into_iter()
            .map(|r| r[1])
            .collect()
    };
    // step 1, group q = [1, 0, 1]: mean 2/3, unbiased std sqrt(1/3); group r = [2, 2]: 0
    let (hi, lo) = (
        (1.0 / 3.0) / (1.0f64 / 3.0).sqrt(),
        (-2.0 / 3.0) / (1.0f64 / 3.0).sqrt(),
    );
    let e = 1e-6;
    assert_close(
        "step 1 a",
        &adv("step=1/a.parquet"),
        &[hi as f32, 0.0],
        e,
        1e-5,
    );
    assert_close(
        "step 1 b",
        &adv("step=1/b.parquet"),
        &[lo as f32, hi as f32, 0.0],
        e,
        1e-5,
    );
    // step 2, group q = [0, 1] alone: ±1/sqrt(2)
    let h = std::f32::consts::FRAC_1_SQRT_2;
    assert_close("step 2", &adv("step=2/a.parquet"), &[-h, h], e, 1e-5);
    // no step column is added to the outputs
    assert!(
        read_parquet(&dir.join("out/step=2/a.parquet"))
            .schema()
            .field_with_name("step")
            .is_err()
    );

    // inspect reports the steps of the paths
    let out = run_in(dir, &["inspect", "--json", "in"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps: Vec<i64> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_i64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2]);
}

/// `compare` and `inspect -e` on a dataset say what they say on the concatenated file.
#[test]
fn compare_and_inspect_on_a_dataset_match_the_concatenated_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("in")).unwrap();
    let batches: Vec<RecordBatch> = (1..=3).map(|s| step_batch(s, 16, true)).collect();
    for (s, b) in (1..=3).zip(&batches) {
        write_parquet(&dir.join(format!("in/step={s}.parquet")), b, 6);
    }
    let whole = concat_batches(&batches[0].schema(), &batches).unwrap();
    write_parquet(&dir.join("all.parquet"), &whole, 6);
    for cmd in [
        &["compare", "--json", "-e", "grpo,rloo,gae"][..],
        &["inspect", "--json", "-e", "grpo"][..],
    ] {
        let json = |input: &str| -> serde_json::Value {
            let out = run_in(dir, &[cmd, &[input]].concat());
            assert!(out.status.success(), "{}", stderr(&out));
            let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            v.as_object_mut().unwrap().remove("file");
            v
        };
        assert_eq!(json("in"), json("all.parquet"), "{cmd:?}");
    }
}

/// 16 step files of 1000 rows (2 row groups each): a run lasts long enough to be caught.
fn large_dataset(dir: &Path) -> usize {
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let batch = large_batch();
    let files = 16;
    let per = batch.num_rows() / files;
    for f in 0..files {
        write_parquet(
            &dir.join(format!("in/step={}.parquet", f + 1)),
            &batch.slice(f * per, per),
            per / 2,
        );
    }
    files
}

fn complete_outputs(out: &Path) -> Vec<String> {
    files_under(out)
        .into_iter()
        .filter(|f| !f.contains(".advcalc-"))
        .collect()
}

/// The issue's bar: `--resume` after a SIGKILL mid-dataset finishes the job without redoing
/// the files that were complete, and the result is the uninterrupted run's, byte for byte.
#[cfg(unix)]
#[test]
fn resume_after_a_kill_redoes_only_the_missing_files() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let files = large_dataset(dir);
    let args = ["run", "-q", "-e", "grpo", "--threads", "1", "in", "out"];
    let mut child = advcalc().current_dir(dir).args(args).spawn().unwrap();
    let start = std::time::Instant::now();
    while complete_outputs(&dir.join("out")).len() < 2 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run finished before it was killed"
        );
        assert!(start.elapsed().as_secs() < 120, "no output appeared");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let done = complete_outputs(&dir.join("out"));
    assert!(done.len() < files, "killed too late: {done:?}");
    let before: Vec<(u64, i64, i64)> = done
        .iter()
        .map(|f| {
            let m = std::fs::metadata(dir.join("out").join(f)).unwrap();
            (m.ino(), m.mtime(), m.mtime_nsec())
        })
        .collect();

    // without --resume an existing output is refused
    let out = run_in(dir, &args);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--resume"), "{}", stderr(&out));

    let out = run_in(dir, &["run", "-e", "grpo", "--resume", "in", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "from {files} files ({} kept by --resume)",
            done.len()
        )),
        "{}",
        stderr(&out)
    );
    for (f, b) in done.iter().zip(&before) {
        let m = std::fs::metadata(dir.join("out").join(f)).unwrap();
        assert_eq!((m.ino(), m.mtime(), m.mtime_nsec()), *b, "{f} was redone");
    }
    assert_eq!(complete_outputs(&dir.join("out")).len(), files);
    assert!(leftovers_under(&dir.join("out")).is_empty());

    // the same bytes as a run that was never interrupted
    std::fs::rename(dir.join("out"), dir.join("resumed")).unwrap();
    let out = run_in(dir, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    for f in complete_outputs(&dir.join("out")) {
        assert!(
            std::fs::read(dir.join("out").join(&f)).unwrap()
                == std::fs::read(dir.join("resumed").join(&f)).unwrap(),
            "{f}"
        );
    }

    // a second --resume keeps everything; an input that changed is redone
    std::thread::sleep(std::time::Duration::from_millis(20));
    let changed = dir.join("in/step=3.parquet");
    let b = read_parquet(&changed);
    write_parquet(&changed, &b, 300);
    let out = run_in(dir, &["run", "-e", "grpo", "--resume", "in", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("({} kept by --resume)", files - 1)),
        "{}",
        stderr(&out)
    );
}

/// `--resume` over outputs of another configuration refuses, naming the file and what
/// differs, and touches nothing; over a file advcalc did not write, too.
#[test]
fn resume_refuses_outputs_of_another_configuration() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    two_steps_in(dir, 4);
    let out = run_in(dir, &["run", "-q", "-e", "grpo", "in", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::remove_file(dir.join("out/step=2.parquet")).unwrap();
    let kept = std::fs::read(dir.join("out/step=1.parquet")).unwrap();
    let out = run_in(dir, &["run", "-q", "-e", "rloo", "--resume", "in", "out"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with(
            "error: out/step=1.parquet: written by a different configuration (its advcalc.estimator is grpo, this run's rloo); --resume never mixes outputs of two configurations\n"
        ),
        "{err}"
    );
    assert!(err.contains("hint: "), "{err}");
    assert_eq!(std::fs::read(dir.join("out/step=1.parquet")).unwrap(), kept);
    assert_eq!(complete_outputs(&dir.join("out")), ["step=1.parquet"]);
    // the same estimator with another setting
    let out = run_in(
        dir,
        &[
            "run",
            "-q",
            "-e",
            "grpo",
            "--set",
            "algorithm.norm_adv_by_std_in_grpo=false",
        ]
        .iter()
        .chain(&["--resume", "in", "out"])
        .copied()
        .collect::<Vec<_>>(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("(its resolved configuration (advcalc.config) differs)"),
        "{}",
        stderr(&out)
    );
    // a file advcalc did not write
    std::fs::write(dir.join("out/step=2.parquet"), b"mine").unwrap();
    let out = run_in(dir, &["run", "-q", "-e", "grpo", "--resume", "in", "out"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("out/step=2.parquet: exists but is not an output of advcalc run"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(dir.join("out/step=2.parquet")).unwrap(),
        b"mine"
    );
    // --force redoes everything
    let out = run_in(dir, &["run", "-q", "-e", "rloo", "--force", "in", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let meta = read_parquet(&dir.join("out/step=2.parquet"))
        .schema()
        .metadata()
        .clone();
    assert_eq!(meta["advcalc.estimator"], "rloo");
}

/// The `advcalc.plan` fingerprints of a fixed dataset are committed values: `--resume` keeps
/// an output only if this run's value equals the one it recorded, so they must never change
/// (not with the toolchain, the machine or the thread count) unless what pass 2 computes the
/// rows with does. GRPO (each row's advantage), and gae with an adaptive KL controller (the
/// steps' β and whitening).
#[test]
fn a_fixed_datasets_plan_fingerprints_are_committed_values() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    two_steps_in(dir, 3);
    let plans = |args: &[&str], out: &str| -> Vec<String> {
        let out_dir = dir.join(out);
        let out = run_in(dir, &[&["run", "-q"], args, &["in", out]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        (1..=2)
            .map(|s| {
                let out = read_parquet(&out_dir.join(format!("step={s}.parquet")));
                out.schema().metadata()["advcalc.plan"].clone()
            })
            .collect()
    };
    assert_eq!(
        plans(&["-e", "grpo", "--threads", "1"], "grpo"),
        ["4867ef258de9524f", "22d2f7289e0c27c8"]
    );
    assert_eq!(
        plans(&["-e", "grpo", "--threads", "2"], "grpo-2"),
        ["4867ef258de9524f", "22d2f7289e0c27c8"]
    );
    let gae = [
        "-e",
        "gae",
        "--set",
        "algorithm.use_kl_in_reward=true",
        "--set",
        "algorithm.kl_ctrl.type=adaptive",
        "--set",
        "algorithm.kl_ctrl.target_kl=0.01",
    ];
    assert_eq!(plans(&gae, "gae"), ["7bce2a6e3f654167", "bbf14bb10f2c299b"]);
}

/// Files whose schemas disagree: both files and the column are named; nothing is written.
#[test]
fn files_whose_schemas_disagree_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("in")).unwrap();
    write_parquet(&dir.join("in/step=1.parquet"), &step_batch(1, 8, true), 4);
    let b = step_batch(2, 8, true);
    let cast = arrow::compute::cast(
        b.column_by_name("values").unwrap(),
        &arrow::datatypes::DataType::List(Arc::new(arrow::datatypes::Field::new(
            "item",
            arrow::datatypes::DataType::Float64,
            true,
        ))),
    )
    .unwrap();
    let mut cols: Vec<ArrayRef> = b.columns().to_vec();
    let i = b.schema().index_of("values").unwrap();
    cols[i] = cast;
    let mut fields: Vec<arrow::datatypes::FieldRef> = b.schema().fields().iter().cloned().collect();
    fields[i] = Arc::new(arrow::datatypes::Field::new(
        "values",
        cols[i].data_type().clone(),
        true,
    ));
    let b = RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), cols).unwrap();
    write_parquet(&dir.join("in/step=2.parquet"), &b, 4);
    for args in [
        &["run", "-q", "-e", "grpo", "in", "out"][..],
        &["inspect", "in"][..],
        &["compare", "-e", "grpo,rloo", "in"][..],
    ] {
        let out = run_in(dir, args);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.starts_with(
                "error: in/step=2.parquet: column `values` is List(Float64), but List(Float32) in in/step=1.parquet (the files of a dataset share one schema)\n"
            ),
            "{err}"
        );
    }
    assert!(!dir.join("out").exists());
    // a column one file lacks
    let b = step_batch(2, 8, true);
    let b = b.project(&[0, 1, 2, 6]).unwrap();
    write_parquet(&dir.join("in/step=2.parquet"), &b, 4);
    let out = run_in(dir, &["run", "-q", "-e", "grpo", "in", "out"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with(
            "error: in/step=2.parquet: column `step` is column 3, but column 6 in in/step=1.parquet"
        ),
        "{}",
        stderr(&out)
    );
}

/// The step in a file's path and its `step` column disagree; files with and without a step.
#[test]
fn path_steps_that_disagree_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("in")).unwrap();
    write_parquet(&dir.join("in/step=1.parquet"), &step_batch(1, 8, true), 4);
    write_parquet(&dir.join("in/step=2.parquet"), &step_batch(3, 8, true), 8);
    let out = run_in(dir, &["run", "-q", "-e", "grpo", "in", "out"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with(
            "error: in/step=2.parquet: column `step` row 0: step 3, but the file's path says step=2\n"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!dir.join("out").exists());
    // without step columns, every file needs a step in its path, or none does
    std::fs::remove_dir_all(dir.join("in")).unwrap();
    std::fs::create_dir(dir.join("in")).unwrap();
    write_parquet(&dir.join("in/step=1.parquet"), &step_batch(1, 8, false), 4);
    write_parquet(&dir.join("in/extra.parquet"), &step_batch(1, 8, false), 4);
    let out = run_in(dir, &["run", "-q", "-e", "grpo", "in", "out"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with(
            "error: in/extra.parquet: no step (no `step` column, no step=N in its path), while in/step=1.parquet is step 1\n"
        ),
        "{}",
        stderr(&out)
    );
}

/// OUT inside IN, IN inside OUT, OUT a file, `--resume` on a single file: usage errors,
/// nothing created.
#[test]
fn out_must_be_a_directory_apart_from_in() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("data/in")).unwrap();
    write_parquet(
        &dir.join("data/in/step=1.parquet"),
        &step_batch(1, 8, true),
        4,
    );
    for (args, message) in [
        (
            &["data/in", "data/in/out"][..],
            "error: data/in/out: OUT is inside IN's directory (data/in); a dataset's OUT must be apart from IN\n",
        ),
        (
            &["data/in", "data/in"][..],
            "error: data/in: OUT is IN's directory (data/in); a dataset's OUT must be apart from IN\n",
        ),
        (
            &["data/in", "data"][..],
            "error: data: IN's directory is inside OUT (data/in); a dataset's OUT must be apart from IN\n",
        ),
        (
            &["data/in/*.parquet", "data/in/x"][..],
            "error: data/in/x: OUT is inside IN's directory (data/in); a dataset's OUT must be apart from IN\n",
        ),
        (
            &["data/in", "data/in/step=1.parquet"][..],
            "error: data/in/step=1.parquet: is a file; a dataset's OUT is a directory that mirrors IN's files\n",
        ),
        (
            &["data/in", "-"][..],
            "error: OUT: a dataset's OUT is a directory that mirrors IN's files, not stdout\n",
        ),
    ] {
        let out = run_in(dir, &[&["run", "-q", "-e", "grpo"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).starts_with(message), "{}", stderr(&out));
        assert_eq!(
            files_under(&dir.join("data")),
            ["in/step=1.parquet"],
            "{args:?}"
        );
    }
    let out = run_in(
        dir,
        &[
            "run",
            "-q",
            "-e",
            "grpo",
            "--resume",
            "data/in/step=1.parquet",
            "o.parquet",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--resume finishes a dataset run"));
}

/// A file that vanishes, or is truncated, between the passes: the run stops naming it
/// (exit 1), the outputs finished before stay, no temporary file is left, and its output is
/// not written.
#[test]
fn a_file_that_vanishes_or_shrinks_between_the_passes_stops_the_run() {
    for truncate in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let files = large_dataset(dir);
        let last = dir.join(format!("in/step={files}.parquet"));
        let mut child = advcalc()
            .current_dir(dir)
            .args(["run", "-q", "-e", "grpo", "--threads", "1", "in", "out"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_temporary(&mut child, &dir.join("out"));
        if truncate {
            let f = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
            let len = f.metadata().unwrap().len();
            f.set_len(len / 2).unwrap();
        } else {
            std::fs::remove_file(&last).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        let want = if truncate {
            format!("error: in/step={files}.parquet: changed between the passes (truncated from ")
        } else {
            format!(
                "error: in/step={files}.parquet: vanished between the passes (pass 1 read it)\n"
            )
        };
        assert!(err.starts_with(&want), "{err}");
        assert!(leftovers_under(&dir.join("out")).is_empty());
        let done = complete_outputs(&dir.join("out"));
        assert!(!done.contains(&format!("step={files}.parquet")), "{done:?}");
        for f in done {
            assert_eq!(read_parquet(&dir.join("out").join(f)).num_rows(), 1000);
        }
    }
}

/// SIGINT and SIGTERM mid-dataset: exit 130 / 143, no temporary file anywhere under OUT,
/// every output there complete.
#[cfg(target_os = "linux")]
#[test]
fn signals_mid_dataset_leave_no_temporary_files() {
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        large_dataset(dir);
        let mut child = advcalc()
            .current_dir(dir)
            .args(["run", "-q", "-e", "gae", "--threads", "2", "in", "out"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_temporary(&mut child, &dir.join("out"));
        // SAFETY: a signal to our own child process.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
        assert_eq!(
            stderr(&out).trim(),
            format!("error: interrupted by signal {}", code - 128)
        );
        assert!(leftovers_under(&dir.join("out")).is_empty());
        for f in complete_outputs(&dir.join("out")) {
            assert_eq!(read_parquet(&dir.join("out").join(f)).num_rows(), 1000);
        }
    }
}

/// Arrow IPC files in a dataset: spooled, run with the Parquet files' numbers, written back
/// as Arrow IPC under their own names.
#[test]
fn arrow_ipc_files_in_a_dataset_give_arrow_ipc_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir(dir.join("pq")).unwrap();
    std::fs::create_dir(dir.join("ipc")).unwrap();
    for s in 1..=2 {
        let b = step_batch(s, 12, true);
        write_parquet(&dir.join(format!("pq/step={s}.parquet")), &b, 5);
        let mut w = arrow::ipc::writer::FileWriter::try_new(
            std::fs::File::create(dir.join(format!("ipc/step={s}.arrow"))).unwrap(),
            &b.schema(),
        )
        .unwrap();
        w.write(&b).unwrap();
        w.finish().unwrap();
    }
    for (i, o) in [("pq", "out-pq"), ("ipc", "out-ipc")] {
        let out = run_in(dir, &["run", "-q", "-e", "gae", i, o]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(
        files_under(&dir.join("out-ipc")),
        ["step=1.arrow", "step=2.arrow"]
    );
    for s in 1..=2 {
        let r = arrow::ipc::reader::FileReader::try_new(
            std::fs::File::open(dir.join(format!("out-ipc/step={s}.arrow"))).unwrap(),
            None,
        )
        .unwrap();
        let schema = r.schema();
        let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
        let got = concat_batches(&schema, &batches).unwrap();
        let want = read_parquet(&dir.join(format!("out-pq/step={s}.parquet")));
        assert_eq!(
            lists_f32(&got, "advantages"),
            lists_f32(&want, "advantages")
        );
        assert_eq!(
            schema.metadata()["advcalc.input"],
            format!("ipc/step={s}.arrow")
        );
    }
    // --resume reads an IPC output's provenance: everything kept
    let out = run_in(dir, &["run", "-e", "gae", "--resume", "ipc", "out-ipc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("(2 kept by --resume)"),
        "{}",
        stderr(&out)
    );
}
