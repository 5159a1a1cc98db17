//! Faults of the object store, end to end: the CLI against moto's `moto_server` through a
//! proxy that injects them (tests/common/fault_proxy.rs). Each failure must be one `error:`
//! line naming the URL and the cause, exit 1, no panic, nothing at OUT and no multipart
//! upload left open; what is retried (throttling, a dropped connection) must succeed when
//! it stops in time and fail within the bounds when it does not.
//!
//! Runs only where `ADVCALC_MOTO` names a `moto_server` executable (tests/common/moto.rs).
#![cfg(feature = "cloud")]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::fault_proxy::{Fault, FaultProxy, Rule};
use common::moto::*;

/// `advcalc` pointed at `proxy` instead of the server, with retries bounded by `retries`.
fn through(s3: &Moto, proxy: &FaultProxy, retries: usize) -> Command {
    let mut command = s3.command();
    command
        .env("AWS_ENDPOINT_URL", proxy.url())
        .env("ADVCALC_OBJECT_MAX_RETRIES", retries.to_string());
    command
}

fn run_grpo(command: &mut Command, input: &str, output: &str) -> Output {
    command
        .args(["run", "-e", "grpo", &url(input), &url(output)])
        .output()
        .unwrap()
}

/// Multipart uploads open in the bucket (moto lists them as S3 does).
fn open_uploads(s3: &mut Moto) -> usize {
    let (status, body) = s3.request("GET", &format!("/{BUCKET}?uploads"), &[]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    String::from_utf8_lossy(&body).matches("<Upload>").count()
}

/// Exit 1, one `error:` line naming `url` and each of `words`, no panic, nothing at the
/// key `out`, no multipart upload open.
fn assert_failed_cleanly(s3: &mut Moto, out: &Output, url: &str, words: &[&str], key: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains(url), "{err}");
    for word in words {
        assert!(errors[0].contains(word), "{word:?} not in: {err}");
    }
    assert_eq!(s3.get(key), None, "something is at {key}");
    assert_eq!(open_uploads(s3), 0, "a multipart upload is left open");
}

/// [`assert_failed_cleanly`] where the error names OUT, the key `out`.
fn out_failed_cleanly(s3: &mut Moto, out: &Output, key: &str, words: &[&str]) {
    assert_failed_cleanly(s3, out, &url(key), words, key);
}

/// A failure that must come within the retry bounds the test set, not after a hang.
fn assert_bounded(start: Instant) {
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
}

/// What `run -e grpo` writes from demo.parquet, straight through the server.
fn expected(s3: &mut Moto) -> Vec<u8> {
    let out = s3.grpo("demo.parquet", "expected.parquet");
    assert!(out.status.success(), "{}", stderr(&out));
    s3.get("expected.parquet").unwrap()
}

#[test]
fn throttling_is_retried_and_bounded() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());
    let want = expected(&mut s3);

    // 3 SlowDowns on IN, then it passes: the default bounds retry through them
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::times("", "demo.parquet", 3, Fault::SlowDown)],
    );
    let mut command = s3.command();
    command.env("AWS_ENDPOINT_URL", proxy.url());
    let out = run_grpo(&mut command, "demo.parquet", "out.parquet");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(proxy.count(&Fault::SlowDown), 3);
    assert_eq!(decoded(s3.get("out.parquet").unwrap()), decoded(want));
    drop(proxy);

    // throttled for good: 1 try and 2 retries of the first request, then one error line
    let proxy = FaultProxy::start(s3.port, vec![Rule::always("", "", Fault::SlowDown)]);
    let start = Instant::now();
    let out = run_grpo(&mut through(&s3, &proxy, 2), "demo.parquet", "out2.parquet");
    assert_bounded(start);
    out_failed_cleanly(
        &mut s3,
        &out,
        "out2.parquet",
        &["slow down", "after 2 retries"],
    );
    assert_eq!(proxy.count(&Fault::SlowDown), 3);
    drop(proxy);

    // only OUT's PUT throttled: the reads pass, the write fails, nothing at OUT
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::always("PUT", "out3.parquet", Fault::SlowDown)],
    );
    let out = run_grpo(&mut through(&s3, &proxy, 1), "demo.parquet", "out3.parquet");
    out_failed_cleanly(&mut s3, &out, "out3.parquet", &["slow down"]);
}

#[test]
fn access_denied_names_the_url() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());

    // every request denied: the first one (OUT's existence check) is named
    let proxy = FaultProxy::start(s3.port, vec![Rule::always("", "", Fault::AccessDenied)]);
    let out = run_grpo(&mut through(&s3, &proxy, 2), "demo.parquet", "out.parquet");
    out_failed_cleanly(&mut s3, &out, "out.parquet", &["access denied"]);
    // not retried
    assert_eq!(proxy.count(&Fault::AccessDenied), 1);
    drop(proxy);

    // reading IN denied (its GET, with a body)
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::always("GET", "demo.parquet", Fault::AccessDenied)],
    );
    let out = through(&s3, &proxy, 2)
        .args(["inspect", &url("demo.parquet")])
        .output()
        .unwrap();
    assert_failed_cleanly(
        &mut s3,
        &out,
        &url("demo.parquet"),
        &["access denied"],
        "out.parquet",
    );
    drop(proxy);

    // writing OUT denied
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::always("PUT", "out.parquet", Fault::AccessDenied)],
    );
    let out = run_grpo(&mut through(&s3, &proxy, 2), "demo.parquet", "out.parquet");
    out_failed_cleanly(&mut s3, &out, "out.parquet", &["access denied"]);
}

#[test]
fn a_missing_bucket_or_key_is_named() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());

    let out = s3.grpo("nope.parquet", "out.parquet");
    assert_failed_cleanly(
        &mut s3,
        &out,
        &url("nope.parquet"),
        &["no such object"],
        "out.parquet",
    );

    // OUT in a bucket that does not exist
    let missing = "s3://advcalc-no-such-bucket/out.parquet";
    let out = s3.advcalc(&["run", "-e", "grpo", &url("demo.parquet"), missing]);
    assert_failed_cleanly(&mut s3, &out, missing, &["no such bucket"], "out.parquet");

    // IN in a bucket that does not exist
    let missing = "s3://advcalc-no-such-bucket/demo.parquet";
    let out = s3.advcalc(&["run", "-e", "grpo", missing, &url("out.parquet")]);
    assert_failed_cleanly(&mut s3, &out, missing, &["no such bucket"], "out.parquet");
    let out = s3.advcalc(&["inspect", missing]);
    assert_failed_cleanly(&mut s3, &out, missing, &["no such bucket"], "out.parquet");
}

#[test]
fn a_wrong_region_says_which_one_to_set() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());

    // S3's answer to a request for a bucket of another region: 301 without a Location
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::always(
            "",
            "",
            Fault::PermanentRedirect("eu-west-1".into()),
        )],
    );
    let out = run_grpo(&mut through(&s3, &proxy, 2), "demo.parquet", "out.parquet");
    out_failed_cleanly(&mut s3, &out, "out.parquet", &["wrong region"]);
    assert!(stderr(&out).contains("AWS_REGION"), "{}", stderr(&out));
    drop(proxy);

    // a signature for the wrong region, the server naming the right one
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::always(
            "GET",
            "demo.parquet",
            Fault::AuthorizationHeaderMalformed("eu-west-1".into()),
        )],
    );
    let out = through(&s3, &proxy, 2)
        .args(["inspect", &url("demo.parquet")])
        .output()
        .unwrap();
    assert_failed_cleanly(
        &mut s3,
        &out,
        &url("demo.parquet"),
        &["wrong region", "eu-west-1"],
        "out.parquet",
    );
    assert!(
        stderr(&out).contains("hint: set AWS_REGION=eu-west-1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_connection_dropped_mid_read_is_resumed_or_fails_cleanly() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());
    let want = expected(&mut s3);

    // dropped once after 1 kB of a read of IN (the footer's): the read resumes from there
    let drop_read = Fault::DropResponseAfter(1_000);
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::times("GET", "demo.parquet", 1, drop_read.clone())],
    );
    let out = run_grpo(&mut through(&s3, &proxy, 10), "demo.parquet", "out.parquet");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(proxy.count(&drop_read), 1);
    assert_eq!(decoded(s3.get("out.parquet").unwrap()), decoded(want));
    drop(proxy);

    // dropped every time: one error naming IN, nothing at OUT
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::always("GET", "demo.parquet", drop_read.clone())],
    );
    let out = run_grpo(&mut through(&s3, &proxy, 2), "demo.parquet", "out2.parquet");
    assert_failed_cleanly(
        &mut s3,
        &out,
        &url("demo.parquet"),
        &["connection was dropped"],
        "out2.parquet",
    );
    // the first GET and 2 resumed ones
    assert_eq!(proxy.count(&drop_read), 3, "{:?}", proxy.seen());
    let out = through(&s3, &proxy, 2)
        .args(["inspect", &url("demo.parquet")])
        .output()
        .unwrap();
    assert_failed_cleanly(
        &mut s3,
        &out,
        &url("demo.parquet"),
        &["connection was dropped"],
        "out2.parquet",
    );
}

#[test]
fn a_connection_dropped_mid_write_leaves_nothing() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());
    let want = expected(&mut s3);
    let drop_write = Fault::DropRequestAfter(50_000);

    // one PUT: dropped every time
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::always("PUT", "out.parquet", drop_write.clone())],
    );
    let out = run_grpo(&mut through(&s3, &proxy, 2), "demo.parquet", "out.parquet");
    out_failed_cleanly(&mut s3, &out, "out.parquet", &["connection was dropped"]);
    drop(proxy);

    // a multipart upload (forced by a 0-byte threshold), its part dropped every time: the
    // upload is aborted
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::always("PUT", "partNumber=", drop_write.clone())],
    );
    let out = run_grpo(
        through(&s3, &proxy, 2).env("ADVCALC_OBJECT_PUT_MAX", "0"),
        "demo.parquet",
        "out.parquet",
    );
    out_failed_cleanly(&mut s3, &out, "out.parquet", &["connection was dropped"]);
    assert!(proxy.count(&drop_write) >= 1);
    assert!(
        proxy
            .seen()
            .iter()
            .any(|s| s.method == "DELETE" && s.target.contains("uploadId=")),
        "no abort: {:?}",
        proxy.seen()
    );
    drop(proxy);

    // its part dropped once: retried, the upload completes
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::times("PUT", "partNumber=", 1, drop_write.clone())],
    );
    let out = run_grpo(
        through(&s3, &proxy, 10).env("ADVCALC_OBJECT_PUT_MAX", "0"),
        "demo.parquet",
        "out.parquet",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(proxy.count(&drop_write), 1);
    assert_eq!(decoded(s3.get("out.parquet").unwrap()), decoded(want));
    assert_eq!(open_uploads(&mut s3), 0);
}

#[test]
fn a_server_that_does_not_answer_times_out() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());
    let proxy = FaultProxy::start(s3.port, vec![Rule::always("", "", Fault::Stall)]);
    let start = Instant::now();
    let out = run_grpo(
        through(&s3, &proxy, 1).env("AWS_TIMEOUT", "1s"),
        "demo.parquet",
        "out.parquet",
    );
    assert_bounded(start);
    out_failed_cleanly(&mut s3, &out, "out.parquet", &["timed out"]);
}

/// `advcalc` against the server with no credentials of the caller's: no AWS key variables,
/// no profile files (HOME an empty directory).
fn without_credentials(s3: &Moto, home: &std::path::Path) -> Command {
    let mut command = s3.command();
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_EC2_METADATA_DISABLED",
        "AWS_METADATA_ENDPOINT",
    ] {
        command.env_remove(var);
    }
    command.env("HOME", home);
    command
}

#[test]
fn no_credentials_at_all_says_where_they_are_looked_for() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());
    let home = tempfile::tempdir().unwrap();

    // the instance metadata service disabled, as the AWS SDKs read it: at once
    let start = Instant::now();
    let out = run_grpo(
        without_credentials(&s3, home.path()).env("AWS_EC2_METADATA_DISABLED", "true"),
        "demo.parquet",
        "out.parquet",
    );
    assert_bounded(start);
    out_failed_cleanly(&mut s3, &out, "out.parquet", &["no credentials"]);
    let err = stderr(&out);
    assert!(err.contains("hint: set AWS_ACCESS_KEY_ID"), "{err}");
    assert!(err.contains("AWS_PROFILE"), "{err}");
    assert!(err.contains("~/.aws/credentials"), "{err}");

    // asked of an instance metadata service that is not there (a closed port here)
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let start = Instant::now();
    let out = run_grpo(
        without_credentials(&s3, home.path())
            .env("AWS_METADATA_ENDPOINT", endpoint)
            .env("ADVCALC_OBJECT_MAX_RETRIES", "1"),
        "demo.parquet",
        "out.parquet",
    );
    assert_bounded(start);
    out_failed_cleanly(&mut s3, &out, "out.parquet", &["no credentials"]);
    assert!(
        stderr(&out).contains("hint: set AWS_ACCESS_KEY_ID"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_profile_s_static_keys_and_region_are_used() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());
    let want = expected(&mut s3);
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".aws")).unwrap();
    std::fs::write(
        home.path().join(".aws/credentials"),
        "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join(".aws/config"),
        "[default]\nregion = us-east-1\n[profile corp]\nsso_session = corp\nregion = us-east-1\n",
    )
    .unwrap();

    let out = run_grpo(
        without_credentials(&s3, home.path())
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            .env("AWS_EC2_METADATA_DISABLED", "true"),
        "demo.parquet",
        "out.parquet",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(decoded(s3.get("out.parquet").unwrap()), decoded(want));

    // a profile whose credentials come from SSO, asked for: a usage error saying what to do
    let out = run_grpo(
        without_credentials(&s3, home.path()).env("AWS_PROFILE", "corp"),
        "demo.parquet",
        "out2.parquet",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&url("out2.parquet")), "{err}");
    assert!(err.contains("sso_session"), "{err}");
    assert!(err.contains("aws configure export-credentials"), "{err}");
    assert_eq!(s3.get("out2.parquet"), None);
}

#[test]
fn resume_that_cannot_read_an_existing_output_says_so() {
    let Some(mut s3) = moto() else { return };
    for step in ["dumps/step=1.parquet", "dumps/step=2.parquet"] {
        s3.put(step, &demo());
    }
    let out = s3.grpo("dumps/", "adv/");
    assert!(out.status.success(), "{}", stderr(&out));
    let before = s3.get("adv/step=1.parquet");

    // the outputs' footers cannot be read: not "not an output of advcalc run" (a usage
    // error telling the user to delete it), but the read that failed, exit 1
    let proxy = FaultProxy::start(
        s3.port,
        vec![Rule::always("GET", "adv/step", Fault::AccessDenied)],
    );
    let start = Instant::now();
    let out = through(&s3, &proxy, 2)
        .args(resume_args("dumps/", "adv/"))
        .output()
        .unwrap();
    assert_bounded(start);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains(&url("adv/step=")), "{err}");
    assert!(errors[0].contains("cannot read it"), "{err}");
    assert!(err.contains("access denied"), "{err}");
    assert!(!err.contains("not an output"), "{err}");
    assert_eq!(
        s3.get("adv/step=1.parquet"),
        before,
        "the output is untouched"
    );

    // readable again: both kept
    drop(proxy);
    assert_kept(&s3.resume("dumps/", "adv/"), 2);
}
