//! Conformance: every case of the committed verl 0.9.1 corpus (`fixtures/verl/cases`, made
//! by `fixtures/verl/generate.py` running verl's own functions on CPU) through the real
//! binary, compared token by token with |a − e| ≤ 2e-5 + 2e-4·|e|.

mod common;

use std::path::{Path, PathBuf};

use common::{lists_f32, read_parquet, run_in, stderr};

const ATOL: f32 = 2e-5;
const RTOL: f32 = 2e-4;
/// Columns compared with verl's when expected.parquet has them.
const COMPARED: [&str; 5] = [
    "token_level_rewards",
    "advantages",
    "returns",
    "response_mask",
    "rollout_is_weights",
];

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures/verl/cases exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    cases.sort();
    cases
}

/// Run one case; returns a description of every mismatch.
fn check_case(dir: &Path) -> Vec<String> {
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
    let mut args: Vec<String> = spec["args"]
        .as_array()
        .expect("case.json has args")
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let out_path = tmp.path().join("out.parquet");
    args.extend([
        "--quiet".into(),
        "input.parquet".into(),
        out_path.display().to_string(),
    ]);
    let metrics_path = tmp.path().join("metrics.json");
    let expected_metrics = dir.join("expected_metrics.json");
    if expected_metrics.is_file() {
        args.extend(["--metrics".into(), metrics_path.display().to_string()]);
    }
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_in(
        dir,
        &["run"].iter().copied().chain(arg_refs).collect::<Vec<_>>(),
    );
    let err = stderr(&out);
    if let Some(expected) = spec["expect_error"].as_str() {
        // verl raises here: advcalc must refuse with the same reason, in one line, and write nothing.
        let first = err.lines().next().unwrap_or_default();
        let mut problems = Vec::new();
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
    let expected = read_parquet(&dir.join("expected.parquet"));
    let actual = read_parquet(&out_path);
    let mut problems = Vec::new();
    // Every input column passes through unchanged.
    for field in input.schema().fields() {
        let name = field.name();
        if COMPARED.contains(&name.as_str()) {
            continue;
        }
        match actual.column_by_name(name) {
            Some(col) if col.as_ref() == input.column_by_name(name).unwrap().as_ref() => {}
            Some(_) => problems.push(format!("column {name} changed")),
            None => problems.push(format!("column {name} missing from the output")),
        }
    }
    if expected_metrics.is_file() {
        problems.extend(compare_metrics(&expected_metrics, &metrics_path));
    }
    for name in COMPARED {
        if expected.column_by_name(name).is_none() {
            if name == "rollout_is_weights"
                && actual.column_by_name(name).is_some()
                && input.column_by_name(name).is_none()
            {
                problems.push("rollout_is_weights written but verl produced none".into());
            }
            continue;
        }
        if actual.column_by_name(name).is_none() {
            problems.push(format!("{name} missing from the output"));
            continue;
        }
        let (a, e) = (lists_f32(&actual, name), lists_f32(&expected, name));
        if a.len() != e.len() {
            problems.push(format!("{name}: {} rows, expected {}", a.len(), e.len()));
            continue;
        }
        for (row, (ar, er)) in a.iter().zip(&e).enumerate() {
            if ar.len() != er.len() {
                problems.push(format!(
                    "{name} row {row}: {} tokens, expected {}",
                    ar.len(),
                    er.len()
                ));
                continue;
            }
            if let Some(t) =
                (0..ar.len()).find(|&t| (ar[t] - er[t]).abs() > ATOL + RTOL * er[t].abs())
            {
                problems.push(format!(
                    "{name} row {row} token {t}: {} vs verl {}",
                    ar[t], er[t]
                ));
            }
        }
    }
    problems
}

/// verl's metrics (every key it produced) against advcalc's, |a − e| ≤ 1e-6 + 1e-4·|e|.
fn compare_metrics(expected: &Path, actual: &Path) -> Vec<String> {
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_default()).unwrap_or_default()
    };
    let (e, a) = (read(expected), read(actual));
    let as_list = |v: serde_json::Value| match v {
        serde_json::Value::Array(items) => items,
        other => vec![other],
    };
    let (e, a) = (as_list(e), as_list(a));
    if e.len() != a.len() {
        return vec![format!("metrics: {} steps, expected {}", a.len(), e.len())];
    }
    let mut problems = Vec::new();
    for (step, (es, as_)) in e.iter().zip(&a).enumerate() {
        for (key, ev) in es.as_object().into_iter().flatten() {
            let Some(ev) = ev.as_f64() else { continue };
            match as_.get(key).and_then(|v| v.as_f64()) {
                Some(av) if (av - ev).abs() <= 1e-6 + 1e-4 * ev.abs() => {}
                Some(av) => problems.push(format!("metric {key} (step {step}): {av} vs verl {ev}")),
                None => problems.push(format!("metric {key} (step {step}) missing")),
            }
        }
    }
    problems
}

#[test]
fn verl_corpus_matches() {
    let cases = cases();
    assert!(
        cases.len() >= 12,
        "the corpus has only {} cases",
        cases.len()
    );
    let mut failures = Vec::new();
    for dir in &cases {
        let problems = check_case(dir);
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for p in problems.iter().take(8) {
            failures.push(format!("{name}: {p}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
