//! `advcalc report` on real files: the page is well-formed (HTML as XML, every SVG on its
//! own), self-contained, has every section the dump allows and says why the others are
//! absent, and every number it states equals what `inspect --json`, `compare --json` and
//! `run --metrics` print for the same input (each number carries its source and JSON
//! pointer). Errors leave no file behind.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::Value;

use common::{advcalc, leftovers, lists_f32, read_parquet, run_in, stderr, write_parquet};

const SECTIONS: [&str; 6] = [
    "findings",
    "steps",
    "distributions",
    "difficulty",
    "strips",
    "correction",
];

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet")
}

/// Rollout correction with IS weights and two rejection options that remove something
/// from the demo dump (its train/rollout log-ratios are within a few percent).
const CORRECTION: [&str; 8] = [
    "--set",
    "algorithm.rollout_correction.rollout_is=token",
    "--set",
    "algorithm.rollout_correction.rollout_is_threshold=2.0",
    "--set",
    "algorithm.rollout_correction.rollout_rs=token_k1,seq_mean_k3",
    "--set",
    "algorithm.rollout_correction.rollout_rs_threshold=\"0.98_1.02,0.0002\"",
];

/// The demo dump with a `step` column (rows 0–127 step 1, the rest step 2), written in row
/// groups of 50 rows (groups cross row groups).
fn stepped(dir: &Path) -> PathBuf {
    let batch = read_parquet(&demo());
    let steps: ArrayRef = Arc::new(Int64Array::from(
        (0..batch.num_rows())
            .map(|i| if i < 128 { 1 } else { 2 })
            .collect::<Vec<i64>>(),
    ));
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("step", DataType::Int64, false));
    let mut columns = batch.columns().to_vec();
    columns.push(steps);
    let with_step = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let path = dir.join("stepped.parquet");
    write_parquet(&path, &with_step, 50);
    path
}

/// Run `advcalc report ARGS -o OUT` in `dir` and return the page.
fn report(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["report", "-q", "-f", "-o", "report.html"];
    all.extend(args);
    let out = run_in(dir, &all);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::read_to_string(dir.join("report.html")).unwrap()
}

/// The page as an XML tree (it is written as well-formed HTML).
fn parse(page: &str) -> roxmltree::Document<'_> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    roxmltree::Document::parse_with_options(page, opts)
        .unwrap_or_else(|e| panic!("the page is not well-formed: {e}"))
}

/// `data-present` of each section, and the reason shown for an absent one.
fn sections(page: &str) -> BTreeMap<String, (bool, String)> {
    let doc = parse(page);
    doc.descendants()
        .filter(|n| n.has_tag_name("section"))
        .map(|s| {
            let why = s
                .descendants()
                .find(|n| n.attribute("class") == Some("why"))
                .map(|n| {
                    n.descendants()
                        .filter(|t| t.is_text())
                        .filter_map(|t| t.text())
                        .collect::<String>()
                })
                .unwrap_or_default();
            (
                s.attribute("data-section").unwrap().to_string(),
                (s.attribute("data-present") == Some("true"), why),
            )
        })
        .collect()
}

/// Every stated number: (source, JSON pointer, exact value; `None` for null).
fn numbers(page: &str) -> Vec<(String, String, Option<f64>)> {
    let doc = parse(page);
    doc.descendants()
        .filter(|n| n.attribute("data-src").is_some() && n.attribute("data-value").is_some())
        .map(|n| {
            let v = n.attribute("data-value").unwrap();
            (
                n.attribute("data-src").unwrap().to_string(),
                n.attribute("data-path").unwrap().to_string(),
                (v != "null").then(|| v.parse::<f64>().unwrap()),
            )
        })
        .collect()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn json_of(dir: &Path, args: &[&str]) -> Value {
    let out = run_in(dir, args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The sources of the page's numbers (`data-src`).
fn sources(page: &str) -> std::collections::BTreeSet<String> {
    numbers(page).into_iter().map(|(s, _, _)| s).collect()
}

/// Each number on the page against its source's JSON, as the real binary prints it.
/// `common` holds the arguments every command gets (input, config flags).
fn check_numbers(dir: &Path, page: &str, estimators: &[&str], common: &[&str]) -> usize {
    let mut sources: BTreeMap<String, Value> = BTreeMap::new();
    let with = |head: &[&str]| -> Vec<String> {
        head.iter().chain(common).map(|s| s.to_string()).collect()
    };
    let joined = estimators.join(",");
    sources.insert(
        "inspect".into(),
        json_of(
            dir,
            &args(&with(&["inspect", "--json", "-q", "-e", estimators[0]])),
        ),
    );
    sources.insert(
        "compare".into(),
        json_of(
            dir,
            &args(&with(&["compare", "--json", "-q", "-e", &joined])),
        ),
    );
    for e in estimators {
        sources.insert(
            format!("inspect -e {e}"),
            json_of(dir, &args(&with(&["inspect", "--json", "-q", "-e", e]))),
        );
        let metrics = dir.join(format!("{e}.metrics.json"));
        let out_file = dir.join(format!("{e}.out.parquet"));
        let mut run = with(&["run", "-q", "-f", "-e", e, "--metrics"]);
        run.insert(6, metrics.display().to_string());
        run.push(out_file.display().to_string());
        let out = run_in(dir, &args(&run));
        assert!(out.status.success(), "{}", stderr(&out));
        sources.insert(
            format!("metrics {e}"),
            serde_json::from_str(&std::fs::read_to_string(&metrics).unwrap()).unwrap(),
        );
    }
    let found = numbers(page);
    for (src, path, value) in &found {
        let json = sources
            .get(src)
            .unwrap_or_else(|| panic!("unknown data-src {src}"));
        let expected = json.pointer(path);
        match (value, expected) {
            (None, None | Some(Value::Null)) => {}
            (Some(v), Some(e)) if e.as_f64() == Some(*v) => {}
            _ => panic!("{src} {path}: the page says {value:?}, the command {expected:?}"),
        }
    }
    for src in ["inspect", "compare"] {
        assert!(
            found.iter().any(|(s, _, v)| s == src && v.is_some()),
            "no number of {src} on the page"
        );
    }
    found.len()
}

#[test]
fn the_demo_report_is_well_formed_self_contained_and_has_what_the_demo_allows() {
    let dir = tempfile::tempdir().unwrap();
    let demo = demo();
    let page = report(
        dir.path(),
        &["-e", "grpo,rloo,drgrpo", demo.to_str().unwrap()],
    );
    let doc = parse(&page);
    // every figure is an SVG that is well-formed on its own, too
    let svgs: Vec<&str> = page
        .match_indices("<svg")
        .map(|(i, _)| &page[i..])
        .collect();
    // distributions, difficulty, two strips
    assert!(svgs.len() >= 4, "{} figures", svgs.len());
    for s in &svgs {
        let end = s.find("</svg>").expect("closed") + "</svg>".len();
        roxmltree::Document::parse(&s[..end])
            .unwrap_or_else(|e| panic!("an SVG is not well-formed: {e}"));
    }
    assert_eq!(
        doc.descendants().filter(|n| n.has_tag_name("svg")).count(),
        svgs.len()
    );
    // nothing fetched, nothing run
    for forbidden in [
        "<script", "<link", "<img", "<iframe", "@import", "url(", " src=",
    ] {
        assert!(!page.contains(forbidden), "the page has {forbidden}");
    }
    for (i, _) in page.match_indices("http") {
        assert!(
            page[i..].starts_with("http://www.w3.org/2000/svg\""),
            "a reference out of the page: {}",
            &page[i..i + 40]
        );
    }
    let s = sections(&page);
    assert_eq!(s.keys().collect::<Vec<_>>().len(), 6);
    for id in ["findings", "distributions", "difficulty", "strips"] {
        assert!(s[id].0, "{id} absent: {}", s[id].1);
    }
    assert!(
        !s["steps"].0 && s["steps"].1.contains("no step column"),
        "{:?}",
        s["steps"]
    );
    assert!(
        !s["correction"].0 && s["correction"].1.contains("rollout correction"),
        "{:?}",
        s["correction"]
    );
    // every section has its one-line caption
    assert_eq!(page.matches("<p class=\"caption\">").count(), 6);
}

#[test]
fn a_dump_with_steps_tool_tokens_and_rollout_correction_has_every_section_and_the_commands_numbers()
{
    let dir = tempfile::tempdir().unwrap();
    let input = stepped(dir.path());
    let input = input.to_str().unwrap();
    let mut common: Vec<&str> = vec![input];
    common.extend(CORRECTION);
    let mut args = vec!["-e", "grpo,rloo,gae", "--rows", "3"];
    args.extend(&common);
    let page = report(dir.path(), &args);
    let s = sections(&page);
    for id in SECTIONS {
        assert!(s[id].0, "{id} absent: {}", s[id].1);
    }
    // the IS weights and each rejection option are shown, per step
    assert!(page.contains("rollout_rs_token_k1_masked_fraction"));
    assert!(page.contains("rollout_rs_seq_mean_k3_seq_masked_fraction"));
    let checked = check_numbers(dir.path(), &page, &["grpo", "rloo", "gae"], &common);
    assert!(checked > 100, "{checked} numbers");
    // per-step advantage std of every variant, and one variant's metrics (the correction
    // is the same for all three, so shown once)
    let found = sources(&page);
    for src in [
        "inspect -e grpo",
        "inspect -e rloo",
        "inspect -e gae",
        "metrics grpo",
    ] {
        assert!(found.contains(src), "no number of {src}: {found:?}");
    }
}

#[test]
fn the_demo_numbers_equal_inspect_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let demo = demo();
    let input = demo.to_str().unwrap();
    let page = report(dir.path(), &["-e", "grpo,rloo,drgrpo", input]);
    let checked = check_numbers(dir.path(), &page, &["grpo", "rloo", "drgrpo"], &[input]);
    assert!(checked > 60, "{checked} numbers");
}

/// The strips' rows, worked out from the demo's columns here: the group (uid) whose share
/// of rows with a score above 0 is nearest 1/2 (the first uid in row order on a tie), its
/// first correct and first incorrect row, then the rows asked for.
#[test]
fn strips_show_one_correct_and_one_incorrect_row_of_the_most_mixed_group_and_the_asked_rows() {
    let batch = read_parquet(&demo());
    let scores: Vec<f64> = lists_f32(&batch, "rm_scores")
        .iter()
        .map(|r| r.iter().map(|&x| x as f64).sum())
        .collect();
    let uid = batch.column_by_name("uid").unwrap();
    let uid = uid.as_string::<i32>();
    let mut order: Vec<String> = Vec::new();
    let mut rows: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for i in 0..uid.len() {
        let u = uid.value(i).to_string();
        if !rows.contains_key(&u) {
            order.push(u.clone());
        }
        rows.entry(u).or_default().push(i);
    }
    let distance = |u: &String| {
        let r = &rows[u];
        (r.iter().filter(|&&i| scores[i] > 0.0).count() as f64 / r.len() as f64 - 0.5).abs()
    };
    let best = order
        .iter()
        .fold(None::<&String>, |b, u| match b {
            Some(b) if distance(b) <= distance(u) => Some(b),
            _ => Some(u),
        })
        .unwrap();
    let right = *rows[best].iter().find(|&&i| scores[i] > 0.0).unwrap();
    let wrong = *rows[best].iter().find(|&&i| scores[i] <= 0.0).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let page = report(
        dir.path(),
        &[
            "-e",
            "grpo,gae",
            "--rows",
            "3,3,200",
            demo().to_str().unwrap(),
        ],
    );
    let drawn = strip_rows(&page);
    assert_eq!(drawn, vec![right, wrong, 3, 200]);
    assert!(page.contains(&format!("uid <code>{best}</code>")));
    // with KL in every variant's reward, pass 1 does not have the raw scores: the rows are
    // chosen after the output pass and their row groups read again, the same rows
    let page = report(
        dir.path(),
        &[
            "-e",
            "grpo,gae",
            "--rows",
            "3,3,200",
            "--set",
            "algorithm.use_kl_in_reward=true",
            demo().to_str().unwrap(),
        ],
    );
    assert_eq!(strip_rows(&page), drawn);
}

/// The rows the page's token strips draw, in page order.
fn strip_rows(page: &str) -> Vec<usize> {
    parse(page)
        .descendants()
        .filter_map(|n| n.attribute("data-row"))
        .map(|r| r.parse().unwrap())
        .collect()
}

/// The input as an Arrow IPC stream on stdin, and as a dataset of two step files: the same
/// numbers as the Parquet file's.
#[test]
fn stdin_and_datasets_give_the_same_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let batch = read_parquet(&demo());
    let mut stream = Vec::new();
    {
        let mut w =
            arrow::ipc::writer::StreamWriter::try_new(&mut stream, &batch.schema()).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
    }
    let mut child = advcalc()
        .current_dir(dir.path())
        .args(["report", "-q", "-e", "grpo,rloo", "-", "-o", "stdin.html"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&stream).unwrap();
    assert!(child.wait().unwrap().success());
    let from_stdin = std::fs::read_to_string(dir.path().join("stdin.html")).unwrap();
    let from_file = report(dir.path(), &["-e", "grpo,rloo", demo().to_str().unwrap()]);
    assert_eq!(numbers(&from_stdin), numbers(&from_file));

    // a dataset: step=1.parquet and step=2.parquet, the demo split in two
    let data = dir.path().join("dumps");
    std::fs::create_dir(&data).unwrap();
    write_parquet(&data.join("step=1.parquet"), &batch.slice(0, 128), 64);
    write_parquet(&data.join("step=2.parquet"), &batch.slice(128, 128), 64);
    let page = report(dir.path(), &["-e", "grpo,rloo", "dumps"]);
    let s = sections(&page);
    assert!(s["steps"].0, "{:?}", s["steps"]);
    check_numbers(dir.path(), &page, &["grpo", "rloo"], &["dumps"]);
}

/// verl's JSONL dump: one score per row, no tokens — the strips say why they are absent.
#[test]
fn a_jsonl_dump_has_no_token_strips_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for (i, score) in [1.0, 0.0, 0.0, 1.0, 1.0, 1.0].iter().enumerate() {
        text += &format!(
            "{{\"input\": \"p{}\", \"output\": \"o{i}\", \"gts\": null, \"score\": {score}, \"step\": 3}}\n",
            i % 2
        );
    }
    std::fs::write(dir.path().join("3.jsonl"), text).unwrap();
    let page = report(dir.path(), &["-e", "grpo,rloo", "3.jsonl"]);
    let s = sections(&page);
    assert!(
        !s["strips"].0 && s["strips"].1.contains("sequence-level"),
        "{:?}",
        s["strips"]
    );
    assert!(s["distributions"].0 && s["difficulty"].0);
    check_numbers(dir.path(), &page, &["grpo", "rloo"], &["3.jsonl"]);
}

#[test]
fn errors_exit_1_or_2_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let demo = demo();
    let input = demo.to_str().unwrap();
    std::fs::copy(&demo, dir.path().join("in.parquet")).unwrap();
    let cases: [(&[&str], i32, &str); 6] = [
        (
            &["-f", "-e", "grpo", "in.parquet", "-o", "in.parquet"],
            2,
            "overwrite its input",
        ),
        (
            &["-e", "grpo", input, "-o", "missing/report.html"],
            1,
            "does not exist",
        ),
        (&["-e", "nope", input, "-o", "r.html"], 2, "nope"),
        (
            &["-e", "grpo", input, "--rows", "256", "-o", "r.html"],
            2,
            "--rows 256",
        ),
        (
            &["-e", "grpo", "absent.parquet", "-o", "r.html"],
            1,
            "absent.parquet",
        ),
        (
            &["-e", "grpo,grpo", input, "-o", "r.html"],
            2,
            "given twice",
        ),
    ];
    for (args, code, message) in cases {
        let mut all = vec!["report"];
        all.extend(args);
        let out = run_in(dir.path(), &all);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert!(!dir.path().join("r.html").exists(), "{args:?}");
    }
    assert_eq!(
        std::fs::read(dir.path().join("in.parquet")).unwrap(),
        std::fs::read(&demo).unwrap()
    );
    // an existing page is kept without --force, replaced with it
    std::fs::write(dir.path().join("r.html"), "mine").unwrap();
    let out = run_in(dir.path(), &["report", "-e", "grpo", input, "-o", "r.html"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("r.html")).unwrap(),
        "mine"
    );
    let out = run_in(
        dir.path(),
        &["report", "-q", "-f", "-e", "grpo", input, "-o", "r.html"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        std::fs::read_to_string(dir.path().join("r.html"))
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    // a data error found while reading (a NaN score, refused) leaves no page nor temporary
    let batch = read_parquet(&demo);
    let mut scores = lists_f32(&batch, "rm_scores");
    scores[10][0] = f32::NAN;
    let idx = batch.schema().index_of("rm_scores").unwrap();
    let mut columns = batch.columns().to_vec();
    columns[idx] = arrow::compute::cast(
        &common::f32_lists(&scores),
        batch.schema().field(idx).data_type(),
    )
    .unwrap();
    let bad = RecordBatch::try_new(batch.schema(), columns).unwrap();
    write_parquet(&dir.path().join("nan.parquet"), &bad, 64);
    let out = run_in(
        dir.path(),
        &["report", "-e", "grpo", "nan.parquet", "-o", "nan.html"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!dir.path().join("nan.html").exists());
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}
