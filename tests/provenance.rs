//! OUT records how it was made (advcalc.* key-value metadata), `inspect` shows it, and the
//! recorded configuration reproduces the run.

mod common;

use std::path::Path;

use common::{advcalc, lists_f32, read_parquet};

fn inspect_json(path: &Path) -> serde_json::Value {
    let out = advcalc()
        .arg("inspect")
        .arg("--json")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn out_records_its_configuration_and_the_record_reproduces_it() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases/chain_gae");
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("first.parquet");
    let status = advcalc()
        .current_dir(&case)
        .args(["run", "--quiet", "--config", "config.yaml", "input.parquet"])
        .arg(&first)
        .status()
        .unwrap();
    assert!(status.success());

    let report = inspect_json(&first);
    let p = &report["provenance"];
    assert_eq!(p["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(p["estimator"], "gae");
    assert_eq!(p["convention"], "verl");
    assert_eq!(p["input"], "input.parquet");
    let size = std::fs::metadata(case.join("input.parquet")).unwrap().len();
    assert_eq!(p["input_bytes"], size.to_string());
    let rows = read_parquet(&case.join("input.parquet")).num_rows();
    assert_eq!(p["input_rows"], rows.to_string());
    let config = p["config"].as_str().unwrap();
    assert!(config.contains("adv_estimator: gae"), "{config}");

    // the recorded configuration alone gives the same numbers
    let recorded = tmp.path().join("recorded.yaml");
    std::fs::write(&recorded, config).unwrap();
    let second = tmp.path().join("second.parquet");
    let status = advcalc()
        .current_dir(&case)
        .args(["run", "--quiet", "--config"])
        .arg(&recorded)
        .arg("input.parquet")
        .arg(&second)
        .status()
        .unwrap();
    assert!(status.success());
    let (a, b) = (read_parquet(&first), read_parquet(&second));
    for name in [
        "advantages",
        "returns",
        "token_level_rewards",
        "response_mask",
    ] {
        assert_eq!(lists_f32(&a, name), lists_f32(&b, name), "{name}");
    }

    // a file advcalc did not write has no provenance
    let input = inspect_json(&case.join("input.parquet"));
    assert_eq!(input["provenance"], serde_json::json!({}));
}
