//! prime-rl's rollout traces (`rollouts/step_N/train/effective/traces.jsonl`) through the real
//! binary: `advcalc run` on the fixture run gives prime-rl's own GRPO advantages
//! (`fixtures/trainers/dumps/prime-rl/run1/expected.json`, computed by prime-rl's code), the
//! logged ones, its groups and steps; the older layout and a malformed line are data errors.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float64Type, Int64Type};
use common::{advcalc, copy_dir, lists_f32, read_parquet, stderr};

const RUN: &str = "fixtures/trainers/dumps/prime-rl/run1";
const OLD: &str = "fixtures/trainers/dumps/prime-rl/run-old";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One row of expected.json: prime-rl's reward and advantage for an episode, and its step.
struct Expected {
    step: i64,
    group: String,
    reward: f64,
    advantage: f64,
    sampled: usize,
}

fn expected() -> HashMap<String, Expected> {
    let text = std::fs::read_to_string(root().join(RUN).join("expected.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out = HashMap::new();
    for (step, rows) in v["steps"].as_object().unwrap() {
        for r in rows.as_array().unwrap() {
            out.insert(
                r["episode_id"].as_str().unwrap().to_string(),
                Expected {
                    step: step.parse().unwrap(),
                    group: r["group"].as_str().unwrap().to_string(),
                    reward: r["reward"].as_f64().unwrap(),
                    advantage: r["advantage"].as_f64().unwrap(),
                    sampled: r["num_sampled_tokens"].as_u64().unwrap() as usize,
                },
            );
        }
    }
    out
}

/// float32 tolerance: |d| ≤ 1e-6 + 1e-5·|x|.
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-6 + 1e-5 * want.abs()
}

fn run(input: &Path, out: &Path) -> std::process::Output {
    advcalc()
        .current_dir(root())
        .arg("run")
        .arg(input)
        .arg(out)
        .output()
        .expect("advcalc runs")
}

fn strings(batch: &arrow::array::RecordBatch, name: &str) -> Vec<String> {
    let col = batch.column_by_name(name).unwrap();
    let col = arrow::compute::cast(col, &arrow::datatypes::DataType::Utf8).unwrap();
    let s = col.as_string::<i32>();
    (0..s.len()).map(|i| s.value(i).to_string()).collect()
}

#[test]
fn run_gives_prime_rls_own_advantages() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.parquet");
    let o = run(Path::new(RUN), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let b = read_parquet(&out);
    let want = expected();
    assert_eq!(b.num_rows(), want.len());
    let ids = strings(&b, "id");
    let uids = strings(&b, "uid");
    let steps = b
        .column_by_name("step")
        .unwrap()
        .as_primitive::<Int64Type>();
    let scores = b
        .column_by_name("score")
        .unwrap()
        .as_primitive::<Float64Type>();
    let logged = b
        .column_by_name("trainer_advantage")
        .unwrap()
        .as_primitive::<Float64Type>();
    let masks = lists_f32(&b, "response_mask");
    let advantages = lists_f32(&b, "advantages");
    let mut previous_step = 0;
    for (i, id) in ids.iter().enumerate() {
        let e = want
            .get(id)
            .unwrap_or_else(|| panic!("row {i}: episode {id}"));
        assert_eq!(uids[i], e.group, "row {i} uid");
        assert_eq!(steps.value(i), e.step, "row {i} step");
        assert!(steps.value(i) >= previous_step, "rows in step order");
        previous_step = steps.value(i);
        assert!(close(scores.value(i), e.reward), "row {i} score");
        assert!(!logged.is_null(i), "row {i}: effective/ logs an advantage");
        assert!(close(logged.value(i), e.advantage), "row {i} logged");
        let sampled = masks[i].iter().filter(|&&m| m == 1.0).count();
        assert_eq!(sampled, e.sampled, "row {i} sampled tokens");
        assert_eq!(
            masks[i][0], 1.0,
            "row {i}: the response starts at a sampled token"
        );
        for (t, (&m, &a)) in masks[i].iter().zip(&advantages[i]).enumerate() {
            if m == 1.0 {
                assert!(
                    close(a as f64, e.advantage),
                    "row {i} token {t}: {a} vs prime-rl's {}",
                    e.advantage
                );
            } else {
                assert_eq!(a, 0.0, "row {i} token {t}: a tool/scaffold token");
            }
        }
    }
    let o = advcalc()
        .arg("inspect")
        .arg(&out)
        .output()
        .expect("advcalc runs");
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("convention  prime-rl"), "{text}");
}

// A step whose train/effective/ is missing is read from train/all/ (no advantages yet).
#[test]
fn a_step_with_only_all_is_read_from_there_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    for step in [1, 2] {
        let kinds: &[&str] = if step == 1 {
            &["all", "effective"]
        } else {
            &["all"]
        };
        for kind in kinds {
            let rel = format!("rollouts/step_{step}/train/{kind}");
            std::fs::create_dir_all(run_dir.join(&rel)).unwrap();
            std::fs::copy(
                root().join(RUN).join(&rel).join("traces.jsonl"),
                run_dir.join(&rel).join("traces.jsonl"),
            )
            .unwrap();
        }
    }
    let out = dir.path().join("out.parquet");
    let o = run(&run_dir, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("train/all/"), "{}", stderr(&o));
    let b = read_parquet(&out);
    let steps = b
        .column_by_name("step")
        .unwrap()
        .as_primitive::<Int64Type>();
    let logged = b.column_by_name("trainer_advantage").unwrap();
    assert_eq!(b.num_rows(), 16);
    for i in 0..b.num_rows() {
        assert_eq!(logged.is_null(i), steps.value(i) == 2, "row {i}");
    }
}

#[test]
fn the_older_layout_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(Path::new(OLD), &dir.path().join("out.parquet"));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    for words in [
        "train_rollouts.jsonl",
        "older",
        "#2983",
        "group ids, steps and advantages",
        "rollouts/step_N/train/effective/traces.jsonl",
    ] {
        assert!(err.contains(words), "{words}: {err}");
    }
}

#[test]
fn a_malformed_line_names_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let rel = "rollouts/step_1/train/effective";
    let step_dir = dir.path().join("run").join(rel);
    std::fs::create_dir_all(&step_dir).unwrap();
    let text = std::fs::read_to_string(root().join(RUN).join(rel).join("traces.jsonl")).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[2] = lines[2].replacen("\"traces\":[", "\"traces\":[{},", 1);
    let file = step_dir.join("traces.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let o = run(&dir.path().join("run"), &dir.path().join("out.parquet"));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("{} line 3", file.display())), "{err}");
    assert!(err.contains("exactly one trace"), "{err}");
    // a line that is not JSON at all
    lines[2] = "{\"id\": ".to_string();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let o = run(&dir.path().join("run"), &dir.path().join("out2.parquet"));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{} line 3", file.display())),
        "{}",
        stderr(&o)
    );
}

/// `advcalc run IN OUT` expected to fail with exit 1: its stderr's first line; nothing at OUT.
fn refused(input: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.parquet");
    let o = run(input, &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!out.exists());
    stderr(&o)
}

/// Two runs' output directories under one IN: their steps would be merged (step 1 of both
/// in one batch, the groups kept apart only by their ids). Refused naming both, as NeMo-RL's
/// and open-instruct's readers refuse two runs.
#[test]
fn two_runs_under_one_directory_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root().join(RUN), &dir.path().join("runs/a"));
    copy_dir(&root().join(RUN), &dir.path().join("runs/b"));
    let err = refused(&dir.path().join("runs"));
    let first = err.lines().next().unwrap();
    assert!(
        first.contains("holds the rollouts of more than one prime-rl run (")
            && first.contains("runs/a/rollouts and ")
            && first.contains("runs/b/rollouts)"),
        "{first}"
    );
    assert!(
        err.contains("hint: give one run's output directory"),
        "{err}"
    );
}

/// A step in the older layout (`step_N/train_rollouts.jsonl`) among current-layout steps:
/// refused naming it, never left out of the run without a word.
#[test]
fn an_older_layout_step_among_current_ones_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    copy_dir(&root().join(RUN), &run_dir);
    std::fs::create_dir_all(run_dir.join("rollouts/step_3")).unwrap();
    std::fs::copy(
        root()
            .join(OLD)
            .join("rollouts/step_1/train_rollouts.jsonl"),
        run_dir.join("rollouts/step_3/train_rollouts.jsonl"),
    )
    .unwrap();
    let err = refused(&run_dir);
    let first = err.lines().next().unwrap();
    assert!(
        first.contains(
            "rollouts/step_3/train_rollouts.jsonl: a step in prime-rl's older rollout layout"
        ),
        "{first}"
    );
    assert!(first.contains("so the step cannot be read"), "{first}");
}

/// prime-rl's file monitor appends a step's episodes to its `traces.jsonl` (an empty batch is
/// never logged): a 0-byte one is a write cut short, refused naming it.
#[test]
fn an_empty_traces_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    copy_dir(&root().join(RUN), &run_dir);
    let file = run_dir.join("rollouts/step_2/train/effective/traces.jsonl");
    std::fs::write(&file, b"").unwrap();
    let err = refused(&run_dir);
    assert!(
        err.starts_with(&format!(
            "error: {}: empty file, no JSON lines\n",
            file.display()
        )),
        "{err}"
    );
}

/// A reward score that is not a number advcalc can take: null (orjson's NaN), absent,
/// `Infinity`, beyond float64 (as written), or a weighted sum beyond float32. Each names the
/// file, the line and the field as the trace holds it.
#[test]
fn a_non_finite_reward_names_the_file_line_and_field() {
    let rel = "rollouts/step_2/train/effective/traces.jsonl";
    let field = "`traces[0].rewards.correct.score`";
    for (from, to, said) in [
        (
            r#""correct":{"score":1.0"#,
            r#""correct":{"score":null"#,
            format!("{field} is null (orjson writes a NaN as null), so the reward is NaN"),
        ),
        (
            r#""correct":{"score":1.0,"#,
            r#""correct":{"#,
            format!("{field} is absent (verifiers leaves out a None score), so the reward is NaN"),
        ),
        (
            r#""correct":{"score":1.0"#,
            r#""correct":{"score":Infinity"#,
            format!("{field} is Infinity (pass --allow-nonfinite"),
        ),
        (
            r#""correct":{"score":1.0"#,
            r#""correct":{"score":1e400"#,
            format!("{field} is 1e400, which overflows float64"),
        ),
        (
            r#""correct":{"score":1.0"#,
            r#""correct":{"score":1e300"#,
            "the reward Σ score·weight over `traces[0].rewards` is 1e300, which overflows float32"
                .to_string(),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        copy_dir(&root().join(RUN), &run_dir);
        let file = run_dir.join(rel);
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        assert!(lines[1].contains(from), "{from}");
        lines[1] = lines[1].replacen(from, to, 1);
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        let err = refused(&run_dir);
        let first = err.lines().next().unwrap();
        assert!(
            first.starts_with(&format!("error: {} line 2: ", file.display())),
            "{first}"
        );
        assert!(first.contains(&said), "{said}: {first}");
        assert!(first.contains("--allow-nonfinite"), "{first}");
    }
}
