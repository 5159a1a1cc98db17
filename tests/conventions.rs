//! The real binary on small files for advcalc's additions (docs/conventions.md): the
//! agent-RL tutorial estimators, other trainers' estimators and `--convention`. Expected
//! numbers are the hand-worked ones of docs/conventions.md.
#![allow(clippy::approx_constant)] // hand-worked numbers, written as computed

mod common;

use std::path::Path;

use arrow::array::{ArrayRef, RecordBatch};
use common::*;

const M: [i8; 10] = [1, 1, 0, 0, 0, 1, 1, 0, 0, 1];
const R: [f32; 10] = [0.0, -0.1, 0.0, 0.0, 0.0, 0.0, -0.1, 0.0, 0.0, 0.9];
const V: [f32; 10] = [0.5, 0.4, 9.0, 9.0, 9.0, 0.6, 0.7, 9.0, 9.0, 0.8];

/// docs/conventions.md's tolerance: |a − e| ≤ 1e-6 + 1e-5·|e| (the worked numbers have six
/// or seven significant digits).
const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-5;

/// Run advcalc on `batch` with `args` before IN OUT; the output batch.
fn run(batch: &RecordBatch, args: &[&str]) -> RecordBatch {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), batch, 3);
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend(["in.parquet", "out.parquet"]);
    let out = run_in(tmp.path(), &all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    read_parquet(&tmp.path().join("out.parquet"))
}

fn fails(batch: &RecordBatch, args: &[&str], code: i32, needle: &str) {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), batch, 3);
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend(["in.parquet", "out.parquet"]);
    let out = run_in(tmp.path(), &all);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(needle), "`{needle}` not in {err}");
    assert!(!Path::new(&tmp.path().join("out.parquet")).exists());
}

/// The issue's agent row, with values.
fn agent_row() -> RecordBatch {
    RecordBatch::try_from_iter(vec![
        ("response_mask", i8_lists(&[M.to_vec()])),
        ("rm_scores", f32_lists(&[R.to_vec()])),
        ("values", f32_lists(&[V.to_vec()])),
    ])
    .unwrap()
}

/// Outcome rows: one `uid` and a two-token mask each, the score on the last token.
fn outcome(uids: &[&str], scores: &[f32]) -> RecordBatch {
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("uid", strings(uids)),
        ("response_mask", i8_lists(&vec![vec![1, 1]; scores.len()])),
        (
            "rm_scores",
            f32_lists(&scores.iter().map(|&s| vec![0.0, s]).collect::<Vec<_>>()),
        ),
    ];
    RecordBatch::try_from_iter(cols).unwrap()
}

/// Each row's advantage on its first token.
fn row_advantages(out: &RecordBatch) -> Vec<f32> {
    lists_f32(out, "advantages").iter().map(|r| r[0]).collect()
}

/// The issue's agent row under each token-level estimator: (flags, output column, the
/// issue's worked numbers).
#[test]
fn token_estimators_on_the_issue_row() {
    let cases: &[(&[&str], &str, &[f64])] = &[
        (
            &["-e", "reinforce", "--gamma", "0.9"],
            "advantages",
            &[0.42759, 0.4751, 0.0, 0.0, 0.0, 0.639, 0.71, 0.0, 0.0, 0.9],
        ),
        (
            &["-e", "reinforce", "--gamma", "0.9"],
            "returns",
            &[0.42759, 0.4751, 0.0, 0.0, 0.0, 0.639, 0.71, 0.0, 0.0, 0.9],
        ),
        (
            &["-e", "reinforce"],
            "advantages",
            &[0.7, 0.7, 0.0, 0.0, 0.0, 0.8, 0.8, 0.0, 0.0, 0.9],
        ),
        // gae without whitening
        (
            &["-e", "gae", "--set", "whiten_advantages=false"],
            "advantages",
            &[0.2, 0.3, 0.0, 0.0, 0.0, 0.2, 0.1, 0.0, 0.0, 0.1],
        ),
        (
            &[
                "-e",
                "gae",
                "--lam",
                "0",
                "--set",
                "algorithm.whiten_advantages=false",
            ],
            "advantages",
            &[-0.1, 0.1, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.1],
        ),
        (
            &["-e", "turn_gae", "--gamma", "0.9", "--lam", "0.95"],
            "advantages",
            &[
                0.0302025, 0.0302025, 0.0, 0.0, 0.0, 0.1055, 0.1055, 0.0, 0.0, 0.1,
            ],
        ),
        (
            &["-e", "turn_gae"],
            "returns",
            &[0.7, 0.7, 0.0, 0.0, 0.0, 0.8, 0.8, 0.0, 0.0, 0.9],
        ),
        // reinforce_plus_plus with mask_mode reset
        (
            &["-e", "reinforce_plus_plus", "--set", "mask_mode=reset"],
            "advantages",
            &[
                -0.447214, -0.447214, 0.0, 0.0, 0.0, -0.447214, -0.447214, 0.0, 0.0, 1.788854,
            ],
        ),
        (
            &["-e", "reinforce_plus_plus", "--set", "mask_mode=reset"],
            "returns",
            &[-0.1, -0.1, 0.0, 0.0, -0.1, -0.1, -0.1, 0.0, 0.9, 0.9],
        ),
    ];
    for (args, column, expect) in cases {
        let out = run(&agent_row(), args);
        assert_rows_close(
            &format!("{args:?} {column}"),
            &lists_f32(&out, column),
            &[expect],
            ATOL,
            RTOL,
        );
    }
}

#[test]
fn group_of_eight_with_one_success() {
    let mut s = [0.0f32; 8];
    s[0] = 1.0;
    let b = outcome(&["g"; 8], &s);
    // (flags, advantages of the success and of a failure; the seven failures are alike)
    let cases: &[(&[&str], [f64; 2])] = &[
        (&["-e", "drgrpo"], [0.875, -0.125]),
        (&["-e", "rloo"], [1.0, -0.142857]),
        (&["-e", "grpo"], [2.474867, -0.353552]),
        (
            &["-e", "grpo", "--convention", "open-instruct"],
            [2.645751, -0.377964],
        ),
        (&["-e", "rloo_loo_std"], [1.0, -0.377963]),
        (&["-e", "maxrl"], [7.0, -1.0]),
    ];
    for (args, [success, failure]) in cases {
        let mut expect = vec![*failure; 8];
        expect[0] = *success;
        assert_close(
            &format!("{args:?}"),
            &row_advantages(&run(&b, args)),
            &expect,
            ATOL,
            RTOL,
        );
    }
}

// conventions.md T1 and T2.
#[test]
fn conventions_on_small_batches() {
    let t1 = outcome(&["a", "a", "a", "b"], &[1.0, 0.0, 0.5, 0.7]);
    assert_close(
        "T1 nemo-rl grpo",
        &row_advantages(&run(&t1, &["-e", "grpo", "--convention", "nemo-rl"])),
        &[2.121314, -2.121314, 0.0, 0.0],
        ATOL,
        RTOL,
    );
    assert_close(
        "T1 skyrl maxrl",
        &row_advantages(&run(&t1, &["-e", "maxrl", "--convention", "skyrl"])),
        &[0.999998, -0.999998, 0.0, 0.7],
        ATOL,
        RTOL,
    );
    assert_close(
        "T1 grpo_batch_std",
        &row_advantages(&run(&t1, &["-e", "grpo_batch_std"])),
        &[1.189575, -1.189575, 0.0, 1.665404],
        ATOL,
        RTOL,
    );
    let t2 = outcome(&["a", "a", "b", "b"], &[1.0, 0.0, 0.25, 0.25]);
    assert_close(
        "T2 trl grpo",
        &row_advantages(&run(&t2, &["-e", "grpo", "--convention", "trl"])),
        &[0.707007, -0.707007, 0.0, 0.0],
        ATOL,
        RTOL,
    );
    assert_close(
        "T2 trl rloo normalised",
        &row_advantages(&run(
            &t2,
            &[
                "-e",
                "rloo",
                "--convention",
                "trl",
                "--set",
                "trl.normalize_advantages=true",
            ],
        )),
        &[1.224595, -1.224595, 0.0, 0.0],
        ATOL,
        RTOL,
    );
    // the default convention is verl's: group a has mean 0.5 and unbiased std
    // √(2·0.5²/1) = 0.7071068, so ±0.5/(0.7071068 + 1e-6) = ±0.7071058; group b's equal
    // scores give 0/(0 + 1e-6) = 0. `--convention verl` is the same thing.
    assert_close(
        "T2 verl grpo",
        &row_advantages(&run(&t2, &["-e", "grpo"])),
        &[0.7071058, -0.7071058, 0.0, 0.0],
        ATOL,
        RTOL,
    );
    let verl = lists_f32(&run(&t2, &["-e", "grpo"]), "advantages");
    let explicit = lists_f32(
        &run(&t2, &["-e", "grpo", "--convention", "verl"]),
        "advantages",
    );
    assert_eq!(verl, explicit);
}

// conventions.md T4: the OpenRLHF token pipeline, group_size 2.
#[test]
fn openrlhf_token_pipeline() {
    let b = RecordBatch::try_from_iter(vec![
        ("uid", strings(&["a", "a", "b", "b"])),
        (
            "response_mask",
            i8_lists(&[vec![1, 0, 1], vec![1, 0, 0], vec![1, 1, 1], vec![1, 1, 0]]),
        ),
        (
            "rm_scores",
            f32_lists(&[
                vec![0.0, 0.0, 1.0],
                vec![0.0, 0.0, 0.0],
                vec![0.0, 0.0, 0.25],
                vec![0.0, 0.25, 0.0],
            ]),
        ),
    ])
    .unwrap();
    let out = run(&b, &["-e", "openrlhf_group_norm", "--set", "group_size=2"]);
    let adv = lists_f32(&out, "advantages");
    let x = 0.707107;
    // group b's two scores are equal: (0.25 − 0.25)/(0 + ε) = 0 on every token
    let group_norm: [&[f64]; 4] = [&[x, x, x], &[-x, 0.0, 0.0], &[0.0; 3], &[0.0; 3]];
    assert_rows_close("openrlhf_group_norm", &adv, &group_norm, ATOL, RTOL);
    let out = run(&b, &["-e", "openrlhf_reinforce_baseline"]);
    let adv = lists_f32(&out, "advantages");
    let (hi, lo, z) = (1.459601, -1.87663, -0.208514);
    // rows 2 and 3 have the same score (0.25, their group's mean): the same advantage z
    let baseline: [&[f64]; 4] = [&[hi, hi, hi], &[lo, z, z], &[z, z, z], &[z, z, z]];
    assert_rows_close("openrlhf_reinforce_baseline", &adv, &baseline, ATOL, RTOL);
    assert_close(
        "openrlhf_reinforce_baseline returns row 0",
        &lists_f32(&out, "returns")[0],
        &[0.5, 0.5, 0.5],
        ATOL,
        RTOL,
    );
}

#[test]
fn refused_combinations() {
    let t2 = outcome(&["a", "a", "b", "b"], &[1.0, 0.0, 0.25, 0.25]);
    fails(&t2, &["-e", "maxrl", "--convention", "trl"], 2, "maxrl");
    fails(
        &t2,
        &["-e", "grpo", "--convention", "nemo"],
        2,
        "unknown convention",
    );
    fails(
        &t2,
        &["-e", "grpo", "--set", "mask_mode=forward"],
        2,
        "mask_mode",
    );
    fails(
        &t2,
        &["-e", "openrlhf_dr_grpo", "--set", "group_size=1"],
        1,
        "OpenRLHF asserts",
    );
    fails(
        &t2,
        &["-e", "grpo", "--convention", "trl", "--set", "group_size=3"],
        1,
        "consecutive groups of 3",
    );
}
