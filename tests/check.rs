//! `advcalc check` on logs written by verl 0.9.1's own logging code (`Tracking` with its
//! file, console and TensorBoard backends) over metrics from its own `compute_data_metrics`,
//! and the dumps its hook wrote for the same steps (`fixtures/logs/`): a run whose logs agree
//! with its dumps in every format, a run made with a deliberately wrong setting, planted
//! disagreements, and logs that do not belong (another run, a truncated or damaged file).

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

use common::{advcalc, copy_dir, stderr};

fn run_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/logs/verl")
        .join(name)
}

/// `advcalc check --json -c RUN/config.yaml LOG DUMPS`: (exit code, report, stderr).
fn check(run: &Path, log: &Path, dumps: &Path) -> (Option<i32>, Value, String) {
    let out = advcalc()
        .args(["check", "-q", "--json", "-c"])
        .arg(run.join("config.yaml"))
        .arg(log)
        .arg(dumps)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), report, stderr(&out))
}

fn diverging(report: &Value) -> Vec<(i64, String)> {
    report["compared"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["agrees"] == false)
        .map(|c| {
            (
                c["step"].as_i64().unwrap(),
                c["metric"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_run_s_logs_agree_with_its_dumps_in_every_format_verl_writes() {
    let run = run_dir("run_ok");
    for log in ["file.jsonl", "console.log", "tensorboard"] {
        let (code, r, err) = check(&run, &run.join(log), &run.join("dumps"));
        assert_eq!(code, Some(0), "{log}: {err}");
        // 24 metrics a step: score, rewards, advantages, returns, both response lengths
        // (with clip_ratio from data.max_response_length) and num_turns, over 3 steps
        assert_eq!(r["compared"].as_array().unwrap().len(), 72, "{log}");
        assert_eq!(r["diverging"], 0, "{log}");
        // what is not recomputed is listed with why, not skipped
        let not: Vec<&str> = r["not_recomputed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metric"].as_str().unwrap())
            .collect();
        assert!(not.contains(&"prompt_length/mean"), "{log}: {not:?}");
        assert!(not.contains(&"training/global_step"), "{log}: {not:?}");
    }
}

#[test]
fn a_run_made_with_the_wrong_norm_setting_diverges_at_step_1_and_the_cause_is_named() {
    let run = run_dir("run_wrong_std");
    for log in ["file.jsonl", "console.log", "tensorboard"] {
        let (code, r, err) = check(&run, &run.join(log), &run.join("dumps"));
        assert_eq!(code, Some(1), "{log}: {err}");
        assert!(err.contains("differ from the dumps"), "{err}");
        assert_eq!(r["first_divergence"]["step"], 1, "{log}");
        let bad = diverging(&r);
        // the advantages (and the returns, which equal them under GRPO) of every step, and
        // nothing else
        assert_eq!(bad.len(), 18, "{log}: {bad:?}");
        assert!(
            bad.iter()
                .all(|(_, m)| m.starts_with("critic/advantages/")
                    || m.starts_with("critic/returns/")),
            "{log}: {bad:?}"
        );
        let causes = r["likely_causes"].to_string();
        assert!(causes.contains("norm_adv_by_std_in_grpo=false"), "{causes}");
    }
    // the text names the first divergence and the cause
    let out = advcalc()
        .args(["check", "-q", "-c"])
        .arg(run.join("config.yaml"))
        .arg(run.join("file.jsonl"))
        .arg(run.join("dumps"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("first divergence: step 1, critic/advantages/"),
        "{text}"
    );
    assert!(text.contains("likely cause:"), "{text}");
}

#[test]
fn a_critic_s_values_and_explained_variance_agree_as_verl_computed_them() {
    // GAE with a critic's values: verl's compute_data_metrics(use_critic=True) logged
    // critic/values/{mean,max,min} and critic/vf_explained_var, recomputed from the dumps
    let run = run_dir("run_gae");
    for log in ["file.jsonl", "console.log", "tensorboard"] {
        let (code, r, err) = check(&run, &run.join(log), &run.join("dumps"));
        assert_eq!(code, Some(0), "{log}: {err}");
        // run_ok's 24 a step and the critic's 4, over 3 steps
        assert_eq!(r["compared"].as_array().unwrap().len(), 84, "{log}");
        assert_eq!(r["diverging"], 0, "{log}");
        let critic = r["compared"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                let m = c["metric"].as_str().unwrap();
                m.starts_with("critic/values/") || m == "critic/vf_explained_var"
            })
            .count();
        assert_eq!(critic, 12, "{log}");
    }
    // and a planted change to one of them is found there alone
    let dir = tempfile::tempdir().unwrap();
    let log = planted_in("run_gae", dir.path(), 2, "critic/vf_explained_var", |x| {
        x + 1e-3
    });
    let (code, r, _) = check(&run, &log, &run.join("dumps"));
    assert_eq!(code, Some(1));
    assert_eq!(
        diverging(&r),
        vec![(2, "critic/vf_explained_var".to_string())],
        "{r}"
    );
}

/// run_ok's file log with step `step`'s `metric` replaced by `f(value)`.
fn planted(dir: &Path, step: i64, metric: &str, f: impl Fn(f64) -> f64) -> PathBuf {
    planted_in("run_ok", dir, step, metric, f)
}

/// Run `run`'s file log with step `step`'s `metric` replaced by `f(value)`.
fn planted_in(run: &str, dir: &Path, step: i64, metric: &str, f: impl Fn(f64) -> f64) -> PathBuf {
    let text = std::fs::read_to_string(run_dir(run).join("file.jsonl")).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v["step"] == step {
            let x = v["data"][metric].as_f64().unwrap();
            v["data"][metric] = serde_json::json!(f(x));
        }
        out += &v.to_string();
        out.push('\n');
    }
    let path = dir.join("planted.jsonl");
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn one_perturbed_metric_of_one_step_is_found_there_and_a_float32_residue_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_dir("run_ok");
    let log = planted(dir.path(), 2, "critic/score/mean", |x| x + 1e-3);
    let (code, r, _) = check(&run, &log, &run.join("dumps"));
    assert_eq!(code, Some(1));
    assert_eq!(
        diverging(&r),
        vec![(2, "critic/score/mean".to_string())],
        "{r}"
    );
    assert!(r["likely_causes"].as_array().unwrap().is_empty());
    // float32 rounding of the same value is no disagreement
    let log = planted(dir.path(), 2, "critic/score/mean", |x| {
        (x as f32 * (1.0 + 2.0 * f32::EPSILON)) as f64
    });
    let (code, r, err) = check(&run, &log, &run.join("dumps"));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(r["diverging"], 0);
    // a response length off by one token on one step
    let log = planted(dir.path(), 3, "response_length/max", |x| x - 1.0);
    let (_, r, _) = check(&run, &log, &run.join("dumps"));
    assert_eq!(diverging(&r), vec![(3, "response_length/max".to_string())]);
}

#[test]
fn logs_that_do_not_line_up_with_the_dumps_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_dir("run_ok");
    // another run's log: steps 101..103
    let text = std::fs::read_to_string(run.join("file.jsonl")).unwrap();
    let shifted: String = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["step"] = serde_json::json!(v["step"].as_i64().unwrap() + 100);
            v.to_string() + "\n"
        })
        .collect();
    std::fs::write(dir.path().join("other.jsonl"), shifted).unwrap();
    let (code, _, err) = check(&run, &dir.path().join("other.jsonl"), &run.join("dumps"));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no step of the log (steps 101..103"), "{err}");
    // dumps missing a step the log has: compared where both are, the rest named
    let dumps = dir.path().join("dumps");
    copy_dir(&run.join("dumps"), &dumps);
    std::fs::remove_file(dumps.join("step=3.parquet")).unwrap();
    let (code, r, err) = check(&run, &run.join("file.jsonl"), &dumps);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(r["steps_only_in_log"], serde_json::json!([3]));
    assert_eq!(r["compared"].as_array().unwrap().len(), 48);
    // a log that is none of the formats
    std::fs::write(dir.path().join("notes.txt"), "training went fine\n").unwrap();
    let (code, _, err) = check(&run, &dir.path().join("notes.txt"), &run.join("dumps"));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("console logger"), "{err}");
}

#[test]
fn a_tensorboard_file_still_being_written_reads_to_its_last_record_and_a_damaged_one_fails() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_dir("run_ok");
    let tb = dir.path().join("tb");
    std::fs::create_dir(&tb).unwrap();
    let src = std::fs::read_dir(run.join("tensorboard"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    let bytes = std::fs::read(&src).unwrap();
    let file = tb.join(src.file_name().unwrap());
    std::fs::write(&file, &bytes[..bytes.len() - 7]).unwrap();
    let (code, r, err) = check(&run, &tb, &run.join("dumps"));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        r["notes"].to_string().contains("partial record"),
        "{}",
        r["notes"]
    );
    assert_eq!(r["diverging"], 0);
    // one byte flipped in the middle: damage, not a run still writing
    let mut damaged = bytes.clone();
    let at = bytes.len() / 2;
    damaged[at] ^= 0x55;
    std::fs::write(&file, &damaged).unwrap();
    let (code, _, err) = check(&run, &tb, &run.join("dumps"));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("corrupt"), "{err}");
}

/// `advcalc check --json ARGS`: (exit code, report, stderr).
fn check_args(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = advcalc()
        .args(["check", "-q", "--json"])
        .args(args)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), report, stderr(&out))
}

#[test]
fn trl_s_trainer_state_agrees_with_its_completions_given_the_reward_weights() {
    // written by a real GRPOTrainer.train() (TRL 1.16.0, fixtures/logs/trl/generate.py) with
    // reward weights [1.0, 0.5], which neither file records
    let run = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/logs/trl/run1");
    let (log, dumps) = (run.to_str().unwrap(), run.join("completions"));
    let dumps = dumps.to_str().unwrap();
    let weights = "algorithm.trl.reward_weights=[1.0,0.5]";
    let (code, r, err) = check_args(&["--set", weights, log, dumps]);
    assert_eq!(code, Some(0), "{err}");
    // reward, reward_std and frac_reward_zero_std of 4 steps
    assert_eq!(r["compared"].as_array().unwrap().len(), 12, "{r}");
    assert_eq!(r["format"], "TRL trainer_state.json");
    let not = r["not_recomputed"].to_string();
    assert!(not.contains("completions/mean_length") && not.contains("clip_ratio/low_mean"));
    // without the weights: the reward differs, and the cause says which setting
    let (code, r, _) = check_args(&[log, dumps]);
    assert_eq!(code, Some(1));
    assert!(diverging(&r).iter().any(|(_, m)| m == "reward"));
    assert!(r["likely_causes"].to_string().contains("reward_weights"));
    // a checkpoint's state logs its steps only; the later dumps are named
    let ckpt = run.join("checkpoint-2");
    let (code, r, err) = check_args(&["--set", weights, ckpt.to_str().unwrap(), dumps]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(r["steps_only_in_dumps"], serde_json::json!([3, 4]));
}
