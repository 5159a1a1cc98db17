//! The real binary on small files: the main job, exit codes, one-line errors, and that a
//! failed run leaves no OUT behind.

mod common;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float32Array, Int64Array, RecordBatch};
use common::*;

/// Assert a failed run: the exit code, one `error:` line mentioning each of `needles`,
/// only `caused by:` lines after it (and maybe a last `hint:` line), no panic, and no OUT.
fn assert_fails(out: &std::process::Output, code: i32, needles: &[&str], out_path: &Path) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    let mut lines = err.lines();
    let first = lines.next().unwrap_or_default();
    assert!(first.starts_with("error: "), "first line: {first}");
    for n in needles {
        assert!(first.contains(n), "`{n}` not in: {first}");
    }
    let mut rest: Vec<&str> = lines.collect();
    if rest.last().is_some_and(|l| l.starts_with("hint: ")) {
        rest.pop();
    }
    for line in rest {
        assert!(line.starts_with("caused by: "), "extra line: {line}");
    }
    assert!(!out_path.exists(), "OUT was left behind");
    let leftovers: Vec<_> = std::fs::read_dir(out_path.parent().unwrap())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".advcalc-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

fn demo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet")
}

#[test]
fn demo_runs_and_writes_the_output_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let out_path = tmp.path().join("out.parquet");
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", demo().to_str().unwrap(), "out.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let input = read_parquet(&demo());
    let output = read_parquet(&out_path);
    assert_eq!(input.num_rows(), output.num_rows());
    for f in input.schema().fields() {
        assert_eq!(
            output.column_by_name(f.name()).unwrap().as_ref(),
            input.column_by_name(f.name()).unwrap().as_ref(),
            "{} changed",
            f.name()
        );
    }
    let mask = output.column_by_name("response_mask").unwrap();
    assert_eq!(
        output.column_by_name("loss_mask").unwrap().as_ref(),
        mask.as_ref()
    );
    let rewards = lists_f32(&output, "token_level_rewards");
    let scores = lists_f32(&input, "rm_scores");
    assert_eq!(rewards, scores);
    let adv = lists_f32(&output, "advantages");
    assert_eq!(adv, lists_f32(&output, "returns"));
    // GRPO computed here from the uids and score sums: (s − μ)/(σ + 1e-6), unbiased σ,
    // times the mask (the demo has no singleton group and no step column).
    let uid_column = arrow::compute::cast(
        input.column_by_name("uid").unwrap(),
        &arrow::datatypes::DataType::Utf8,
    )
    .unwrap();
    let uids: Vec<&str> = uid_column
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .unwrap()
        .iter()
        .map(|u| u.unwrap())
        .collect();
    let sums: Vec<f64> = scores
        .iter()
        .map(|r| r.iter().map(|&x| x as f64).sum())
        .collect();
    let masks = lists_f32(&input, "response_mask");
    let expected: Vec<Vec<f64>> = (0..sums.len())
        .map(|i| {
            let group: Vec<f64> = (0..sums.len())
                .filter(|&j| uids[j] == uids[i])
                .map(|j| sums[j])
                .collect();
            let n = group.len() as f64;
            assert!(n > 1.0, "row {i}: a singleton group");
            let mu = group.iter().sum::<f64>() / n;
            let sigma = (group.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
            let a = (sums[i] - mu) / (sigma + 1e-6);
            masks[i].iter().map(|&m| a * m as f64).collect()
        })
        .collect();
    assert_rows_close("demo grpo advantages", &adv, &expected, 1e-5, 1e-5);
}

// Hand computation: group a = rows {0, 2} with scores {1, 0}, group b = rows {1, 3} with
// {2, 4}; each is {lo, hi} with σ = |hi − lo|/√2, so a = ±(Δ/2)/(Δ/√2 + 1e-6).
#[test]
fn small_grpo_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &grpo_batch(), 3);
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let adv = lists_f32(&read_parquet(&tmp.path().join("out.parquet")), "advantages");
    let a = 0.5 / (1.0 / 2f64.sqrt() + 1e-6);
    let b = 1.0 / (2.0 / 2f64.sqrt() + 1e-6);
    let (a, b) = (a as f32, b as f32);
    assert_eq!(
        adv,
        vec![vec![a, a], vec![-b, 0.0, -b], vec![-a], vec![0.0, b]]
    );

    let out = run_in(
        tmp.path(),
        &[
            "run",
            "-e",
            "grpo",
            "--no-norm-adv-by-std",
            "-f",
            "in.parquet",
            "out.parquet",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let adv = lists_f32(&read_parquet(&tmp.path().join("out.parquet")), "advantages");
    assert_eq!(
        adv,
        vec![
            vec![0.5, 0.5],
            vec![-1.0, 0.0, -1.0],
            vec![-0.5],
            vec![0.0, 1.0]
        ]
    );
}

/// Write `batch` (row groups of `rows_per_group`), run `-e grpo` on it and assert a data
/// error (exit 1) whose line mentions each of `needles`, with no OUT left.
fn grpo_fails_on(batch: &RecordBatch, rows_per_group: usize, needles: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), batch, rows_per_group);
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert_fails(&out, 1, needles, &tmp.path().join("out.parquet"));
}

#[test]
fn missing_column_names_what_is_needed_and_what_the_file_has() {
    let batch = grpo_batch();
    let batch = RecordBatch::try_from_iter(vec![
        ("response_mask", batch.column(1).clone()),
        ("rm_scores", batch.column(2).clone()),
    ])
    .unwrap();
    grpo_fails_on(
        &batch,
        10,
        &[
            "in.parquet",
            "missing column uid",
            "the file has: response_mask, rm_scores",
        ],
    );
}

#[test]
fn wrong_column_type_is_named() {
    let batch = grpo_batch();
    let scores: ArrayRef = Arc::new(Float32Array::from(vec![1.0, 2.0, 3.0, 4.0]));
    let batch = RecordBatch::try_from_iter(vec![
        ("uid", batch.column(0).clone()),
        ("response_mask", scores),
        ("rm_scores", batch.column(2).clone()),
    ])
    .unwrap();
    grpo_fails_on(&batch, 10, &["in.parquet", "`response_mask`", "Float32"]);
}

#[test]
fn unequal_list_lengths_name_the_row() {
    let batch = RecordBatch::try_from_iter(vec![
        ("uid", strings(&["a", "a", "a"])),
        ("response_mask", i8_lists(&[vec![1], vec![1, 1], vec![1]])),
        ("rm_scores", f32_lists(&[vec![1.0], vec![1.0], vec![0.0]])),
    ])
    .unwrap();
    grpo_fails_on(
        &batch,
        2,
        &["`rm_scores` row 1", "1 elements", "`response_mask` has 2"],
    );
}

#[test]
fn bad_mask_value_names_row_and_token() {
    let batch = RecordBatch::try_from_iter(vec![
        ("uid", strings(&["a", "a", "a"])),
        ("response_mask", i8_lists(&[vec![1], vec![1], vec![1, 2]])),
        (
            "rm_scores",
            f32_lists(&[vec![1.0], vec![1.0], vec![0.0, 0.0]]),
        ),
    ])
    .unwrap();
    grpo_fails_on(&batch, 2, &["`response_mask` row 2", "token 1"]);
}

#[test]
fn unreadable_input_is_a_data_error() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("in.parquet"), b"this is not parquet").unwrap();
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert_fails(
        &out,
        1,
        &["in.parquet", "not a readable Parquet file"],
        &tmp.path().join("out.parquet"),
    );

    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "missing.parquet", "out.parquet"],
    );
    assert_fails(
        &out,
        1,
        &["missing.parquet", "cannot open"],
        &tmp.path().join("out.parquet"),
    );

    std::fs::create_dir(tmp.path().join("dir")).unwrap();
    let out = run_in(tmp.path(), &["run", "-e", "grpo", "dir", "out.parquet"]);
    assert_fails(
        &out,
        1,
        &["dir", "is a directory"],
        &tmp.path().join("out.parquet"),
    );
}

#[test]
fn truncated_input_is_a_data_error() {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("full.parquet"), &grpo_batch(), 2);
    let bytes = std::fs::read(tmp.path().join("full.parquet")).unwrap();
    std::fs::write(tmp.path().join("in.parquet"), &bytes[..bytes.len() / 2]).unwrap();
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert_fails(&out, 1, &["in.parquet"], &tmp.path().join("out.parquet"));
}

#[test]
fn output_rules() {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &grpo_batch(), 2);
    // OUT equal to IN, also through another spelling of the path
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "./in.parquet"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // the fix is a line of its own, after the error
    assert_eq!(
        stderr(&out),
        format!(
            "error: {}: OUT is the same file as IN\nhint: write to another file\n",
            Path::new("./in.parquet").display()
        )
    );
    // missing parent directory
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "nowhere/out.parquet"],
    );
    assert_fails(
        &out,
        1,
        &["nowhere", "does not exist"],
        &tmp.path().join("nowhere/out.parquet"),
    );
    // an existing OUT is kept unless --force
    std::fs::write(tmp.path().join("out.parquet"), b"precious").unwrap();
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"));
    assert_eq!(
        std::fs::read(tmp.path().join("out.parquet")).unwrap(),
        b"precious"
    );
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "--force", "in.parquet", "out.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_parquet(&tmp.path().join("out.parquet")).num_rows(), 4);
}

#[test]
fn failed_data_check_keeps_an_existing_output() {
    let tmp = tempfile::tempdir().unwrap();
    let batch = RecordBatch::try_from_iter(vec![
        ("uid", strings(&["a", "a"])),
        ("response_mask", i8_lists(&[vec![1], vec![3]])),
        ("rm_scores", f32_lists(&[vec![1.0], vec![1.0]])),
    ])
    .unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &batch, 1);
    std::fs::write(tmp.path().join("out.parquet"), b"previous").unwrap();
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "-f", "in.parquet", "out.parquet"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read(tmp.path().join("out.parquet")).unwrap(),
        b"previous"
    );
}

#[test]
fn config_errors_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &grpo_batch(), 2);
    std::fs::write(
        tmp.path().join("c.yaml"),
        "algorithm:\n  adv_estimator: grpo\n  norm_adv_by_stdd: true\n",
    )
    .unwrap();
    let out = run_in(
        tmp.path(),
        &["run", "--config", "c.yaml", "in.parquet", "out.parquet"],
    );
    assert_fails(
        &out,
        2,
        &["unknown key `algorithm.norm_adv_by_stdd`", "c.yaml"],
        &tmp.path().join("out.parquet"),
    );
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpoo", "in.parquet", "out.parquet"],
    );
    assert_fails(
        &out,
        2,
        &["unknown estimator `grpoo`"],
        &tmp.path().join("out.parquet"),
    );
    let out = run_in(
        tmp.path(),
        &[
            "run",
            "-e",
            "grpo",
            "--threads",
            "0",
            "in.parquet",
            "out.parquet",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn grpo_vectorized_says_it_ignores_the_norm_flag() {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &grpo_batch(), 2);
    let out = run_in(
        tmp.path(),
        &[
            "run",
            "-e",
            "grpo_vectorized",
            "--no-norm-adv-by-std",
            "in.parquet",
            "out.parquet",
        ],
    );
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("grpo_vectorized divides by the group std"),
        "{}",
        stderr(&out)
    );
    let out = run_in(
        tmp.path(),
        &[
            "run",
            "-q",
            "-f",
            "-e",
            "grpo_vectorized",
            "--no-norm-adv-by-std",
            "in.parquet",
            "out.parquet",
        ],
    );
    assert!(out.status.success());
    assert_eq!(stderr(&out), "");
}

#[test]
fn empty_input_gives_an_empty_output() {
    let tmp = tempfile::tempdir().unwrap();
    let batch = grpo_batch().slice(0, 0);
    write_parquet(&tmp.path().join("in.parquet"), &batch, 2);
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let output = read_parquet(&tmp.path().join("out.parquet"));
    assert_eq!(output.num_rows(), 0);
    for name in ["token_level_rewards", "advantages", "returns"] {
        let column = output
            .column_by_name(name)
            .unwrap_or_else(|| panic!("no {name}"));
        assert!(
            matches!(column.data_type(), arrow::datatypes::DataType::List(f) if f.data_type() == &arrow::datatypes::DataType::Float32),
            "{name}: {}",
            column.data_type()
        );
    }
}

#[test]
fn thread_count_does_not_change_a_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let args = |threads: &str, out: &str| {
        run_in(
            tmp.path(),
            &[
                "run",
                "-q",
                "-e",
                "grpo",
                "--threads",
                threads,
                demo().to_str().unwrap(),
                out,
            ],
        )
    };
    assert!(args("1", "one.parquet").status.success());
    assert!(args("2", "two.parquet").status.success());
    assert!(args("3", "three.parquet").status.success());
    let one = std::fs::read(tmp.path().join("one.parquet")).unwrap();
    assert_eq!(one, std::fs::read(tmp.path().join("two.parquet")).unwrap());
    assert_eq!(
        one,
        std::fs::read(tmp.path().join("three.parquet")).unwrap()
    );
}

#[test]
fn steps_split_batches() {
    // The same uid in two steps is two groups: step 0 {1, 3}, step 1 {10}.
    let tmp = tempfile::tempdir().unwrap();
    let step: ArrayRef = Arc::new(Int64Array::from(vec![0, 1, 0]));
    let batch = RecordBatch::try_from_iter(vec![
        ("uid", strings(&["a", "a", "a"])),
        ("step", step),
        ("response_mask", i8_lists(&[vec![1], vec![1], vec![1]])),
        ("rm_scores", f32_lists(&[vec![1.0], vec![10.0], vec![3.0]])),
    ])
    .unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &batch, 2);
    let out = run_in(
        tmp.path(),
        &[
            "run",
            "-e",
            "grpo",
            "--no-norm-adv-by-std",
            "in.parquet",
            "out.parquet",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let adv = lists_f32(&read_parquet(&tmp.path().join("out.parquet")), "advantages");
    assert_eq!(adv, vec![vec![-1.0], vec![10.0], vec![1.0]]);
}

#[test]
fn row_group_size_does_not_change_any_value() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = read_parquet(&demo());
    write_parquet(&tmp.path().join("a.parquet"), &demo, 17);
    write_parquet(&tmp.path().join("b.parquet"), &demo, 100);
    std::fs::write(
        tmp.path().join("chain.yaml"),
        "adv_estimator: gae\nlam: 0.95\nuse_kl_in_reward: true\nkl_penalty: low_var_kl\nkl_ctrl:\n  type: adaptive\n  target_kl: 0.01\nrollout_correction:\n  rollout_is: token\n  rollout_is_threshold: 2.0\n  rollout_is_batch_normalize: true\n  rollout_rs: token_k1\n  rollout_rs_threshold: 2.0\n",
    )
    .unwrap();
    let runs: [&[&str]; 4] = [
        &["-e", "grpo"],
        &["-e", "rloo"],
        &["-e", "reinforce_plus_plus_baseline"],
        &["--config", "chain.yaml"],
    ];
    for args in runs {
        let mut outputs = Vec::new();
        for input in ["a.parquet", "b.parquet"] {
            let out_name = format!("out-{input}");
            let mut full = vec!["run", "-q", "-f"];
            full.extend(args);
            full.extend([input, out_name.as_str()]);
            let out = run_in(tmp.path(), &full);
            assert!(out.status.success(), "{args:?}: {}", stderr(&out));
            outputs.push(read_parquet(&tmp.path().join(&out_name)));
        }
        for column in [
            "token_level_rewards",
            "advantages",
            "returns",
            "response_mask",
        ] {
            let (a, b) = (
                lists_f32(&outputs[0], column),
                lists_f32(&outputs[1], column),
            );
            // bit for bit, every row's length included (NaN compares by its bits too)
            let bits = |rows: &[Vec<f32>]| -> Vec<Vec<u32>> {
                rows.iter()
                    .map(|r| r.iter().map(|v| v.to_bits()).collect())
                    .collect()
            };
            assert!(
                bits(&a) == bits(&b),
                "{args:?}: {column} differs between row-group sizes"
            );
        }
    }
}

#[test]
fn estimators_lists_every_variant() {
    let out = advcalc().args(["estimators", "--json"]).output().unwrap();
    assert!(out.status.success());
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for name in [
        "gae",
        "grpo",
        "grpo_vectorized",
        "tir_optimal_token_baseline",
        "reinforce",
        "turn_gae",
        "drgrpo",
        "maxrl",
        "rloo_loo_std",
        "openrlhf_group_norm",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let table = advcalc().arg("estimators").output().unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.contains("turn_gae")
            && text.contains("source: verl 0.9.1; token-level; columns: values")
    );
    assert!(table.stderr.is_empty());
}

// `advcalc losses` lists every policy loss verl 0.9.1 registers but clip_cov: the list
// below is verl's (trainer/ppo/core_algos.py's register_policy_loss names), not computed by
// advcalc. bypass_mode comes twice, once per rollout_correction.loss_type.
#[test]
fn losses_lists_every_verl_loss_but_clip_cov() {
    let out = advcalc().args(["losses", "--json"]).output().unwrap();
    assert!(out.status.success());
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let verl = [
        "vanilla",
        "dppo_tv",
        "dppo_kl",
        "gspo",
        "sapo",
        "gpg",
        "kl_cov",
        "geo_mean",
        "dro",
        "cispo",
        "bypass_mode",
    ];
    for name in verl {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(!names.contains(&"clip_cov"));
    assert!(names.iter().all(|n| verl.contains(n)), "{names:?}");
    let loss_types: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "bypass_mode")
        .map(|e| e["loss_type"].as_str().unwrap())
        .collect();
    assert_eq!(loss_types, ["ppo_clip", "reinforce"]);
    let table = advcalc().arg("losses").output().unwrap();
    assert!(table.status.success() && table.stderr.is_empty());
    let text = String::from_utf8(table.stdout).unwrap();
    for name in verl {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name} missing from the table"
        );
    }
    assert!(text.contains("source: verl 0.9.1 trainer/ppo/core_algos.py:1285; per token"));
    assert!(text.contains("clip_cov (verl 0.9.1 registers it too) is refused"));
}

/// A consumer that closes the pipe early is the normal end of a pipeline (SIGPIPE
/// convention): no error, exit 0. `run`'s output (an Arrow stream of the whole demo) is far
/// larger than a pipe's buffer, so it meets the closed pipe mid-write; `inspect` and
/// `compare` are run the same way.
#[test]
fn a_closed_pipe_is_not_an_error() {
    use std::io::Read;
    use std::process::Stdio;
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let runs: [&[&str]; 3] = [
        &["run", "-e", "grpo", "--quiet"],
        &["inspect", "-e", "grpo", "--json"],
        &["compare", "-e", "grpo,rloo,gpg", "--json"],
    ];
    for args in runs {
        let mut cmd = advcalc();
        cmd.args(args).arg(&demo);
        if args[0] == "run" {
            cmd.arg("-");
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 100];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        // the read end is closed here, with the rest of the output unread
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// Without the `cloud` feature an object URL as IN or OUT is a usage error naming the
/// feature and how to build with it; nothing is written.
#[cfg(not(feature = "cloud"))]
#[test]
fn object_urls_without_the_cloud_feature_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let fixture = fixture.to_str().unwrap();
    let cases: [&[&str]; 8] = [
        &[
            "run",
            "-e",
            "grpo",
            "s3://bucket/demo.parquet",
            "out.parquet",
        ],
        &["run", "-e", "grpo", fixture, "gs://bucket/out.parquet"],
        &["inspect", "az://container/demo.parquet"],
        &[
            "compare",
            "-e",
            "grpo",
            "-e",
            "rloo",
            "https://host/demo.parquet",
        ],
        &[
            "report",
            "-e",
            "grpo",
            "abfss://c@a.dfs.core.windows.net/d.parquet",
            "-o",
            "r.html",
        ],
        &[
            "run",
            "-c",
            "s3://bucket/trainer.yaml",
            fixture,
            "out.parquet",
        ],
        &[
            "run",
            "--metrics",
            "s3://bucket/m.json",
            fixture,
            "out.parquet",
        ],
        &["report", "-e", "grpo", fixture, "-o", "s3://bucket/r.html"],
    ];
    for args in cases {
        let out = run_in(dir.path(), args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("`cloud` feature"), "{args:?}: {err}");
        assert!(
            err.contains("cargo install --path . --features cloud"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn out_is_offered_only_the_formats_advcalc_writes() {
    let help = advcalc().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let block = &help[help.find("--output-format").unwrap()..];
    // up to the next option
    let end = block[1..]
        .find("\n  -")
        .or_else(|| block[1..].find("\n      --"))
        .map_or(block.len(), |i| i + 1);
    let block = &block[..end];
    for shown in ["parquet", "arrow", "arrows"] {
        assert!(block.contains(&format!("- {shown}:")), "{block}");
    }
    for hidden in ["jsonl", "trl", "nemo-rl", "prime-rl", "open-instruct"] {
        assert!(!block.contains(&format!("- {hidden}:")), "{block}");
    }
}

#[test]
fn compare_and_report_take_estimator_as_run_does() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let out = advcalc()
        .args(["compare", "--json", "--estimator", "grpo,rloo"])
        .arg(&demo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let spelled = advcalc()
        .args(["compare", "--json", "--estimators", "grpo,rloo"])
        .arg(&demo)
        .output()
        .unwrap();
    assert_eq!(out.stdout, spelled.stdout);
}

#[test]
fn loss_help_says_what_loss_reads_and_writes() {
    let help = advcalc().args(["loss", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let config = &help[help.find("-c, --config").unwrap()..];
    let config = &config[..config.find("\n\n").unwrap()];
    assert!(config.contains("actor_rollout_ref.actor"), "{config}");
    let metrics = &help[help.find("--metrics <FILE>").unwrap()..];
    let metrics = &metrics[..metrics.find("\n\n").unwrap()];
    assert!(metrics.contains("actor/pg_loss"), "{metrics}");
}
