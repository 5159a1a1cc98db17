//! Hostile loss configurations (issue 36): the seed corpus `tests/hostile/loss_config/*.yaml`
//! through the fuzz target's entry (`tests/hostile/loss_config.rs`, shared with
//! `fuzz/fuzz_targets/loss_config.rs`) and through the real binary. Each seed says in its
//! header what must happen:
//!
//! - `# expect: refused`: a usage error (exit 2) whose text contains `# names:` (the key, as
//!   `KEY (` with its source or `KEY:`) and every `# says:`; nothing written at OUT;
//! - `# expect: runs`: the configuration loads, the synthetic replay is finite, and `advcalc
//!   loss` on the fixture `# input:` (default `kl_k3`, 32 rows) exits 0;
//! - `# expect: loads`: the configuration loads (and its replay is finite), but the fixture's
//!   rows do not fit it: exit 1 with every `# says:`.
//!
//! Never a panic (exit 101, `panicked`).

mod common;

#[path = "hostile/loss_config.rs"]
mod entry;

use std::path::{Path, PathBuf};

use common::{advcalc, stderr};

#[derive(Debug, PartialEq)]
enum Expect {
    Refused,
    Runs,
    Loads,
}

struct Seed {
    path: PathBuf,
    text: String,
    expect: Expect,
    names: Option<String>,
    says: Vec<String>,
    input: String,
}

impl Seed {
    /// The seed's file name, for failure messages.
    fn name(&self) -> String {
        self.path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }
}

fn seeds() -> Vec<Seed> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile/loss_config");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            assert_eq!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml"),
                "{}",
                path.display()
            );
            let text = std::fs::read_to_string(&path).unwrap();
            let header = |key: &str| -> Vec<String> {
                text.lines()
                    .filter_map(|l| l.strip_prefix(&format!("# {key}: ")))
                    .map(str::to_string)
                    .collect()
            };
            let expect = match header("expect").as_slice() {
                [e] if e == "refused" => Expect::Refused,
                [e] if e == "runs" => Expect::Runs,
                [e] if e == "loads" => Expect::Loads,
                other => panic!("{}: `# expect:` {other:?}", path.display()),
            };
            let names = header("names").pop();
            assert_eq!(
                names.is_some(),
                expect == Expect::Refused && !text.contains("# says: 64 bits"),
                "{}: a refused seed names its key",
                path.display()
            );
            Seed {
                says: header("says"),
                input: header("input").pop().unwrap_or_else(|| "kl_k3".into()),
                path,
                text,
                expect,
                names,
            }
        })
        .collect()
}

/// The error as the CLI prints it: the message, each cause and the hint.
fn full_text(e: &advcalc::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text += &format!("\ncaused by: {s}");
        source = s.source();
    }
    if let Some(h) = e.hint() {
        text += &format!("\nhint: {h}");
    }
    text
}

fn names_key(text: &str, key: &str) -> bool {
    text.contains(&format!("{key} (")) || text.contains(&format!("{key}:"))
}

/// A refusal's text names the seed's key and holds each text the seed's header asks for.
fn says_what_the_seed_wants(name: &str, seed: &Seed, text: &str, failures: &mut Vec<String>) {
    if let Some(key) = &seed.names
        && !names_key(text, key)
    {
        failures.push(format!("{name}: does not name {key}: {text}"));
    }
    for s in &seed.says {
        if !text.contains(s.as_str()) {
            failures.push(format!("{name}: `{s}` not in: {text}"));
        }
    }
}

// The corpus covers what the issue lists and its kin: at least this many seeds of each kind.
#[test]
fn the_corpus_holds_the_issues_cases() {
    let seeds = seeds();
    let count = |e: Expect| seeds.iter().filter(|s| s.expect == e).count();
    assert!(count(Expect::Refused) >= 60, "{}", count(Expect::Refused));
    assert!(count(Expect::Runs) >= 20, "{}", count(Expect::Runs));
    for issue_case in [
        "clip_ratio_high_negative",
        "clip_ratio_negative_fallback",
        "mini_batch_2_62_n4",
        "mini_batch_i64_max_n4",
        "loss_scale_factor_1e-320",
        "micro_not_dividing",
        "kl_cov_ratio_5",
    ] {
        assert!(
            seeds
                .iter()
                .any(|s| s.path.file_stem().unwrap() == issue_case),
            "{issue_case}"
        );
    }
}

// The fuzz target's entry on every seed: no panic; the bad ones a usage error naming the
// key; the good ones replayed to finite numbers.
#[test]
fn seeds_are_refused_naming_the_key_or_replayed_finite() {
    let mut failures = Vec::new();
    for seed in seeds() {
        let name = seed.name();
        let text = seed.text.clone();
        let outcome = std::panic::catch_unwind(move || entry::check(&text));
        let outcome = match outcome {
            Ok(o) => o,
            Err(_) => {
                failures.push(format!("{name}: panicked"));
                continue;
            }
        };
        match (&seed.expect, outcome) {
            (Expect::Refused, Err(e)) => {
                let text = full_text(&e);
                if e.kind() != advcalc::ErrorKind::Usage {
                    failures.push(format!("{name}: not a usage error: {text}"));
                }
                says_what_the_seed_wants(&name, &seed, &text, &mut failures);
            }
            (Expect::Refused, Ok(r)) => failures.push(format!("{name}: accepted ({r:?})")),
            (Expect::Runs | Expect::Loads, Err(e)) => {
                failures.push(format!("{name}: refused: {}", full_text(&e)))
            }
            (expect, Ok(r)) => {
                if let Some(what) = r.non_finite {
                    failures.push(format!("{name}: {what}"));
                }
                if *expect == Expect::Runs && r.rows == 0 {
                    failures.push(format!("{name}: not replayed"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// The same seeds through the real binary on a small dump: exit 2 naming the key with nothing
// at OUT, exit 0 for the good ones, never exit 101.
#[test]
fn the_binary_refuses_the_seeds_without_a_panic_or_an_output() {
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/loss/cases");
    let mut failures = Vec::new();
    for seed in seeds() {
        let name = seed.name();
        let tmp = tempfile::tempdir().unwrap();
        let out_path = tmp.path().join("out.parquet");
        let input = cases.join(&seed.input).join("input.parquet");
        let out = advcalc()
            .args(["loss", "-q", "-c"])
            .arg(&seed.path)
            .arg(&input)
            .arg(&out_path)
            .output()
            .unwrap();
        let err = stderr(&out);
        let code = out.status.code();
        if code == Some(101) || err.contains("panicked") {
            failures.push(format!("{name}: panicked: {err}"));
            continue;
        }
        let want = match seed.expect {
            Expect::Refused => 2,
            Expect::Runs => 0,
            Expect::Loads => 1,
        };
        if code != Some(want) {
            failures.push(format!("{name}: exit {code:?}, not {want}: {err}"));
            continue;
        }
        let written = std::fs::read_dir(tmp.path()).unwrap().count();
        if want == 0 {
            if !out_path.is_file() || written != 1 {
                failures.push(format!("{name}: OUT not written alone ({written} entries)"));
            }
            continue;
        }
        if written != 0 {
            failures.push(format!("{name}: {written} entries left beside OUT"));
        }
        if !err.starts_with("error: ") {
            failures.push(format!("{name}: {err}"));
        }
        says_what_the_seed_wants(&name, &seed, &err, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
