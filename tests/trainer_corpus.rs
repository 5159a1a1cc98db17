//! Conformance with other trainers: every case of the committed cross-trainer corpus
//! (`fixtures/trainers/cases`, made by `fixtures/trainers/generate.py`, which runs TRL's,
//! OpenRLHF's, SkyRL's, NeMo-RL's, prime-rl's, open-instruct's and verl's own advantage code
//! on CPU) through the real binary with the case's arguments.
//!
//! One trial per case directory (`cargo test --test trainer_corpus -- nemo_grpo`), run by
//! libtest-mimic (`harness = false`). NaN is a value and lengths are checked everywhere
//! (`src/test_support.rs`). Each case says how it is judged (`case.json`):
//!
//! * `kind: match` — advcalc's `advantages` and `returns` equal the trainer's float32 numbers
//!   within the case's tolerance, which is set from the trainer's own float32 rounding noise
//!   (its code re-run in float64, `trainer_noise`; docs/trainer-corpus.md).
//! * `kind: deviation` — a fragile group, where the trainer's float32 arithmetic departs from
//!   the exact answer by far more than rounding (equal non-dyadic scores, a one-pass variance,
//!   ε dominating). advcalc must give the exact answer: the trainer's own code run in float64
//!   (`advantages_f64`, `returns_f64`; for NeMo's one-pass variance, which cancels in float64
//!   too, the formula in exact arithmetic, case.json `exact`). The trainer's float32 numbers stay beside it, and the
//!   test checks that they really differ by the recorded magnitude.
//!
//! * `kind: error` — a convention × estimator pair docs/conventions.md C5 marks "error" (the
//!   framework has no such estimator): advcalc refuses with exit 2, one `error:` line naming
//!   both, and writes nothing.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Float64Type};
use common::{case_dirs, check_rows_close, read_parquet, run_in, stderr};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

/// At most this many problems of one case are printed.
const SHOWN: usize = 8;

fn main() {
    let args = Arguments::from_args();
    let mut trials = vec![Trial::test("corpus::complete", || {
        corpus_complete(&cases_root())
    })];
    trials.extend(oracle_trials());
    for dir in case_dirs(&cases_root()) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        trials.push(Trial::test(name, move || {
            let problems = check_case(&dir);
            if problems.is_empty() {
                Ok(())
            } else {
                Err(report(&problems).into())
            }
        }));
    }
    libtest_mimic::run(&args, trials).exit();
}

fn report(problems: &[String]) -> String {
    let mut text = format!("{} problem(s):\n", problems.len());
    for p in problems.iter().take(SHOWN) {
        text += &format!("  {p}\n");
    }
    text
}

fn cases_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trainers/cases")
}

/// The case names of docs/trainer-corpus.md's case table (`| name | trainer | rows | ...`).
fn documented_cases() -> Result<BTreeSet<String>, String> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/trainer-corpus.md");
    let text = std::fs::read_to_string(&doc).map_err(|e| format!("{}: {e}", doc.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells.get(1)?.trim_matches('`');
            let rows = cells.get(3)?;
            (!name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && rows.parse::<usize>().is_ok())
            .then(|| name.to_string())
        })
        .collect())
}

/// The directories are exactly the documented cases.
fn corpus_complete(root: &Path) -> Result<(), Failed> {
    let names: BTreeSet<String> = case_dirs(root)
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let documented = documented_cases()?;
    let mut problems = Vec::new();
    if names.is_empty() {
        problems.push("no case directory".to_string());
    }
    let missing: Vec<&String> = documented.difference(&names).collect();
    if !missing.is_empty() {
        problems.push(format!("documented but no directory: {missing:?}"));
    }
    let undocumented: Vec<&String> = names.difference(&documented).collect();
    if !undocumented.is_empty() {
        problems.push(format!(
            "not in docs/trainer-corpus.md's table: {undocumented:?}"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// Rows of a list column as f64 (float32 lists widen exactly).
fn lists_f64(batch: &RecordBatch, name: &str) -> Result<Vec<Vec<f64>>, String> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| format!("no column {name}"))?;
    let as_list = DataType::List(Arc::new(Field::new("item", DataType::Float64, true)));
    let col = arrow::compute::cast(col, &as_list).map_err(|e| format!("{name}: {e}"))?;
    let list = col.as_list::<i32>();
    if list.null_count() != 0 {
        return Err(format!("{name} has null rows"));
    }
    (0..list.len())
        .map(|i| {
            let row = list.value(i);
            if row.null_count() != 0 {
                return Err(format!("{name} row {i} has null values"));
            }
            Ok(row.as_primitive::<Float64Type>().values().to_vec())
        })
        .collect()
}

/// The largest |a − b| over two equally shaped row sets (NaN only against NaN).
fn max_abs_diff(a: &[Vec<f64>], b: &[Vec<f64>]) -> Result<f64, String> {
    let mut m: f64 = 0.0;
    if a.len() != b.len() {
        return Err(format!("{} rows vs {}", a.len(), b.len()));
    }
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x.len() != y.len() {
            return Err(format!("row {i}: {} values vs {}", x.len(), y.len()));
        }
        for (p, q) in x.iter().zip(y) {
            match (p.is_nan(), q.is_nan()) {
                (true, true) => {}
                (false, false) => m = m.max((p - q).abs()),
                _ => return Err(format!("row {i}: NaN against a number")),
            }
        }
    }
    Ok(m)
}

/// A refused pair: exit `expect_exit`, one `error:` line naming every `expect_error` word, no
/// panic, no output file.
fn check_error_case(dir: &Path, args: &[&str], spec: &Value) -> Vec<String> {
    let (Some(code), Some(words)) = (
        spec["expect_exit"].as_i64(),
        spec["expect_error"]
            .as_array()
            .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<&str>>>()),
    ) else {
        return vec!["case.json: expect_exit or expect_error missing".into()];
    };
    let tmp = tempfile::tempdir().unwrap();
    let out_path = tmp.path().join("out.parquet");
    let out_str = out_path.display().to_string();
    let mut all = vec!["run"];
    all.extend(args.iter().copied());
    all.extend(["--quiet", "input.parquet", out_str.as_str()]);
    let out = run_in(dir, &all);
    let err = stderr(&out);
    let first = err.lines().next().unwrap_or_default();
    let mut problems = Vec::new();
    if out.status.code() != Some(code as i32) {
        problems.push(format!(
            "exit {:?}, expected {code}: {err}",
            out.status.code()
        ));
    }
    if !first.starts_with("error: ") || words.iter().any(|w| !first.contains(w)) {
        problems.push(format!("error line does not name {words:?}: {first}"));
    }
    if err.contains("panicked") || out_path.exists() {
        problems.push("panic or output left behind".into());
    }
    problems
}

/// How a non-error case is judged (case.json).
struct Judged {
    atol: f64,
    rtol: f64,
    /// The trainer's own largest |float32 − float64| on the case.
    noise: f64,
    /// Compared with the exact (float64) answer instead of the trainer's float32 numbers.
    deviation: bool,
}

fn read_spec(dir: &Path) -> Result<Value, String> {
    std::fs::read_to_string(dir.join("case.json"))
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| format!("case.json: {e}"))
}

fn judged(spec: &Value) -> Result<Judged, String> {
    let (Some(atol), Some(rtol), Some(noise)) = (
        spec["tolerance"]["atol"].as_f64(),
        spec["tolerance"]["rtol"].as_f64(),
        spec["trainer_noise"].as_f64(),
    ) else {
        return Err("case.json: tolerance.atol, tolerance.rtol or trainer_noise missing".into());
    };
    let deviation = match spec["kind"].as_str() {
        Some("match") => false,
        Some("deviation") => true,
        other => return Err(format!("case.json: kind {other:?}")),
    };
    Ok(Judged {
        atol,
        rtol,
        noise,
        deviation,
    })
}

fn check_case(dir: &Path) -> Vec<String> {
    let spec = match read_spec(dir) {
        Ok(v) => v,
        Err(e) => return vec![e],
    };
    let Some(args) = spec["args"]
        .as_array()
        .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<&str>>>())
    else {
        return vec!["case.json: args is not an array of strings".into()];
    };
    if spec["kind"].as_str() == Some("error") {
        return check_error_case(dir, &args, &spec);
    }
    let judged = match judged(&spec) {
        Ok(j) => j,
        Err(e) => return vec![e],
    };

    let tmp = tempfile::tempdir().unwrap();
    let out_path = tmp.path().join("out.parquet");
    let out_str = out_path.display().to_string();
    let mut all = vec!["run"];
    all.extend(args.iter().copied());
    all.extend(["--quiet", "input.parquet", out_str.as_str()]);
    let out = run_in(dir, &all);
    if !out.status.success() {
        return vec![format!(
            "advcalc {} failed: {}",
            args.join(" "),
            stderr(&out).trim()
        )];
    }
    let input = read_parquet(&dir.join("input.parquet"));
    let expected = read_parquet(&dir.join("expected.parquet"));
    let actual = read_parquet(&out_path);
    if actual.num_rows() != input.num_rows() || expected.num_rows() != input.num_rows() {
        return vec![format!(
            "rows: input {}, output {}, expected {}",
            input.num_rows(),
            actual.num_rows(),
            expected.num_rows()
        )];
    }
    compare(&judged, &actual, &expected)
}

/// advcalc's `advantages` and `returns` (`actual`) against the case's expected.parquet.
fn compare(j: &Judged, actual: &RecordBatch, expected: &RecordBatch) -> Vec<String> {
    let mut problems = Vec::new();
    for name in ["advantages", "returns"] {
        let got = lists_f64(actual, name);
        let trainer = lists_f64(expected, name);
        let exact = lists_f64(expected, &format!("{name}_f64"));
        let (got, trainer, exact) = match (got, trainer, exact) {
            (Ok(g), Ok(t), Ok(e)) => (g, t, e),
            (g, t, e) => {
                for r in [g.err(), t.err(), e.err()].into_iter().flatten() {
                    problems.push(r);
                }
                continue;
            }
        };
        // The recorded magnitude is what the committed numbers say.
        match max_abs_diff(&trainer, &exact) {
            Ok(d) if d <= j.noise * (1.0 + 1e-6) + 1e-12 => {
                if j.deviation && d <= j.atol {
                    problems.push(format!(
                        "{name}: a deviation case whose trainer numbers are within the tolerance of the exact ones ({d:e})"
                    ));
                }
            }
            Ok(d) => problems.push(format!(
                "{name}: trainer float32 vs float64 differ by {d:e}, case.json says {:e}",
                j.noise
            )),
            Err(e) => problems.push(format!("{name}: expected.parquet: {e}")),
        }
        let (reference, label) = if j.deviation {
            (&exact, format!("{name} (vs the exact float64 answer)"))
        } else {
            (
                &trainer,
                format!("{name} (vs the trainer's float32 output)"),
            )
        };
        if let Err(p) = check_rows_close(&label, &got, reference, j.atol, j.rtol) {
            problems.push(p);
        }
    }
    problems
}

// ---- The comparison must be able to fail: expected.parquet's own columns fed in as advcalc's
// output, untouched or damaged.

/// `expected.parquet` of a case, its judgement, and an "output" made of its columns `adv`
/// and `ret`, passed through `damage`.
fn oracle(
    case: &str,
    adv: &str,
    ret: &str,
    damage: impl Fn(&mut Vec<Vec<f64>>),
) -> Result<Vec<String>, String> {
    let dir = cases_root().join(case);
    let j = judged(&read_spec(&dir)?)?;
    let expected = read_parquet(&dir.join("expected.parquet"));
    let mut a = lists_f64(&expected, adv)?;
    damage(&mut a);
    let r = lists_f64(&expected, ret)?;
    let col = |rows: Vec<Vec<f64>>| -> ArrayRef {
        Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(
            rows.into_iter().map(|r| Some(r.into_iter().map(Some))),
        ))
    };
    let actual = RecordBatch::try_from_iter([("advantages", col(a)), ("returns", col(r))])
        .map_err(|e| e.to_string())?;
    Ok(compare(&j, &actual, &expected))
}

fn must_fail(what: &str, problems: Result<Vec<String>, String>) -> Result<(), Failed> {
    match problems? {
        p if p.is_empty() => Err(format!("{what}: the comparison accepted it").into()),
        _ => Ok(()),
    }
}

fn must_pass(what: &str, problems: Result<Vec<String>, String>) -> Result<(), Failed> {
    match problems? {
        p if p.is_empty() => Ok(()),
        p => Err(format!("{what}: {}", report(&p)).into()),
    }
}

fn oracle_trials() -> Vec<Trial> {
    vec![
        Trial::test("oracle::deviation_rejects_the_trainers_float32", || {
            must_fail(
                "TRL's float32 numbers on trl_grpo_fragile",
                oracle("trl_grpo_fragile", "advantages", "returns", |_| {}),
            )
        }),
        Trial::test("oracle::deviation_accepts_the_exact_answer", || {
            must_pass(
                "the float64 answer on trl_grpo_fragile",
                oracle("trl_grpo_fragile", "advantages_f64", "returns_f64", |_| {}),
            )
        }),
        Trial::test("oracle::match_accepts_the_trainer", || {
            must_pass(
                "TRL's numbers on trl_grpo",
                oracle("trl_grpo", "advantages", "returns", |_| {}),
            )
        }),
        Trial::test("oracle::match_rejects_a_moved_value", || {
            must_fail(
                "one value of trl_grpo moved by 1e-4",
                oracle("trl_grpo", "advantages", "returns", |a| a[3][0] += 1e-4),
            )
        }),
        Trial::test("oracle::match_rejects_a_short_row", || {
            must_fail(
                "a row of trl_grpo one value short",
                oracle("trl_grpo", "advantages", "returns", |a| {
                    a[0].pop();
                }),
            )
        }),
        Trial::test("oracle::match_rejects_nan", || {
            must_fail(
                "a NaN in trl_grpo_nan",
                oracle("trl_grpo_nan", "advantages", "returns", |a| {
                    a[0][0] = f64::NAN
                }),
            )
        }),
    ]
}
