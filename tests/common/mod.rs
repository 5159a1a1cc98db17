//! Helpers shared by the integration tests: write small Parquet inputs, run the real
//! binary, read its output back.
#![allow(dead_code)]

use std::fs::File;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Float32Builder, Int8Builder, ListArray, ListBuilder, RecordBatch,
    StringArray,
};
use arrow::compute::concat_batches;
use arrow::datatypes::Float32Type;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;

pub mod corpus;
#[cfg(feature = "cloud")]
pub mod fault_proxy;
pub mod metrics;
#[cfg(feature = "cloud")]
pub mod moto;

/// The one numeric oracle (`assert_close` and its rules), shared with the unit tests.
#[path = "../../crates/advcalc-maths/src/test_support.rs"]
mod test_support;
#[allow(unused_imports)] // not every test binary compares numbers
pub use test_support::*;

/// Every directory under a corpus's `cases/`, sorted, whether it holds a case.json or not (a
/// directory without one is a failing case, not a skipped one).
pub fn case_dirs(root: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

pub fn advcalc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_advcalc"))
}

/// Run advcalc with `args` in `dir`.
pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    advcalc()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("advcalc runs")
}

/// Copy a directory tree (a fixture, to write next to it).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn write_parquet(path: &Path, batch: &RecordBatch, rows_per_group: usize) {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group.max(1)))
        .build();
    let mut w =
        ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

pub fn read_parquet(path: &Path) -> RecordBatch {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    let schema = builder.schema().clone();
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
    concat_batches(&schema, &batches).unwrap()
}

/// A list<float32> column from rows.
pub fn f32_lists(rows: &[Vec<f32>]) -> ArrayRef {
    let mut b = ListBuilder::new(Float32Builder::new());
    for r in rows {
        b.append_value(r.iter().map(|&v| Some(v)));
    }
    Arc::new(b.finish())
}

/// A list<int8> mask column from rows.
pub fn i8_lists(rows: &[Vec<i8>]) -> ArrayRef {
    let mut b = ListBuilder::new(Int8Builder::new());
    for r in rows {
        b.append_value(r.iter().map(|&v| Some(v)));
    }
    Arc::new(b.finish())
}

pub fn strings(values: &[&str]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

/// Rows of a list column of numbers (list or large_list) as f32 vectors. A null row or a
/// null value panics: it would otherwise read as whatever sits in the values buffer.
pub fn lists_f32(batch: &RecordBatch, name: &str) -> Vec<Vec<f32>> {
    use arrow::datatypes::{DataType, Field};
    let col = batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"));
    let as_list = DataType::List(Arc::new(Field::new("item", DataType::Float32, true)));
    let col = arrow::compute::cast(col, &as_list).unwrap();
    let list: &ListArray = col.as_list::<i32>();
    assert_eq!(list.null_count(), 0, "column {name} has null rows");
    (0..list.len())
        .map(|i| {
            let row = list.value(i);
            assert_eq!(row.null_count(), 0, "column {name} row {i} has null values");
            row.as_primitive::<Float32Type>().values().to_vec()
        })
        .collect()
}

/// A small valid GRPO input: two groups, ragged rows.
pub fn grpo_batch() -> RecordBatch {
    RecordBatch::try_from_iter(vec![
        ("uid", strings(&["a", "b", "a", "b"])),
        (
            "response_mask",
            i8_lists(&[vec![1, 1], vec![1, 0, 1], vec![1], vec![0, 1]]),
        ),
        (
            "rm_scores",
            f32_lists(&[
                vec![0.0, 1.0],
                vec![0.0, 0.0, 2.0],
                vec![0.0],
                vec![0.0, 4.0],
            ]),
        ),
    ])
    .unwrap()
}

/// ~1.6M tokens in 16 000 rows (16 row groups when written 1000 rows a group): a run on it
/// lasts long enough to be caught while writing.
pub fn large_batch() -> RecordBatch {
    let (rows, len) = (16_000, 100);
    let uids: Vec<String> = (0..rows).map(|i| format!("u{}", i / 8)).collect();
    let uid_refs: Vec<&str> = uids.iter().map(String::as_str).collect();
    let masks: Vec<Vec<i8>> = (0..rows).map(|_| vec![1; len]).collect();
    let scores: Vec<Vec<f32>> = (0..rows)
        .map(|i| {
            let mut r = vec![0.0; len];
            r[len - 1] = (i % 3) as f32;
            r
        })
        .collect();
    RecordBatch::try_from_iter(vec![
        ("uid", strings(&uid_refs)),
        ("response_mask", i8_lists(&masks)),
        ("rm_scores", f32_lists(&scores)),
        ("values", f32_lists(&scores)),
    ])
    .unwrap()
}

/// advcalc's temporary files in `dir` (`.advcalc-*`).
pub fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".advcalc-"))
        .collect()
}

/// Wait until a spawned run has its temporary OUT in `dir` (it is writing), and a little more,
/// so that a fault delivered next catches it mid-write; fails if the run ends first.
pub fn wait_until_writing(child: &mut std::process::Child, dir: &Path) {
    use std::time::{Duration, Instant};
    let start = Instant::now();
    while leftovers(dir).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "advcalc finished before it was caught writing"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no temporary file appeared"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        child.try_wait().unwrap().is_none(),
        "advcalc finished before it was caught writing"
    );
}

/// The demo dump with a `step` column (rows 0–127 step 1, the rest step 2), written to
/// `dir/stepped.parquet` in row groups of 50 (so steps and row groups do not line up).
pub fn stepped_demo(dir: &Path) -> std::path::PathBuf {
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let batch = read_parquet(&demo);
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

/// Rollout correction with IS weights and two rejection options that remove something from
/// the demo dump (its train/rollout log-ratios are within a few percent).
pub const DEMO_CORRECTION: [&str; 8] = [
    "--set",
    "algorithm.rollout_correction.rollout_is=token",
    "--set",
    "algorithm.rollout_correction.rollout_is_threshold=2.0",
    "--set",
    "algorithm.rollout_correction.rollout_rs=token_k1,seq_mean_k3",
    "--set",
    "algorithm.rollout_correction.rollout_rs_threshold=\"0.98_1.02,0.0002\"",
];

/// README.md and every Markdown file under docs/ (not below it), in name order.
pub fn doc_files() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}
