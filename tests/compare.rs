//! `advcalc compare` against separate `advcalc run` invocations: every number of the
//! comparison is recomputed here, independently, from the `advantages` and `response_mask`
//! that `run` writes for each variant.

mod common;

use std::path::Path;

use common::{
    assert_close, f32_lists, i8_lists, lists_f32, read_parquet, run_in, stderr, strings,
    write_parquet,
};
use serde_json::Value;

/// 48 rows in 6 groups of 8 whose pass rates (0, 1, 3, 5, 7, 8 correct of 8) fill every
/// bucket; ragged rows with tool spans; rows shuffled over row groups of 7.
fn dump(dir: &Path) {
    let mut seed = 12345u64;
    let mut rand = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as f64 / (1u64 << 31) as f64) as f32
    };
    let correct_per_group = [0, 1, 3, 5, 7, 8];
    let mut rows = Vec::new();
    for (g, &right) in correct_per_group.iter().enumerate() {
        for k in 0..8 {
            rows.push((g, k < right));
        }
    }
    // A fixed shuffle: stride 7 over 48 rows visits every row once.
    let order: Vec<usize> = (0..48).map(|i| (i * 7) % 48).collect();
    let uids: Vec<String> = order.iter().map(|&i| format!("q{}", rows[i].0)).collect();
    let (mut mask, mut scores, mut old, mut reference, mut rollout, mut values) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (n, &i) in order.iter().enumerate() {
        let len = 3 + (n * 5) % 10;
        let mut m = vec![1i8; len];
        if n % 2 == 0 && len > 4 {
            m[1] = 0;
            m[2] = 0; // a tool span
        }
        let score = if rows[i].1 {
            1.0
        } else if n % 3 == 0 {
            -0.5
        } else {
            0.0
        };
        let mut s = vec![0.0f32; len];
        s[len - 1] = score;
        let o: Vec<f32> = (0..len).map(|_| -0.1 - 2.0 * rand()).collect();
        let r: Vec<f32> = o.iter().map(|&x| x - 0.3 * rand()).collect();
        // Most tokens agree with the rollout engine; a few are far off (rejected by token_k1).
        let ro: Vec<f32> = o
            .iter()
            .map(|&x| x + if rand() < 0.1 { 1.5 } else { 0.05 * rand() })
            .collect();
        let v: Vec<f32> = (0..len).map(|_| rand() - 0.5).collect();
        mask.push(m);
        scores.push(s);
        old.push(o);
        reference.push(r);
        rollout.push(ro);
        values.push(v);
    }
    let uid_refs: Vec<&str> = uids.iter().map(String::as_str).collect();
    let batch = arrow::array::RecordBatch::try_from_iter(vec![
        ("uid", strings(&uid_refs)),
        ("response_mask", i8_lists(&mask)),
        ("rm_scores", f32_lists(&scores)),
        ("old_log_probs", f32_lists(&old)),
        ("ref_log_prob", f32_lists(&reference)),
        ("rollout_log_probs", f32_lists(&rollout)),
        ("values", f32_lists(&values)),
    ])
    .unwrap();
    write_parquet(&dir.join("in.parquet"), &batch, 7);
}

/// What `run` wrote for one variant: per row, the advantages of the valid tokens, plus the
/// row's uid and score.
struct RunResult {
    valid: Vec<Vec<f32>>,
    /// Per token of each row: `Some(advantage)` when valid.
    tokens: Vec<Vec<Option<f32>>>,
}

fn run_variant(dir: &Path, name: &str, args: &[&str]) -> RunResult {
    let out = format!("{name}.parquet");
    let mut full = vec!["run", "-q"];
    full.extend_from_slice(args);
    full.extend(["in.parquet", &out]);
    let o = run_in(dir, &full);
    assert!(o.status.success(), "{}", stderr(&o));
    let batch = read_parquet(&dir.join(&out));
    let adv = lists_f32(&batch, "advantages");
    let mask = lists_f32(&batch, "response_mask");
    assert_eq!(adv.len(), mask.len(), "{name}: rows of advantages and mask");
    for (i, (a, m)) in adv.iter().zip(&mask).enumerate() {
        assert_eq!(
            a.len(),
            m.len(),
            "{name} row {i}: advantages and mask lengths"
        );
    }
    let tokens: Vec<Vec<Option<f32>>> = adv
        .iter()
        .zip(&mask)
        .map(|(a, m)| {
            a.iter()
                .zip(m)
                .map(|(&a, &m)| (m == 1.0).then_some(a))
                .collect()
        })
        .collect();
    RunResult {
        valid: tokens
            .iter()
            .map(|r| r.iter().flatten().copied().collect())
            .collect(),
        tokens,
    }
}

fn row_scores_and_uids(dir: &Path) -> (Vec<f64>, Vec<String>) {
    let batch = read_parquet(&dir.join("in.parquet"));
    let scores = lists_f32(&batch, "rm_scores")
        .iter()
        .map(|r| r.iter().map(|&x| x as f64).sum())
        .collect();
    let uid = batch
        .column_by_name("uid")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .unwrap()
        .iter()
        .map(|s| s.unwrap().to_string())
        .collect();
    (scores, uid)
}

/// `compare --json`'s number `v` against the value recomputed here (the shared oracle,
/// |a − e| ≤ 1e-9 + 1e-9·|e|; a missing or non-numeric field fails).
fn close(expected: f64, v: &Value, what: &str) {
    let actual = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {v}"));
    assert_close(what, &[actual], &[expected], 1e-9, 1e-9);
}

/// Average ranks by counting (O(n²), independent of the tool's sort-based ranking).
fn naive_ranks(x: &[f64]) -> Vec<f64> {
    x.iter()
        .map(|&v| {
            let below = x.iter().filter(|&&w| w < v).count() as f64;
            let equal = x.iter().filter(|&&w| w == v).count() as f64;
            below + (equal + 1.0) / 2.0
        })
        .collect()
}

fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    cov / (vx * vy).sqrt()
}

/// Check every number of `compare --json` against the separate runs.
fn check(json: &Value, runs: &[(&str, RunResult)], scores: &[f64], uids: &[String]) {
    let correct: Vec<bool> = scores.iter().map(|&s| s > 0.0).collect();
    assert_eq!(json["rows"], scores.len());
    assert_eq!(json["correct_rows"], correct.iter().filter(|&&c| c).count());
    let variants = json["variants"].as_array().unwrap();
    assert_eq!(variants.len(), runs.len());
    // pass rate per uid (one step here)
    let mut groups: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for (u, &c) in uids.iter().zip(&correct) {
        let g = groups.entry(u).or_default();
        g.0 += 1;
        g.1 += usize::from(c);
    }
    let bucket = |u: &str| {
        let (n, right) = groups[u];
        match right as f64 / n as f64 {
            0.0 => 0,
            p if p <= 0.25 => 1,
            p if p <= 0.5 => 2,
            p if p <= 0.75 => 3,
            p if p < 1.0 => 4,
            _ => 5,
        }
    };
    for (v, (label, run)) in variants.iter().zip(runs) {
        assert_eq!(v["label"], *label);
        assert_eq!(run.valid.len(), scores.len(), "{label}: rows");
        let all: Vec<f64> = run.valid.iter().flatten().map(|&a| a as f64).collect();
        let n = all.len() as f64;
        assert_eq!(v["valid_tokens"], all.len());
        let mean = all.iter().sum::<f64>() / n;
        close(mean, &v["mean"], &format!("{label} mean"));
        let var = all.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / n;
        close(var.sqrt(), &v["std"], &format!("{label} std"));
        close(
            all.iter().cloned().fold(f64::INFINITY, f64::min),
            &v["min"],
            "min",
        );
        close(
            all.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            &v["max"],
            "max",
        );
        let zeros = all.iter().filter(|&&a| a == 0.0).count() as f64;
        close(
            zeros / n,
            &v["zero_fraction"],
            &format!("{label} zero fraction"),
        );
        let row_sum = |r: &Vec<f32>| r.iter().map(|&a| a as f64).sum::<f64>();
        let row_abs = |r: &Vec<f32>| r.iter().map(|&a| (a as f64).abs()).sum::<f64>();
        let (mut right, mut wrong, mut abs_right, mut abs_all) = (0.0, 0.0, 0.0, 0.0);
        for (r, &c) in run.valid.iter().zip(&correct) {
            if c {
                right += row_sum(r);
                abs_right += row_abs(r);
            } else {
                wrong += row_sum(r);
            }
            abs_all += row_abs(r);
        }
        close(
            right,
            &v["weight_correct"],
            &format!("{label} weight correct"),
        );
        close(
            wrong,
            &v["weight_incorrect"],
            &format!("{label} weight incorrect"),
        );
        close(abs_right / abs_all, &v["abs_share_correct"], "abs share");
        let buckets = v["pass_rate_buckets"].as_array().unwrap();
        assert_eq!(buckets.len(), 6);
        for (k, b) in buckets.iter().enumerate() {
            let rows: Vec<usize> = (0..uids.len()).filter(|&i| bucket(&uids[i]) == k).collect();
            // one group per bucket by construction
            assert_eq!(b["groups"], 1, "{label} bucket {k}");
            assert_eq!(b["rows"], rows.len());
            let tokens: usize = rows.iter().map(|&i| run.valid[i].len()).sum();
            assert_eq!(b["valid_tokens"], tokens);
            let abs: f64 = rows.iter().map(|&i| row_abs(&run.valid[i])).sum();
            close(
                abs / tokens as f64,
                &b["mean_abs_advantage"],
                "bucket mean |adv|",
            );
        }
    }
    let pairs = json["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), runs.len() * (runs.len() - 1) / 2);
    let mut k = 0;
    for i in 0..runs.len() {
        for j in i + 1..runs.len() {
            let p = &pairs[k];
            k += 1;
            let (a, b) = (&runs[i].1, &runs[j].1);
            assert_eq!(p["a"], runs[i].0);
            assert_eq!(p["b"], runs[j].0);
            let (mut both, mut same) = (0usize, 0usize);
            assert_eq!(a.tokens.len(), b.tokens.len());
            for (ra, rb) in a.tokens.iter().zip(&b.tokens) {
                assert_eq!(ra.len(), rb.len());
                for (x, y) in ra.iter().zip(rb) {
                    if let (Some(x), Some(y)) = (x, y) {
                        both += 1;
                        let s = |v: f32| (v > 0.0) as i8 - (v < 0.0) as i8;
                        same += usize::from(s(*x) == s(*y));
                    }
                }
            }
            assert_eq!(p["tokens"], both);
            close(
                same as f64 / both as f64,
                &p["sign_agreement"],
                "sign agreement",
            );
            let mean = |r: &Vec<f32>| r.iter().map(|&v| v as f64).sum::<f64>() / r.len() as f64;
            let (x, y): (Vec<f64>, Vec<f64>) = a
                .valid
                .iter()
                .zip(&b.valid)
                .filter(|(ra, rb)| !ra.is_empty() && !rb.is_empty())
                .map(|(ra, rb)| (mean(ra), mean(rb)))
                .unzip();
            assert_eq!(p["rows"], x.len());
            let rho = pearson(&naive_ranks(&x), &naive_ranks(&y));
            close(
                rho,
                &p["rank_correlation"],
                &format!("{} vs {} rank", runs[i].0, runs[j].0),
            );
        }
    }
}

fn compare_json(dir: &Path, args: &[&str]) -> Value {
    let mut full = vec!["compare", "-q", "--json"];
    full.extend_from_slice(args);
    full.push("in.parquet");
    let o = run_in(dir, &full);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn compare_equals_separate_runs() {
    let dir = tempfile::tempdir().unwrap();
    dump(dir.path());
    let names = ["grpo", "rloo", "drgrpo", "gae", "reinforce_plus_plus"];
    let json = compare_json(dir.path(), &["-e", &names.join(",")]);
    let runs: Vec<(&str, RunResult)> = names
        .iter()
        .map(|&n| (n, run_variant(dir.path(), n, &["-e", n])))
        .collect();
    let (scores, uids) = row_scores_and_uids(dir.path());
    check(&json, &runs, &scores, &uids);
    // Same numbers whatever the thread count.
    assert_eq!(
        compare_json(dir.path(), &["-j", "1", "-e", &names.join(",")]),
        json
    );
}

#[test]
fn compare_with_kl_and_rejection_equals_separate_runs() {
    // Adaptive KL (a constants pre-pass), batch-normalised IS and token_k1 rejection, which
    // rewrites the mask: the comparison must use each variant's rejected mask.
    let dir = tempfile::tempdir().unwrap();
    dump(dir.path());
    std::fs::write(
        dir.path().join("trainer.yaml"),
        "algorithm:\n  lam: 0.95\n  use_kl_in_reward: true\n  kl_penalty: low_var_kl\n  kl_ctrl:\n    type: adaptive\n    target_kl: 0.01\n  rollout_correction:\n    rollout_is: token\n    rollout_is_threshold: 2.0\n    rollout_is_batch_normalize: true\n    rollout_rs: token_k1\n    rollout_rs_threshold: 2.0\n",
    )
    .unwrap();
    let json = compare_json(dir.path(), &["-c", "trainer.yaml", "-e", "grpo,gae"]);
    let runs: Vec<(&str, RunResult)> = ["grpo", "gae"]
        .iter()
        .map(|&n| {
            (
                n,
                run_variant(dir.path(), n, &["-c", "trainer.yaml", "-e", n]),
            )
        })
        .collect();
    // The rejection did reject something, so the masks were really rewritten.
    let (scores, uids) = row_scores_and_uids(dir.path());
    let input = lists_f32(
        &read_parquet(&dir.path().join("in.parquet")),
        "response_mask",
    );
    let before: usize = input.iter().flatten().filter(|&&m| m == 1.0).count();
    assert!(json["variants"][0]["valid_tokens"].as_u64().unwrap() < before as u64);
    check(&json, &runs, &scores, &uids);
}

#[test]
fn compare_configs_by_file_stem() {
    let dir = tempfile::tempdir().unwrap();
    dump(dir.path());
    std::fs::write(dir.path().join("std.yaml"), "adv_estimator: grpo\n").unwrap();
    std::fs::write(
        dir.path().join("nostd.yaml"),
        "adv_estimator: grpo\nnorm_adv_by_std_in_grpo: false\n",
    )
    .unwrap();
    let json = compare_json(dir.path(), &["-c", "std.yaml", "-c", "nostd.yaml"]);
    let runs = vec![
        ("std", run_variant(dir.path(), "std", &["-c", "std.yaml"])),
        (
            "nostd",
            run_variant(dir.path(), "nostd", &["-c", "nostd.yaml"]),
        ),
    ];
    let (scores, uids) = row_scores_and_uids(dir.path());
    check(&json, &runs, &scores, &uids);
    // Dividing by the group std or not never changes a sign.
    assert_eq!(json["pairs"][0]["sign_agreement"], 1.0);
}

#[test]
fn compare_human_output_and_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    dump(dir.path());
    let o = run_in(
        dir.path(),
        &["compare", "-q", "-e", "grpo,rloo", "in.parquet"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    for expected in [
        "grpo",
        "rloo",
        "mean |adv| by group pass rate",
        "grpo vs rloo",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    for (args, needle) in [
        (&["compare", "-e", "grpo", "in.parquet"][..], "at least two"),
        (
            &["compare", "-e", "grpo,grpo", "in.parquet"][..],
            "given twice",
        ),
        (&["compare", "-e", "grpo,nope", "in.parquet"][..], "nope"),
    ] {
        let o = run_in(dir.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    // A variant the data cannot serve is a data error naming the column it needs.
    write_parquet(&dir.path().join("small.parquet"), &common::grpo_batch(), 2);
    let o = run_in(dir.path(), &["compare", "-e", "grpo,gae", "small.parquet"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("values"), "{}", stderr(&o));
}

// Eight rows of 0.3 (fragile: float32 cannot average them exactly) and eight of 0.5 (safe):
// compare reports the fragile group as inspect does, with OpenRLHF's up to ±59.6 (2 ulp of
// 0.3f32 = 2^−24, over ε 1e−9).
#[test]
fn compare_reports_fragile_groups() {
    let dir = tempfile::tempdir().unwrap();
    let uids: Vec<&str> = (0..16).map(|i| if i < 8 { "p" } else { "q" }).collect();
    let scores: Vec<Vec<f32>> = (0..16)
        .map(|i| vec![if i < 8 { 0.3 } else { 0.5 }])
        .collect();
    let batch = arrow::array::RecordBatch::try_from_iter(vec![
        ("uid", strings(&uids)),
        ("response_mask", i8_lists(&vec![vec![1]; 16])),
        ("rm_scores", f32_lists(&scores)),
    ])
    .unwrap();
    write_parquet(&dir.path().join("in.parquet"), &batch, 5);
    let json = compare_json(dir.path(), &["-e", "grpo,drgrpo"]);
    let f = &json["fragile_groups"];
    assert_eq!(f["equal_inexact_scores"]["groups"], 1, "{json:#}");
    assert_eq!(f["equal_inexact_scores"]["rows"], 8);
    let openrlhf = &f["trainers"][2];
    assert_eq!(openrlhf["trainer"], "OpenRLHF group_norm");
    let hi = openrlhf["equal_scores_abs_advantage"][1].as_f64().unwrap();
    assert!((hi - 59.60464).abs() < 1e-4, "{hi}");
    assert_eq!(json["warnings"][0]["code"], "equal_inexact_scores");
    // the variants themselves write the exact answer: 0 on every token
    assert_eq!(json["variants"][0]["max"], 0.0);
    let o = run_in(
        dir.path(),
        &["compare", "-q", "-e", "grpo,drgrpo", "in.parquet"],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("warning[equal_inexact_scores]"),
        "{text}{}",
        stderr(&o)
    );
}
