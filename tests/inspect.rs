//! `advcalc inspect` on small dumps: a clean one raises no warning, and each planted problem
//! is reported with its warning code and the counts worked out by hand from the planted rows.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float32Array, Int64Array, RecordBatch};
use arrow::ipc::writer::StreamWriter;
use common::*;
use serde_json::Value;

/// The rows of a dump, edited by each test before it is written.
#[derive(Clone)]
struct Dump {
    uid: Vec<&'static str>,
    mask: Vec<Vec<i8>>,
    scores: Vec<Vec<f32>>,
    old: Vec<Vec<f32>>,
    reference: Vec<Vec<f32>>,
    rollout: Vec<Vec<f32>>,
    step: Option<Vec<i64>>,
}

/// Eight rows in four groups of two, each group with one right and one wrong answer, the
/// reward on a policy token, no row ending in a tool token; per valid token
/// old = −0.5, ref = −0.625 (k1 = 0.125) and rollout = −0.4375 (old − rollout = −0.0625);
/// log-probs are 0 on tool tokens. Valid tokens per row: 3, 3, 2, 2, 4, 3, 2, 1 (20 in all).
fn clean() -> Dump {
    let mask: Vec<Vec<i8>> = vec![
        vec![1, 1, 0, 0, 1],
        vec![1, 1, 1],
        vec![1, 0, 1],
        vec![1, 1],
        vec![1, 1, 1, 1],
        vec![1, 0, 0, 1, 0, 1],
        vec![1, 1],
        vec![1],
    ];
    let scores = vec![
        vec![0., 0., 0., 0., 1.],
        vec![0., 0., 0.],
        vec![0., 0., 1.],
        vec![0., 0.],
        vec![0., 0., 0., 1.],
        vec![0., 0., 0., 0., 0., 0.],
        vec![0., 1.],
        vec![0.],
    ];
    let per_token = |v: f32| -> Vec<Vec<f32>> {
        mask.iter()
            .map(|r| r.iter().map(|&m| if m == 1 { v } else { 0.0 }).collect())
            .collect()
    };
    Dump {
        uid: vec!["a", "a", "b", "b", "c", "c", "d", "d"],
        old: per_token(-0.5),
        reference: per_token(-0.625),
        rollout: per_token(-0.4375),
        mask,
        scores,
        step: None,
    }
}

impl Dump {
    fn batch(&self) -> RecordBatch {
        let mut cols: Vec<(&str, ArrayRef)> = vec![
            ("uid", strings(&self.uid)),
            ("response_mask", i8_lists(&self.mask)),
            ("rm_scores", f32_lists(&self.scores)),
            ("old_log_probs", f32_lists(&self.old)),
            ("ref_log_prob", f32_lists(&self.reference)),
            ("rollout_log_probs", f32_lists(&self.rollout)),
        ];
        if let Some(step) = &self.step {
            cols.push(("step", Arc::new(Int64Array::from(step.clone()))));
        }
        RecordBatch::try_from_iter(cols).unwrap()
    }

    /// Write the dump as `name` in `dir`, `rows_per_group` rows to a row group.
    fn write(&self, dir: &Path, name: &str, rows_per_group: usize) {
        write_parquet(&dir.join(name), &self.batch(), rows_per_group);
    }
}

/// `advcalc inspect --json FILE ARGS...`: the exit status and the parsed report.
fn inspect_json(dir: &Path, file: &str, args: &[&str]) -> (Output, Value) {
    let mut all = vec!["inspect", "--json", file];
    all.extend_from_slice(args);
    let out = run_in(dir, &all);
    assert!(
        out.status.code() == Some(0) || args.contains(&"--deny-warnings"),
        "{}",
        stderr(&out)
    );
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        )
    });
    (out, json)
}

/// Inspect a dump written with 3 rows per row group; the one step of the report.
fn inspect_dump(dump: &Dump, args: &[&str]) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    dump.write(tmp.path(), "in.parquet", 3);
    let (_, json) = inspect_json(tmp.path(), "in.parquet", args);
    assert_eq!(json["steps"].as_array().unwrap().len(), 1, "{json:#}");
    json
}

/// Every warning code of the report, in order.
fn codes(json: &Value) -> Vec<String> {
    json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["warnings"].as_array().unwrap().iter())
        .map(|w| w["code"].as_str().unwrap().to_string())
        .collect()
}

/// Assert that the report raises exactly the warnings `expected` (and counts them).
fn assert_codes(json: &Value, expected: &[&str]) {
    let mut found = codes(json);
    found.sort();
    let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(found, expected, "{json:#}");
    assert_eq!(json["warnings"], expected.len(), "{json:#}");
}

const KL_ON: &str = "algorithm.use_kl_in_reward=true";
const RS_TOKEN_K1: &str = "algorithm.rollout_correction.rollout_rs=token_k1";

#[test]
fn clean_dump_raises_no_warning() {
    let json = inspect_dump(
        &clean(),
        &[
            "--set",
            "actor_rollout_ref.rollout.n=2",
            "--set",
            KL_ON,
            "--set",
            "algorithm.kl_ctrl.kl_coef=0.001",
            "--set",
            RS_TOKEN_K1,
            "--set",
            "algorithm.rollout_correction.rollout_rs_threshold=2.0",
        ],
    );
    assert_codes(&json, &[]);
    let s = &json["steps"][0];
    assert_eq!(s["step"], Value::Null);
    assert_eq!(s["rows"], 8);
    assert_eq!(s["tokens"], 5 + 3 + 3 + 2 + 4 + 6 + 2 + 1);
    assert_eq!(s["valid_tokens"], 20);
    assert_eq!(s["rows_without_valid_token"], 0);
    assert_eq!(s["rows_ending_in_tool_token"], 0);
    assert_eq!(s["masked_rewards"]["rows"], 0);
    // Tool spans: row 0 one, row 2 one, row 5 two, the rest none.
    let spans = &s["tool_spans"];
    assert_eq!(spans["rows_with_0"], 5);
    assert_eq!(spans["rows_with_1"], 2);
    assert_eq!(spans["rows_with_2"], 1);
    assert_eq!(spans["rows_with_3_or_more"], 0);
    assert_eq!(spans["mean"], 4.0 / 8.0);
    assert_eq!(spans["max"], 2);
    let g = &s["groups"];
    assert_eq!(g["count"], 4);
    assert_eq!(g["size_histogram"], serde_json::json!({"2": 4}));
    assert_eq!(g["expected_size"], 2);
    assert_eq!(g["no_signal"], 0);
    // Score sums: four 1s and four 0s. Sorted, h = 7p: p25 at 1.75 → 0, median at 3.5 → 0.5,
    // p75 at 5.25 → 1; p5 at 0.35 → 0; p95 at 6.65 → 1.
    let d = &s["score_sum"];
    assert_eq!(
        (&d["min"], &d["p5"], &d["p25"], &d["median"]),
        (&0.0.into(), &0.0.into(), &0.0.into(), &0.5.into())
    );
    assert_eq!(
        (&d["p75"], &d["p95"], &d["max"], &d["mean"]),
        (&1.0.into(), &1.0.into(), &1.0.into(), &0.5.into())
    );
    // k1 = 0.125 on each of the 20 valid tokens; 2.5 over 8 rows.
    let kl = &s["kl"];
    assert_eq!(kl["tokens"], 20);
    assert_eq!(kl["mean_k1"], 0.125);
    assert_eq!(kl["mean_abs_k1"], 0.125);
    assert_eq!(kl["mean_row_sum_k1"], 2.5 / 8.0);
    assert_eq!(kl["shaping"]["kl_coef"], 0.001);
    assert_eq!(kl["shaping"]["rows_sign_flipped"], 0);
    let x = &s["train_rollout_mismatch"];
    assert_eq!(x["tokens"], 20);
    assert_eq!(x["mean_abs_diff"], 0.0625);
    assert_eq!(x["ratio_outside"], 0);
    assert_eq!(x["ratio_extreme"], 0);
    // token_k1 with threshold 2 keeps |old − rollout| ≤ ln 2: nothing is rejected.
    assert_eq!(s["rejection"]["rejected_tokens"], 0);
    assert_eq!(s["rejection"]["valid_tokens"], 20);
    assert_eq!(s["non_finite"]["old_log_probs"]["nan"], 0);
    assert_eq!(s["positive_log_probs"]["rollout_log_probs"], 0);
    assert_eq!(s["advantages"], Value::Null);

    // Without any configuration: no KL shaping, no rejection, still no warning.
    let json = inspect_dump(&clean(), &[]);
    assert_codes(&json, &[]);
    assert_eq!(json["steps"][0]["kl"]["shaping"], Value::Null);
    assert_eq!(json["steps"][0]["rejection"], Value::Null);
}

#[test]
fn rows_without_a_valid_token() {
    let mut d = clean();
    d.mask[7] = vec![0];
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["rows_without_valid_token"]);
    assert_eq!(json["steps"][0]["rows_without_valid_token"], 1);
    assert_eq!(json["steps"][0]["valid_tokens"], 19);
}

#[test]
fn verl_v1_padding_rows_are_expected() {
    // Two V1 padding rows (uid pad<hex>, one token, mask [0], score [0]) raise nothing and
    // stay out of the groups.
    let mut d = clean();
    for _ in 0..2 {
        d.uid.push("pad1f3e");
        d.mask.push(vec![0]);
        for col in [&mut d.scores, &mut d.old, &mut d.reference, &mut d.rollout] {
            col.push(vec![0.0]);
        }
    }
    let json = inspect_dump(&d, &["--set", "actor_rollout_ref.rollout.n=2"]);
    assert_codes(&json, &[]);
    let s = &json["steps"][0];
    assert_eq!(s["rows"], 10);
    assert_eq!(s["rows_without_valid_token"], 2);
    assert_eq!(s["v1_padding_rows"], 2);
    assert_eq!(s["groups"]["count"], 4);
    assert_eq!(s["score_sum"]["rows"], 8);
}

#[test]
fn rewards_on_mask0_tokens() {
    let mut d = clean();
    d.scores[2] = vec![0., 2., 1.]; // mask [1, 0, 1]: one token
    d.scores[5] = vec![0., 0.5, 0.5, 0., 0., 0.]; // mask [1, 0, 0, 1, 0, 1]: two tokens
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["masked_reward"]);
    let m = &json["steps"][0]["masked_rewards"];
    assert_eq!((&m["rows"], &m["tokens"]), (&2.into(), &3.into()));
}

#[test]
fn last_token_a_tool_token() {
    let mut d = clean();
    d.mask[4] = vec![1, 1, 0, 0];
    d.scores[4] = vec![0., 1., 0., 0.];
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["ends_in_tool_token"]);
    assert_eq!(json["steps"][0]["rows_ending_in_tool_token"], 1);
    // The trailing run is not a tool span: row 4 has none.
    assert_eq!(json["steps"][0]["tool_spans"]["rows_with_0"], 5);

    // Under --layout padded trailing zeros are padding: not counted, a note says so.
    let json = inspect_dump(&d, &["--layout", "padded"]);
    assert_codes(&json, &[]);
    assert_eq!(json["steps"][0]["rows_ending_in_tool_token"], Value::Null);
    assert!(json["notes"][0].as_str().unwrap().contains("padded"));
}

#[test]
fn a_scalar_score_on_a_trailing_tool_token_is_a_dropped_reward() {
    // verl places a scalar score on the last position, here a tool token (docs/reference/verl-0.9.1.md §7.1).
    let batch = RecordBatch::try_from_iter(vec![
        ("uid", strings(&["a", "a"])),
        ("response_mask", i8_lists(&[vec![1, 1, 0], vec![1, 1]])),
        (
            "score",
            Arc::new(Float32Array::from(vec![1.0f32, 0.0])) as ArrayRef,
        ),
    ])
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &batch, 10);
    let (_, json) = inspect_json(tmp.path(), "in.parquet", &[]);
    assert_codes(&json, &["ends_in_tool_token", "masked_reward"]);
    assert_eq!(json["steps"][0]["masked_rewards"]["tokens"], 1);
    assert_eq!(json["steps"][0]["non_finite"]["score"]["nan"], 0);
}

#[test]
fn group_size_differs_from_rollout_n() {
    let json = inspect_dump(&clean(), &["--set", "actor_rollout_ref.rollout.n=8"]);
    assert_codes(&json, &["group_size_mismatch"]);
    assert_eq!(json["steps"][0]["groups"]["expected_size"], 8);
    let message = json["steps"][0]["warnings"][0]["message"].as_str().unwrap();
    assert!(message.starts_with("4 of 4 groups"), "{message}");
}

#[test]
fn unequal_group_sizes() {
    let mut d = clean();
    d.uid[7] = "a"; // a: rows 0, 1, 7; d: row 6 alone
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["unequal_group_sizes"]);
    let g = &json["steps"][0]["groups"];
    assert_eq!(
        g["size_histogram"],
        serde_json::json!({"1": 1, "2": 2, "3": 1})
    );
    // The singleton d has no one to compare with: 1 of 4 groups, under the threshold.
    assert_eq!(g["no_signal"], 1);
}

#[test]
fn groups_with_all_equal_scores() {
    let mut d = clean();
    d.scores[0] = vec![0.; 5]; // a: 0, 0
    d.scores[4] = vec![0.; 4]; // c: 0, 0
    d.scores[6] = vec![0.; 2]; // d: 0, 0; only b keeps 1, 0
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["no_signal_groups"]);
    let g = &json["steps"][0]["groups"];
    assert_eq!(g["no_signal"], 3);
    assert_eq!(g["no_signal_fraction"], 0.75);
}

#[test]
fn all_scores_equal() {
    let mut d = clean();
    for row in &mut d.scores {
        row.iter_mut().for_each(|x| *x = 0.0);
    }
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["constant_scores", "no_signal_groups"]);
    assert_eq!(json["steps"][0]["groups"]["no_signal"], 4);
    assert_eq!(json["steps"][0]["score_sum"]["max"], 0.0);
}

#[test]
fn kl_penalty_flips_the_sign() {
    // β = 4, k1 = 0.125 per valid token: a row loses 0.5 per valid token. Rows scoring 1:
    // row 0 (3 valid) → −0.5 and row 4 (4 valid) → −1 flip; rows 2 and 6 (2 valid) → 0, no
    // sign. Mean |penalty| = 0.5·20/8 = 1.25 > mean |score| = 4/8 = 0.5.
    let json = inspect_dump(
        &clean(),
        &["--set", KL_ON, "--set", "algorithm.kl_ctrl.kl_coef=4"],
    );
    assert_codes(&json, &["kl_flips_sign", "kl_dominates"]);
    let s = &json["steps"][0]["kl"]["shaping"];
    assert_eq!(s["kl_penalty"], "kl");
    assert_eq!(s["kl_coef"], 4.0);
    assert_eq!(s["rows_sign_flipped"], 2);
    assert_eq!(s["sign_flipped_fraction"], 0.25);
    assert_eq!(s["mean_abs_penalty"], 1.25);
    assert_eq!(s["mean_abs_score_sum"], 0.5);
}

#[test]
fn kl_in_reward_without_ref_log_prob_is_skipped_with_a_note() {
    let batch = clean().batch();
    let batch = batch.project(&[0, 1, 2, 3, 5]).unwrap(); // no ref_log_prob
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &batch, 3);
    let (_, json) = inspect_json(tmp.path(), "in.parquet", &["--set", KL_ON]);
    assert_codes(&json, &[]);
    assert_eq!(json["steps"][0]["kl"], Value::Null);
    let notes = json["notes"].to_string();
    assert!(notes.contains("ref_log_prob"), "{notes}");
}

#[test]
fn large_train_rollout_mismatch() {
    // Row 0: old − rollout = 1 on its 3 valid tokens (ratio e ≈ 2.72); row 1: 3 on its first
    // (ratio e³ ≈ 20.1). Outside [0.5, 2]: 4 of 20 tokens; above 10: 1. Mean |diff| =
    // (3·1 + 3 + 16·0.0625)/20 = 7/20.
    let mut d = clean();
    d.rollout[0] = vec![-1.5, -1.5, 0., 0., -1.5];
    d.rollout[1][0] = -3.5;
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["train_rollout_mismatch"]);
    let x = &json["steps"][0]["train_rollout_mismatch"];
    assert_eq!(x["ratio_outside"], 4);
    assert_eq!(x["ratio_outside_fraction"], 0.2);
    assert_eq!(x["ratio_extreme"], 1);
    assert_eq!(x["ratio_extreme_fraction"], 0.05);
    assert_eq!(x["mean_abs_diff"], 7.0 / 20.0);
    assert_eq!(x["ratio_range"], serde_json::json!([0.5, 2.0]));
}

#[test]
fn nan_and_inf_are_counted_not_refused() {
    let mut d = clean();
    d.old[3][0] = f32::NAN; // a valid token: left out of the KL and mismatch means
    d.reference[0][2] = f32::INFINITY; // a tool token
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["non_finite_values"]);
    let s = &json["steps"][0];
    assert_eq!(s["non_finite"]["old_log_probs"]["nan"], 1);
    assert_eq!(s["non_finite"]["ref_log_prob"]["inf"], 1);
    assert_eq!(s["non_finite"]["rm_scores"]["nan"], 0);
    assert_eq!(s["kl"]["tokens"], 19);
    assert_eq!(s["kl"]["mean_k1"], 0.125);
    assert_eq!(s["train_rollout_mismatch"]["tokens"], 19);
}

#[test]
fn nan_score_is_left_out_of_the_distribution() {
    let mut d = clean();
    d.scores[1][0] = f32::NAN;
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["non_finite_values"]);
    let s = &json["steps"][0]["score_sum"];
    assert_eq!(s["non_finite_rows"], 1);
    assert_eq!(s["rows"], 7);
    assert_eq!(json["steps"][0]["non_finite"]["rm_scores"]["nan"], 1);
}

#[test]
fn positive_log_probs() {
    // On row 0's two tool tokens, where nothing else reads them.
    let mut d = clean();
    d.rollout[0] = vec![-0.4375, -0.4375, 0.5, 0.25, -0.4375];
    let json = inspect_dump(&d, &[]);
    assert_codes(&json, &["positive_log_probs"]);
    let p = &json["steps"][0]["positive_log_probs"];
    assert_eq!(p["rollout_log_probs"], 2);
    assert_eq!(p["old_log_probs"], 0);
}

#[test]
fn rejection_that_removes_most_tokens() {
    // token_k1 with threshold 1.01 keeps |old − rollout| ≤ ln 1.01 ≈ 0.00995; only rows 6
    // and 7, where rollout = old, keep their 3 valid tokens: 17 of 20 tokens and 6 of 8 rows
    // are rejected.
    let mut d = clean();
    d.rollout[6] = d.old[6].clone();
    d.rollout[7] = d.old[7].clone();
    let json = inspect_dump(
        &d,
        &[
            "--set",
            RS_TOKEN_K1,
            "--set",
            "algorithm.rollout_correction.rollout_rs_threshold=1.01",
        ],
    );
    assert_codes(&json, &["heavy_rejection"]);
    let r = &json["steps"][0]["rejection"];
    assert_eq!(r["rejected_tokens"], 17);
    assert_eq!(r["rejected_token_fraction"], 17.0 / 20.0);
    assert_eq!(r["rows_fully_rejected"], 6);
    assert_eq!(r["rows_fully_rejected_fraction"], 0.75);
    assert_eq!(r["mask0_tokens_set"], 0);
}

#[test]
fn steps_are_reported_separately() {
    // Rows 0–3 are step 1, rows 4–7 step 0 (sections come in step order); row 3 of step 1
    // has no valid token, so only step 1 warns.
    let mut d = clean();
    d.step = Some(vec![1, 1, 1, 1, 0, 0, 0, 0]);
    d.mask[3] = vec![0, 0];
    let tmp = tempfile::tempdir().unwrap();
    d.write(tmp.path(), "in.parquet", 3);
    let (_, json) = inspect_json(tmp.path(), "in.parquet", &[]);
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(
        (&steps[0]["step"], &steps[1]["step"]),
        (&0.into(), &1.into())
    );
    assert_eq!(
        (&steps[0]["rows"], &steps[1]["rows"]),
        (&4.into(), &4.into())
    );
    assert_eq!(steps[0]["valid_tokens"], 4 + 3 + 2 + 1);
    assert_eq!(steps[1]["valid_tokens"], 3 + 3 + 2);
    assert_eq!(steps[0]["groups"]["count"], 2);
    assert_eq!(steps[0]["warnings"], serde_json::json!([]));
    assert_eq!(steps[1]["warnings"][0]["code"], "rows_without_valid_token");
    assert_eq!(json["warnings"], 1);
}

#[test]
fn deny_warnings_sets_the_exit_status() {
    let tmp = tempfile::tempdir().unwrap();
    clean().write(tmp.path(), "clean.parquet", 3);
    let mut d = clean();
    d.mask[7] = vec![0];
    d.write(tmp.path(), "planted.parquet", 3);
    let out = run_in(tmp.path(), &["inspect", "--deny-warnings", "clean.parquet"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run_in(
        tmp.path(),
        &["inspect", "--deny-warnings", "planted.parquet"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: planted.parquet: 1 warning(s) raised (--deny-warnings)"),
        "{err}"
    );
    // The report is still printed.
    assert!(String::from_utf8_lossy(&out.stdout).contains("rows_without_valid_token"));
}

#[test]
fn human_output_is_a_table_with_warning_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let mut d = clean();
    d.mask[7] = vec![0];
    d.scores[2] = vec![0., 2., 1.];
    d.write(tmp.path(), "in.parquet", 3);
    let out = run_in(tmp.path(), &["inspect", "in.parquet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("advcalc inspect: in.parquet (ragged layout)\n"),
        "{text}"
    );
    let table: Vec<&str> = text.lines().filter(|l| l.starts_with("  ")).collect();
    // Values start in one column (counted in characters: labels hold − and β).
    let value_column = |l: &str| {
        let c: Vec<char> = l.chars().collect();
        let mut i = 2;
        while !(c[i] == ' ' && c[i + 1] == ' ') {
            i += 1;
        }
        while c[i] == ' ' {
            i += 1;
        }
        i
    };
    let first = value_column(table[0]);
    assert!(table.iter().all(|l| value_column(l) == first), "{text}");
    assert!(text.contains("\n  rows without a valid token"), "{text}");
    assert!(
        text.contains("\nwarning: rows_without_valid_token: 1 rows have no valid token"),
        "{text}"
    );
    assert!(
        text.contains(
            "\nwarning: masked_reward: 1 rows carry non-zero rewards on mask-0 tokens (1 tokens)"
        ),
        "{text}"
    );
    assert!(text.ends_with("\n2 warnings\n"), "{text}");
}

#[test]
fn threads_and_row_groups_do_not_change_the_report() {
    let mut d = clean();
    d.step = Some(vec![0, 1, 0, 1, 0, 1, 0, 1]);
    d.rollout[0] = vec![-1.5, -1.5, 0., 0., -1.5];
    let tmp = tempfile::tempdir().unwrap();
    d.write(tmp.path(), "one.parquet", 1);
    d.write(tmp.path(), "all.parquet", 100);
    let args = ["--set", KL_ON, "--set", "algorithm.kl_ctrl.kl_coef=0.3"];
    let (_, a) = inspect_json(
        tmp.path(),
        "one.parquet",
        &[&args[..], &["-j", "1"]].concat(),
    );
    let (_, b) = inspect_json(
        tmp.path(),
        "one.parquet",
        &[&args[..], &["-j", "4"]].concat(),
    );
    let (_, c) = inspect_json(
        tmp.path(),
        "all.parquet",
        &[&args[..], &["-j", "3"]].concat(),
    );
    assert_eq!(a, b);
    assert_eq!(a["steps"], c["steps"]);
}

#[test]
fn arrow_stream_on_stdin() {
    let mut d = clean();
    d.mask[7] = vec![0];
    let batch = d.batch();
    let mut w = StreamWriter::try_new(Vec::new(), &batch.schema()).unwrap();
    w.write(&batch.slice(0, 5)).unwrap();
    w.write(&batch.slice(5, 3)).unwrap();
    let bytes = w.into_inner().unwrap();
    let mut child = advcalc()
        .args(["inspect", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["file"], "<stdin>");
    assert_codes(&json, &["rows_without_valid_token"]);
    assert_eq!(json["steps"][0]["rows"], 8);
}

#[test]
fn a_bare_dump_needs_only_the_mask_and_the_scores() {
    let batch = grpo_batch().project(&[1, 2]).unwrap(); // response_mask, rm_scores
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &batch, 10);
    let (_, json) = inspect_json(tmp.path(), "in.parquet", &[]);
    let s = &json["steps"][0];
    assert_eq!(s["rows"], 4);
    assert_eq!(s["groups"], Value::Null);
    assert_eq!(s["kl"], Value::Null);
    assert_eq!(s["train_rollout_mismatch"], Value::Null);
    assert!(json["notes"][0].as_str().unwrap().contains("uid"));

    // Without the scores it is an error naming what is missing.
    let batch = grpo_batch().project(&[0, 1]).unwrap();
    write_parquet(&tmp.path().join("bad.parquet"), &batch, 10);
    let out = run_in(tmp.path(), &["inspect", "bad.parquet"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: bad.parquet: missing column rm_scores"),
        "{err}"
    );
}

#[test]
fn an_empty_dump_gives_one_empty_section() {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(
        &tmp.path().join("in.parquet"),
        &grpo_batch().slice(0, 0),
        10,
    );
    let (_, json) = inspect_json(tmp.path(), "in.parquet", &[]);
    assert_codes(&json, &[]);
    let s = &json["steps"][0];
    assert_eq!(s["rows"], 0);
    assert_eq!(s["valid_token_fraction"], Value::Null);
    assert_eq!(s["score_sum"]["median"], Value::Null);
    assert_eq!(s["groups"]["count"], 0);
}

#[test]
fn bypass_mode_reads_rollout_log_probs_as_old() {
    // No old_log_probs: in bypass mode verl's old_log_probs are the rollout's, so
    // k1 = −0.4375 − (−0.625) = 0.1875 per valid token.
    let batch = clean().batch().project(&[0, 1, 2, 4, 5]).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &batch, 3);
    let (_, json) = inspect_json(
        tmp.path(),
        "in.parquet",
        &[
            "--set",
            "algorithm.rollout_correction.bypass_mode=true",
            "--set",
            KL_ON,
            "--set",
            "algorithm.kl_ctrl.kl_coef=0.001",
        ],
    );
    assert_codes(&json, &[]);
    let s = &json["steps"][0];
    assert_eq!(s["kl"]["mean_k1"], 0.1875);
    assert_eq!(s["kl"]["shaping"]["rows_sign_flipped"], 0);
    assert_eq!(s["train_rollout_mismatch"], Value::Null);
}

#[test]
fn advantage_statistics_of_the_configured_estimator() {
    // Every group is {1, 0}: GRPO gives ±a, a = 0.5 / (std + 1e-6) with the unbiased std
    // √0.5. The right answers (rows 0, 2, 4, 6) hold 3 + 2 + 4 + 2 = 11 valid tokens, the
    // wrong ones 3 + 2 + 3 + 1 = 9, so the mean is a·(11 − 9)/20 and every |advantage| is a.
    let a = 0.5 / (0.5f64.sqrt() + 1e-6);
    let json = inspect_dump(&clean(), &["-e", "grpo"]);
    assert_codes(&json, &[]);
    let adv = &json["steps"][0]["advantages"];
    assert_eq!(adv["estimator"], "grpo");
    assert_eq!(adv["valid_tokens"], 20);
    let near = |key: &str, want: f64| {
        let got = adv[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}: {}", adv[key]));
        assert_close(key, &[got], &[want], 1e-6, 0.0);
    };
    near("max", a);
    near("min", -a);
    near("mean", a * 2.0 / 20.0);
    near("std", (a * a - (a * 0.1).powi(2)).sqrt());
    near("zero_fraction", 0.0);
    // Without -e the section stays empty.
    assert_eq!(
        inspect_dump(&clean(), &[])["steps"][0]["advantages"],
        Value::Null
    );
}

#[test]
fn zero_advantages() {
    // All scores 0: every GRPO advantage is exactly 0.
    let mut d = clean();
    for row in &mut d.scores {
        row.iter_mut().for_each(|x| *x = 0.0);
    }
    let json = inspect_dump(&d, &["-e", "grpo"]);
    assert_codes(
        &json,
        &["constant_scores", "no_signal_groups", "zero_advantages"],
    );
    assert_eq!(json["steps"][0]["advantages"]["zero_fraction"], 1.0);
}

#[test]
fn extreme_advantages() {
    // Rewards of 100 in groups {100, 0}: verl's RLOO gives r·n/(n−1) − mean·n/(n−1) =
    // 200 − 100 = 100 and 0 − 100 = −100 (n = 2), far past the threshold of 20.
    let mut d = clean();
    for row in &mut d.scores {
        row.iter_mut().for_each(|x| *x *= 100.0);
    }
    let json = inspect_dump(&d, &["-e", "rloo"]);
    assert_codes(&json, &["extreme_advantages"]);
    let adv = &json["steps"][0]["advantages"];
    assert_eq!(adv["max"], 100.0);
    assert_eq!(adv["min"], -100.0);
}

#[test]
fn an_estimator_the_dump_cannot_serve_is_a_note() {
    // gae needs `values`, which the dump lacks: the other findings stand, with a note.
    let json = inspect_dump(&clean(), &["-e", "gae"]);
    assert_codes(&json, &[]);
    assert_eq!(json["steps"][0]["advantages"], Value::Null);
    let notes = json["notes"].to_string();
    assert!(
        notes.contains("advantage statistics of gae skipped"),
        "{notes}"
    );
    assert!(notes.contains("values"), "{notes}");
}

/// One-token rows in groups of eight (`p`, `q`, ...), each group's rows scoring the given
/// value; old = ref = rollout = −0.5.
fn groups_of_eight(values: &[f32]) -> Dump {
    const UIDS: [&str; 4] = ["p", "q", "r", "s"];
    let n = values.len() * 8;
    Dump {
        uid: (0..n).map(|i| UIDS[i / 8]).collect(),
        mask: vec![vec![1]; n],
        scores: (0..n).map(|i| vec![values[i / 8]]).collect(),
        old: vec![vec![-0.5]; n],
        reference: vec![vec![-0.5]; n],
        rollout: vec![vec![-0.5]; n],
        step: None,
    }
}

// Eight rows of 0.3 are flagged (3·0.3 is not a float32); eight rows of 0.5 are not. With
// u = ulp(0.3f32) = 2^−25 = 2.980232e−8, up to 2u/ε: OpenRLHF group_norm (ε 1e−9) 59.6, 10
// after its clip; verl/SkyRL (ε 1e−6) .0596; TRL (ε 1e−4) 5.96e−4; open-instruct (float64)
// nothing. From u/(2u + ε): .49175, .028126, 2.978457e−4.
#[test]
fn equal_non_dyadic_scores_are_fragile() {
    let json = inspect_dump(&groups_of_eight(&[0.3, 0.5]), &[]);
    assert_codes(&json, &["equal_inexact_scores", "no_signal_groups"]);
    let f = &json["steps"][0]["fragile_groups"];
    assert_eq!(f["equal_inexact_scores"]["groups"], 1, "{f:#}");
    assert_eq!(f["equal_inexact_scores"]["rows"], 8);
    assert_eq!(f["tight_spread"]["groups"], 0);
    let trainer = |name: &str| {
        f["trainers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["trainer"] == name)
            .unwrap_or_else(|| panic!("{name} in {f:#}"))
            .clone()
    };
    let range = |t: &Value, key: &str| -> (f64, f64) {
        (t[key][0].as_f64().unwrap(), t[key][1].as_f64().unwrap())
    };
    let openrlhf = trainer("OpenRLHF group_norm");
    let (lo, hi) = range(&openrlhf, "equal_scores_abs_advantage");
    assert!(
        (lo - 0.49175).abs() < 1e-5 && (hi - 59.60464).abs() < 1e-4,
        "{lo} {hi}"
    );
    let (lo, hi) = range(&openrlhf, "equal_scores_abs_advantage_clipped");
    assert!((lo - 0.49175).abs() < 1e-5 && hi == 10.0, "{lo} {hi}");
    let (lo, hi) = range(
        &trainer("verl grpo, SkyRL grpo"),
        "equal_scores_abs_advantage",
    );
    assert!((lo - 0.02812589).abs() < 1e-7 && (hi - 0.05960464).abs() < 1e-7);
    let (_, hi) = range(&trainer("TRL grpo"), "equal_scores_abs_advantage");
    assert!((hi - 5.960464e-4).abs() < 1e-9);
    assert_eq!(
        trainer("open-instruct standard")["equal_scores_abs_advantage"],
        Value::Null
    );
    let message = json["steps"][0]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "equal_inexact_scores")
        .unwrap()["message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains("OpenRLHF group_norm up to ±59.6046 (±10 after its clip)"),
        "{message}"
    );

    // only dyadic scores: nothing fragile
    let json = inspect_dump(&groups_of_eight(&[0.5, 0.25]), &[]);
    assert_codes(&json, &["no_signal_groups"]);
    assert_eq!(
        json["steps"][0]["fragile_groups"]["equal_inexact_scores"]["groups"],
        0
    );
    assert_eq!(
        json["steps"][0]["fragile_groups"]["trainers"],
        serde_json::json!([])
    );
}

// A group scoring 1 and 1.001: σ = .000707, so TRL's ε 1e−4 alone moves its advantages by
// 1e−4/(σ + 1e−4) = 12.4 %; the 0/1 group is robust.
#[test]
fn tight_spreads_are_fragile() {
    let mut d = clean();
    d.scores[0] = vec![0., 0., 0., 0., 1.0];
    d.scores[1] = vec![0., 0., 1.001];
    // verl's own arithmetic stays within the threshold here (ε/σ ≈ 1.4e-3): for a verl run
    // (the default convention) the finding is a note, and --deny-warnings passes
    let json = inspect_dump(&d, &["--deny-warnings"]);
    assert_codes(&json, &[]);
    let f = &json["steps"][0]["fragile_groups"];
    assert_eq!(f["tight_spread"]["groups"], 1, "{f:#}");
    assert_eq!(f["tight_spread"]["rows"], 2);
    let trl = f["trainers"][1]["tight_spread_relative_departure"]
        .as_f64()
        .unwrap();
    assert!((trl - 0.1241).abs() < 2e-4, "{trl}");
    let note = &json["steps"][0]["notes"][0];
    assert_eq!(note["code"], "tight_spread_groups");
    let message = note["message"].as_str().unwrap();
    assert!(
        message.starts_with("not this run's trainer (verl"),
        "{message}"
    );
    assert!(message.contains("TRL grpo up to 12.4%"), "{message}");
    // for a TRL run it is a warning
    let json = inspect_dump(&d, &["--convention", "trl"]);
    assert_codes(&json, &["tight_spread_groups"]);
    let message = json["steps"][0]["warnings"][0]["message"].as_str().unwrap();
    assert!(message.contains("TRL grpo up to 12.4%"), "{message}");
    assert_eq!(json["steps"][0]["notes"], serde_json::json!([]));
}

#[test]
fn zero_is_printed_without_a_sign() {
    // A group whose only right answer is an empty row: GRPO's advantages of the other rows
    // are negative, and the empty row's statistics are sums over nothing (0, not −0).
    let mut dump = clean();
    dump.uid.push("e");
    dump.mask.push(vec![]);
    dump.scores.push(vec![]);
    dump.old.push(vec![]);
    dump.reference.push(vec![]);
    dump.rollout.push(vec![]);
    let tmp = tempfile::tempdir().unwrap();
    dump.write(tmp.path(), "in.parquet", 3);
    let out = run_in(tmp.path(), &["inspect", "in.parquet", "-e", "grpo"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text
            .split_whitespace()
            .any(|w| w.trim_end_matches(',') == "-0"),
        "{text}"
    );
}

/// `inspect --deny-warnings` on a shipped fixture under its run's own configuration.
fn deny_warnings_on(fixture: &str, args: &[&str]) -> Output {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(fixture);
    advcalc()
        .args(["inspect", "--deny-warnings"])
        .args(args)
        .arg(&path)
        .output()
        .unwrap()
}

/// What a command printed, stdout (the report, its warnings) then stderr (notes, errors).
fn everything(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(out))
}

#[test]
fn every_clean_fixture_passes_deny_warnings_under_its_own_configuration() {
    // each fixture under the configuration its run was made with (expected.json, make_demo.py):
    // a warning here is one that cries wolf
    let trl_weights = "algorithm.trl.reward_weights=[1.0,0.5]";
    for (fixture, args) in [
        ("demo.parquet", vec!["-e", "grpo"]),
        ("demo.parquet", vec!["-e", "rloo"]),
        ("trainers/dumps/nemo-rl/run1", vec![]),
        ("trainers/dumps/open-instruct/run1", vec![]),
        (
            "trainers/dumps/open-instruct/run_centered",
            vec!["--no-norm-adv-by-std"],
        ),
        ("trainers/dumps/prime-rl/run1", vec![]),
        ("trainers/dumps/trl/run1", vec!["--set", trl_weights]),
        ("trainers/dumps/trl/run_chat", vec!["--set", trl_weights]),
    ] {
        let out = deny_warnings_on(fixture, &args);
        let err = everything(&out);
        assert_eq!(out.status.code(), Some(0), "{fixture} {args:?}: {err}");
        assert!(!err.contains("warning:"), "{fixture} {args:?}: {err}");
    }
}

#[test]
fn deny_warnings_fails_on_each_planted_fault_in_the_fixtures() {
    let trl_weights = "algorithm.trl.reward_weights=[1.0,0.5]";
    for (fixture, args, code) in [
        // the demo's rewards on tool tokens, which GAE drops
        ("demo.parquet", vec!["-e", "gae"], "masked_reward"),
        ("demo.parquet", vec!["-e", "gae"], "ends_in_tool_token"),
        // TRL's reward weights left out: the logged advantages disagree
        (
            "trainers/dumps/trl/run1",
            vec![],
            "logged_advantages_differ",
        ),
        // a TRL row without a reward, read under verl's rules (its NaN is not TRL's own)
        (
            "trainers/dumps/trl/run1",
            vec!["--convention", "verl", "--set", trl_weights],
            "non_finite_values",
        ),
        // open-instruct's centred advantages recomputed as standard ones
        (
            "trainers/dumps/open-instruct/run_centered",
            vec![],
            "logged_advantages_differ",
        ),
    ] {
        let out = deny_warnings_on(fixture, &args);
        let err = everything(&out);
        assert_eq!(out.status.code(), Some(1), "{fixture} {args:?}: {err}");
        assert!(
            err.contains(&format!("warning: {code}:")),
            "{fixture} {args:?} should warn {code}: {err}"
        );
    }
}

#[test]
fn non_finite_values_in_a_column_the_estimator_does_not_read_are_a_note() {
    // open-instruct's run holds a NaN rollout log-prob, which grpo never reads
    let out = deny_warnings_on("trainers/dumps/open-instruct/run1", &[]);
    let err = everything(&out);
    assert!(
        err.contains("note: non_finite_unread: non-finite values in columns grpo does not read (rollout_log_probs 1 NaN"),
        "{err}"
    );
    // a TRL dump's own NaN score (under its convention) is the reader's note alone
    let out = deny_warnings_on(
        "trainers/dumps/trl/run1",
        &["--set", "algorithm.trl.reward_weights=[1.0,0.5]"],
    );
    let err = everything(&out);
    assert!(err.contains("their score is NaN, which TRL"), "{err}");
    assert!(!err.contains("non_finite"), "{err}");
    // nor does a sequence-level dump print the token checks its note says do not apply
    let text = String::from_utf8_lossy(&out.stdout);
    for absent in ["tool spans per row", "rewards on mask-0 tokens", "KL (old"] {
        assert!(!text.contains(absent), "{absent}: {text}");
    }
}
