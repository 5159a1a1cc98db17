//! Formats: every pairing of Parquet, Arrow IPC file and Arrow IPC stream gives the numbers of
//! the Parquet run; `-` streams through stdin and stdout, in record-batch chunks.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::ipc::reader::{FileReader, StreamReader};
use arrow::ipc::writer::{FileWriter, StreamWriter};
use common::*;

fn demo() -> RecordBatch {
    read_parquet(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet"))
}

/// The demo as an IPC stream in batches of `rows`.
fn stream_bytes(batch: &RecordBatch, rows: usize) -> Vec<u8> {
    let mut w = StreamWriter::try_new(Vec::new(), &batch.schema()).unwrap();
    let mut start = 0;
    while start < batch.num_rows() {
        let n = rows.min(batch.num_rows() - start);
        w.write(&batch.slice(start, n)).unwrap();
        start += n;
    }
    w.into_inner().unwrap()
}

fn read_any(path: &Path) -> RecordBatch {
    let name = path.to_string_lossy();
    if name.ends_with(".parquet") {
        return read_parquet(path);
    }
    let file = std::fs::File::open(path).unwrap();
    let (schema, batches): (_, Vec<RecordBatch>) = if name.ends_with(".arrows") {
        let r = StreamReader::try_new(file, None).unwrap();
        (r.schema(), r.map(|b| b.unwrap()).collect())
    } else {
        let r = FileReader::try_new(file, None).unwrap();
        (r.schema(), r.map(|b| b.unwrap()).collect())
    };
    concat_batches(&schema, &batches).unwrap()
}

const COMPUTED: [&str; 4] = ["token_level_rewards", "advantages", "returns", "loss_mask"];

#[test]
fn every_format_pairing_gives_the_parquet_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let batch = demo();
    write_parquet(&dir.join("in.parquet"), &batch, 64);
    std::fs::write(dir.join("in.arrows"), stream_bytes(&batch, 50)).unwrap();
    let mut fw = FileWriter::try_new(
        std::fs::File::create(dir.join("in.arrow")).unwrap(),
        &batch.schema(),
    )
    .unwrap();
    fw.write(&batch).unwrap();
    fw.finish().unwrap();

    let out = run_in(
        dir,
        &["run", "-q", "-e", "grpo", "in.parquet", "reference.parquet"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let reference = read_parquet(&dir.join("reference.parquet"));
    for input in ["in.parquet", "in.arrow", "in.arrows"] {
        for output in ["out.parquet", "out.arrow", "out.arrows"] {
            let out = run_in(dir, &["run", "-q", "-f", "-e", "grpo", input, output]);
            assert!(
                out.status.success(),
                "{input} -> {output}: {}",
                stderr(&out)
            );
            let result = read_any(&dir.join(output));
            assert_eq!(result.num_rows(), reference.num_rows());
            for name in COMPUTED {
                assert_eq!(
                    lists_f32(&result, name),
                    lists_f32(&reference, name),
                    "{input} -> {output}: {name}"
                );
            }
            for f in batch.schema().fields() {
                assert_eq!(
                    result.column_by_name(f.name()).unwrap().as_ref(),
                    batch.column_by_name(f.name()).unwrap().as_ref(),
                    "{input} -> {output}: {} changed",
                    f.name()
                );
            }
        }
    }
    // Explicit formats override the extension.
    std::fs::copy(dir.join("in.arrows"), dir.join("in.bin")).unwrap();
    let out = run_in(
        dir,
        &[
            "run",
            "-q",
            "-e",
            "grpo",
            "--input-format",
            "arrows",
            "--output-format",
            "arrow",
            "in.bin",
            "out.bin",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let r = FileReader::try_new(std::fs::File::open(dir.join("out.bin")).unwrap(), None).unwrap();
    assert_eq!(
        r.map(|b| b.unwrap().num_rows()).sum::<usize>(),
        reference.num_rows()
    );
}

#[test]
fn stdin_to_stdout_in_chunks() {
    let batch = demo();
    let tmp = tempfile::tempdir().unwrap();
    write_parquet(&tmp.path().join("in.parquet"), &batch, 64);
    let out = run_in(
        tmp.path(),
        &["run", "-q", "-e", "rloo", "in.parquet", "reference.parquet"],
    );
    assert!(out.status.success());
    let reference = read_parquet(&tmp.path().join("reference.parquet"));

    let mut child = advcalc()
        .args(["run", "-q", "-e", "rloo", "-", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = stream_bytes(&batch, 7);
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stderr.is_empty(),
        "stdout carries data only; stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let reader = StreamReader::try_new(std::io::Cursor::new(output.stdout), None).unwrap();
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    let result = concat_batches(&schema, &batches).unwrap();
    for name in COMPUTED {
        assert_eq!(
            lists_f32(&result, name),
            lists_f32(&reference, name),
            "{name}"
        );
    }
}

#[test]
fn bad_streams_are_clean_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str], stdin: &[u8]| {
        let mut child = advcalc()
            .current_dir(tmp.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).ok();
        child.wait_with_output().unwrap()
    };
    let out = run(
        &["run", "-e", "grpo", "-", "out.parquet"],
        b"not arrow at all",
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: <stdin>: not a readable Arrow IPC stream"),
        "{err}"
    );
    assert!(!tmp.path().join("out.parquet").exists());
    let out = run(
        &[
            "run",
            "-e",
            "grpo",
            "--input-format",
            "arrow",
            "-",
            "out.parquet",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
