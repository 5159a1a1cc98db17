//! A Parquet IN in object storage read in place (ranged GETs: the footer by a suffix GET,
//! each column chunk by one GET) against a real S3-compatible server: moto's `moto_server`,
//! started on 127.0.0.1 and stopped by its PID (tests/common/moto.rs). The request counts
//! are the unit tests' (`io::positional::object`, on an in-memory store); here the results
//! are checked against local runs of the same files.
#![cfg(feature = "cloud")]

use std::path::Path;

use arrow_array::RecordBatchReader;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};

mod common;
use common::moto::*;

/// The demo fixture rewritten with `props` (its schema, metadata and rows kept).
fn rewritten(props: WriterProperties) -> Vec<u8> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(demo()))
        .unwrap()
        .build()
        .unwrap();
    let schema = reader.schema();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
    for batch in reader {
        w.write(&batch.unwrap()).unwrap();
    }
    w.close().unwrap();
    out
}

/// Row groups of 48 rows (6 of them, the last short) whose chunks hold many small pages.
fn many_pages() -> Vec<u8> {
    rewritten(
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(48))
            .set_data_page_size_limit(2048)
            .set_write_batch_size(4)
            .set_dictionary_enabled(false)
            .build(),
    )
}

/// `advcalc ARGS` on local paths, in `dir`.
fn local_run(s3: &Moto, args: &[&str]) -> std::process::Output {
    let out = s3.advcalc(args);
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// `run -e ESTIMATOR` from and to s3 gives the local run's columns, on `bytes` as IN.
fn run_matches_local(s3: &mut Moto, bytes: &[u8], key: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let local_in = dir.path().join("in.parquet");
    std::fs::write(&local_in, bytes).unwrap();
    s3.put(key, bytes);
    for estimator in ["grpo", "gae"] {
        let local_out = dir.path().join(format!("{estimator}.parquet"));
        let out_key = format!("out-{estimator}{}-{key}", extra.join(""));
        let mut args = vec!["run", "-e", estimator];
        args.extend_from_slice(extra);
        let mut local_args = args.clone();
        local_args.extend([local_in.to_str().unwrap(), local_out.to_str().unwrap()]);
        local_run(s3, &local_args);
        let (url_in, url_out) = (url(key), url(&out_key));
        args.extend([url_in.as_str(), url_out.as_str()]);
        let out = s3.advcalc(&args);
        assert!(out.status.success(), "{estimator}: {}", stderr(&out));
        assert_eq!(
            decoded(s3.get(&out_key).expect("OUT was written")),
            decoded(std::fs::read(&local_out).unwrap()),
            "{estimator} {extra:?}"
        );
    }
}

#[test]
fn a_multi_row_group_object_runs_as_the_local_file() {
    let Some(mut s3) = moto() else { return };
    let demo = demo();
    assert_eq!(
        SerializedFileReader::new(bytes::Bytes::from(demo.clone()))
            .unwrap()
            .num_row_groups(),
        4
    );
    run_matches_local(&mut s3, &demo, "demo.parquet", &[]);
    run_matches_local(&mut s3, &demo, "demo.parquet", &["--threads", "1"]);

    // inspect says what it says of the local file, the URL in place of the path
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("demo.parquet");
    std::fs::write(&local, &demo).unwrap();
    let theirs = local_run(&s3, &["inspect", local.to_str().unwrap()]);
    let ours = s3.advcalc(&["inspect", &url("demo.parquet")]);
    assert!(ours.status.success(), "{}", stderr(&ours));
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&theirs.stdout)
            .replace(local.to_str().unwrap(), &url("demo.parquet"))
    );
}

#[test]
fn chunks_of_many_pages_read_correctly() {
    let Some(mut s3) = moto() else { return };
    let bytes = many_pages();
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes.clone())).unwrap();
    assert_eq!(reader.num_row_groups(), 6);
    let rg = reader.get_row_group(0).unwrap();
    // the token lists' chunks: many pages each
    let pages = rg.get_column_page_reader(3).unwrap().count();
    assert!(pages >= 10, "{pages} pages");
    run_matches_local(&mut s3, &bytes, "pages.parquet", &[]);

    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("pages.parquet");
    std::fs::write(&local, &bytes).unwrap();
    let theirs = local_run(&s3, &["inspect", local.to_str().unwrap()]);
    let ours = s3.advcalc(&["inspect", &url("pages.parquet")]);
    assert!(ours.status.success(), "{}", stderr(&ours));
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&theirs.stdout)
            .replace(local.to_str().unwrap(), &url("pages.parquet"))
    );
}

/// Non-Parquet IN (Arrow IPC) is still fetched whole and read as before.
#[test]
fn an_arrow_ipc_object_still_reads() {
    let Some(mut s3) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let arrow = dir.path().join("demo.arrow");
    // the demo as Arrow IPC, by advcalc itself (OUT's format by extension)
    let local_out = dir.path().join("out.parquet");
    local_run(
        &s3,
        &[
            "run",
            "-e",
            "grpo",
            fixture.to_str().unwrap(),
            arrow.to_str().unwrap(),
        ],
    );
    local_run(
        &s3,
        &[
            "run",
            "-e",
            "rloo",
            arrow.to_str().unwrap(),
            local_out.to_str().unwrap(),
        ],
    );
    s3.put("demo.arrow", &std::fs::read(&arrow).unwrap());
    let out = s3.advcalc(&[
        "run",
        "-e",
        "rloo",
        &url("demo.arrow"),
        &url("from-arrow.parquet"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        decoded(s3.get("from-arrow.parquet").unwrap()),
        decoded(std::fs::read(&local_out).unwrap())
    );
}
