//! `advcalc view` over HTTP, as a browser meets it: the real binary started on the shipped
//! dumps, its printed URL, then plain HTTP/1.1 requests. The numbers a row's endpoint serves
//! are checked against what `advcalc run` and `advcalc loss` write for that row; bad indices
//! get a 404 that says why; a request without the token, with a wrong one or with another
//! Host gets a 403; `--follow` shows a step written while the view runs.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef, RecordBatch};
use serde_json::Value;

use common::{advcalc, lists_f32, read_parquet, run_in, stderr, write_parquet};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet")
}

/// A running `advcalc view`, killed when dropped.
struct View {
    child: Child,
    /// `127.0.0.1:PORT`
    host: String,
    token: String,
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `advcalc view -q ARGS` in `dir` and read the URL it prints first.
fn start_view(dir: &Path, args: &[&str]) -> View {
    let mut all = vec!["view", "-q"];
    all.extend(args);
    let mut child = advcalc()
        .current_dir(dir)
        .args(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim();
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("a URL first: {url:?}"));
    let (host, token) = rest.split_once("/?token=").expect("host/?token=");
    View {
        child,
        host: host.to_string(),
        token: token.to_string(),
    }
}

/// Start `advcalc view ARGS` and wait until its first snapshot is built.
fn view(dir: &Path, args: &[&str]) -> View {
    let v = start_view(dir, args);
    let start = Instant::now();
    loop {
        let (status, body) = v.get("/api/version");
        assert_eq!(status, 200, "{body}");
        let state = serde_json::from_str::<Value>(&body).unwrap()["state"].clone();
        if state != "reading" {
            assert_eq!(state, "ready", "{body}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    v
}

/// One HTTP/1.1 request; (status, body).
fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += "\r\n";
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_string(), body.to_string())
}

impl View {
    /// GET with the token and the right Host.
    fn get(&self, path: &str) -> (u16, String) {
        let sep = if path.contains('?') { '&' } else { '?' };
        let (status, _, body) = request(
            &self.host,
            "GET",
            &format!("{path}{sep}token={}", self.token),
            &[("Host", &self.host)],
        );
        (status, body)
    }

    fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

fn strings_of(batch: &RecordBatch, name: &str) -> Vec<String> {
    let c = batch.column_by_name(name).unwrap();
    let a = c
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .unwrap();
    (0..a.len()).map(|i| a.value(i).to_string()).collect()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().map_or(f32::NAN, |x| x as f32))
        .collect()
}

fn stepped(dir: &Path) -> PathBuf {
    common::stepped_demo(dir)
}

const CORRECTION: [&str; 8] = common::DEMO_CORRECTION;

#[test]
fn a_row_s_tokens_are_the_numbers_advcalc_run_writes_for_that_row() {
    let dir = tempfile::tempdir().unwrap();
    let input = stepped(dir.path());
    let input = input.to_str().unwrap();
    for (estimator, extra) in [("grpo", &CORRECTION[..]), ("gae", &[][..])] {
        let mut args = vec!["run", "-q", "-f", "-e", estimator, input, "out.parquet"];
        args.extend(extra);
        let out = run_in(dir.path(), &args);
        assert!(out.status.success(), "{}", stderr(&out));
        let written = read_parquet(&dir.path().join("out.parquet"));
        let advantages = lists_f32(&written, "advantages");
        let mask = lists_f32(&written, "response_mask");
        let mut vargs = vec!["-e", estimator, input];
        vargs.extend(extra);
        let v = view(dir.path(), &vargs);
        let overview = v.json("/api/overview");
        assert_eq!(overview["rows"], 256);
        assert_eq!(overview["steps"].as_array().unwrap().len(), 2);
        // rows in every row group, the first and last of a group of 50 among them
        for row in [0usize, 3, 49, 50, 127, 128, 200, 255] {
            let r = v.json(&format!("/api/rows/{row}"));
            let served = floats(&r["signals"][format!("advantage:{estimator}")]);
            assert_eq!(served, advantages[row], "{estimator} row {row}: advantages");
            if estimator == "grpo" {
                let weights = lists_f32(&written, "rollout_is_weights");
                assert_eq!(
                    floats(&r["signals"]["is_weight:grpo"]),
                    weights[row],
                    "row {row}: IS weights"
                );
                // rejected tokens are the ones whose mask run wrote as 0 where IN had 1
                let before = floats(&r["mask"]);
                let rejected = floats(&r["signals"]["rejected:grpo"]);
                for t in 0..before.len() {
                    let expect = f32::from(before[t] != 0.0 && mask[row][t] == 0.0);
                    assert_eq!(rejected[t], expect, "row {row} token {t}: rejected");
                }
            } else {
                let returns = lists_f32(&written, "returns");
                assert_eq!(floats(&r["signals"]["returns"]), returns[row], "row {row}");
            }
            assert_eq!(r["meta"]["step"], if row < 128 { 1 } else { 2 });
        }
    }
}

#[test]
fn gradient_weights_are_the_ones_advcalc_loss_writes() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/loss/cases/adv_grpo");
    let dir = tempfile::tempdir().unwrap();
    let (config, input) = (case.join("config.yaml"), case.join("input.parquet"));
    let (config, input) = (config.to_str().unwrap(), input.to_str().unwrap());
    let out = run_in(
        dir.path(),
        &["loss", "-q", "-f", "-c", config, input, "loss.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let written = read_parquet(&dir.path().join("loss.parquet"));
    let weights = lists_f32(&written, "grad_weights");
    let v = view(dir.path(), &["-c", config, input]);
    let overview = v.json("/api/overview");
    let rows = overview["rows"].as_u64().unwrap() as usize;
    assert_eq!(rows, written.num_rows());
    for (row, expected) in weights.iter().enumerate() {
        let r = v.json(&format!("/api/rows/{row}"));
        assert_eq!(&floats(&r["signals"]["grad_weight"]), expected, "row {row}");
    }
    // without an actor section there is nothing to replay, and the overview says why
    let v = view(dir.path(), &["-e", "grpo", input]);
    let o = v.json("/api/overview");
    assert!(
        o["notes"].to_string().contains("no gradient weights"),
        "{}",
        o["notes"]
    );
    assert!(
        v.json("/api/rows/0")["signals"]
            .get("grad_weight")
            .is_none()
    );
}

#[test]
fn steps_groups_and_rows_agree_with_the_dump() {
    let dir = tempfile::tempdir().unwrap();
    let input = stepped(dir.path());
    let v = view(dir.path(), &["-e", "grpo,rloo", input.to_str().unwrap()]);
    let o = v.json("/api/overview");
    assert_eq!(o["labels"], serde_json::json!(["grpo", "rloo"]));
    let step = v.json("/api/steps/0");
    assert_eq!(step["step"], 1);
    // the demo: 32 prompts of 8 rows, shuffled; the first 128 rows hold some of each prompt's
    let uids = strings_of(&read_parquet(&input), "uid");
    let mut first: Vec<&str> = uids[..128].iter().map(String::as_str).collect();
    first.sort_unstable();
    first.dedup();
    let groups = step["groups"].as_array().unwrap();
    assert_eq!(groups.len(), first.len());
    let sizes: u64 = groups.iter().map(|g| g["size"].as_u64().unwrap()).sum();
    assert_eq!(sizes, 128);
    let biggest = groups
        .iter()
        .max_by_key(|g| g["size"].as_u64().unwrap())
        .unwrap();
    let g = v.json(&format!("/api/groups/{}", biggest["index"]));
    let rows = g["rows"].as_array().unwrap();
    assert_eq!(rows.len() as u64, biggest["size"].as_u64().unwrap());
    for r in rows {
        let row = r["row"].as_u64().unwrap() as usize;
        assert!(row < 128 && uids[row] == g["uid"].as_str().unwrap(), "{r}");
    }
    // GRPO's advantages of a group sum to 0 (each row's tokens share its advantage)
    let sum: f64 = rows
        .iter()
        .map(|r| r["advantages"][0].as_f64().unwrap())
        .sum();
    assert!(sum.abs() < 1e-5, "{sum}");
    // a row's mean advantage in the group table is its tokens' mean
    let r0 = rows[0]["row"].as_u64().unwrap();
    let tokens = v.json(&format!("/api/rows/{r0}"));
    let adv = floats(&tokens["signals"]["advantage:grpo"]);
    let mask = floats(&tokens["mask"]);
    let valid: Vec<f32> = adv
        .iter()
        .zip(&mask)
        .filter(|(_, m)| **m != 0.0)
        .map(|(a, _)| *a)
        .collect();
    let mean = valid.iter().map(|&a| a as f64).sum::<f64>() / valid.len() as f64;
    assert!((mean - rows[0]["advantages"][0].as_f64().unwrap()).abs() < 1e-6);
    // the demo's prompt is shown as the dump has it
    let text = tokens["meta"]["text"].as_array().unwrap();
    assert_eq!(text[0]["column"], "prompt");
}

#[test]
fn bad_indices_get_a_404_that_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let v = view(dir.path(), &["-e", "grpo", demo().to_str().unwrap()]);
    for (path, needle) in [
        ("/api/rows/256", "row 256: the input has 256 rows"),
        ("/api/rows/-1", "not an index"),
        ("/api/rows/99999999999999999999999", "not an index"),
        ("/api/steps/1", "step 1: the input has 1 step"),
        ("/api/groups/32", "group 32: the input has 32 groups"),
        ("/api/groups/x", "not an index"),
        ("/api/nothing", "no endpoint"),
        ("/etc/passwd", "no page"),
        ("/../../etc/passwd", "no page"),
    ] {
        let (status, body) = v.get(path);
        assert_eq!(status, 404, "{path}: {body}");
        assert!(body.contains(needle), "{path}: {body}");
    }
}

#[test]
fn without_the_token_or_from_another_host_every_request_is_forbidden() {
    let dir = tempfile::tempdir().unwrap();
    let v = view(dir.path(), &["-e", "grpo", demo().to_str().unwrap()]);
    let host = v.host.clone();
    let with = |t: &str| format!("/api/overview?token={t}");
    let wrong = "0".repeat(v.token.len());
    for (path, headers) in [
        ("/api/overview".to_string(), vec![("Host", host.as_str())]),
        ("/".to_string(), vec![("Host", host.as_str())]),
        (with(&wrong), vec![("Host", host.as_str())]),
        (with(&v.token[..8]), vec![("Host", host.as_str())]),
        // DNS rebinding: the right token, another site's name
        (with(&v.token), vec![("Host", "attacker.example:80")]),
        (with(&v.token), vec![]),
    ] {
        let (status, _, body) = request(&host, "GET", &path, &headers);
        assert_eq!(status, 403, "{path} {headers:?}: {body}");
        assert!(!body.contains("\"rows\""), "data leaked: {body}");
    }
    // no cookie: browsers scope cookies by host, not port (one would reach every other
    // service on localhost); the token is needed on every request
    let (status, head, _) = request(&host, "GET", &with(&v.token), &[("Host", &host)]);
    assert_eq!(status, 200);
    assert!(!head.contains("Set-Cookie"), "{head}");
    let (status, _, _) = request(
        &host,
        "GET",
        "/api/overview",
        &[
            ("Host", &host),
            ("Cookie", &format!("advcalc_view={}", v.token)),
        ],
    );
    assert_eq!(status, 403);
    // a request announcing a huge body is refused without reading it, and the view lives
    let (status, _, _) = request(
        &host,
        "POST",
        &with(&v.token),
        &[("Host", "wrong:1"), ("Content-Length", "100000000000000")],
    );
    assert_eq!(status, 400);
    assert_eq!(v.get("/api/version").0, 200);
    // read-only
    let (status, head, _) = request(&host, "DELETE", &with(&v.token), &[("Host", &host)]);
    assert_eq!(status, 405);
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
    // the page and its assets are served from the binary, with a policy that fetches
    // nothing from elsewhere
    let (status, head, page) = request(
        &host,
        "GET",
        &format!("/?token={}", v.token),
        &[("Host", &host)],
    );
    assert_eq!(status, 200);
    assert!(
        head.contains("Content-Security-Policy: default-src 'self'"),
        "{head}"
    );
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "{page}"
    );
    let (_, _, js) = request(
        &host,
        "GET",
        &format!("/view.js?token={}", v.token),
        &[("Host", &host)],
    );
    assert!(js.contains("textContent") && !js.contains("innerHTML"));
}

#[test]
fn follow_shows_a_step_that_lands_while_the_view_runs() {
    let dir = tempfile::tempdir().unwrap();
    let steps = dir.path().join("steps");
    std::fs::create_dir(&steps).unwrap();
    let demo = read_parquet(&demo());
    write_parquet(&steps.join("step=1.parquet"), &demo.slice(0, 128), 64);
    let v = view(dir.path(), &["-e", "grpo", "--follow", "steps"]);
    assert_eq!(v.json("/api/version")["steps"], 1);
    // written beside, then renamed into place, as trainers and the hook land a step
    write_parquet(&dir.path().join("step=2.tmp"), &demo.slice(128, 128), 64);
    let landed = Instant::now();
    std::fs::rename(dir.path().join("step=2.tmp"), steps.join("step=2.parquet")).unwrap();
    loop {
        let version = v.json("/api/version");
        if version["steps"] == 2 {
            break;
        }
        assert!(
            landed.elapsed() < Duration::from_secs(2),
            "the step did not show within 2 s: {version}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = v.json("/api/overview");
    let shown: Vec<i64> = o["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_i64().unwrap())
        .collect();
    assert_eq!(shown, [1, 2]);
    // a file that is not Parquet yet keeps the last snapshot and says why
    std::fs::write(steps.join("step=3.parquet"), b"not yet").unwrap();
    let start = Instant::now();
    loop {
        let version = v.json("/api/version");
        if !version["follow_error"].is_null() {
            assert!(
                version["follow_error"].to_string().contains("step=3"),
                "{version}"
            );
            assert_eq!(version["steps"], 2);
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{version}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn follow_on_a_directory_with_no_step_yet_serves_and_shows_the_first_one_that_lands() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("steps")).unwrap();
    let v = start_view(dir.path(), &["-e", "grpo", "--follow", "steps"]);
    let wait_for = |want: &str| {
        let start = Instant::now();
        loop {
            let version = v.json("/api/version");
            if version["state"] == want {
                return version;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{version}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let waiting = wait_for("failed");
    assert!(
        waiting["error"].as_str().unwrap().contains("steps"),
        "{waiting}"
    );
    let (status, body) = v.get("/api/overview");
    assert_eq!(status, 503, "{body}");
    let demo = read_parquet(&demo());
    write_parquet(&dir.path().join("steps/step=1.parquet"), &demo, 64);
    assert_eq!(wait_for("ready")["steps"], 1);
    assert_eq!(v.json("/api/overview")["rows"], 256);
}

#[test]
fn follow_on_a_file_and_a_port_in_use_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = advcalc()
        .args(["view", "-e", "grpo", "--follow", demo().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--follow watches a directory"));
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let out = advcalc()
        .current_dir(dir.path())
        .args([
            "view",
            "-e",
            "grpo",
            "--port",
            &port,
            demo().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot listen"), "{}", stderr(&out));
}

#[test]
fn token_ids_are_shown_as_text_with_tokenizer_as_hugging_face_decodes_them() {
    // the fixture's first byte-level case: ids and the string Hugging Face's decode gives
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tokenizers");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("expected.json")).unwrap())
            .unwrap();
    let case = &expected["tokenizers"]["byte_level_bpe"]["cases"][0];
    let ids: Vec<i64> = case["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    let decoded = case["decode"].as_str().unwrap();
    // two rows of one group, each response the case's tokens, the reward on the last one
    let n = ids.len();
    let dir = tempfile::tempdir().unwrap();
    let scores: Vec<Vec<f32>> = [1.0, 0.0]
        .iter()
        .map(|&s| {
            let mut v = vec![0.0; n];
            v[n - 1] = s;
            v
        })
        .collect();
    let responses: ArrayRef = Arc::new(arrow::array::ListArray::from_iter_primitive::<
        arrow::datatypes::Int64Type,
        _,
        _,
    >(
        (0..2).map(|_| Some(ids.iter().map(|&i| Some(i)).collect::<Vec<_>>())),
    ));
    let batch = RecordBatch::try_from_iter([
        ("uid", common::strings(&["a", "a"])),
        ("response_mask", common::i8_lists(&[vec![1; n], vec![1; n]])),
        ("rm_scores", common::f32_lists(&scores)),
        ("responses", responses),
    ])
    .unwrap();
    write_parquet(&dir.path().join("ids.parquet"), &batch, 2);
    let tokenizer = root.join("byte_level_bpe/tokenizer.json");
    let v = view(
        dir.path(),
        &[
            "-e",
            "grpo",
            "--tokenizer",
            tokenizer.to_str().unwrap(),
            "ids.parquet",
        ],
    );
    let r = v.json("/api/rows/0");
    assert_eq!(r["meta"]["decoded"], decoded);
    assert_eq!(
        r["meta"]["token_ids"],
        serde_json::json!(ids),
        "one id per token"
    );
    let pieces: String = r["meta"]["pieces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(
        pieces, decoded,
        "the pieces concatenate to the decoded text"
    );
    // without --tokenizer the ids are there, the text is not
    let v = view(dir.path(), &["-e", "grpo", "ids.parquet"]);
    let r = v.json("/api/rows/1");
    assert!(r["meta"]["decoded"].is_null() && r["meta"]["pieces"].is_null());
    assert_eq!(r["meta"]["token_ids"], serde_json::json!(ids));
    // a tokenizer file that is not one is a usage error before anything is served
    let out = advcalc()
        .current_dir(dir.path())
        .args([
            "view",
            "-e",
            "grpo",
            "--tokenizer",
            "ids.parquet",
            "ids.parquet",
        ])
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(1 | 2)), "{}", stderr(&out));
    assert!(stderr(&out).contains("ids.parquet"), "{}", stderr(&out));
}

#[test]
fn a_verl_jsonl_row_shows_its_own_line_s_input_and_output() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/jsonl_v1/two_steps");
    let tmp = tempfile::tempdir().unwrap();
    let v = view(tmp.path(), &["-e", "grpo", dir.to_str().unwrap()]);
    // the rows in step order, each file's lines in order: step 1's file, then step 2's
    let mut lines: Vec<Value> = Vec::new();
    for step in ["1.jsonl", "2.jsonl"] {
        for l in std::fs::read_to_string(dir.join(step)).unwrap().lines() {
            if !l.trim().is_empty() {
                lines.push(serde_json::from_str(l).unwrap());
            }
        }
    }
    assert_eq!(v.json("/api/overview")["rows"], lines.len());
    for (row, line) in lines.iter().enumerate() {
        let meta = &v.json(&format!("/api/rows/{row}"))["meta"];
        assert_eq!(meta["score"].as_f64(), line["score"].as_f64(), "row {row}");
        assert_eq!(
            meta["text"][0],
            serde_json::json!({"column": "input", "text": line["input"]})
        );
        assert_eq!(
            meta["text"][1],
            serde_json::json!({"column": "output", "text": line["output"]})
        );
    }
}

#[test]
fn with_log_the_overview_shows_the_run_s_log_against_its_dumps() {
    let run = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/logs/verl/run_wrong_std");
    let tmp = tempfile::tempdir().unwrap();
    let (config, log, dumps) = (
        run.join("config.yaml"),
        run.join("file.jsonl"),
        run.join("dumps"),
    );
    let v = view(
        tmp.path(),
        &[
            "-c",
            config.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
            dumps.to_str().unwrap(),
        ],
    );
    let check = &v.json("/api/overview")["check"];
    // what `advcalc check` finds on the same files (tests/check.rs)
    assert_eq!(check["compared"], 72, "{check}");
    assert_eq!(check["diverging"], 18);
    assert_eq!(check["first_divergence"]["step"], 1);
    assert!(
        check["causes"]
            .to_string()
            .contains("norm_adv_by_std_in_grpo=false")
    );
    let mean = check["metrics"]["critic/advantages/mean"]
        .as_array()
        .unwrap();
    assert_eq!(mean.len(), 3);
    assert_eq!(mean[0][3], false, "{mean:?}");
    assert_eq!(check["metrics"]["critic/score/mean"][0][3], true);
    // a log that cannot be read: the view serves, and says why on the overview
    let v = view(
        tmp.path(),
        &[
            "-e",
            "grpo",
            "--log",
            "no-such.jsonl",
            dumps.to_str().unwrap(),
        ],
    );
    let check = &v.json("/api/overview")["check"];
    assert!(
        check["error"].as_str().unwrap().contains("no-such.jsonl"),
        "{check}"
    );
}
