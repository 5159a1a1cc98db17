//! Datasets in object storage against a real S3-compatible server (moto, started here on
//! 127.0.0.1, see tests/common/moto.rs): a prefix and a glob of objects run s3 -> s3 as a
//! local dataset of the same files runs, `inspect` and `compare` on a prefix, `--resume`
//! after a SIGKILL (an input rewritten since its output was made is redone: its ETag
//! changed), concurrent writers to one OUT (exactly one wins), a versioned bucket's
//! `advcalc.input_version`, and a listing of more than one page.
#![cfg(feature = "cloud")]

use std::path::Path;
use std::process::Stdio;

mod common;
use common::moto::*;
use common::{large_batch, read_parquet, write_parquet};

/// `files` step files of `large_batch`'s rows (2 row groups each) under `dir/in/`, and the
/// same bytes under `prefix` in the bucket.
fn dataset(s3: &mut Moto, dir: &Path, prefix: &str, files: usize) {
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let batch = large_batch();
    let per = batch.num_rows() / files;
    for f in 0..files {
        let name = format!("step={}.parquet", f + 1);
        let path = dir.join("in").join(&name);
        write_parquet(&path, &batch.slice(f * per, per), per / 2);
        s3.put(&format!("{prefix}{name}"), &std::fs::read(&path).unwrap());
    }
}

fn local(dir: &Path, args: &[&str]) -> std::process::Output {
    common::run_in(dir, args)
}

fn ok(out: &std::process::Output) {
    assert!(out.status.success(), "{}", stderr(out));
}

/// An output's `advcalc.input_etag`.
fn input_etag(parquet: Vec<u8>) -> Option<String> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(parquet)).unwrap();
    let kv = reader.metadata().file_metadata().key_value_metadata()?;
    kv.iter()
        .find(|kv| kv.key == "advcalc.input_etag")?
        .value
        .clone()
}

/// The output keys under `prefix`, relative to it, sorted.
fn outputs(s3: &mut Moto, prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = s3
        .keys(prefix)
        .into_iter()
        .map(|k| k[prefix.len()..].to_string())
        .collect();
    keys.sort();
    keys
}

#[test]
fn a_prefix_and_a_glob_run_as_the_local_dataset_does() {
    let Some(mut s3) = moto() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    dataset(&mut s3, dir, "dumps/", 4);
    // not data, or not the dataset's: skipped as a local dataset skips them
    s3.put("dumps/_SUCCESS", b"");
    s3.put("dumps/notes.txt", b"not data");
    s3.put("dumps2/step=9.parquet", b"not even parquet");

    ok(&local(dir, &["run", "-q", "-e", "grpo", "in", "out"]));
    let out = s3.grpo("dumps/", "adv/");
    ok(&out);
    assert!(stderr(&out).contains("from 4 files"), "{}", stderr(&out));
    let names: Vec<String> = (1..=4).map(|i| format!("step={i}.parquet")).collect();
    assert_eq!(outputs(&mut s3, "adv/"), names);
    for name in &names {
        let got = s3.get(&format!("adv/{name}")).unwrap();
        let want = std::fs::read(dir.join("out").join(name)).unwrap();
        assert!(decoded(got) == decoded(want), "{name}");
    }

    // each output records its input's ETag, which inspect shows
    let out = s3.advcalc(&["inspect", &url("adv/step=2.parquet")]);
    ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("input_etag"), "{text}");
    assert!(text.contains(&url("dumps/step=2.parquet")), "{text}");

    // an existing output without --resume or --force: refused, nothing touched
    let before = s3.get("adv/step=1.parquet");
    let out = s3.grpo("dumps/", "adv/");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert_eq!(s3.get("adv/step=1.parquet"), before);

    // s3 -> a local directory: the same outputs
    let out = s3.advcalc(&[
        "run",
        "-q",
        "-e",
        "grpo",
        &url("dumps/"),
        dir.join("from-s3").to_str().unwrap(),
    ]);
    ok(&out);
    for name in &names {
        let got = std::fs::read(dir.join("from-s3").join(name)).unwrap();
        let want = std::fs::read(dir.join("out").join(name)).unwrap();
        assert!(decoded(got) == decoded(want), "{name}");
    }

    // --resume into the local directory keeps every output there (their inputs' ETags are
    // the objects' own)
    let out = s3.advcalc(&[
        "run",
        "-e",
        "grpo",
        "--resume",
        &url("dumps/"),
        dir.join("from-s3").to_str().unwrap(),
    ]);
    ok(&out);
    assert!(
        stderr(&out).contains("from 4 files (4 kept by --resume)"),
        "{}",
        stderr(&out)
    );

    // a glob: the objects it matches, as the local glob runs
    ok(&local(
        dir,
        &[
            "run",
            "-q",
            "-e",
            "grpo",
            "in/step=[12].parquet",
            "out-glob",
        ],
    ));
    let out = s3.advcalc(&[
        "run",
        "-q",
        "-e",
        "grpo",
        &url("dumps/step=[12].parquet"),
        &url("adv-glob/"),
    ]);
    ok(&out);
    assert_eq!(outputs(&mut s3, "adv-glob/"), names[..2]);
    for name in &names[..2] {
        let got = s3.get(&format!("adv-glob/{name}")).unwrap();
        let want = std::fs::read(dir.join("out-glob").join(name)).unwrap();
        assert!(decoded(got) == decoded(want), "{name}");
    }

    // inspect and compare on the prefix report what they report on the local dataset
    for cmd in [vec!["inspect"], vec!["compare", "-e", "grpo", "-e", "rloo"]] {
        let s3_in = url("dumps/");
        let from_s3 = s3.advcalc(&[&cmd[..], &[s3_in.as_str()]].concat());
        ok(&from_s3);
        let here = local(dir, &[&cmd[..], &["in"]].concat());
        ok(&here);
        // the same report, but for the name of IN
        let text = |o: &std::process::Output, name: &str| {
            let t =
                String::from_utf8_lossy(&o.stdout).replacen(&format!(": {name} ("), ": IN (", 1);
            match t.strip_prefix(&format!("{name}: ")) {
                Some(rest) => format!("IN: {rest}"),
                None => t,
            }
        };
        assert_eq!(text(&from_s3, &s3_in), text(&here, "in"), "{cmd:?}");
    }

    // report on the prefix, as on the local dataset
    let report = dir.join("report.html");
    let out = s3.advcalc(&[
        "report",
        "-e",
        "grpo",
        &url("dumps/"),
        "-o",
        report.to_str().unwrap(),
    ]);
    ok(&out);
    assert!(report.is_file());

    // nothing to read: exit 1 naming the URL, nothing written
    for empty in [url("nothing/"), url("dumps/*.arrow")] {
        let out = s3.advcalc(&["run", "-e", "grpo", &empty, &url("adv-empty/")]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains(&empty), "{}", stderr(&out));
        assert!(s3.keys("adv-empty/").is_empty());
    }
    // OUT inside IN: a usage error
    let out = s3.grpo("dumps/", "dumps/adv/");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// The bar: `--resume` after a SIGKILL finishes the job; every output visible at any
/// time is complete; the result is the uninterrupted run's; an input rewritten since its
/// output was made (another ETag) is redone, one put again unchanged (same ETag, newer
/// Last-Modified) is kept.
#[cfg(unix)]
#[test]
fn resume_after_a_kill_keeps_the_finished_objects() {
    let Some(mut s3) = moto() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let files = 16;
    dataset(&mut s3, dir, "dumps/", files);
    let run = ["run", "-q", "-e", "grpo", "--threads", "1"];
    let (inp, out) = (url("dumps/"), url("adv/"));

    // the runs' temporary files (local copies of the objects, the outputs before their PUT)
    // go here: a SIGKILL leaves its own, a finished run none
    let spools = dir.join("tmp");
    std::fs::create_dir(&spools).unwrap();
    let spooled = || {
        let mut names: Vec<_> = std::fs::read_dir(&spools)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let mut child = s3
        .command()
        .env("TMPDIR", &spools)
        .args(run)
        .args([&inp, &out])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let seen = loop {
        let seen = outputs(&mut s3, "adv/");
        if !seen.is_empty() || child.try_wait().unwrap().is_some() {
            break seen;
        }
        assert!(start.elapsed().as_secs() < 300, "no output appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    child.kill().ok(); // SIGKILL (or it finished first: then everything is kept)
    child.wait().unwrap();
    let done = outputs(&mut s3, "adv/");
    assert!(done.len() >= seen.len());
    eprintln!("killed with {} of {files} outputs written", done.len());
    let before: Vec<Vec<u8>> = done
        .iter()
        .map(|f| s3.get(&format!("adv/{f}")).unwrap())
        .collect();
    // every output there is complete: it decodes, with its input's rows
    for (f, bytes) in done.iter().zip(&before) {
        let (_, batches) = decoded(bytes.clone());
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 16_000 / files, "{f}");
    }

    if !done.is_empty() {
        let again = s3.advcalc(&[&run[..], &[inp.as_str(), out.as_str()]].concat());
        assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
        assert!(
            stderr(&again).contains("already exists"),
            "{}",
            stderr(&again)
        );
        assert!(stderr(&again).contains("--resume"), "{}", stderr(&again));
    }

    // what the killed run left in its temporary directory (its local results) is removed by
    // the next run, which leaves none of its own
    let resumed = s3
        .command()
        .env("TMPDIR", &spools)
        .args(["run", "-e", "grpo", "--resume", &inp, &out])
        .output()
        .unwrap();
    ok(&resumed);
    assert_eq!(
        spooled(),
        Vec::<std::ffi::OsString>::new(),
        "temporary files left after the resumed run"
    );
    let kept = if done.is_empty() {
        format!("from {files} files")
    } else {
        format!("from {files} files ({} kept by --resume)", done.len())
    };
    assert!(stderr(&resumed).contains(&kept), "{}", stderr(&resumed));
    for (f, b) in done.iter().zip(&before) {
        assert!(
            s3.get(&format!("adv/{f}")).as_ref() == Some(b),
            "{f} was redone"
        );
    }
    let all: Vec<String> = outputs(&mut s3, "adv/");
    assert_eq!(all.len(), files, "{all:?}");

    // the same bytes as a run never interrupted
    ok(&s3.advcalc(&[&run[..], &[inp.as_str(), url("clean/").as_str()]].concat()));
    for f in &all {
        assert!(
            s3.get(&format!("adv/{f}")) == s3.get(&format!("clean/{f}")),
            "{f}"
        );
    }

    // an input put again unchanged (same ETag, newer Last-Modified): kept
    let step3 = std::fs::read(dir.join("in/step=3.parquet")).unwrap();
    s3.put("dumps/step=3.parquet", &step3);
    let out3 = s3.get("adv/step=3.parquet");
    let again = s3.advcalc(&["run", "-e", "grpo", "--resume", &inp, &out]);
    ok(&again);
    assert!(
        stderr(&again).contains(&format!("({files} kept by --resume)")),
        "{}",
        stderr(&again)
    );
    assert_eq!(s3.get("adv/step=3.parquet"), out3);

    // an input rewritten (other row groups): its output alone is redone; then rewritten with
    // the same size and rows (only its Arrow schema metadata differs): only the ETag says it
    // changed, and that is enough
    let batch = read_parquet(&dir.join("in/step=3.parquet"));
    let rewritten = dir.join("step=3-again.parquet");
    let mut sizes = Vec::new();
    for note in ["1", "2"] {
        let meta: std::collections::HashMap<String, String> =
            [("rewrite".to_string(), note.to_string())].into();
        let schema = std::sync::Arc::new(batch.schema().as_ref().clone().with_metadata(meta));
        write_parquet(&rewritten, &batch.clone().with_schema(schema).unwrap(), 300);
        let bytes = std::fs::read(&rewritten).unwrap();
        sizes.push(bytes.len());
        s3.put("dumps/step=3.parquet", &bytes);
        let others: Vec<Option<Vec<u8>>> =
            all.iter().map(|f| s3.get(&format!("adv/{f}"))).collect();
        let again = s3.advcalc(&["run", "-e", "grpo", "--resume", &inp, &out]);
        ok(&again);
        assert!(
            stderr(&again).contains(&format!("({} kept by --resume)", files - 1)),
            "rewrite {note}: {}",
            stderr(&again)
        );
        for (f, b) in all.iter().zip(&others) {
            let now = s3.get(&format!("adv/{f}"));
            if f == "step=3.parquet" {
                let etag = |b: &Option<Vec<u8>>| input_etag(b.clone().unwrap());
                assert!(etag(&now) != etag(b), "rewrite {note}: {f} was kept");
            } else {
                assert!(now == *b, "rewrite {note}: {f} was redone");
            }
        }
    }
    assert_eq!(sizes[0], sizes[1], "the second rewrite keeps the size");
    // and it is what a local run of the rewritten file gives
    std::fs::copy(&rewritten, dir.join("in/step=3.parquet")).unwrap();
    ok(&local(dir, &["run", "-q", "-e", "grpo", "in", "out"]));
    assert!(
        decoded(s3.get("adv/step=3.parquet").unwrap())
            == decoded(std::fs::read(dir.join("out/step=3.parquet")).unwrap())
    );
}

/// Eight `advcalc run`s to one OUT at once: exactly one writes it, the others exit 2
/// (`already exists`), and OUT is one complete output.
#[test]
fn concurrent_writers_to_one_out_exactly_one_wins() {
    let Some(mut s3) = moto() else { return };
    s3.put("demo.parquet", &demo());
    let children: Vec<_> = (0..8)
        .map(|_| {
            s3.command()
                .args([
                    "run",
                    "-q",
                    "-e",
                    "grpo",
                    &url("demo.parquet"),
                    &url("race.parquet"),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let results: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let winners = results.iter().filter(|o| o.status.success()).count();
    assert_eq!(
        winners,
        1,
        "{:?}",
        results.iter().map(stderr).collect::<Vec<_>>()
    );
    for o in results.iter().filter(|o| !o.status.success()) {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
        assert!(stderr(o).contains("already exists"), "{}", stderr(o));
    }
    let tmp = tempfile::tempdir().unwrap();
    let want = tmp.path().join("local.parquet");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    ok(&s3.advcalc(&[
        "run",
        "-q",
        "-e",
        "grpo",
        fixture.to_str().unwrap(),
        want.to_str().unwrap(),
    ]));
    assert!(decoded(s3.get("race.parquet").unwrap()) == decoded(std::fs::read(&want).unwrap()));
}

/// In a versioned bucket an output also records its input's version (`advcalc.input_version`).
#[test]
fn a_versioned_buckets_inputs_record_their_version() {
    let Some(mut s3) = moto() else { return };
    let (status, body) = s3.request(
        "PUT",
        &format!("/{BUCKET}?versioning"),
        b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>",
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let tmp = tempfile::tempdir().unwrap();
    dataset(&mut s3, tmp.path(), "dumps/", 2);
    ok(&s3.advcalc(&["run", "-q", "-e", "grpo", &url("dumps/"), &url("adv/")]));
    let out = s3.advcalc(&["inspect", "--json", &url("adv/step=1.parquet")]);
    ok(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let provenance = &json["provenance"];
    assert!(
        provenance["input_version"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "{provenance}"
    );
    assert!(provenance["input_etag"].as_str().is_some(), "{provenance}");
}

/// A prefix of more than one page of keys (S3 lists 1000 a page): the listing follows the
/// pages, and the data objects after the first page are found.
#[test]
fn a_listing_longer_than_one_page_is_followed() {
    let Some(mut s3) = moto() else { return };
    for i in 0..1001 {
        s3.put(&format!("many/a-{i:04}.txt"), b"");
    }
    let tmp = tempfile::tempdir().unwrap();
    dataset(&mut s3, tmp.path(), "many/", 2);
    let out = s3.grpo("many/", "adv/");
    ok(&out);
    assert!(stderr(&out).contains("from 2 files"), "{}", stderr(&out));
    assert_eq!(
        outputs(&mut s3, "adv/"),
        ["step=1.parquet", "step=2.parquet"]
    );
}

#[test]
fn a_local_dataset_runs_into_a_prefix_and_resumes_by_the_inputs_modification_time() {
    let Some(mut s3) = moto() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    dataset(&mut s3, dir, "unused/", 3);
    ok(&local(dir, &["run", "-q", "-e", "grpo", "in", "out"]));

    let inp = dir.join("in");
    let inp = inp.to_str().unwrap();
    let out = s3.advcalc(&["run", "-e", "grpo", inp, &url("adv/")]);
    ok(&out);
    assert!(stderr(&out).contains("from 3 files"), "{}", stderr(&out));
    let names: Vec<String> = (1..=3).map(|i| format!("step={i}.parquet")).collect();
    assert_eq!(outputs(&mut s3, "adv/"), names);
    let first: Vec<Vec<u8>> = names
        .iter()
        .map(|n| s3.get(&format!("adv/{n}")).unwrap())
        .collect();
    for (name, got) in names.iter().zip(&first) {
        let want = std::fs::read(dir.join("out").join(name)).unwrap();
        assert!(decoded(got.clone()) == decoded(want), "{name}");
    }

    // again without --resume: refused, nothing replaced
    let again = s3.advcalc(&["run", "-e", "grpo", inp, &url("adv/")]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );

    // --resume keeps all three; after an input is touched, it redoes that one only
    let resumed = s3.advcalc(&["run", "-e", "grpo", "--resume", inp, &url("adv/")]);
    ok(&resumed);
    assert!(
        stderr(&resumed).contains("(3 kept by --resume)"),
        "{}",
        stderr(&resumed)
    );
    let touched = dir.join("in").join("step=2.parquet");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&touched)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let resumed = s3.advcalc(&["run", "-e", "grpo", "--resume", inp, &url("adv/")]);
    ok(&resumed);
    assert!(
        stderr(&resumed).contains("(2 kept by --resume)"),
        "{}",
        stderr(&resumed)
    );
    for (name, before) in names.iter().zip(&first) {
        let now = s3.get(&format!("adv/{name}")).unwrap();
        assert!(decoded(now.clone()) == decoded(before.clone()), "{name}");
    }
}

#[test]
fn keys_with_glob_characters_and_metrics_objects() {
    let Some(mut s3) = moto() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    dataset(&mut s3, dir, "unused/", 2);
    // the dataset under a directory whose name holds `[`, `]` and `=`
    for i in 1..=2 {
        let name = format!("step={i}.parquet");
        let bytes = std::fs::read(dir.join("in").join(&name)).unwrap();
        s3.put(&format!("odd/exp[lr=1e-5]/{name}"), &bytes);
    }
    std::fs::rename(dir.join("in"), dir.join("exp[lr=1e-5]")).unwrap();
    std::fs::create_dir(dir.join("in")).unwrap();
    std::fs::rename(
        dir.join("exp[lr=1e-5]"),
        dir.join("in").join("exp[lr=1e-5]"),
    )
    .unwrap();
    let local_metrics = dir.join("m.json");
    ok(&local(
        dir,
        &[
            "run",
            "-q",
            "-e",
            "grpo",
            "--metrics",
            local_metrics.to_str().unwrap(),
            "in",
            "out",
        ],
    ));

    let out = s3.advcalc(&[
        "run",
        "-e",
        "grpo",
        "--metrics",
        &url("odd-metrics.json"),
        &url("odd/"),
        &url("odd-adv/"),
    ]);
    ok(&out);
    // the outputs under the keys as they are (not percent-encoded), equal to the local run
    let names = ["exp[lr=1e-5]/step=1.parquet", "exp[lr=1e-5]/step=2.parquet"];
    assert_eq!(outputs(&mut s3, "odd-adv/"), names);
    for name in names {
        let got = s3.get(&format!("odd-adv/{name}")).unwrap();
        let want = std::fs::read(dir.join("out").join(name)).unwrap();
        assert!(decoded(got) == decoded(want), "{name}");
    }
    // the dataset's metrics put at their URL, as the local run writes them
    assert_eq!(
        s3.get("odd-metrics.json").expect("the metrics object"),
        std::fs::read(&local_metrics).unwrap()
    );
    // the outputs are found again: refused before any work, kept by --resume
    let again = s3.grpo("odd/", "odd-adv/");
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("--resume"), "{}", stderr(&again));
    let resumed = s3.advcalc(&[
        "run",
        "-e",
        "grpo",
        "--resume",
        &url("odd/"),
        &url("odd-adv/"),
    ]);
    ok(&resumed);
    assert!(
        stderr(&resumed).contains("(2 kept by --resume)"),
        "{}",
        stderr(&resumed)
    );
}

/// `batch` as an Arrow IPC file.
fn ipc_bytes(batch: &arrow_array::RecordBatch) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = arrow::ipc::writer::FileWriter::try_new(&mut out, &batch.schema()).unwrap();
    w.write(batch).unwrap();
    w.finish().unwrap();
    drop(w);
    out
}

#[test]
fn resume_over_arrow_ipc_outputs_keeps_them() {
    let Some(mut s3) = moto() else { return };
    let batch = large_batch().slice(0, 2000);
    let half = batch.num_rows() / 2;
    s3.put("ipc/step=1.arrow", &ipc_bytes(&batch.slice(0, half)));
    s3.put("ipc/step=2.arrow", &ipc_bytes(&batch.slice(half, half)));
    let out = s3.grpo("ipc/", "ipc-adv/");
    ok(&out);
    assert_eq!(
        outputs(&mut s3, "ipc-adv/"),
        ["step=1.arrow", "step=2.arrow"]
    );
    assert_eq!(&s3.get("ipc-adv/step=1.arrow").unwrap()[..6], b"ARROW1");
    // the outputs' provenance is read from their footers: both kept
    assert_kept(&s3.resume("ipc/", "ipc-adv/"), 2);
    // an input rewritten since: its output is redone, the other kept
    s3.put("ipc/step=2.arrow", &ipc_bytes(&batch.slice(half, half - 8)));
    assert_kept(&s3.resume("ipc/", "ipc-adv/"), 1);
}
