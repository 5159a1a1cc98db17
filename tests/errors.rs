//! Bad input, table-driven: every case is a small file made here, and advcalc must exit 1
//! (data) or 2 (usage) with one `error:` line naming the file and the column / row / token
//! at fault (then only `caused by:` lines and, for a case with a fix, one `hint:` line),
//! without a panic, and leave no OUT and no temporary file behind.

mod common;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float32Array, Float32Builder, Int64Array, ListBuilder, RecordBatch, StringArray,
    StringBuilder,
};
use common::*;

/// The columns of a valid two-group input with every optional column, as (name, array).
fn base() -> Vec<(&'static str, ArrayRef)> {
    let lp = |shift: f32| {
        f32_lists(&[
            vec![-0.5 + shift, -0.7, -0.2],
            vec![-0.3, -0.4 + shift],
            vec![-1.0, -0.1],
            vec![-0.6 + shift],
        ])
    };
    vec![
        ("uid", strings(&["a", "b", "a", "b"])),
        (
            "response_mask",
            i8_lists(&[vec![1, 1, 0], vec![1, 1], vec![1, 1], vec![1]]),
        ),
        (
            "rm_scores",
            f32_lists(&[
                vec![0.0, 0.0, 1.0],
                vec![0.0, 0.5],
                vec![0.0, 0.0],
                vec![2.0],
            ]),
        ),
        ("old_log_probs", lp(0.0)),
        ("ref_log_prob", lp(0.1)),
        ("rollout_log_probs", lp(-0.05)),
        (
            "values",
            f32_lists(&[
                vec![0.1, 0.2, 0.3],
                vec![0.4, 0.5],
                vec![0.0, 0.1],
                vec![0.2],
            ]),
        ),
        (
            "sum_pi_squared",
            f32_lists(&[
                vec![0.5, 0.4, 0.3],
                vec![0.6, 0.5],
                vec![0.9, 0.8],
                vec![0.7],
            ]),
        ),
        (
            "reward_baselines",
            Arc::new(Float32Array::from(vec![0.5, 0.5, 0.5, 0.5])) as ArrayRef,
        ),
    ]
}

fn batch(columns: Vec<(&'static str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).unwrap()
}

fn without(name: &str) -> RecordBatch {
    batch(base().into_iter().filter(|(n, _)| *n != name).collect())
}

fn with(name: &'static str, array: ArrayRef) -> RecordBatch {
    batch(
        base()
            .into_iter()
            .map(|(n, a)| {
                if n == name {
                    (n, array.clone())
                } else {
                    (n, a)
                }
            })
            .collect(),
    )
}

fn f32_list_with(rows: &[Vec<Option<f32>>], null_row: Option<usize>) -> ArrayRef {
    let mut b = ListBuilder::new(Float32Builder::new());
    for (i, r) in rows.iter().enumerate() {
        if Some(i) == null_row {
            b.append_null();
        } else {
            b.append_value(r.iter().copied());
        }
    }
    Arc::new(b.finish())
}

struct Case {
    name: &'static str,
    input: RecordBatch,
    args: &'static [&'static str],
    config: Option<&'static str>,
    code: i32,
    needles: &'static [&'static str],
    /// Words of the last line, `hint: ...`; `None`: no hint line.
    hint: Option<&'static str>,
}

impl Case {
    fn hint(mut self, words: &'static str) -> Self {
        self.hint = Some(words);
        self
    }
}

fn case(
    name: &'static str,
    input: RecordBatch,
    args: &'static [&'static str],
    code: i32,
    needles: &'static [&'static str],
) -> Case {
    Case {
        name,
        input,
        args,
        config: None,
        code,
        needles,
        hint: None,
    }
}

fn config_case(name: &'static str, yaml: &'static str, needles: &'static [&'static str]) -> Case {
    Case {
        name,
        input: batch(base()),
        args: &["--config", "c.yaml"],
        config: Some(yaml),
        code: 2,
        needles,
        hint: None,
    }
}

fn cases() -> Vec<Case> {
    let nan_scores = f32_lists(&[
        vec![0.0, f32::NAN, 1.0],
        vec![0.0, 0.5],
        vec![0.0, 0.0],
        vec![2.0],
    ]);
    let inf_lp = f32_lists(&[
        vec![-0.5, -0.7, -0.2],
        vec![-0.3, -0.4],
        vec![-1.0, f32::INFINITY],
        vec![-0.6],
    ]);
    let nan_values = f32_lists(&[
        vec![0.1, 0.2, 0.3],
        vec![0.4, f32::NEG_INFINITY],
        vec![0.0, 0.1],
        vec![0.2],
    ]);
    let null_uid: ArrayRef = Arc::new(StringArray::from(vec![
        Some("a"),
        Some("b"),
        None,
        Some("b"),
    ]));
    let float_uid: ArrayRef = Arc::new(Float32Array::from(vec![1.0, 2.0, 1.0, 2.0]));
    let mut text_mask = ListBuilder::new(StringBuilder::new());
    for _ in 0..4 {
        text_mask.append_value([Some("1")]);
    }
    let int_scores: ArrayRef = {
        let mut b = ListBuilder::new(arrow::array::Int64Builder::new());
        for r in [vec![0, 0, 1], vec![0, 1], vec![0, 0], vec![2]] {
            b.append_value(r.into_iter().map(Some));
        }
        Arc::new(b.finish())
    };
    let one_token_mask = i8_lists(&[vec![0, 0, 0], vec![0, 0], vec![0, 1], vec![0]]);
    let singleton_uid = strings(&["a", "b", "a", "c"]);
    vec![
        case(
            "missing uid",
            without("uid"),
            &["-e", "grpo"],
            1,
            &["missing column uid", "the file has:"],
        ),
        case(
            "missing values for gae",
            without("values"),
            &["-e", "gae"],
            1,
            &["missing column values", "estimator gae needs"],
        ),
        case(
            "missing reward_baselines for remax",
            without("reward_baselines"),
            &["-e", "remax"],
            1,
            &["missing column reward_baselines"],
        ),
        case(
            "missing sum_pi_squared for otb",
            without("sum_pi_squared"),
            &["-e", "optimal_token_baseline"],
            1,
            &["missing column sum_pi_squared"],
        ),
        case(
            "missing sum_pi_squared for tir otb",
            without("sum_pi_squared"),
            &["-e", "tir_optimal_token_baseline"],
            1,
            &["missing column sum_pi_squared"],
        ),
        case(
            "missing ref_log_prob for KL",
            without("ref_log_prob"),
            &["-e", "grpo", "--set", "algorithm.use_kl_in_reward=true"],
            1,
            &["missing column ref_log_prob", "KL in reward"],
        ),
        case(
            "missing rollout_log_probs for IS",
            without("rollout_log_probs"),
            &[
                "-e",
                "grpo",
                "--set",
                "algorithm.rollout_correction.rollout_is=token",
            ],
            1,
            &["rollout_log_probs"],
        ),
        case(
            "uid of floats",
            with("uid", float_uid),
            &["-e", "grpo"],
            1,
            &["`uid` has type Float32"],
        ),
        case(
            "mask of strings",
            with("response_mask", Arc::new(text_mask.finish())),
            &["-e", "grpo"],
            1,
            &["`response_mask` has type"],
        ),
        case(
            "integer rewards",
            with("rm_scores", int_scores),
            &["-e", "grpo"],
            1,
            &["`rm_scores` has type", "float32 or float64"],
        ),
        case(
            "unequal lengths",
            with(
                "values",
                f32_lists(&[vec![0.1, 0.2, 0.3], vec![0.4], vec![0.0, 0.1], vec![0.2]]),
            ),
            &["-e", "gae"],
            1,
            &["`values` row 1", "`response_mask` has 2"],
        ),
        case(
            "null list",
            with(
                "rm_scores",
                f32_list_with(
                    &[
                        vec![Some(0.0); 3],
                        vec![],
                        vec![Some(0.0); 2],
                        vec![Some(1.0)],
                    ],
                    Some(1),
                ),
            ),
            &["-e", "grpo"],
            1,
            &["`rm_scores` row 1", "null list"],
        ),
        case(
            "null value in a list",
            with(
                "rm_scores",
                f32_list_with(
                    &[
                        vec![Some(0.0), None, Some(1.0)],
                        vec![Some(0.0); 2],
                        vec![Some(0.0); 2],
                        vec![Some(1.0)],
                    ],
                    None,
                ),
            ),
            &["-e", "grpo"],
            1,
            &["`rm_scores` row 0", "null value at token 1"],
        ),
        case(
            "null uid",
            with("uid", null_uid),
            &["-e", "grpo"],
            1,
            &["`uid` row 2", "null label"],
        ),
        case(
            "mask value 2",
            with(
                "response_mask",
                i8_lists(&[vec![1, 1, 0], vec![1, 2], vec![1, 1], vec![1]]),
            ),
            &["-e", "grpo"],
            1,
            &["`response_mask` row 1", "token 1"],
        ),
        case(
            "NaN reward",
            with("rm_scores", nan_scores),
            &["-e", "grpo"],
            1,
            &["`rm_scores` row 0", "NaN at token 1", "--allow-nonfinite"],
        ),
        case(
            "inf log-prob",
            with("old_log_probs", inf_lp),
            &["-e", "grpo", "--set", "algorithm.use_kl_in_reward=true"],
            1,
            &["`old_log_probs` row 2", "inf at token 1"],
        ),
        case(
            "-inf value",
            with("values", nan_values),
            &["-e", "gae"],
            1,
            &["`values` row 1", "-inf at token 1"],
        ),
        case(
            "whitening over one valid token",
            with("response_mask", one_token_mask),
            &["-e", "gae"],
            1,
            &[
                "gae whitens",
                "at least 2 valid tokens, found 1",
                "The sum of the mask is one",
            ],
        ),
        case(
            "pass@k singleton",
            with("uid", singleton_uid),
            &["-e", "grpo_passk"],
            1,
            &[
                "`uid` row 1",
                "Pass@k requires at least 2 samples per group",
            ],
        ),
        case(
            "unknown estimator",
            batch(base()),
            &["-e", "ppo"],
            2,
            &["unknown estimator `ppo`", "(from -e)"],
        )
        .hint("`gae`"),
        case(
            "misspelt estimator",
            batch(base()),
            &["-e", "gpro"],
            2,
            &["unknown estimator `gpro`", "(from -e)"],
        )
        .hint("did you mean `grpo`?"),
        case(
            "several estimators to run",
            batch(base()),
            &["-e", "grpo,rloo"],
            2,
            &["unknown estimator `grpo,rloo`"],
        )
        .hint("`advcalc compare -e grpo,rloo IN`"),
        case(
            "bad --set",
            batch(base()),
            &["-e", "grpo", "--set", "gamma"],
            2,
            &["--set gamma", "KEY=VALUE"],
        )
        .hint("--set algorithm.lam=0.95"),
        config_case(
            "IS threshold 0_1",
            "rollout_correction:\n  rollout_is: token\n  rollout_is_threshold: \"0_1\"\n",
            &["rollout_is_threshold lower bound must be positive"],
        ),
        config_case(
            "IS threshold 2_1",
            "rollout_correction:\n  rollout_is: token\n  rollout_is_threshold: \"2_1\"\n",
            &["lower bound must be <= upper bound"],
        ),
        config_case(
            "IS threshold -1",
            "rollout_correction:\n  rollout_is: token\n  rollout_is_threshold: -1\n",
            &["upper bound must be positive, got -1"],
        ),
        config_case(
            "IS threshold bool",
            "rollout_correction:\n  rollout_is: token\n  rollout_is_threshold: true\n",
            &["not a boolean"],
        ),
        config_case(
            "unknown RS option",
            "rollout_correction:\n  rollout_rs: token_k9\n  rollout_rs_threshold: 2.0\n",
            &["Invalid rollout_rs option: token_k9"],
        ),
        config_case(
            "RS without threshold",
            "rollout_correction:\n  rollout_rs: token_k1\n",
            &["rollout_rs_threshold must be explicitly provided"],
        ),
        config_case(
            "unknown key",
            "adv_estimator: grpo\nlamda: 0.9\n",
            &["unknown key `algorithm.lamda`", "c.yaml"],
        )
        .hint("did you mean `algorithm.lam`?"),
        config_case(
            "wrong key type",
            "adv_estimator: grpo\ngamma: [1]\n",
            &["algorithm.gamma: expected a finite number"],
        ),
        config_case(
            "kl_penalty full",
            "adv_estimator: grpo\nuse_kl_in_reward: true\nkl_penalty: full\n",
            &["algorithm.kl_penalty (in c.yaml)", "`full`", "logits"],
        )
        .hint("low_var_kl"),
        config_case(
            "kl_penalty unknown",
            "adv_estimator: grpo\nuse_kl_in_reward: true\nkl_penalty: k4\n",
            &["algorithm.kl_penalty (in c.yaml)", "unknown estimator `k4`"],
        )
        .hint("verl 0.9.1 knows kl, k1"),
        config_case(
            "kl_ctrl horizon",
            "adv_estimator: grpo\nuse_kl_in_reward: true\nkl_ctrl:\n  type: adaptive\n  horizon: 0\n",
            &["algorithm.kl_ctrl.horizon (in c.yaml)", "larger than 0"],
        ),
        config_case(
            "KL inside openrlhf's group statistics",
            "adv_estimator: openrlhf_group_norm\nuse_kl_in_reward: true\n",
            &[
                "algorithm.use_kl_in_reward (in c.yaml)",
                "OpenRLHF never does",
            ],
        )
        .hint("use_kl_in_reward=false"),
        config_case("not YAML", "adv_estimator: [grpo\n", &["not valid YAML"]),
        config_case(
            "gdpo without keys",
            "adv_estimator: gdpo\n",
            &["gdpo_reward_keys", "(in c.yaml)"],
        )
        .hint("--set algorithm.gdpo_reward_keys=["),
        config_case(
            "pf_ppo",
            "adv_estimator: gae\nuse_pf_ppo: true\n",
            &["algorithm.use_pf_ppo (in c.yaml)"],
        )
        .hint("use_pf_ppo=false"),
    ]
}

fn assert_clean_failure(
    name: &str,
    out: &std::process::Output,
    code: i32,
    needles: &[&str],
    hint: Option<&str>,
    dir: &Path,
) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{name}: {err}");
    assert!(!err.contains("panicked"), "{name}: panic: {err}");
    let mut lines = err.lines();
    let first = lines.next().unwrap_or_default();
    assert!(first.starts_with("error: "), "{name}: {first}");
    for n in needles {
        assert!(first.contains(n), "{name}: `{n}` not in: {first}");
    }
    let mut rest: Vec<&str> = lines.collect();
    match hint {
        Some(words) => {
            let last = rest.pop().unwrap_or_default();
            assert!(last.starts_with("hint: "), "{name}: no hint line: {err}");
            assert!(last.contains(words), "{name}: `{words}` not in: {last}");
        }
        None => assert!(
            !rest.last().is_some_and(|l| l.starts_with("hint: ")),
            "{name}: unexpected {err}"
        ),
    }
    for line in rest {
        assert!(
            line.starts_with("caused by: "),
            "{name}: extra line: {line}"
        );
    }
    assert!(!dir.join("out.parquet").exists(), "{name}: OUT left behind");
    let leftovers = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".advcalc-"))
        .count();
    assert_eq!(leftovers, 0, "{name}: temporary files left");
}

#[test]
fn bad_input_table() {
    for c in cases() {
        let tmp = tempfile::tempdir().unwrap();
        write_parquet(&tmp.path().join("in.parquet"), &c.input, 2);
        if let Some(yaml) = c.config {
            std::fs::write(tmp.path().join("c.yaml"), yaml).unwrap();
        }
        let mut args = vec!["run"];
        args.extend(c.args);
        args.extend(["in.parquet", "out.parquet"]);
        let out = run_in(tmp.path(), &args);
        assert_clean_failure(c.name, &out, c.code, c.needles, c.hint, tmp.path());
        if c.code == 1 {
            assert!(
                stderr(&out).contains("in.parquet"),
                "{}: the file is not named",
                c.name
            );
        }
    }
}

#[test]
fn allow_nonfinite_lets_verl_behaviour_through() {
    let tmp = tempfile::tempdir().unwrap();
    let nan = f32_lists(&[
        vec![0.0, f32::NAN, 1.0],
        vec![0.0, 0.5],
        vec![0.0, 0.0],
        vec![2.0],
    ]);
    write_parquet(&tmp.path().join("in.parquet"), &with("rm_scores", nan), 2);
    let out = run_in(
        tmp.path(),
        &[
            "run",
            "-e",
            "grpo",
            "--allow-nonfinite",
            "in.parquet",
            "out.parquet",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // The NaN reaches group a's statistics, as it would in verl: rows 0 and 2 are NaN on
    // every token (verl's NaN · mask keeps NaN on mask-0 tokens too). Group b is {0.5, 2}:
    // μ = 1.25, unbiased σ = 1.5/√2 = 1.0606602, so ∓0.75/(σ + 1e-6) = ∓0.7071061.
    let adv = lists_f32(&read_parquet(&tmp.path().join("out.parquet")), "advantages");
    let (nan, b) = (f64::NAN, 0.75 / (1.5 / 2f64.sqrt() + 1e-6));
    let expected: [&[f64]; 4] = [&[nan; 3], &[-b, -b], &[nan; 2], &[b]];
    assert_rows_close("advantages", &adv, &expected, 1e-6, 1e-6);
}

#[test]
fn positive_log_probs_are_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let positive = f32_lists(&[
        vec![-0.5, 0.7, -0.2],
        vec![-0.3, -0.4],
        vec![-1.0, -0.1],
        vec![0.6],
    ]);
    write_parquet(
        &tmp.path().join("in.parquet"),
        &with("old_log_probs", positive),
        2,
    );
    let out = run_in(
        tmp.path(),
        &[
            "run",
            "-e",
            "grpo",
            "--set",
            "algorithm.use_kl_in_reward=true",
            "in.parquet",
            "out.parquet",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning:")
            && err.contains("2 positive values")
            && err.contains("`old_log_probs` row 0 token 1"),
        "{err}"
    );
}

#[test]
fn unwritable_output_is_a_data_error() {
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &batch(base()), 2);
    // /proc refuses new files even to root
    let out = run_in(
        tmp.path(),
        &[
            "run",
            "-e",
            "grpo",
            "in.parquet",
            "/proc/advcalc-out.parquet",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("error: /proc/advcalc-out.parquet"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn step_column_of_strings_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cols = base();
    cols.push(("step", strings(&["0", "0", "1", "1"])));
    write_parquet(&tmp.path().join("in.parquet"), &batch(cols), 2);
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert_clean_failure(
        "string step",
        &out,
        1,
        &["`step` has type Utf8", "integers"],
        None,
        tmp.path(),
    );
    let mut cols = base();
    cols.push((
        "step",
        Arc::new(Int64Array::from(vec![0, 0, 1, 1])) as ArrayRef,
    ));
    write_parquet(&tmp.path().join("in.parquet"), &batch(cols), 2);
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // Integer steps split the batch: each (step, uid) group is a singleton, so GRPO gives
    // s/(1 + 1e-6) (scores 1, 0.5, 0, 2), times the mask.
    let adv = lists_f32(&read_parquet(&tmp.path().join("out.parquet")), "advantages");
    let a = |s: f64| s / (1.0 + 1e-6);
    let expected: [&[f64]; 4] = [&[a(1.0), a(1.0), 0.0], &[a(0.5); 2], &[0.0; 2], &[a(2.0)]];
    assert_rows_close("advantages by step", &adv, &expected, 1e-7, 1e-6);
}

// Found by the `read_input` fuzz target: a file on which the Parquet decoder itself panics.
// It must be a one-line data error, whatever the thread count.
#[test]
fn decoder_panic_is_a_data_error() {
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz-decoder-panic.parquet");
    for threads in ["1", "2"] {
        let tmp = tempfile::tempdir().unwrap();
        let out = run_in(
            tmp.path(),
            &[
                "run",
                "-e",
                "grpo",
                "-j",
                threads,
                input.to_str().unwrap(),
                "out.parquet",
            ],
        );
        assert_clean_failure(
            "decoder panic",
            &out,
            1,
            &["fuzz-decoder-panic.parquet: cannot decode row group"],
            None,
            tmp.path(),
        );
    }
}

#[test]
fn an_input_without_rows_is_named_before_rollout_correction() {
    // verl's rollout correction raises on a batch without a valid token; with no rows at all,
    // the input itself is what is wrong, and the message says so first (file and stream).
    let tmp = tempfile::tempdir().unwrap();
    let empty = batch(base()).slice(0, 0);
    write_parquet(&tmp.path().join("in.parquet"), &empty, 2);
    let set = "algorithm.rollout_correction.rollout_is=token";
    let out = run_in(
        tmp.path(),
        &[
            "run",
            "-e",
            "grpo",
            "--set",
            set,
            "in.parquet",
            "out.parquet",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: in.parquet: the input has no rows"),
        "{err}"
    );
    assert!(!tmp.path().join("out.parquet").exists());

    let mut stream = Vec::new();
    {
        let mut w =
            arrow::ipc::writer::StreamWriter::try_new(&mut stream, &empty.schema()).unwrap();
        w.write(&empty).unwrap();
        w.finish().unwrap();
    }
    let mut child = advcalc()
        .args(["run", "-e", "grpo", "--set", set, "-", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(&stream).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: <stdin>: the input has no rows"),
        "{err}"
    );
}

#[test]
fn an_input_without_rows_says_so_and_nothing_of_a_correction_not_configured() {
    // with rollout_log_probs in the input but no IS or RS configured, an empty input is
    // written as an empty output with a warning; an estimator that refuses an empty batch
    // says the input has no rows first
    let tmp = tempfile::tempdir().unwrap();
    let empty = batch(base()).slice(0, 0);
    assert!(empty.schema().field_with_name("rollout_log_probs").is_ok());
    write_parquet(&tmp.path().join("in.parquet"), &empty, 2);
    let out = run_in(
        tmp.path(),
        &["run", "-e", "grpo", "in.parquet", "out.parquet"],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: in.parquet: the input has no rows: OUT has none"),
        "{err}"
    );
    assert!(!err.contains("rollout correction"), "{err}");
    assert_eq!(read_parquet(&tmp.path().join("out.parquet")).num_rows(), 0);
    let out = run_in(
        tmp.path(),
        &["run", "-e", "gae", "in.parquet", "gae.parquet"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: in.parquet: the input has no rows: "),
        "{err}"
    );
    assert!(!tmp.path().join("gae.parquet").exists());
}

#[test]
fn stdin_named_as_a_dump_or_jsonl_is_a_usage_error_in_every_command() {
    // `--input-format trl -` panicked ("unreachable") before IN was resolved in one place
    for format in ["trl", "nemo-rl", "jsonl"] {
        for args in [
            vec![
                "run",
                "-e",
                "grpo",
                "--input-format",
                format,
                "-",
                "out.parquet",
            ],
            vec!["inspect", "--input-format", format, "-"],
            vec!["compare", "-e", "grpo,rloo", "--input-format", format, "-"],
        ] {
            let out = advcalc()
                .args(&args)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains("not from stdin"), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
        }
    }
}
