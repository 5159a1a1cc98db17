//! `advcalc config` through the real binary: YAML and JSON, origins, the failures,
//! and that its YAML loads back (as `run --config` would read it) to the same values.

use std::process::{Command, Output};

fn advcalc(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_advcalc"))
        .current_dir(dir)
        .args(args)
        .env_remove("ADVCALC_TEST_N")
        .output()
        .expect("run advcalc")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn shows_the_resolved_configuration_with_origins() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        "actor_rollout_ref:\n  rollout:\n    n: ${oc.decode:${oc.env:ADVCALC_TEST_N,'8'}}\nalgorithm:\n  gamma: ${algorithm.lam}\n  lam: 0.95\n  use_kl_in_reward: yes\n  kl_ctrl:\n    kl_coef: 1e-3\n",
    )
    .unwrap();
    let out = advcalc(
        &[
            "config",
            "-c",
            "c.yaml",
            "-e",
            "grpo",
            "--set",
            "kl_ctrl.horizon=1_000",
            "--origins",
        ],
        dir.path(),
    );
    let yaml = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for line in [
        "  gamma: 0.95  # file c.yaml, from ${algorithm.lam}\n",
        "  adv_estimator: grpo  # -e\n",
        "  use_kl_in_reward: true  # file c.yaml\n",
        "    kl_coef: 0.001  # file c.yaml\n",
        "    horizon: 1000  # --set\n",
        "    target_kl: 0.1  # default\n",
        "    n: 8  # file c.yaml\n",
    ] {
        assert!(yaml.contains(line), "`{line}` not in:\n{yaml}");
    }
    // the printed YAML is a config that means the same
    std::fs::write(dir.path().join("shown.yaml"), &yaml).unwrap();
    let again = advcalc(&["config", "-c", "shown.yaml"], dir.path());
    let plain = advcalc(
        &[
            "config",
            "-c",
            "c.yaml",
            "-e",
            "grpo",
            "--set",
            "kl_ctrl.horizon=1_000",
        ],
        dir.path(),
    );
    assert_eq!(text(&again.stdout), text(&plain.stdout));

    let out = advcalc(
        &["config", "-c", "c.yaml", "--json", "--origins"],
        dir.path(),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["algorithm"]["gamma"], 0.95);
    assert_eq!(json["actor_rollout_ref"]["rollout"]["n"], 8);
    assert_eq!(json["origins"]["algorithm.gamma"]["source"], "file");
    assert_eq!(
        json["origins"]["algorithm.gamma"]["interpolation"],
        "${algorithm.lam}"
    );
    assert_eq!(json["origins"]["algorithm.lam"]["file"], "c.yaml");
    assert_eq!(json["origins"]["algorithm.kl_penalty"]["source"], "default");
}

#[test]
fn configuration_errors_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("m.yaml"),
        "defaults:\n  - ppo_trainer\n  - override model_engine: megatron\n  - _self_\n",
    )
    .unwrap();
    let out = advcalc(&["config", "-c", "m.yaml"], dir.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("error: m.yaml: a Hydra composition"),
        "{err}"
    );
    assert!(
        lines[1].starts_with("hint: pass the composed config"),
        "{err}"
    );
    std::fs::write(
        dir.path().join("g.yaml"),
        "algorithm:\n  gamma: ${algorithm.lamb}\n",
    )
    .unwrap();
    let out = advcalc(
        &["run", "-c", "g.yaml", "in.parquet", "out.parquet"],
        dir.path(),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: algorithm.gamma (in g.yaml): cannot resolve the interpolation: interpolation key `algorithm.lamb` not found"),
        "{err}"
    );
}

#[test]
fn help_documents_the_command() {
    let out = advcalc(&["config", "--help"], std::path::Path::new("."));
    let help = text(&out.stdout);
    for needle in ["--origins", "--json", "--set", "oc.env", "YAML 1.1"] {
        assert!(help.contains(needle), "`{needle}` not in:\n{help}");
    }
    let out = advcalc(&["--help"], std::path::Path::new("."));
    assert!(text(&out.stdout).contains("advcalc config"));
}

#[test]
fn a_trainer_file_with_a_defaults_list_gets_a_note_naming_the_generated_file() {
    // verl's own ppo_trainer.yaml: an `algorithm:` section beside a Hydra defaults list that
    // composes in rollout_correction and the rollout section, which advcalc does not follow
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/verl");
    let out = advcalc(&["config", "-c", "ppo_trainer.yaml"], &root);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let note = err
        .lines()
        .find(|l| l.starts_with("note: ppo_trainer.yaml has a Hydra `defaults:` list"))
        .unwrap_or_else(|| panic!("no note: {err}"));
    assert!(
        note.contains("algorithm@algorithm.rollout_correction: rollout_correction"),
        "{note}"
    );
    assert!(
        note.ends_with("pass _generated_ppo_trainer.yaml (beside it)"),
        "{note}"
    );
    // the generated file itself composes nothing: no note
    let out = advcalc(&["config", "-c", "_generated_ppo_trainer.yaml"], &root);
    assert!(
        !text(&out.stderr).contains("defaults:"),
        "{}",
        text(&out.stderr)
    );
    // without the generated file beside it, the note says where verl keeps it
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        root.join("ppo_trainer.yaml"),
        dir.path().join("ppo_trainer.yaml"),
    )
    .unwrap();
    let out = advcalc(&["config", "-c", "ppo_trainer.yaml"], dir.path());
    assert!(
        text(&out.stderr)
            .contains("verl's `_generated_ppo_trainer.yaml` (in verl/trainer/config/)"),
        "{}",
        text(&out.stderr)
    );
}
