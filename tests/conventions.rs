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

/// Rows of one group (`uid` a) with their masks and token scores, for the tests below.
fn rows(masks: &[Vec<i8>], scores: &[Vec<f32>]) -> Vec<(&'static str, ArrayRef)> {
    vec![
        ("uid", strings(&vec!["a"; masks.len()])),
        ("response_mask", i8_lists(masks)),
        ("rm_scores", f32_lists(scores)),
    ]
}

// TRL rloo_trainer.py: a group with one scorable reward keeps a NaN baseline through the
// batch normalisation and is zeroed after it. Groups of 2: [1, NaN], [0, 1], [.5, 0]; the
// normalisation sees [−1, 1, .5, −.5] only: nanstd = √(2.5/3) = .912871, so ±1/(.912871 +
// 1e-4) = ±1.095325 and ±.547663 (zeroing group a first gave ±1.414014, ±.707007).
#[test]
fn trl_rloo_normalisation_leaves_single_scorable_groups_out() {
    let b = outcome(
        &["a", "a", "b", "b", "c", "c"],
        &[1.0, f32::NAN, 0.0, 1.0, 0.5, 0.0],
    );
    let out = run(
        &b,
        &[
            "--allow-nonfinite",
            "-e",
            "rloo",
            "--convention",
            "trl",
            "--set",
            "trl.normalize_advantages=true",
        ],
    );
    assert_close(
        "trl rloo normalised, NaN reward",
        &row_advantages(&out),
        &[0.0, 0.0, -1.095325, 1.095325, 0.547663, -0.547663],
        ATOL,
        RTOL,
    );
}

// prime-rl max_rl.py scores `iter_trainable_traces` only: a row with no policy token leaves
// the group mean. s = [1, 0, 1], the last row tokenless: μ = .5 → [1, −1, 0] (μ = 2/3
// would give [.5, −1, .5]).
#[test]
fn maxrl_leaves_rows_without_tokens_out_of_the_mean() {
    let b = RecordBatch::try_from_iter(rows(
        &[vec![1, 1], vec![1, 1], vec![0, 0]],
        &[vec![0.0, 1.0], vec![0.0, 0.0], vec![0.0, 1.0]],
    ))
    .unwrap();
    let adv = lists_f32(&run(&b, &["-e", "maxrl"]), "advantages");
    assert_rows_close(
        "maxrl",
        &adv,
        &[&[1.0, 1.0], &[-1.0, -1.0], &[0.0, 0.0]],
        ATOL,
        RTOL,
    );
}

/// Two rows of one group with log-probs: row 0 mask [1,0,1] scoring 1 (d = old − ref =
/// [.5, −1, 0]), row 1 mask [1,0,0] scoring 0 (d = 0).
fn openrlhf_kl_batch() -> RecordBatch {
    let mut cols = rows(
        &[vec![1, 0, 1], vec![1, 0, 0]],
        &[vec![0.0, 0.0, 1.0], vec![0.0, 0.0, 0.0]],
    );
    cols.push((
        "old_log_probs",
        f32_lists(&[vec![-0.5, -2.0, -1.0], vec![-1.0, -1.0, -1.0]]),
    ));
    cols.push(("ref_log_prob", f32_lists(&[vec![-1.0; 3], vec![-1.0; 3]])));
    RecordBatch::try_from_iter(cols).unwrap()
}

// OpenRLHF compute_reward with kl_coef .1: −.1·kl on every valid token (the tool token's KL
// is masked away), after the group scalar ±.707107 (group_norm) sits on the last valid token.
// k1: row 0 rewards [−.05, 0, .707107] → returns [.657107, .707107, .707107];
// k2 (d²/2 = .125): [.694607, …]; k3 (e^−.5 − 1 + .5 = .106531): [.696454, …].
// Row 1 has no KL (d = 0): [−.707107, 0, 0].
#[test]
fn openrlhf_kl_in_the_reward() {
    let b = openrlhf_kl_batch();
    for (estimator, first) in [("k1", 0.657107), ("k2", 0.694607), ("k3", 0.696454)] {
        let kl = format!("openrlhf.kl_estimator={estimator}");
        let out = run(
            &b,
            &[
                "-e",
                "openrlhf_group_norm",
                "--set",
                "openrlhf.kl_coef=0.1",
                "--set",
                &kl,
            ],
        );
        let x = 0.707107;
        let want: [&[f64]; 2] = [&[first, x, x], &[-x, 0.0, 0.0]];
        assert_rows_close(estimator, &lists_f32(&out, "advantages"), &want, ATOL, RTOL);
    }
    // reinforce_baseline: returns [.45, .5, .5] and [−.5, 0, 0]; the valid tokens .45, .5,
    // −.5 have μ = .15 and population var .211667 (rstd 2.173571), so the advantages are
    // [.652071, .760750, .760750] and [−1.412821, −.326036, −.326036].
    let out = run(
        &b,
        &[
            "-e",
            "openrlhf_reinforce_baseline",
            "--set",
            "openrlhf.kl_coef=0.1",
        ],
    );
    let want: [&[f64]; 2] = [
        &[0.652071, 0.76075, 0.76075],
        &[-1.412821, -0.326036, -0.326036],
    ];
    assert_rows_close(
        "reinforce_baseline",
        &lists_f32(&out, "advantages"),
        &want,
        ATOL,
        RTOL,
    );
    let want: [&[f64]; 2] = [&[0.45, 0.5, 0.5], &[-0.5, 0.0, 0.0]];
    assert_rows_close(
        "reinforce_baseline returns",
        &lists_f32(&out, "returns"),
        &want,
        ATOL,
        RTOL,
    );
    // without the log-prob columns: a clear data error
    let bare = RecordBatch::try_from_iter(rows(
        &[vec![1, 0, 1], vec![1, 0, 0]],
        &[vec![0.0, 0.0, 1.0], vec![0.0, 0.0, 0.0]],
    ))
    .unwrap();
    fails(
        &bare,
        &["-e", "openrlhf_rloo", "--set", "openrlhf.kl_coef=0.1"],
        1,
        "missing column old_log_probs, ref_log_prob",
    );
    fails(
        &b,
        &["-e", "openrlhf_rloo", "--set", "openrlhf.kl_estimator=k4"],
        2,
        "expected k1, k2 or k3",
    );
}

// conventions.md T8: drgrpo under skyrl gives a = [1, −1] on masks [1,1,0] and [1,0,0];
// advantage_batch_normalize with T = 3 (mean over all 6 entries = 1/6, masked population
// var 2.75/3) and with row 0 one padding column longer (T = 4, mean 1/8).
#[test]
fn skyrl_advantage_batch_normalize() {
    let args = [
        "-e",
        "drgrpo",
        "--convention",
        "skyrl",
        "--set",
        "skyrl.advantage_batch_normalize=true",
    ];
    let b = RecordBatch::try_from_iter(rows(
        &[vec![1, 1, 0], vec![1, 0, 0]],
        &[vec![0.0, 1.0, 0.0], vec![-1.0, 0.0, 0.0]],
    ))
    .unwrap();
    let out = run(&b, &args);
    let want: [&[f64]; 2] = [
        &[0.870388, 0.870388, -0.174078],
        &[-1.218544, -0.174078, -0.174078],
    ];
    assert_rows_close("T = 3", &lists_f32(&out, "advantages"), &want, ATOL, RTOL);
    let want: [&[f64]; 2] = [&[1.0, 1.0, 0.0], &[-1.0, 0.0, 0.0]];
    assert_rows_close("returns", &lists_f32(&out, "returns"), &want, ATOL, RTOL);
    let b = RecordBatch::try_from_iter(rows(
        &[vec![1, 1, 0, 0], vec![1, 0, 0]],
        &[vec![0.0, 1.0, 0.0, 0.0], vec![-1.0, 0.0, 0.0]],
    ))
    .unwrap();
    let out = run(&b, &args);
    let want: [&[f64]; 2] = [
        &[0.906217, 0.906217, -0.12946, -0.12946],
        &[-1.165136, -0.12946, -0.12946],
    ];
    assert_rows_close("T = 4", &lists_f32(&out, "advantages"), &want, ATOL, RTOL);
    fails(
        &b,
        &[
            "-e",
            "grpo",
            "--set",
            "skyrl.advantage_batch_normalise=true",
        ],
        2,
        "advantage_batch_normalise",
    );
}

// NeMo groups by identical prompt token ids: uids all differ, prompt ids [1,2] ×3 and [3]
// give T1's groups: [2.121314, −2.121314, 0, 0].
#[test]
fn nemo_groups_by_prompt_ids() {
    use arrow::array::ListArray;
    use arrow::datatypes::Int64Type;
    use std::sync::Arc;
    let ids = |rows: &[&[i64]]| -> ArrayRef {
        Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
            rows.iter().map(|r| Some(r.iter().map(|&x| Some(x)))),
        ))
    };
    let base = outcome(&["p", "q", "r", "s"], &[1.0, 0.0, 0.5, 0.7]);
    let schema = base.schema();
    let mut cols: Vec<(&str, ArrayRef)> = schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .zip(base.columns().iter().cloned())
        .collect();
    cols.push(("prompt_ids", ids(&[&[1, 2], &[1, 2], &[1, 2], &[3]])));
    let b = RecordBatch::try_from_iter(cols).unwrap();
    let want = [2.121314, -2.121314, 0.0, 0.0];
    let set = ["--set", "nemo.group_by=prompt_ids"];
    for args in [
        &["-e", "rloo_loo_std"][..],
        &["-e", "grpo", "--convention", "nemo-rl"][..],
    ] {
        let all: Vec<&str> = args.iter().chain(&set).copied().collect();
        assert_close(
            &format!("{args:?}"),
            &row_advantages(&run(&b, &all)),
            &want,
            ATOL,
            RTOL,
        );
    }
    // by uid (the default) every row is a singleton: 0
    assert_close(
        "by uid",
        &row_advantages(&run(&b, &["-e", "rloo_loo_std"])),
        &[0.0; 4],
        ATOL,
        RTOL,
    );
    fails(
        &base,
        &["-e", "rloo_loo_std", "--set", "nemo.group_by=prompt_ids"],
        1,
        "missing column prompt_ids",
    );
    fails(
        &base,
        &["-e", "rloo_loo_std", "--set", "nemo.group_by=prompt"],
        2,
        "expected uid or prompt_ids",
    );
}

// The new keys are written by `advcalc config` and read back unchanged; a key set where the
// estimator does not read it gives a note (the lists `advcalc estimators` prints).
#[test]
fn new_keys_round_trip_through_config() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(
        tmp.path(),
        &[
            "config",
            "-e",
            "openrlhf_rloo",
            "--set",
            "openrlhf.kl_coef=0.05",
            "--set",
            "openrlhf.kl_estimator=k3",
            "--set",
            "nemo.group_by=prompt_ids",
            "--set",
            "skyrl.advantage_batch_normalize=true",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let yaml = String::from_utf8(out.stdout.clone()).unwrap();
    for line in [
        "kl_coef: 0.05",
        "kl_estimator: k3",
        "group_by: prompt_ids",
        "advantage_batch_normalize: true",
    ] {
        assert!(yaml.contains(line), "{line} not in {yaml}");
    }
    let err = stderr(&out);
    assert!(
        err.contains("algorithm.nemo.group_by is not read by openrlhf_rloo"),
        "{err}"
    );
    assert!(!err.contains("openrlhf.kl_coef is not read"), "{err}");
    std::fs::write(tmp.path().join("c.yaml"), &yaml).unwrap();
    let again = run_in(tmp.path(), &["config", "-c", "c.yaml"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(String::from_utf8(again.stdout).unwrap(), yaml);
}
