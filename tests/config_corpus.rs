//! The configuration conformance corpus (`fixtures/config/`): every trainer config verl 0.9.1
//! ships and recipe-style configs, each resolved by OmegaConf itself (`generate.py`, run in
//! the oracle environment; its outputs are committed). `advcalc config --json --origins` must
//! give every value OmegaConf gives, with the same type (an integer stays an integer), and
//! every other value it prints must be a default; where OmegaConf (or verl's access) refuses,
//! advcalc must refuse with a one-line usage error (exit 2) holding the expected words.
//! One trial per case (libtest-mimic), so a failure names the case.

use std::path::{Path, PathBuf};
use std::process::Command;

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

fn main() {
    let args = Arguments::from_args();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root.join("cases"))
        .expect("fixtures/config/cases")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    cases.sort();
    let count = cases.len();
    let mut trials = vec![Trial::test("corpus::complete", move || {
        // every verl config and every recipe has its case
        if count < 60 {
            return Err(format!("only {count} cases").into());
        }
        Ok(())
    })];
    for path in cases {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let root = root.clone();
        trials.push(Trial::test(name, move || check(&root, &path)));
    }
    libtest_mimic::run(&args, trials).exit();
}

fn check(root: &Path, case_path: &Path) -> Result<(), Failed> {
    let case: Value = serde_json::from_str(&std::fs::read_to_string(case_path)?)?;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_advcalc"));
    cmd.current_dir(root)
        .args(["config", "--json", "--origins", "-c"])
        .arg(case["file"].as_str().ok_or("file")?);
    for set in case["sets"].as_array().ok_or("sets")? {
        cmd.arg("--set").arg(set.as_str().ok_or("set")?);
    }
    for (key, _) in std::env::vars() {
        if key.starts_with("ADVCALC_CORPUS_") {
            cmd.env_remove(key);
        }
    }
    for (key, value) in case["env"].as_object().ok_or("env")? {
        cmd.env(key, value.as_str().ok_or("env value")?);
    }
    let out = cmd.output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(expect) = case.get("expect_error").and_then(Value::as_str) {
        if out.status.code() != Some(2) {
            return Err(
                format!("expected exit 2 ({expect}), got {:?}: {stderr}", out.status).into(),
            );
        }
        // the expected words are in the error line or its causes
        if !stderr.starts_with("error: ") || !stderr.to_lowercase().contains(&expect.to_lowercase())
        {
            return Err(format!("expected an error holding `{expect}`, got: {stderr}").into());
        }
        if stderr.contains("panicked") {
            return Err(format!("panic: {stderr}").into());
        }
        return Ok(());
    }
    if !out.status.success() {
        return Err(format!("advcalc refused what OmegaConf resolves: {stderr}").into());
    }
    let got: Value = serde_json::from_slice(&out.stdout)?;
    let want = &case["omegaconf"];
    let mut problems = Vec::new();
    let mut omega_leaves = Vec::new();
    if want["algorithm"].as_object().is_none_or(|m| !m.is_empty()) {
        leaves(&want["algorithm"], "algorithm", &mut omega_leaves);
    }
    for (path, value) in &omega_leaves {
        match at(&got, path) {
            Some(v) if same(v, value) => {}
            Some(v) => problems.push(format!("{path}: OmegaConf {value}, advcalc {v}")),
            None => problems.push(format!(
                "{path}: OmegaConf {value}, advcalc has no such key"
            )),
        }
    }
    // what advcalc adds to the file's keys must be defaults
    let origins = got["origins"].as_object().ok_or("origins")?;
    for (path, origin) in origins {
        let in_omega = omega_leaves
            .iter()
            .any(|(p, _)| p == path || path.starts_with(&format!("{p}.")));
        if path.starts_with("algorithm.") && !in_omega && origin["source"] != "default" {
            problems.push(format!(
                "{path}: not in OmegaConf's section but from {origin}"
            ));
        }
    }
    let n = at(&got, "actor_rollout_ref.rollout.n");
    match (want.get("rollout_n"), n) {
        (None, None) => {}
        (Some(w), Some(g)) if same(w, g) => {}
        (w, g) => problems.push(format!("rollout.n: OmegaConf {w:?}, advcalc {g:?}")),
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// Leaves of a JSON tree (scalars, lists, empty objects) with their dotted paths.
fn leaves(v: &Value, path: &str, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(x, &format!("{path}.{k}"), out);
            }
        }
        other => out.push((path.to_string(), other.clone())),
    }
}

fn at<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(v, |node, part| node.as_object()?.get(part))
}

/// Equal values of equal types: an integer is not a float (`1` ≠ `1.0`), as in Python.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x.is_f64() == y.is_f64() && x.as_f64() == y.as_f64()
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
