//! `advcalc report` on real files: the page is well-formed (HTML as XML, every SVG on its
//! own), self-contained, has every section the dump allows and says why the others are
//! absent, and every number it states equals what `inspect --json`, `compare --json` and
//! `run --metrics` print for the same input (each number carries its source and JSON
//! pointer). Errors leave no file behind.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
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

const CORRECTION: [&str; 8] = common::DEMO_CORRECTION;

fn stepped(dir: &Path) -> PathBuf {
    common::stepped_demo(dir)
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
    sources_of(page)
}

fn sources_of(page: &str) -> std::collections::BTreeSet<String> {
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
    if sources_of(page).contains("loss") {
        let out_file = dir.join("loss.out.parquet");
        let mut loss = with(&["loss", "--json", "-q", "-f", "-e", estimators[0]]);
        loss.push(out_file.display().to_string());
        sources.insert("loss".into(), json_of(dir, &args(&loss)));
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
    assert_eq!(s.keys().collect::<Vec<_>>().len(), 7);
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
    // no trainer YAML, no actor section: no loss to replay
    assert!(
        !s["loss"].0 && s["loss"].1.contains("actor_rollout_ref.actor"),
        "{:?}",
        s["loss"]
    );
    // every section has its one-line caption
    assert_eq!(page.matches("<p class=\"caption\">").count(), 7);
}

#[test]
fn the_loss_section_shows_advcalc_loss_numbers_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/loss/cases/adv_grpo");
    let (config, input) = (case.join("config.yaml"), case.join("input.parquet"));
    let common = ["-c", config.to_str().unwrap(), input.to_str().unwrap()];
    let mut args = vec!["-e", "grpo,rloo"];
    args.extend(common);
    let page = report(dir.path(), &args);
    let s = sections(&page);
    assert!(s["loss"].0, "loss absent: {}", s["loss"].1);
    assert!(page.contains("seq-mean-token-mean") && page.contains("(configured)"));
    check_numbers(dir.path(), &page, &["grpo", "rloo"], &common);
    assert!(sources_of(&page).contains("loss"));
    // a step that mini-batches do not divide: absent, with verl's reason
    let mut args = vec![
        "-e",
        "grpo",
        "--set",
        "actor_rollout_ref.actor.ppo_mini_batch_size=5",
    ];
    args.extend(common);
    let page = report(dir.path(), &args);
    let s = sections(&page);
    assert!(
        !s["loss"].0 && s["loss"].1.contains("mini-batches"),
        "{:?}",
        s["loss"]
    );
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

/// The strips' rows, worked out from the demo's columns here: of the groups (uid) with both
/// correct (score above 0) and incorrect rows, the one whose correct and incorrect row with
/// tool spans make the most (a row with tool spans counts 1; the demo has no rejection),
/// the one whose share of correct rows is nearest 1/2 on a tie, the first uid in row order
/// on a tie; its first such correct and incorrect row; then the rows asked for.
#[test]
fn strips_show_a_correct_and_an_incorrect_row_of_one_group_and_the_asked_rows() {
    let batch = read_parquet(&demo());
    let scores: Vec<f64> = lists_f32(&batch, "rm_scores")
        .iter()
        .map(|r| r.iter().map(|&x| x as f64).sum())
        .collect();
    let spans: Vec<bool> = lists_f32(&batch, "response_mask")
        .iter()
        .map(|m| m.windows(2).any(|w| w[0] == 0.0 && w[1] == 1.0))
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
    // (shows, distance, correct row, incorrect row) of a group with both kinds of rows
    let pair = |u: &String| {
        let r = &rows[u];
        let pick = |want: bool| {
            let kind: Vec<usize> = r
                .iter()
                .copied()
                .filter(|&i| (scores[i] > 0.0) == want)
                .collect();
            kind.iter()
                .copied()
                .find(|&i| spans[i])
                .or(kind.first().copied())
        };
        let (right, wrong) = (pick(true)?, pick(false)?);
        let rate = r.iter().filter(|&&i| scores[i] > 0.0).count() as f64 / r.len() as f64;
        Some((
            u8::from(spans[right]) + u8::from(spans[wrong]),
            (rate - 0.5).abs(),
            right,
            wrong,
        ))
    };
    let best = order
        .iter()
        .filter_map(pair)
        .fold(None, |b: Option<(u8, f64, usize, usize)>, p| match b {
            Some(b) if b.0 > p.0 || (b.0 == p.0 && b.1 <= p.1) => Some(b),
            _ => Some(p),
        })
        .unwrap();
    let (right, wrong) = (best.2, best.3);
    let best = uid.value(right).to_string();

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

// ---- the page as a browser shows it (issue 26) ----

/// The page's column width: the body's `max-width` in the page's style sheet, in CSS px. On
/// a screen wider than the column (plus the body's padding) this is the width figures are
/// laid out in; `.fig svg { max-width: 100% }` scales a wider figure down to it, a narrower
/// one keeps its own width.
fn column_width(page: &str) -> f64 {
    let style = &page[page.find("<style>").unwrap()..page.find("</style>").unwrap()];
    let body = &style[style.find("body {").expect("a body rule")..];
    let body = &body[..body.find('}').unwrap()];
    let at = body.find("max-width:").expect("the body has a max-width") + "max-width:".len();
    let px = body[at..].trim_start();
    let px = &px[..px.find("px").expect("in px")];
    let scale_rule = style.contains(".fig svg { max-width: 100%; height: auto; }");
    assert!(
        scale_rule,
        "the figures' scaling rule changed: update this test"
    );
    px.trim().parse().unwrap()
}

/// Every text of every figure with the size it is rendered at, in CSS px, when the page is
/// laid out in its column: font-size (SVG user units) × displayed width / viewBox width,
/// the displayed width being the figure's own, or the column's when it is wider.
fn rendered_text_sizes(page: &str) -> Vec<(String, f64)> {
    let column = column_width(page);
    let doc = parse(page);
    let mut out = Vec::new();
    for svg in doc.descendants().filter(|n| n.has_tag_name("svg")) {
        let width: f64 = svg.attribute("width").unwrap().parse().unwrap();
        let view: Vec<f64> = svg
            .attribute("viewBox")
            .unwrap()
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let scale = width.min(column) / view[2];
        for t in svg.descendants().filter(|n| n.has_tag_name("text")) {
            let size: f64 = t
                .attribute("font-size")
                .expect("a text without a font-size")
                .parse()
                .unwrap();
            out.push((t.text().unwrap_or("").trim().to_string(), size * scale));
        }
    }
    out
}

/// The full page: steps, rollout correction, tool spans and rejected tokens in the strips.
fn full_page(dir: &Path) -> String {
    let input = stepped(dir);
    let mut args = vec![
        "-e",
        "grpo,rloo,gae",
        "--rows",
        "3",
        input.to_str().unwrap(),
    ];
    args.extend(CORRECTION);
    report(dir, &args)
}

/// Axis text was about 8 px next to 15 px body text (plotters' 11–12 → 8.9–9.7 units).
#[test]
fn figure_text_is_at_least_12_px_in_the_page_s_column() {
    let dir = tempfile::tempdir().unwrap();
    let demo = demo();
    for page in [
        full_page(dir.path()),
        report(
            dir.path(),
            &["-e", "grpo,rloo,drgrpo", demo.to_str().unwrap()],
        ),
    ] {
        assert_eq!(column_width(&page), 1080.0);
        let sizes = rendered_text_sizes(&page);
        assert!(sizes.len() > 50, "{} texts", sizes.len());
        let small: Vec<&(String, f64)> = sizes.iter().filter(|(_, px)| *px < 12.0).collect();
        assert!(small.is_empty(), "texts under 12 px: {small:?}");
    }
}

/// A line chart's y axis and points, read from its SVG: the y tick labels (right-aligned
/// texts that are numbers, with or without %; a reference line's label is not) with their
/// pixel rows, the points (circles) as (x px, y px, value in the labels'
/// unit), and the horizontal lines (y px, value, x from, x to).
struct Chart {
    ticks: Vec<(f64, String)>,
    points: Vec<(f64, f64, f64)>,
    horizontal: Vec<(f64, f64, f64, f64)>,
    percent: bool,
}

fn chart(svg: roxmltree::Node<'_, '_>) -> Chart {
    let px =
        |n: roxmltree::Node<'_, '_>, a: &str| -> f64 { n.attribute(a).unwrap().parse().unwrap() };
    let ticks: Vec<(f64, String)> = svg
        .descendants()
        .filter(|n| {
            n.has_tag_name("text")
                && n.attribute("text-anchor") == Some("end")
                && n.attribute("transform").is_none()
        })
        .map(|n| (px(n, "y"), n.text().unwrap().trim().to_string()))
        .filter(|(_, t)| t.trim_end_matches('%').parse::<f64>().is_ok())
        .collect();
    assert!(ticks.len() >= 2, "{ticks:?}");
    let percent = ticks.iter().all(|(_, t)| t.ends_with('%'));
    let value = |t: &str| -> f64 { t.trim_end_matches('%').parse().unwrap() };
    let (a, b) = (&ticks[0], &ticks[ticks.len() - 1]);
    let (y0, v0, y1, v1) = (a.0, value(&a.1), b.0, value(&b.1));
    let at = |y: f64| v0 + (y - y0) * (v1 - v0) / (y1 - y0);
    let mut points: Vec<(f64, f64, f64)> = svg
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .map(|n| (px(n, "cx"), px(n, "cy"), at(px(n, "cy"))))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let horizontal = svg
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter_map(|n| {
            let xy: Vec<(f64, f64)> = n
                .attribute("points")
                .unwrap()
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            let y = xy[0].1;
            (xy.len() >= 2 && xy.iter().all(|p| p.1 == y)).then(|| {
                let xs = xy.iter().map(|p| p.0);
                (
                    y,
                    at(y),
                    xs.clone().fold(f64::INFINITY, f64::min),
                    xs.fold(f64::NEG_INFINITY, f64::max),
                )
            })
        })
        .collect();
    Chart {
        ticks,
        points,
        horizontal,
        percent,
    }
}

impl Chart {
    /// The value one pixel row spans, in the labels' unit.
    fn pixel(&self) -> f64 {
        let value = |t: &str| -> f64 { t.trim_end_matches('%').parse().unwrap() };
        let (a, b) = (&self.ticks[0], &self.ticks[self.ticks.len() - 1]);
        ((value(&b.1) - value(&a.1)) / (b.0 - a.0)).abs()
    }
}

/// The figure of `section` whose title is `title`.
fn figure_titled<'a, 'input>(
    doc: &'a roxmltree::Document<'input>,
    section: &str,
    title: &str,
) -> roxmltree::Node<'a, 'input> {
    doc.descendants()
        .find(|n| n.attribute("data-section") == Some(section))
        .unwrap()
        .descendants()
        .filter(|n| n.has_tag_name("svg"))
        .find(|svg| {
            svg.descendants()
                .any(|t| t.has_tag_name("text") && t.text().map(str::trim) == Some(title))
        })
        .unwrap_or_else(|| panic!("no figure titled {title}"))
}

/// A table column of `section`'s first table, by header: the cells' text per row.
fn column(doc: &roxmltree::Document<'_>, section: &str, header: &str) -> Vec<String> {
    let table = doc
        .descendants()
        .find(|n| n.attribute("data-section") == Some(section))
        .unwrap()
        .descendants()
        .find(|n| n.has_tag_name("table"))
        .unwrap();
    let text = |n: roxmltree::Node<'_, '_>| -> String {
        n.descendants()
            .filter(|t| t.is_text())
            .filter_map(|t| t.text())
            .collect()
    };
    let rows: Vec<roxmltree::Node<'_, '_>> =
        table.children().filter(|n| n.has_tag_name("tr")).collect();
    let k = rows[0]
        .children()
        .filter(|n| n.has_tag_name("th"))
        .position(|th| text(th) == header)
        .unwrap_or_else(|| panic!("no column {header}"));
    rows[1..]
        .iter()
        .map(|r| {
            text(
                r.children()
                    .filter(|n| n.has_tag_name("td"))
                    .nth(k)
                    .unwrap(),
            )
        })
        .collect()
}

/// The per-step charts used fractions (0.2) where the table beside them says 21.88%.
#[test]
fn per_step_charts_use_the_tables_units_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let page = full_page(dir.path());
    let doc = parse(&page);
    for (title, header) in [
        ("groups with no signal", "groups with no signal"),
        ("tokens rejected", "tokens rejected"),
        ("mean score", "mean score"),
        ("KL: mean k1 per token", "mean k1 per token"),
    ] {
        let c = chart(figure_titled(&doc, "steps", title));
        let cells = column(&doc, "steps", header);
        let in_percent = cells.iter().all(|c| c.ends_with('%'));
        assert_eq!(
            c.percent, in_percent,
            "{title}: the axis says {:?}, the table {cells:?}",
            c.ticks
        );
        assert_eq!(c.points.len(), cells.len(), "{title}");
        for ((_, _, drawn), cell) in c.points.iter().zip(&cells) {
            let stated: f64 = cell.trim_end_matches('%').parse().unwrap();
            assert!(
                (drawn - stated).abs() <= 1.5 * c.pixel(),
                "{title}: a point drawn at {drawn} where the table says {cell} (axis {:?})",
                c.ticks
            );
        }
    }
}

/// verl's `rollout_is_max` is the truncated weight: it saturates at the threshold, which
/// the chart draws, and the caption says what a max on the line means.
#[test]
fn the_is_weight_chart_draws_the_truncation_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let page = full_page(dir.path());
    let doc = parse(&page);
    let svg = figure_titled(&doc, "steps", "IS weight: mean and max");
    let c = chart(svg);
    // the configured rollout_is_threshold (CORRECTION): 2.0, above every weight here, so no
    // series lies on it
    let at_threshold: Vec<_> = c
        .horizontal
        .iter()
        .filter(|h| (h.1 - 2.0).abs() <= 1.5 * c.pixel())
        .collect();
    assert!(
        !at_threshold.is_empty(),
        "no line at 2.0: {:?}",
        c.horizontal
    );
    let from = at_threshold
        .iter()
        .map(|h| h.2)
        .fold(f64::INFINITY, f64::min);
    let to = at_threshold
        .iter()
        .map(|h| h.3)
        .fold(f64::NEG_INFINITY, f64::max);
    let (first, last) = (c.points[0].0, c.points[c.points.len() - 1].0);
    assert!(from <= first && to >= last, "the line spans {from}..{to}");
    let text: String = svg
        .parent()
        .unwrap()
        .descendants()
        .filter(|t| t.is_text())
        .filter_map(|t| t.text())
        .collect();
    assert!(
        text.contains("rollout_is_threshold") && text.contains("truncation is active"),
        "{text}"
    );
}

/// The demo with tool spans on two rows only (every other mask all 1) and rejected tokens
/// on one (rollout log-probs equal the old ones elsewhere; `token_k1` keeps ratios in
/// [0.5, 2]).
fn few_shapes(dir: &Path) -> PathBuf {
    let batch = read_parquet(&demo());
    let schema = batch.schema();
    let mut masks = lists_f32(&batch, "response_mask");
    for (r, m) in masks.iter_mut().enumerate() {
        if r != 2 && r != 80 {
            m.iter_mut().for_each(|x| *x = 1.0);
        }
    }
    let old = lists_f32(&batch, "old_log_probs");
    let mut rollout = old.clone();
    rollout[100][10..20].iter_mut().for_each(|x| *x -= 3.0);
    let mut columns = batch.columns().to_vec();
    let mask_rows: Vec<Vec<i8>> = masks
        .iter()
        .map(|m| m.iter().map(|&x| x as i8).collect())
        .collect();
    for (name, column) in [
        ("response_mask", common::i8_lists(&mask_rows)),
        ("rollout_log_probs", common::f32_lists(&rollout)),
    ] {
        let i = schema.index_of(name).unwrap();
        columns[i] = arrow::compute::cast(&column, schema.field(i).data_type()).unwrap();
    }
    let path = dir.join("few.parquet");
    write_parquet(&path, &RecordBatch::try_new(schema, columns).unwrap(), 64);
    path
}

/// Strips of rows without tool spans under an outcome-level estimator are one colour: the
/// rows with tool spans or rejected tokens are drawn first, and the page says why each row.
#[test]
fn strips_prefer_rows_with_tool_spans_or_rejected_tokens_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let input = few_shapes(dir.path());
    let page = report(
        dir.path(),
        &[
            "-e",
            "grpo,rloo",
            "--set",
            "algorithm.rollout_correction.rollout_rs=token_k1",
            "--set",
            "algorithm.rollout_correction.rollout_rs_threshold=\"0.5_2.0\"",
            input.to_str().unwrap(),
        ],
    );
    // Row 2 (prompt-0000, 3 of 8 correct, incorrect) has tool spans, row 80 (prompt-0016,
    // 6 of 8, correct) too, row 100 (prompt-0024, 1 of 8, incorrect) rejected tokens: each
    // of these groups' pairs shows one, prompt-0000 is nearest 1/2, so its pair (its first
    // correct row 4, and row 2); then row 100 for the rejected tokens neither has.
    assert_eq!(strip_rows(&page), vec![4, 2, 100]);
    let doc = parse(&page);
    let why = |row: usize| -> String {
        let h = doc
            .descendants()
            .find(|n| n.attribute("data-row") == Some(&row.to_string()))
            .unwrap();
        let p = h
            .next_siblings()
            .skip(1)
            .find(|n| n.is_element())
            .filter(|n| n.attribute("class") == Some("why-row"))
            .unwrap_or_else(|| panic!("no reason beside row {row}"));
        p.descendants()
            .filter(|t| t.is_text())
            .filter_map(|t| t.text())
            .collect()
    };
    let heading = |row: usize| -> String {
        let h = doc
            .descendants()
            .find(|n| n.attribute("data-row") == Some(&row.to_string()))
            .unwrap();
        h.descendants()
            .filter(|t| t.is_text())
            .filter_map(|t| t.text())
            .collect()
    };
    assert_eq!(heading(2), "Row 2 — incorrect, 2 tool spans");
    assert_eq!(heading(4), "Row 4 — correct");
    assert!(
        heading(100).starts_with("Row 100 — incorrect, 10 rejected tokens"),
        "{}",
        heading(100)
    );
    assert!(
        why(2).contains("tool spans (2 of the 256 rows)"),
        "{}",
        why(2)
    );
    assert!(
        why(4).contains("prompt-0000") && why(4).contains("3 of 8"),
        "{}",
        why(4)
    );
    assert!(why(100).contains("rejected token"), "{}", why(100));
}

/// Another trainer's dump (NeMo-RL's own writer, fixtures/trainers/dumps): the page shows the
/// check of the logged advantages with inspect's numbers, and every number on it is a
/// command's.
#[test]
fn a_trainer_dump_shows_the_check_of_its_logged_advantages() {
    let dir = tempfile::tempdir().unwrap();
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trainers/dumps/nemo-rl/run1");
    let input = input.to_str().unwrap();
    let page = report(dir.path(), &["-e", "grpo,drgrpo", input]);
    assert!(
        page.contains("<h3>Logged advantages</h3>"),
        "no check on the page"
    );
    assert!(page.contains("data-path=\"/logged_advantages/compared\""));
    let checked = check_numbers(dir.path(), &page, &["grpo", "drgrpo"], &[input]);
    assert!(checked > 20, "{checked} numbers");
}

#[test]
fn the_findings_warn_of_rewards_on_tool_tokens_when_any_variant_drops_them() {
    // the demo's rewards on tool tokens: nothing to grpo, lost to gae; §1 says so for the
    // variants it shows, and names the estimators its checks ran under
    let tmp = tempfile::tempdir().unwrap();
    let demo = demo();
    let demo = demo.to_str().unwrap();
    let both = report(tmp.path(), &["-e", "grpo,gae", demo]);
    for code in ["ends_in_tool_token", "masked_reward"] {
        assert!(both.contains(code), "{code}");
    }
    assert!(both.contains("where gae drops it"));
    assert!(both.contains("made for gae too"));
    let grpo = report(tmp.path(), &["-e", "grpo", demo]);
    for code in ["ends_in_tool_token", "masked_reward", "made for"] {
        assert!(!grpo.contains(code), "{code}");
    }
    assert!(grpo.contains("What <code>advcalc inspect -e grpo</code> finds in this dump:"));
}

#[test]
fn a_chart_with_nothing_to_draw_is_a_note_saying_why() {
    // open-instruct's dump has no old/ref log-probs and nothing is rejected: no empty KL
    // or rejection chart, a line each instead; the demo with steps draws its KL
    let tmp = tempfile::tempdir().unwrap();
    let dump =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trainers/dumps/open-instruct/run1");
    let page = report(tmp.path(), &[dump.to_str().unwrap()]);
    // a chart's title is the SVG's text on a line of its own
    let (kl, rejected) = (
        "\nKL: mean k1 per token\n</text>",
        "\ntokens rejected\n</text>",
    );
    assert!(!page.contains(kl));
    assert!(page.contains("No KL plot: the dump lacks"));
    assert!(!page.contains(rejected));
    assert!(page.contains("No rejection plot:"));
    let stepped = stepped(tmp.path());
    let mut args = vec!["-e", "grpo", stepped.to_str().unwrap()];
    args.extend(CORRECTION);
    let page = report(tmp.path(), &args);
    assert!(page.contains(kl) && page.contains(rejected));
    assert!(!page.contains("No KL plot") && !page.contains("No rejection plot"));
}

#[test]
fn a_graded_reward_s_pass_rates_say_what_correct_means_there() {
    let dir = tempfile::tempdir().unwrap();
    // TRL's fixture: weighted sums of two reward functions, 1.25 … 2.5, every row above 0
    let trl = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/trainers/dumps/trl/run1");
    let page = report(dir.path(), &[trl.to_str().unwrap()]);
    assert!(
        page.contains("The scores here are graded") && page.contains("--correct-above"),
        "no word on what correct means for a graded reward"
    );
    // the demo's pass/fail scores (0, 0.5, 1): no such note
    let page = report(dir.path(), &["-e", "grpo", demo().to_str().unwrap()]);
    assert!(!page.contains("The scores here are graded"));
}
