//! verl's own text dumps (`trainer.rollout_data_dir`, `{global_steps}.jsonl`) as input to the
//! real binary: `run`, `inspect` and `compare` on them, the refusals of what needs tokens,
//! and every fault of issue 17 (exit code, file and line named, nothing written).
//!
//! The files are written here exactly as verl 0.9.1's `RayPPOTrainer._dump_generations`
//! (`verl/trainer/ppo/ray_trainer.py`) writes them: per row
//! `json.dumps({"input", "output", "gts", "score", "step", *reward_extra_infos},
//! ensure_ascii=False)` — keys in that order, `", "` and `": "` separators, non-ASCII text
//! unescaped, floats as Python's `repr` (`1.0`, `0.5`), NaN as the bare token `NaN` — lines
//! joined by `"\n"` with one final `"\n"`.

mod common;

use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Float32Type, Float64Type};

use common::{
    advcalc, assert_close, f32_lists, i8_lists, leftovers, lists_f32, read_parquet, stderr,
    strings, write_parquet,
};

/// One response as verl dumps it; `score` and `extra` values are Python's JSON text.
struct Sample<'a> {
    input: &'a str,
    output: &'a str,
    score: &'a str,
    extra: &'a [(&'a str, &'a str)],
}

fn sample<'a>(input: &'a str, score: &'a str) -> Sample<'a> {
    Sample {
        input,
        output: "The answer is 2.",
        score,
        extra: &[],
    }
}

/// `json.dumps(entry, ensure_ascii=False)` of verl's entry: serde_json escapes strings as
/// Python does with `ensure_ascii=False` (`"`, `\`, control characters; nothing else).
fn verl_line(s: &Sample<'_>, step: i64) -> String {
    let text = |t: &str| serde_json::to_string(t).unwrap();
    let mut line = format!(
        "{{\"input\": {}, \"output\": {}, \"gts\": \"2\", \"score\": {}, \"step\": {step}",
        text(s.input),
        text(s.output),
        s.score
    );
    for (key, value) in s.extra {
        line += &format!(", {}: {value}", text(key));
    }
    line + "}"
}

/// A step's file: `"\n".join(lines) + "\n"`.
fn verl_file(samples: &[Sample<'_>], step: i64) -> String {
    let lines: Vec<String> = samples.iter().map(|s| verl_line(s, step)).collect();
    lines.join("\n") + "\n"
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Prompts A (4 responses), B (3) and C (1), their rows interleaved as a dump may hold them.
fn step_one() -> Vec<Sample<'static>> {
    vec![
        Sample {
            extra: &[("acc", "true"), ("pred", "[1, NaN]")],
            ..sample("What is 1+1?", "1.0")
        },
        Sample {
            extra: &[("acc", "true"), ("pred", "[0.5]")],
            ..sample("Résous x² = 4, « vite »", "0.5")
        },
        Sample {
            extra: &[("acc", "false"), ("pred", "null")],
            ..sample("What is 1+1?", "0.0")
        },
        Sample {
            extra: &[("acc", "true"), ("pred", "[]")],
            ..sample("What is 1+1?", "1.0")
        },
        Sample {
            extra: &[("acc", "true"), ("pred", "[2]")],
            ..sample("Résous x² = 4, « vite »", "2.0")
        },
        Sample {
            extra: &[("acc", "false"), ("pred", "[]")],
            ..sample("What is 1+1?", "0.0")
        },
        Sample {
            extra: &[("acc", "true"), ("pred", "[]")],
            ..sample("Résous x² = 4, « vite »", "0.5")
        },
        Sample {
            extra: &[("acc", "true"), ("pred", "{\"a\": 3}")],
            ..sample("Name a prime.", "3.0")
        },
    ]
}

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    advcalc().current_dir(dir).args(args).output().unwrap()
}

fn f32_column(batch: &RecordBatch, name: &str) -> Vec<f32> {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .as_primitive::<Float32Type>()
        .values()
        .to_vec()
}

/// GRPO by hand (verl: unbiased std, ε = 1e-6, a singleton has μ = 0, σ = 1):
/// A = [1, 0, 1, 0]: μ = 0.5, σ = sqrt((4 · 0.25)/3) = 0.5773503, a = ±0.5/0.5773513 = ±0.8660239
/// B = [0.5, 2, 0.5]: μ = 1, σ = sqrt((0.25 + 1 + 0.25)/2) = 0.8660254,
///     a = −0.5/0.8660264 = −0.5773496, 1/0.8660264 = 1.1546992
/// C = [3]: 3/(1 + 1e-6) = 2.999997
const GRPO: [f64; 8] = [
    0.8660239, -0.5773496, -0.8660239, 0.8660239, 1.1546992, -0.8660239, -0.5773496, 2.999997,
];
/// RLOO by hand: s_i − mean of the others; a singleton keeps its score.
/// A: 1 − (0+1+0)/3 = 0.6666667, 0 − (1+1+0)/3 = −0.6666667;
/// B: 0.5 − (2+0.5)/2 = −0.75, 2 − (0.5+0.5)/2 = 1.5; C: 3.
const RLOO: [f64; 8] = [
    0.6666667, -0.75, -0.6666667, 0.6666667, 1.5, -0.6666667, -0.75, 3.0,
];

#[test]
fn grpo_and_rloo_on_a_verl_dump_are_the_hand_computed_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "1.jsonl", &verl_file(&step_one(), 1));
    for (estimator, expected) in [("grpo", GRPO), ("rloo", RLOO)] {
        let out = format!("{estimator}.parquet");
        let o = run(tmp.path(), &["run", "-q", "-e", estimator, "1.jsonl", &out]);
        assert!(o.status.success(), "{}", stderr(&o));
        let batch = read_parquet(&tmp.path().join(&out));
        assert_close(
            estimator,
            &f32_column(&batch, "advantage"),
            &expected,
            2e-6,
            1e-5,
        );
    }
}

#[test]
fn a_dump_gives_the_numbers_of_the_equivalent_token_level_parquet() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "1.jsonl", &verl_file(&step_one(), 1));
    // the same rows as token-level Parquet: three tokens each, the score on the last one
    let rows = step_one();
    let uid: Vec<&str> = rows.iter().map(|s| s.input).collect();
    let scores: Vec<Vec<f32>> = rows
        .iter()
        .map(|s| vec![0.0, 0.0, s.score.parse().unwrap()])
        .collect();
    let batch = RecordBatch::try_from_iter([
        ("uid", strings(&uid)),
        ("response_mask", i8_lists(&vec![vec![1, 1, 1]; rows.len()])),
        ("rm_scores", f32_lists(&scores)),
    ])
    .unwrap();
    write_parquet(&tmp.path().join("tokens.parquet"), &batch, 3);
    for estimator in [
        "grpo",
        "rloo",
        "grpo_vectorized",
        "rloo_vectorized",
        "drgrpo",
        "gpg",
        "maxrl",
        "rloo_loo_std",
        "grpo_batch_std",
    ] {
        let o = run(
            tmp.path(),
            &["run", "-q", "-f", "-e", estimator, "1.jsonl", "seq.parquet"],
        );
        assert!(o.status.success(), "{estimator}: {}", stderr(&o));
        let o = run(
            tmp.path(),
            &[
                "run",
                "-q",
                "-f",
                "-e",
                estimator,
                "tokens.parquet",
                "tok.parquet",
            ],
        );
        assert!(o.status.success(), "{estimator}: {}", stderr(&o));
        let sequence = f32_column(&read_parquet(&tmp.path().join("seq.parquet")), "advantage");
        let tokens = lists_f32(&read_parquet(&tmp.path().join("tok.parquet")), "advantages");
        // an outcome estimator's scalar sits on every token of the row
        let first: Vec<f32> = tokens.iter().map(|r| r[0]).collect();
        assert_eq!(sequence, first, "{estimator}");
    }
}

#[test]
fn out_holds_the_dump_fields_and_one_advantage_per_row() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "1.jsonl", &verl_file(&step_one(), 1));
    let o = run(tmp.path(), &["run", "-e", "grpo", "1.jsonl", "out.parquet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("8 rows in 1 batch"), "{}", stderr(&o));
    let batch = read_parquet(&tmp.path().join("out.parquet"));
    let schema = batch.schema();
    let columns: Vec<(&str, &DataType)> = schema
        .fields()
        .iter()
        .map(|f| (f.name().as_str(), f.data_type()))
        .collect();
    assert_eq!(
        columns,
        [
            ("input", &DataType::Utf8),
            ("output", &DataType::Utf8),
            ("gts", &DataType::Utf8),
            ("score", &DataType::Float64),
            ("step", &DataType::Int64),
            ("acc", &DataType::Boolean),
            // lists, objects and nulls: each value's JSON text, as verl wrote it
            ("pred", &DataType::Utf8),
            ("advantage", &DataType::Float32),
        ]
    );
    let input = batch
        .column(0)
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    assert_eq!(input.value(1), "Résous x² = 4, « vite »");
    let pred = batch
        .column(6)
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    assert_eq!(pred.value(0), "[1, NaN]");
    assert!(pred.is_null(2));
    assert_eq!(pred.value(7), "{\"a\": 3}");
    let score = batch.column(3).as_primitive::<Float64Type>();
    assert_eq!(
        score.values().to_vec(),
        [1.0, 0.5, 0.0, 1.0, 2.0, 0.0, 0.5, 3.0]
    );

    // the usual provenance
    let file = std::fs::File::open(tmp.path().join("out.parquet")).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    let kv: Vec<(String, String)> = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .unwrap()
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect();
    let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert_eq!(get("advcalc.estimator"), Some("grpo"));
    assert_eq!(get("advcalc.input"), Some("1.jsonl"));
    assert_eq!(get("advcalc.input_rows"), Some("8"));
    assert_eq!(get("advcalc:sequence_level"), None);

    // Arrow IPC by OUT's extension, same columns and numbers
    let o = run(
        tmp.path(),
        &["run", "-q", "-e", "grpo", "1.jsonl", "out.arrow"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let file = std::fs::File::open(tmp.path().join("out.arrow")).unwrap();
    let reader = arrow::ipc::reader::FileReader::try_new(file, None).unwrap();
    let arrow_schema = reader.schema();
    assert_eq!(
        arrow_schema
            .metadata()
            .get("advcalc.estimator")
            .map(String::as_str),
        Some("grpo")
    );
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    assert_eq!(batches[0].schema().fields(), schema.fields());
    assert_eq!(
        f32_column(&batches[0], "advantage"),
        f32_column(&batch, "advantage")
    );
}

#[test]
fn a_directory_is_one_input_with_one_training_batch_per_step() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("rollout_data_dir");
    std::fs::create_dir(&dump).unwrap();
    // step 2 repeats prompt A with other scores: groups never cross a step
    let step_two = vec![sample("What is 1+1?", "1.0"), sample("What is 1+1?", "1.0")];
    let step_ten = vec![sample("What is 1+1?", "2.0"), sample("What is 1+1?", "0.0")];
    write(&dump, "10.jsonl", &verl_file(&step_ten, 10));
    write(&dump, "2.jsonl", &verl_file(&step_two, 2));
    write(&dump, "1.jsonl", &verl_file(&step_one(), 1));
    let o = run(
        tmp.path(),
        &["run", "-e", "grpo", "rollout_data_dir", "out.parquet"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("12 rows in 3 batches"),
        "{}",
        stderr(&o)
    );
    let batch = read_parquet(&tmp.path().join("out.parquet"));
    let step = batch
        .column_by_name("step")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    // files in the step order of their names
    assert_eq!(
        step.values().to_vec(),
        [1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 10, 10]
    );
    // step 2: all-equal group, 0; step 10: [2, 0], μ = 1, σ = sqrt(2) = 1.4142136,
    // a = ±1/1.4142146 = ±0.7071063
    let mut expected = GRPO.to_vec();
    expected.extend([0.0, 0.0, 0.7071063, -0.7071063]);
    assert_close(
        "grpo per step",
        &f32_column(&batch, "advantage"),
        &expected,
        2e-6,
        1e-5,
    );
}

#[test]
fn inspect_runs_its_group_checks_per_step() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("dump");
    std::fs::create_dir(&dump).unwrap();
    write(&dump, "1.jsonl", &verl_file(&step_one(), 1));
    let flat = vec![
        sample("What is 1+1?", "1.0"),
        sample("What is 1+1?", "1.0"),
        sample("Name a prime.", "0.0"),
        sample("Name a prime.", "0.0"),
    ];
    write(&dump, "2.jsonl", &verl_file(&flat, 2));
    let o = run(
        tmp.path(),
        &[
            "inspect",
            "--json",
            "--set",
            "actor_rollout_ref.rollout.n=4",
            "-e",
            "grpo",
            "dump",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["step"], 1);
    assert_eq!(steps[0]["rows"], 8);
    let groups = &steps[0]["groups"];
    assert_eq!(groups["count"], 3);
    assert_eq!(
        groups["size_histogram"],
        serde_json::json!({"1": 1, "3": 1, "4": 1})
    );
    // C (one row) has all-equal scores
    assert_eq!(groups["no_signal"], 1);
    let scores = &steps[0]["score_sum"];
    assert_eq!(scores["min"], 0.0);
    assert_eq!(scores["max"], 3.0);
    // step 2: both groups flat, the warning of a step without signal
    assert_eq!(steps[1]["groups"]["no_signal"], 2);
    let codes: Vec<&str> = steps[1]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(!codes.is_empty(), "{}", steps[1]);
    // the advantages of -e grpo, per step
    assert_eq!(steps[0]["advantages"]["estimator"], "grpo");
    let notes = report["notes"].to_string();
    assert!(notes.contains("verl JSONL dump"), "{notes}");
}

#[test]
fn compare_runs_the_sequence_level_estimators() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "1.jsonl", &verl_file(&step_one(), 1));
    let o = run(
        tmp.path(),
        &["compare", "--json", "-e", "grpo,rloo", "1.jsonl"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let variants = c["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    // one valid token per row: the statistics are over rows
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    for (v, expected) in variants.iter().zip([GRPO, RLOO]) {
        assert_eq!(v["valid_tokens"], 8, "{v}");
        let got = v["mean"].as_f64().unwrap();
        assert!((got - mean(&expected)).abs() < 1e-5, "{v}");
    }
    assert_eq!(c["pairs"][0]["sign_agreement"], 1.0);

    let o = run(tmp.path(), &["compare", "-e", "grpo,gae", "1.jsonl"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("estimator gae needs"), "{}", stderr(&o));
}

#[test]
fn what_needs_tokens_is_refused_naming_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "1.jsonl", &verl_file(&step_one(), 1));
    for (args, names) in [
        (
            vec!["-e", "gae"],
            "estimator gae needs per-token rewards and the critic's values",
        ),
        (
            vec!["-e", "opo"],
            "estimator opo needs each row's valid-token count",
        ),
        (
            vec!["-e", "reinforce_plus_plus_baseline"],
            "estimator reinforce_plus_plus_baseline needs each row's valid-token count",
        ),
        (
            vec!["-e", "reinforce_plus_plus"],
            "estimator reinforce_plus_plus needs",
        ),
        (
            vec!["-e", "optimal_token_baseline"],
            "needs per-token log-probabilities",
        ),
        (
            vec!["-e", "grpo", "--set", "algorithm.use_kl_in_reward=true"],
            "KL in reward needs old_log_probs and ref_log_prob",
        ),
        (
            vec![
                "-e",
                "grpo",
                "--set",
                "algorithm.rollout_correction.rollout_is=token",
            ],
            "rollout correction (rollout_is / rollout_rs) needs old_log_probs and rollout_log_probs",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend(&args);
        all.extend(["1.jsonl", "out.parquet"]);
        let o = run(tmp.path(), &all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.starts_with("error: 1.jsonl: "), "{err}");
        assert!(err.contains(names), "{args:?}: {err}");
        assert!(
            err.contains("one score per row and no token columns"),
            "{err}"
        );
        assert!(
            err.contains("hint: ") && err.contains("docs/verl.md"),
            "{err}"
        );
        assert!(!tmp.path().join("out.parquet").exists());
        assert!(leftovers(tmp.path()).is_empty());
    }
}

/// Run `advcalc run -e grpo IN out.parquet` in `dir`: the exit code and the stderr.
fn fails(dir: &Path, input: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["run", "-e", "grpo"];
    args.extend(extra);
    args.extend([input, "out.parquet"]);
    let o = run(dir, &args);
    assert!(!dir.join("out.parquet").exists(), "OUT written");
    assert!(leftovers(dir).is_empty(), "temporary files left");
    assert!(o.stdout.is_empty());
    (o.status.code(), stderr(&o))
}

#[test]
fn every_fault_is_one_line_naming_the_file_and_line_exit_1_nothing_written() {
    let good = verl_line(&sample("What is 1+1?", "1.0"), 3);
    for (what, text, message) in [
        (
            "malformed line",
            format!("{good}\n{{\"input\": \"q\", \"score\": 1.0\n"),
            "error: 3.jsonl line 2: not a JSON object\ncaused by: expected `,` or `}`, found the end of the line at column 29\n",
        ),
        (
            "no score",
            format!("{good}\n{{\"input\": \"q\", \"output\": \"a\", \"step\": 3}}\n"),
            "error: 3.jsonl line 2: no `score`\n",
        ),
        (
            "no input",
            format!("{good}\n{good}\n{{\"output\": \"a\", \"score\": 1.0, \"step\": 3}}\n"),
            "error: 3.jsonl line 3: no `input` (the prompt text, which groups the rows)\n",
        ),
        (
            "non-numeric score",
            format!("{good}\n{{\"input\": \"q\", \"score\": \"high\", \"step\": 3}}\n"),
            "error: 3.jsonl line 2: `score` is \"high\", not a number\n",
        ),
        (
            "null score",
            "{\"input\": \"q\", \"score\": null, \"step\": 3}\n".to_string(),
            "error: 3.jsonl line 1: `score` is null, not a number\n",
        ),
        (
            "NaN score",
            format!("{good}\n{{\"input\": \"q\", \"score\": NaN, \"step\": 3}}\n"),
            "error: 3.jsonl line 2: `score` is NaN (pass --allow-nonfinite to let non-finite values through, as verl would)\n",
        ),
        (
            "step of another file",
            format!("{good}\n{{\"input\": \"q\", \"score\": 1.0, \"step\": 4}}\n"),
            "error: 3.jsonl line 2: `step` is 4, but the file name says step 3\n",
        ),
        (
            "empty file",
            String::new(),
            "error: 3.jsonl: empty file, no JSON lines\nhint: a step without rows leaves an empty file; remove it\n",
        ),
        (
            "a lone newline (verl's empty batch)",
            "\n".to_string(),
            "error: 3.jsonl: empty file, no JSON lines\nhint: a step without rows leaves an empty file; remove it\n",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "3.jsonl", &text);
        let (code, err) = fails(tmp.path(), "3.jsonl", &[]);
        assert_eq!(code, Some(1), "{what}: {err}");
        assert_eq!(err, message, "{what}");
    }
}

#[test]
fn faults_in_a_directory_name_the_file_inside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("dump");
    std::fs::create_dir(&dump).unwrap();
    // empty directory
    let (code, err) = fails(tmp.path(), "dump", &[]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with(
            "error: dump: is a directory with no .jsonl, Parquet or Arrow files in it\n"
        ),
        "{err}"
    );
    // a bad line in the second file
    write(&dump, "1.jsonl", &verl_file(&step_one(), 1));
    write(
        &dump,
        "2.jsonl",
        "{\"input\": \"q\", \"score\": [1], \"step\": 2}\n",
    );
    let (code, err) = fails(tmp.path(), "dump", &[]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err,
        "error: dump/2.jsonl line 1: `score` is [1], not a number\n"
    );
    // JSONL mixed with Parquet
    std::fs::remove_file(dump.join("2.jsonl")).unwrap();
    write(&dump, "2.parquet", "");
    let (code, err) = fails(tmp.path(), "dump", &[]);
    assert_eq!(code, Some(1));
    assert_eq!(
        err,
        "error: dump: the directory mixes JSONL (dump/1.jsonl) with Parquet or Arrow files (dump/2.parquet)\nhint: keep one format per directory, or give the file to read\n"
    );
}

#[test]
fn nan_scores_go_through_with_allow_nonfinite_as_in_verl() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = vec![
        sample("q", "NaN"),
        sample("q", "1.0"),
        sample("r", "1.0"),
        sample("r", "0.0"),
    ];
    write(tmp.path(), "1.jsonl", &verl_file(&rows, 1));
    let o = run(
        tmp.path(),
        &[
            "run",
            "-q",
            "-e",
            "grpo",
            "--allow-nonfinite",
            "1.jsonl",
            "out.parquet",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let advantage = f32_column(&read_parquet(&tmp.path().join("out.parquet")), "advantage");
    // NaN spreads through its group's mean; r = [1, 0]: ±0.5/(0.7071068 + 1e-6) = ±0.7071058
    assert_close(
        "nan",
        &advantage,
        &[f64::NAN, f64::NAN, 0.7071058, -0.7071058],
        2e-6,
        1e-5,
    );
    // inspect counts them instead of refusing
    let o = run(tmp.path(), &["inspect", "--json", "1.jsonl"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["steps"][0]["score_sum"]["non_finite_rows"], 1);
}

#[test]
fn usage_errors_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "1.jsonl", &verl_file(&step_one(), 1));
    let o = run(tmp.path(), &["run", "-e", "grpo", "1.jsonl", "out.jsonl"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("advcalc writes Parquet or Arrow IPC, not JSONL"));
    assert!(!tmp.path().join("out.jsonl").exists());
    let o = run(
        tmp.path(),
        &[
            "run",
            "-e",
            "grpo",
            "--input-format",
            "jsonl",
            "-",
            "out.parquet",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // --input-format jsonl reads a file of any name
    std::fs::copy(tmp.path().join("1.jsonl"), tmp.path().join("dump.txt")).unwrap();
    let o = run(
        tmp.path(),
        &[
            "run",
            "-q",
            "-e",
            "grpo",
            "--input-format",
            "jsonl",
            "dump.txt",
            "out.parquet",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The V1 corpus (`fixtures/verl/jsonl_v1/`): dumps written by verl 0.9.1's own
/// `_log_rollout_data` (V1 and legacy trainers) and the advantages verl's own
/// `_compute_advantage` gave on the same batch. Each run of each case, as `advcalc run ARGS
/// CASE_DIR OUT`, must give verl's per-row advantage (the corpus tolerance).
#[test]
fn verl_v1_dumps_give_verls_advantages() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/jsonl_v1");
    let mut runs = 0;
    for case in common::case_dirs(&root) {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(text) = std::fs::read_to_string(case.join("expected.json")) else {
            continue; // not a case directory
        };
        let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
        for r in expected["runs"].as_array().unwrap() {
            let args: Vec<&str> = r["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            let want: Vec<f64> = r["advantages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let tmp = tempfile::tempdir().unwrap();
            let out = tmp.path().join("out.parquet");
            let mut all = vec!["run", "-q"];
            all.extend(&args);
            all.extend([".", out.to_str().unwrap()]);
            let o = run(&case, &all);
            assert!(o.status.success(), "{name} {args:?}: {}", stderr(&o));
            let got = f32_column(&read_parquet(&out), "advantage");
            assert_close(&format!("{name} {args:?}"), &got, &want, 2e-5, 2e-4);
            runs += 1;
        }
    }
    // 7 cases, 14 runs: a corpus that lost its files fails here rather than passing empty
    assert_eq!(runs, 14, "runs of the V1 corpus");
}

/// `inspect` says which grouping it used, and a V1 dump's groups are the key's uid parts:
/// the prompt drawn twice is two groups of four, not one of eight.
#[test]
fn inspect_names_the_grouping_of_each_writer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/jsonl_v1");
    let inspect = |case: &str| -> serde_json::Value {
        let o = run(&root.join(case), &["inspect", "--json", "."]);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let v1 = inspect("prompt_drawn_twice");
    let notes = v1["notes"].to_string();
    assert!(
        notes.contains("grouped by the uid part of their `uid` key"),
        "{notes}"
    );
    let groups = &v1["steps"][0]["groups"];
    assert_eq!(groups["count"], 3, "{groups}");
    assert_eq!(
        groups["size_histogram"],
        serde_json::json!({"4": 3}),
        "{groups}"
    );
    // verl's padding rows (`pad<hex>_{i}_0`, score 0) are padding, as in a token-level dump
    let padded = inspect("padding_rows");
    let step = &padded["steps"][0];
    assert_eq!(step["v1_padding_rows"], 4, "{step}");
    assert_eq!(step["groups"]["count"], 2, "{step}");
    let legacy = inspect("legacy_writer");
    let notes = legacy["notes"].to_string();
    assert!(notes.contains("grouped by their `input` text"), "{notes}");
}

/// A V1 key that verl could not have written (no integer session and index), or lines with
/// and without a `uid`, are refused naming the line, as any other fault.
#[test]
fn a_uid_that_is_not_a_v1_key_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let line = |uid: &str| {
        format!(
            "{{\"input\": \"q\", \"output\": \"a\", \"gts\": null, \"score\": 1.0, \"step\": 1, \"uid\": {uid}}}"
        )
    };
    for (second, message) in [
        (
            line("\"u1_x_0\""),
            "error: 1.jsonl line 2: `uid` is \"u1_x_0\", not verl V1's key `{uid}_{session_id}_{index}`",
        ),
        (
            line("7"),
            "error: 1.jsonl line 2: `uid` is 7, not a string (verl V1 writes `{uid}_{session_id}_{index}`)",
        ),
        (
            "{\"input\": \"q\", \"output\": \"a\", \"gts\": null, \"score\": 1.0, \"step\": 1}"
                .to_string(),
            "error: 1.jsonl line 2: no `uid` (verl V1's key), while the lines before have one",
        ),
    ] {
        write(
            tmp.path(),
            "1.jsonl",
            &format!("{}\n{second}\n", line("\"u1_0_0\"")),
        );
        let o = run(tmp.path(), &["inspect", "1.jsonl"]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().next().unwrap(), message);
    }
}

/// A copy of `tests/hostile/readers/NAME` in `dir` (so that nothing is written beside the
/// committed files), under its own name.
fn hostile(dir: &Path, name: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile/readers");
    common::copy_dir(&root.join(name), &dir.join(name));
}

/// verl writes one `{global_steps}.jsonl` per step: `01.jsonl` beside `1.jsonl` (a copy, or a
/// file renamed by hand) would put both files' rows into step 1's groups, doubling them.
#[test]
fn two_files_of_one_step_are_refused_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    hostile(tmp.path(), "verl_same_step");
    let (code, err) = fails(tmp.path(), "verl_same_step", &[]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "error: verl_same_step: two files for step 1, verl_same_step/01.jsonl and verl_same_step/1.jsonl\nhint: verl writes one STEP.jsonl per step: keep one of them\n"
    );
}

/// A directory whose `.jsonl` files are one level down (verl writes them side by side in
/// `rollout_data_dir`): the message says where they are, not that there are none.
#[test]
fn jsonl_files_below_in_directory_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    hostile(tmp.path(), "verl_nested");
    for extra in [&[][..], &["--input-format", "jsonl"][..]] {
        let (code, err) = fails(tmp.path(), "verl_nested", extra);
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(
            err,
            "error: verl_nested: holds no .jsonl file itself; its .jsonl files are below it, in verl_nested/rollout_data_dir\nhint: verl writes a dump's STEP.jsonl files side by side in one directory (rollout_data_dir): give that directory, verl_nested/rollout_data_dir\n",
            "{extra:?}"
        );
    }
    // the directory it names reads
    let o = run(
        tmp.path(),
        &[
            "run",
            "-q",
            "-e",
            "grpo",
            "verl_nested/rollout_data_dir",
            "out.parquet",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A score beyond float32 (verl's scores are float32 sums) is said as written, not as the
/// `inf` it would become.
#[test]
fn a_score_beyond_float32_is_named_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    hostile(tmp.path(), "verl_score_1e300");
    let (code, err) = fails(tmp.path(), "verl_score_1e300", &[]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "error: verl_score_1e300/1.jsonl line 3: `score` is 1e300, which overflows float32 (pass --allow-nonfinite to let non-finite values through, as verl would)\n"
    );
    // and 1e400, beyond float64, which Python's json reads as inf
    let dir = tmp.path().join("verl_score_1e300");
    let text = std::fs::read_to_string(dir.join("1.jsonl")).unwrap();
    std::fs::write(dir.join("1.jsonl"), text.replace("1e300", "1e400")).unwrap();
    let (code, err) = fails(tmp.path(), "verl_score_1e300", &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with(
            "error: verl_score_1e300/1.jsonl line 3: `score` is 1e400, which overflows float64 ("
        ),
        "{err}"
    );
}
