//! The CLI on `s3://` URLs against a real S3-compatible server: moto's `moto_server`,
//! started here on 127.0.0.1 and stopped by its PID (also when a test panics).
//!
//! Runs only where `ADVCALC_MOTO` names a `moto_server` executable (a venv with
//! `moto[s3]==5.2.5 flask flask-cors`); otherwise each test prints why it is skipped and
//! passes (see tests/common/moto.rs).
#![cfg(feature = "cloud")]

use std::path::Path;

mod common;
use common::moto::*;

#[test]
fn run_reads_and_writes_s3_as_it_does_local_files() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());

    let out = s3.grpo("demo.parquet", "out.parquet");
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local.parquet");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let out = s3.advcalc(&[
        "run",
        "-e",
        "grpo",
        fixture.to_str().unwrap(),
        local.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let remote = s3.get("out.parquet").expect("OUT was written");
    assert_eq!(
        decoded(remote.clone()),
        decoded(std::fs::read(&local).unwrap())
    );

    // OUT records IN's size and the ETag it was read at
    let out = s3.advcalc(&["inspect", "--json", &url("out.parquet")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("input_etag"), "{text}");
    assert!(
        text.contains(&format!("\"{}\"", demo().len())),
        "input_bytes: {text}"
    );

    // inspect on IN and on OUT, the URL named
    for key in ["demo.parquet", "out.parquet"] {
        let out = s3.advcalc(&["inspect", &url(key)]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains(&url(key)));
    }

    // compare and report read an object IN too
    let out = s3.advcalc(&["compare", "-e", "grpo", "-e", "rloo", &url("demo.parquet")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&url("demo.parquet")));
    let report = dir.path().join("report.html");
    let out = s3.advcalc(&[
        "report",
        "-e",
        "grpo",
        &url("demo.parquet"),
        "-o",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(report.is_file());

    // an existing OUT without --force: a usage error, OUT as it was
    let out = s3.advcalc(&[
        "run",
        "-e",
        "rloo",
        &url("demo.parquet"),
        &url("out.parquet"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(s3.get("out.parquet").unwrap(), remote);
    // with --force it is replaced
    let out = s3.advcalc(&[
        "run",
        "-e",
        "rloo",
        "--force",
        &url("demo.parquet"),
        &url("out.parquet"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_ne!(s3.get("out.parquet").unwrap(), remote);

    // an Arrow IPC OUT is exported from the finished result, then put
    let out = s3.grpo("demo.parquet", "out.arrow");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(&s3.get("out.arrow").unwrap()[..6], b"ARROW1");
}

#[test]
fn a_missing_object_is_a_data_error_naming_it_and_nothing_is_written() {
    let Some(mut s3) = moto() else { return };
    let out = s3.grpo("nope.parquet", "never.parquet");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&url("nope.parquet")),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("no such object"), "{}", stderr(&out));
    assert_eq!(s3.get("never.parquet"), None);

    let out = s3.advcalc(&["inspect", &url("nope.parquet")]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&url("nope.parquet")),
        "{}",
        stderr(&out)
    );

    // IN that is not Parquet: a data error naming the URL, nothing at OUT
    s3.put("junk.parquet", b"not parquet at all");
    let out = s3.grpo("junk.parquet", "never.parquet");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&url("junk.parquet")),
        "{}",
        stderr(&out)
    );
    assert_eq!(s3.get("never.parquet"), None);

    // a bucket, not an object: a usage error
    let out = s3.advcalc(&["inspect", &format!("s3://{BUCKET}/")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn config_files_reports_and_metrics_can_be_objects() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());
    s3.put(
        "trainer.yaml",
        b"algorithm:\n  adv_estimator: rloo\n  norm_adv_by_std_in_grpo: false\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let local_yaml = dir.path().join("trainer.yaml");
    std::fs::write(&local_yaml, s3.get("trainer.yaml").unwrap()).unwrap();
    let local_metrics = dir.path().join("metrics.json");
    let local_out = dir.path().join("out.parquet");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");

    // --config and --metrics as objects give what local files give
    let out = s3.advcalc(&[
        "run",
        "-c",
        &url("trainer.yaml"),
        "--metrics",
        &url("metrics.json"),
        &url("demo.parquet"),
        &url("out.parquet"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("rloo"), "{}", stderr(&out));
    let out = s3.advcalc(&[
        "run",
        "-c",
        local_yaml.to_str().unwrap(),
        "--metrics",
        local_metrics.to_str().unwrap(),
        fixture.to_str().unwrap(),
        local_out.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        decoded(s3.get("out.parquet").unwrap()),
        decoded(std::fs::read(&local_out).unwrap())
    );
    assert_eq!(
        s3.get("metrics.json").unwrap(),
        std::fs::read(&local_metrics).unwrap()
    );

    // a missing config object: an error naming it, nothing written
    let out = s3.advcalc(&[
        "run",
        "-c",
        &url("none.yaml"),
        &url("demo.parquet"),
        &url("never.parquet"),
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains(&url("none.yaml")), "{}", stderr(&out));
    assert_eq!(s3.get("never.parquet"), None);

    // report's page as an object: the same page as a local report, not clobbered
    let out = s3.advcalc(&[
        "report",
        "-e",
        "grpo",
        &url("demo.parquet"),
        "-o",
        &url("r.html"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = s3.get("r.html").expect("the report was written");
    assert!(page.starts_with(b"<!"), "an HTML page");
    let out = s3.advcalc(&[
        "report",
        "-e",
        "grpo",
        &url("demo.parquet"),
        "-o",
        &url("r.html"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert_eq!(s3.get("r.html").unwrap(), page);
}

#[test]
fn a_trainer_dump_object_is_told_by_its_name() {
    let Some(mut s3) = moto() else { return };
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/trainers/dumps/nemo-rl/run1/exp_001/train_data_step2.jsonl");
    s3.put(
        "nemo/train_data_step2.jsonl",
        &std::fs::read(&file).unwrap(),
    );
    // what inspect says of the local file, with the URL in place of its path
    let local = s3.advcalc(&["inspect", "--json", file.to_str().unwrap()]);
    assert!(local.status.success(), "{}", stderr(&local));
    let remote = s3.advcalc(&["inspect", "--json", &url("nemo/train_data_step2.jsonl")]);
    assert!(remote.status.success(), "{}", stderr(&remote));
    let want = String::from_utf8_lossy(&local.stdout)
        .replace(file.to_str().unwrap(), &url("nemo/train_data_step2.jsonl"));
    assert_eq!(String::from_utf8_lossy(&remote.stdout), want);
    assert!(want.contains("logged_advantages"), "{want}");
}

/// A single TRL completions file as an object (`completions_NNNNN.parquet`, Parquet by its
/// extension) is TRL's dump, told by its key's file name as a local file is: read as the
/// local file reads, not as a plain Parquet input without `uid`.
#[test]
fn a_trl_completions_object_is_read_as_trl() {
    let Some(mut s3) = moto() else { return };
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/trainers/dumps/trl/run1/completions/completions_00002.parquet");
    let key = "trl/completions/completions_00002.parquet";
    s3.put(key, &std::fs::read(&file).unwrap());
    let weights = "algorithm.trl.reward_weights=[1.0,0.5]";
    let local = s3.advcalc(&[
        "inspect",
        "--json",
        "--set",
        weights,
        file.to_str().unwrap(),
    ]);
    assert!(local.status.success(), "{}", stderr(&local));
    let remote = s3.advcalc(&["inspect", "--json", "--set", weights, &url(key)]);
    assert!(remote.status.success(), "{}", stderr(&remote));
    let want = String::from_utf8_lossy(&local.stdout).replace(file.to_str().unwrap(), &url(key));
    assert_eq!(String::from_utf8_lossy(&remote.stdout), want);
    assert!(want.contains("logged_advantages"), "{want}");
    // and run writes TRL's advantages under TRL's convention
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.parquet");
    let done = s3.advcalc(&["run", "--set", weights, &url(key), out.to_str().unwrap()]);
    assert!(done.status.success(), "{}", stderr(&done));
    assert!(stderr(&done).contains("TRL"), "{}", stderr(&done));
}

#[test]
fn a_report_over_its_own_input_object_is_refused() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());
    // the same object however the scheme is spelled, even with --force
    for out in [
        url("demo.parquet"),
        url("demo.parquet").replace("s3://", "S3A://"),
    ] {
        let args = [
            "report",
            "-f",
            "-e",
            "grpo",
            &url("demo.parquet"),
            "-o",
            &out,
        ];
        let got = s3.advcalc(&args);
        assert_eq!(got.status.code(), Some(2), "{}", stderr(&got));
        assert!(
            stderr(&got).contains("overwrite its input"),
            "{}",
            stderr(&got)
        );
        assert_eq!(s3.get("demo.parquet").unwrap(), demo());
    }
}

/// `--metrics` never replaces an input object (issue #36: `--metrics s3://bkt/dumps/step=0.parquet`
/// replaced one), however the scheme is spelled, nor lands inside a dataset prefix IN, nor
/// replaces an existing object without `--force`.
#[test]
fn metrics_never_replaces_an_input_object() {
    let Some(mut s3) = moto() else { return };
    s3.put("dumps/step=0.parquet", &demo());
    s3.put("dumps/step=1.parquet", &demo());
    s3.put("m.json", b"earlier");
    let file = url("dumps/step=0.parquet");
    for (input, metrics, says) in [
        (file.clone(), file.clone(), "is IN"),
        (file.clone(), file.replace("s3://", "S3A://"), "is IN"),
        (url("dumps/"), url("dumps/step=0.parquet"), "lies inside IN"),
        (url("dumps/"), url("dumps/step=9.parquet"), "lies inside IN"),
        (file.clone(), url("m.json"), "already exists"),
    ] {
        let out = s3.advcalc(&[
            "run",
            "-e",
            "grpo",
            &input,
            &url("adv/"),
            "--metrics",
            &metrics,
        ]);
        assert_eq!(out.status.code(), Some(2), "{metrics}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{metrics}: {}", stderr(&out));
    }
    assert_eq!(s3.get("dumps/step=0.parquet").unwrap(), demo());
    assert_eq!(s3.get("dumps/step=9.parquet"), None);
    assert_eq!(s3.get("m.json").unwrap(), b"earlier");
    assert!(s3.keys("adv/").is_empty());
}
