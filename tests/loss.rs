//! `advcalc loss` as a user meets it: the refusals (exit 2 for the configuration, 1 for the
//! data, one line naming the key or file, nothing written), the notes, the length-bias view
//! and `advcalc config --actor`. The numbers themselves are `tests/loss_corpus.rs`'s.

mod common;

use std::path::{Path, PathBuf};

use common::{advcalc, stderr};

fn case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/verl/loss/cases")
        .join(name)
}

/// `advcalc loss -c config.yaml input.parquet OUT EXTRA...` in `case`'s directory.
fn loss(name: &str, extra: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.parquet");
    let mut args = vec!["loss", "-c", "config.yaml", "input.parquet"];
    let out_s = out.display().to_string();
    args.push(&out_s);
    args.extend(extra);
    let output = advcalc()
        .current_dir(case(name))
        .args(&args)
        .output()
        .unwrap();
    (output, tmp)
}

fn refused(name: &str, extra: &[&str], code: i32, needles: &[&str]) {
    let mut quiet = vec!["-q"];
    quiet.extend(extra);
    let (out, tmp) = loss(name, &quiet);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{extra:?}: {err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(first.starts_with("error: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "`{n}` not in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "output left behind"
    );
}

#[test]
fn configuration_faults_are_usage_errors_naming_the_key() {
    let set = |kv: &'static str| ["--set", kv];
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov"),
        2,
        &["clip_cov", "randperm"],
    );
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.loss_agg_mod=token-sum"),
        2,
        &[
            "actor_rollout_ref.actor.loss_agg_mod",
            "did you mean `actor_rollout_ref.actor.loss_agg_mode`",
        ],
    );
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.loss_agg_mode=token_mean"),
        2,
        &["loss_agg_mode", "token-mean"],
    );
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.policy_loss.loss_mode=vanila"),
        2,
        &["vanila", "did you mean `vanilla`"],
    );
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.use_dynamic_bsz=true"),
        2,
        &["use_dynamic_bsz", "token budget"],
    );
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.shuffle=true"),
        2,
        &["shuffle"],
    );
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.clip_ratio_c=1.0"),
        2,
        &["clip_ratio_c", "greater than 1.0"],
    );
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.policy_loss.loss_mode=dro"),
        2,
        &["dro_beta"],
    );
    refused(
        "loss_vanilla",
        &[
            "--set",
            "actor_rollout_ref.actor.use_kl_loss=true",
            "--set",
            "actor_rollout_ref.actor.kl_loss_type=full",
        ],
        2,
        &["kl_loss_type", "full"],
    );
}

// issue 36: what panicked (an inverted clip range, a wrapped mini-batch product) or gave
// inf/NaN silently (loss_scale_factor 1e-320, kl_cov_ratio 5, micro-batches that do not
// divide the mini-batch): exit 2 naming the key, the range and the value, nothing written.
// The corpus of such configurations is tests/hostile_loss.rs's.
#[test]
fn out_of_range_numbers_are_usage_errors_naming_the_key_and_the_range() {
    let set = |kv: &'static str| ["--set", kv];
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.clip_ratio_high=-1.5"),
        2,
        &[
            "actor_rollout_ref.actor.clip_ratio_high (from --set)",
            "≥ 0",
            "`-1.5`",
        ],
    );
    refused(
        "loss_vanilla",
        &[
            "--set",
            "actor_rollout_ref.actor.clip_ratio=-0.5",
            "--set",
            "actor_rollout_ref.actor.clip_ratio_low=null",
            "--set",
            "actor_rollout_ref.actor.clip_ratio_high=null",
        ],
        2,
        &["actor_rollout_ref.actor.clip_ratio (from --set)", "`-0.5`"],
    );
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.ppo_mini_batch_size=4611686018427387904"),
        2,
        &[
            "actor_rollout_ref.actor.ppo_mini_batch_size",
            "4611686018427387904 × 4 overflows",
            "at most 9223372036854775807",
        ],
    );
    refused(
        "agg_seq_mean_token_sum_norm_off",
        &set("actor_rollout_ref.actor.loss_scale_factor=1e-320"),
        2,
        &[
            "actor_rollout_ref.actor.loss_scale_factor (from --set)",
            "from 1 to 9223372036854775807",
            "`1e-320`",
        ],
    );
    // loss_vanilla: G = 8 × 4 = 32 rows
    refused(
        "loss_vanilla",
        &set("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=5"),
        2,
        &[
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (from --set)",
            "a divisor of",
            "= 32 rows",
            "`5`",
            "data size must be divisible",
        ],
    );
    refused(
        "loss_kl_cov",
        &set("actor_rollout_ref.actor.policy_loss.kl_cov_ratio=5"),
        2,
        &[
            "actor_rollout_ref.actor.policy_loss.kl_cov_ratio (from --set)",
            "(0, 1]",
            "`5.0`",
        ],
    );
    refused(
        "loss_sapo",
        &set("actor_rollout_ref.actor.tau_neg=0"),
        2,
        &[
            "actor_rollout_ref.actor.tau_neg (from --set)",
            "1e-30 to 1e30",
        ],
    );
    // `config --actor` refuses them as `loss` does, instead of printing a wrapped product
    let out = advcalc()
        .current_dir(case("loss_vanilla"))
        .args([
            "config",
            "--actor",
            "-c",
            "config.yaml",
            "--set",
            "actor_rollout_ref.actor.ppo_mini_batch_size=9223372036854775807",
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("9223372036854775807 × 4 overflows") && out.stdout.is_empty(),
        "{err}"
    );
}

// issue 36: the hint for a sequence-level dump said to pick a sequence-level estimator, which
// no loss replay can use; it says what the loss needs
#[test]
fn a_dump_without_log_probs_is_refused_with_what_the_loss_needs() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/verl/jsonl_v1/reference_example/1.jsonl");
    let out = advcalc()
        .args(["loss", "-q", "-e", "grpo"])
        .arg(&dump)
        .arg(tmp.path().join("out.parquet"))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the loss needs the log-probs of every token"),
        "{err}"
    );
    let hint = err
        .lines()
        .find(|l| l.starts_with("hint: "))
        .unwrap_or_default();
    assert!(
        hint.contains("old_log_probs") && hint.contains("token-level"),
        "{hint}"
    );
    assert!(!hint.contains("sequence-level estimator"), "{hint}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    // run keeps its hint: a sequence-level estimator is the fix there
    let out = advcalc()
        .args(["run", "-q", "-e", "gae"])
        .arg(&dump)
        .arg(tmp.path().join("out.parquet"))
        .output()
        .unwrap();
    assert!(stderr(&out).contains("use a sequence-level estimator"));
}

#[test]
fn data_faults_are_data_errors() {
    // 32 rows do not cut into mini-batches of 3 × 4
    refused(
        "loss_vanilla",
        &["--set", "actor_rollout_ref.actor.ppo_mini_batch_size=3"],
        1,
        &["input.parquet", "32 rows", "12 rows", "ppo_mini_batch_size"],
    );
    // the KL loss needs ref_log_prob, which this input lacks
    refused(
        "loss_vanilla",
        &["--set", "actor_rollout_ref.actor.use_kl_loss=true"],
        1,
        &["ref_log_prob"],
    );
    // kl_cov chooses from IN's advantages; adv_grpo computes them
    refused(
        "adv_grpo",
        &[
            "--set",
            "actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov",
        ],
        2,
        &["kl_cov", "advantages"],
    );
}

#[test]
fn notes_findings_and_the_length_bias_view() {
    let (out, tmp) = loss("bypass_rs_token_k1", &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("warning: bypass_token_mean_divisor"), "{err}");
    assert!(err.contains("(loss bypass_mode, token-mean)"), "{err}");
    // the table names every mode, the configured one marked
    for mode in [
        "token-mean",
        "token-sum",
        "seq-mean-token-sum",
        "seq-mean-token-mean",
        "seq-mean-token-sum-norm",
    ] {
        assert!(err.contains(&format!("  {mode} ")), "{mode}: {err}");
    }
    assert!(tmp.path().join("out.parquet").is_file());

    // on-policy without log_probs; --json on stdout, shares adding to 1
    let (out, _tmp) = loss("agg_token_mean_on", &["--json"]);
    let err = stderr(&out);
    assert!(err.contains("on-policy"), "{err}");
    let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(view["configured"], "token-mean");
    for m in view["modes"].as_array().unwrap() {
        let q: f64 = m["share_by_length_quartile"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .sum();
        assert!((q - 1.0).abs() < 1e-9, "{m}");
    }
    // -q prints nothing
    let (out, _tmp) = loss("loss_vanilla", &["-q"]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        stderr(&out)
    );
}

#[test]
fn config_shows_the_actor_section_with_its_origins() {
    let out = advcalc()
        .current_dir(case("kl_k3"))
        .args([
            "config",
            "--actor",
            "-c",
            "config.yaml",
            "--origins",
            "--set",
            "actor_rollout_ref.actor.clip_ratio_c=2.5",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("    clip_ratio_c: 2.5  # --set\n"), "{text}");
    assert!(
        text.contains("    use_kl_loss: true  # file config.yaml\n"),
        "{text}"
    );
    assert!(
        text.contains("    loss_agg_mode: token-mean  # default\n"),
        "{text}"
    );
    // issue 36: the deprecated global micro-batch key was shown as the per-GPU key's default
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("legacy.yaml");
    std::fs::write(
        &config,
        "actor_rollout_ref:\n  actor:\n    ppo_mini_batch_size: 8\n    ppo_micro_batch_size: 4\n  rollout:\n    n: 4\n",
    )
    .unwrap();
    let out = advcalc()
        .current_dir(tmp.path())
        .args(["config", "--actor", "-c", "legacy.yaml", "--origins"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("    ppo_micro_batch_size: 4  # file legacy.yaml\n"),
        "{text}"
    );
    assert!(
        text.contains("    ppo_micro_batch_size_per_gpu: null  # default\n"),
        "{text}"
    );
    // without --actor, run's view: no actor section
    let out = advcalc()
        .current_dir(case("kl_k3"))
        .args(["config", "-c", "config.yaml"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8(out.stdout)
            .unwrap()
            .contains("  actor:\n")
    );
}

#[test]
fn inspect_flags_what_loss_would() {
    let inspect = |sets: &[&str]| {
        let mut args = vec!["inspect", "-c", "config.yaml", "input.parquet", "--json"];
        for s in sets {
            args.extend(["--set", s]);
        }
        let out = advcalc()
            .current_dir(case("decoupled_is_rs_grpo"))
            .args(&args)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        report.to_string()
    };
    // bypass mode's in-loss rejection under token-mean, with the kept fraction
    let bypass = inspect(&[
        "algorithm.rollout_correction.bypass_mode=true",
        "algorithm.rollout_correction.rollout_is=null",
    ]);
    assert!(
        bypass.contains("bypass_token_mean_divisor") && bypass.contains("verl #4852"),
        "{bypass}"
    );
    let long = inspect(&["actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"]);
    assert!(long.contains("seq_mean_token_mean_length_bias"), "{long}");
    // neither under the file's own configuration (decoupled, token-mean)
    let plain = inspect(&[]);
    assert!(
        !plain.contains("bypass_token_mean_divisor") && !plain.contains("length_bias"),
        "{plain}"
    );
}
