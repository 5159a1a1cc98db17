//! Conformance: every case of the committed verl 0.9.1 corpus (`fixtures/verl/cases`, made
//! by `fixtures/verl/generate.py` running verl's own functions on CPU) through the real
//! binary, compared token by token with |a − e| ≤ 2e-5 + 2e-4·|e|, and verl's metrics with
//! |a − e| ≤ 1e-6 + 1e-4·|e|.
//!
//! One test per case directory, named after it (`cargo test --test verl_corpus -- chain_gae`),
//! run by libtest-mimic (`harness = false`). The comparison follows the oracle rules of
//! `src/test_support.rs`: NaN is a value (it matches only NaN, on either side), lengths are
//! checked everywhere (rows, each row's tokens, metric steps), and nothing missing is skipped.
//! `corpus::complete` checks the directories against the case table of
//! `fixtures/verl/README.md`; the `oracle::` tests check that this file's comparisons fail
//! when they should.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::corpus::case_trials;
use common::metrics::{compare_metrics, metric_value, parse_json, read_json};
use common::{case_dirs, check_rows_close, lists_f32, read_parquet, run_in, stderr};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

const ATOL: f64 = 2e-5;
const RTOL: f64 = 2e-4;
/// Columns verl writes for every case that is not an error case.
const ALWAYS: [&str; 3] = ["token_level_rewards", "advantages", "returns"];
/// Columns verl writes only when its rollout-correction step ran (README "Format additions").
const SOMETIMES: [&str; 2] = ["response_mask", "rollout_is_weights"];

fn main() {
    let args = Arguments::from_args();
    let root = cases_root();
    let mut trials = vec![
        Trial::test("corpus::complete", move || corpus_complete(&root)),
        Trial::test("oracle::metrics_nan_is_a_value", oracle_metrics_nan),
        Trial::test("oracle::metrics_shape_and_keys", oracle_metrics_shape),
        Trial::test("oracle::parse_nonfinite_json", oracle_parse_nonfinite),
    ];
    trials.extend(case_trials(&cases_root(), check_case));
    libtest_mimic::run(&args, trials).exit();
}

fn cases_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases")
}

/// The case names of the README's case table (`| name | rows | args | covers |`).
fn documented_cases() -> Result<BTreeSet<String>, String> {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/README.md");
    let text = std::fs::read_to_string(&readme).map_err(|e| format!("README: {e}"))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            // ["", name, rows, ...]: a case row has a number of rows in the second cell
            let name = cells.get(1)?;
            let rows = cells.get(2)?;
            (!name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && rows.parse::<usize>().is_ok())
            .then(|| name.to_string())
        })
        .collect())
}

/// The directories are exactly the documented cases, and each holds a case.json.
fn corpus_complete(root: &Path) -> Result<(), Failed> {
    let dirs = case_dirs(root);
    let names: BTreeSet<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let with_spec = dirs
        .iter()
        .filter(|d| d.join("case.json").is_file())
        .count();
    let documented = documented_cases()?;
    let mut problems = Vec::new();
    if with_spec != dirs.len() {
        problems.push(format!(
            "{} case directories, only {with_spec} with a case.json",
            dirs.len()
        ));
    }
    if documented.is_empty() {
        problems.push("no case table found in fixtures/verl/README.md".into());
    }
    let missing: Vec<&String> = documented.difference(&names).collect();
    if !missing.is_empty() {
        problems.push(format!("documented but no directory: {missing:?}"));
    }
    let undocumented: Vec<&String> = names.difference(&documented).collect();
    if !undocumented.is_empty() {
        problems.push(format!(
            "directory not in the README table: {undocumented:?}"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// Run one case; returns a description of every mismatch.
fn check_case(dir: &Path) -> Vec<String> {
    let spec: Value = match std::fs::read_to_string(dir.join("case.json"))
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => return vec![format!("case.json: {e}")],
    };
    let Some(raw_args) = spec["args"].as_array() else {
        return vec!["case.json has no args array".into()];
    };
    let mut args: Vec<String> = Vec::new();
    for a in raw_args {
        match a.as_str() {
            Some(s) => args.push(s.to_string()),
            None => return vec![format!("case.json: argument {a} is not a string")],
        }
    }
    let expected_parquet = dir.join("expected.parquet");
    let expected_metrics = dir.join("expected_metrics.json");
    let mut problems = Vec::new();
    // The files the case's kind promises (README): metrics exactly when case.json says so,
    // expected.parquet exactly when verl did not raise.
    let wants_metrics = spec["metrics"].as_bool().unwrap_or(false);
    if wants_metrics != expected_metrics.is_file() {
        problems.push(format!(
            "case.json metrics: {wants_metrics}, expected_metrics.json present: {}",
            expected_metrics.is_file()
        ));
    }
    let error_case = !spec["expect_error"].is_null();
    if error_case == expected_parquet.is_file() {
        problems.push(format!(
            "expect_error given: {error_case}, expected.parquet present: {}",
            expected_parquet.is_file()
        ));
    }
    if !problems.is_empty() {
        return problems;
    }

    let tmp = tempfile::tempdir().unwrap();
    let out_path = tmp.path().join("out.parquet");
    args.extend([
        "--quiet".into(),
        "input.parquet".into(),
        out_path.display().to_string(),
    ]);
    let metrics_path = tmp.path().join("metrics.json");
    if wants_metrics {
        args.extend(["--metrics".into(), metrics_path.display().to_string()]);
    }
    let mut all = vec!["run"];
    all.extend(args.iter().map(String::as_str));
    let out = run_in(dir, &all);
    let err = stderr(&out);
    if error_case {
        let Some(expected) = spec["expect_error"].as_str() else {
            return vec!["case.json: expect_error is not a string".into()];
        };
        // verl raises here: advcalc must refuse with the same reason, in one line, and write nothing.
        let first = err.lines().next().unwrap_or_default();
        if !matches!(out.status.code(), Some(1 | 2)) {
            problems.push(format!(
                "expected an error ({expected}), got {:?}",
                out.status.code()
            ));
        }
        if !first.starts_with("error: ") || !first.contains(expected) {
            problems.push(format!("error line lacks `{expected}`: {first}"));
        }
        if err.contains("panicked") || out_path.exists() {
            problems.push("panic or output left behind".into());
        }
        return problems;
    }
    if !out.status.success() {
        return vec![format!("advcalc failed: {err}")];
    }
    let input = read_parquet(&dir.join("input.parquet"));
    let expected = read_parquet(&expected_parquet);
    let actual = read_parquet(&out_path);
    if actual.num_rows() != input.num_rows() || expected.num_rows() != input.num_rows() {
        problems.push(format!(
            "rows: input {}, output {}, verl {}",
            input.num_rows(),
            actual.num_rows(),
            expected.num_rows()
        ));
        return problems;
    }
    // Every input column passes through unchanged (verl's columns are compared below).
    for field in input.schema().fields() {
        let name = field.name();
        if ALWAYS.contains(&name.as_str())
            || (SOMETIMES.contains(&name.as_str()) && expected.column_by_name(name).is_some())
        {
            continue;
        }
        match actual.column_by_name(name) {
            Some(col) if col.as_ref() == input.column_by_name(name).unwrap().as_ref() => {}
            Some(_) => problems.push(format!("column {name} changed")),
            None => problems.push(format!("column {name} missing from the output")),
        }
    }
    for name in ALWAYS.iter().chain(&SOMETIMES) {
        let (in_expected, in_actual) = (
            expected.column_by_name(name).is_some(),
            actual.column_by_name(name).is_some(),
        );
        match (in_expected, in_actual) {
            (true, true) => {
                if let Err(p) = check_rows_close(
                    name,
                    &lists_f32(&actual, name),
                    &lists_f32(&expected, name),
                    ATOL,
                    RTOL,
                ) {
                    problems.push(p);
                }
            }
            (true, false) => problems.push(format!("{name} missing from the output")),
            (false, _) if ALWAYS.contains(name) => {
                problems.push(format!("{name} missing from expected.parquet"))
            }
            // verl wrote no such column: advcalc must not write one either (an input column
            // of that name passed through unchanged, checked above).
            (false, true) if input.column_by_name(name).is_none() => {
                problems.push(format!("{name} written but verl produced none"))
            }
            (false, _) => {}
        }
    }
    if wants_metrics {
        match (read_json(&expected_metrics), read_json(&metrics_path)) {
            (Ok(e), Ok(a)) => problems.extend(compare_metrics(&e, &a, None)),
            (Err(e), _) => problems.push(format!("expected_metrics.json: {e}")),
            (_, Err(e)) => problems.push(format!("advcalc's metrics: {e}")),
        }
    }
    problems
}

// ---- the comparisons above must fail when they should ----

fn expect(cond: bool, what: &str) -> Result<(), Failed> {
    if cond { Ok(()) } else { Err(what.into()) }
}

fn oracle_metrics_nan() -> Result<(), Failed> {
    let one = |v: &str| parse_json(&format!("{{\"rollout_corr/kl\": {v}}}")).unwrap();
    let ok = |e: &str, a: &str| compare_metrics(&one(e), &one(a), None).is_empty();
    expect(ok("NaN", "null"), "verl NaN, advcalc NaN (null) must match")?;
    expect(!ok("NaN", "0.5"), "verl NaN against a number must fail")?;
    expect(
        !ok("0.5", "null"),
        "a number against advcalc's NaN must fail",
    )?;
    expect(
        !ok("Infinity", "1e308"),
        "inf against a finite number must fail",
    )?;
    expect(!ok("-Infinity", "null"), "-inf against NaN must fail")?;
    expect(ok("0.5", "0.50004"), "within 1e-6 + 1e-4·|e| must match")?;
    expect(!ok("0.5", "0.5001"), "outside the tolerance must fail")?;
    expect(!ok("0.5", "\"0.5\""), "a string is not a number")?;
    expect(!ok("null", "null"), "verl's null is not a number")?;
    Ok(())
}

fn oracle_metrics_shape() -> Result<(), Failed> {
    let j = |t: &str| parse_json(t).unwrap();
    let fails = |e: &str, a: &str| !compare_metrics(&j(e), &j(a), None).is_empty();
    expect(
        fails(r#"{"rollout_corr/kl": 1.0}"#, r#"{"advcalc/rows": 3}"#),
        "a missing key must fail",
    )?;
    expect(
        fails(
            r#"{"actor/reward_kl_penalty": 1.0}"#,
            r#"{"actor/reward_kl_penalty": 1.0, "rollout_corr/kl": 0.0}"#,
        ),
        "an extra verl-named key must fail",
    )?;
    expect(
        !fails(
            r#"{"actor/reward_kl_penalty": 1.0}"#,
            r#"{"actor/reward_kl_penalty": 1.0, "advcalc/rows": 3}"#,
        ),
        "advcalc's own keys are allowed",
    )?;
    expect(
        fails(r#"[{"step": 1}, {"step": 2}]"#, r#"[{"step": 1}]"#),
        "a missing step must fail",
    )?;
    expect(
        fails(r#"[{"step": 1}]"#, r#"{"step": 1}"#),
        "one object for a list of steps must fail",
    )?;
    expect(fails(r#"{"a": 1}"#, "null"), "no metrics must fail")?;
    Ok(())
}

fn oracle_parse_nonfinite() -> Result<(), Failed> {
    let v = parse_json(r#"{"NaN key": NaN, "s": "Infinity NaN", "l": [-Infinity, Infinity]}"#)?;
    expect(
        metric_value(&v["NaN key"], false).unwrap().is_nan(),
        "NaN token",
    )?;
    expect(
        v["s"] == "Infinity NaN",
        "tokens inside strings are left alone",
    )?;
    expect(
        metric_value(&v["l"][0], false) == Some(f64::NEG_INFINITY)
            && metric_value(&v["l"][1], false) == Some(f64::INFINITY),
        "infinities",
    )?;
    expect(parse_json("{").is_err(), "malformed JSON is an error")?;
    Ok(())
}
