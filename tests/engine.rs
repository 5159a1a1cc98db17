//! The library API: `Engine::compute` on record batches in memory gives verl's numbers (the
//! corpus) and the same columns as `advcalc run`, however the input is cut into batches.

mod common;

use std::path::Path;

use advcalc::{Config, ConfigSources, Engine};
use arrow::array::{Array, ListArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn read(path: &Path, batch_rows: usize) -> Vec<RecordBatch> {
    let file = std::fs::File::open(path).unwrap();
    ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .with_batch_size(batch_rows)
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

/// Every value of a list column, flattened, as f64 (NaN kept), and the list lengths.
fn column(batches: &[RecordBatch], name: &str) -> (Vec<f64>, Vec<usize>) {
    let (mut values, mut lengths) = (Vec::new(), Vec::new());
    for b in batches {
        let list = b
            .column_by_name(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        let list = list.as_any().downcast_ref::<ListArray>().unwrap();
        for i in 0..list.len() {
            let v = cast(&list.value(i), &DataType::Float64).unwrap();
            let v = v
                .as_any()
                .downcast_ref::<arrow::array::Float64Array>()
                .unwrap();
            lengths.push(v.len());
            values.extend(v.values().iter().copied());
        }
    }
    (values, lengths)
}

fn engine(
    dir: &Path,
    config: Option<&str>,
    estimator: Option<&str>,
    batches: &[RecordBatch],
) -> Engine {
    let config_path = config.map(|c| dir.join(c));
    let config = Config::load(&ConfigSources {
        file: config_path.as_deref(),
        estimator,
        ..Default::default()
    })
    .unwrap();
    Engine::new(&config, batches[0].schema(), "input").unwrap()
}

/// Corpus cases with steps, an adaptive controller (so the pre-pass), rejection and IS
/// weights, against verl's own outputs, for several cuts of the input into record batches.
#[test]
fn compute_gives_verls_numbers_for_any_batching() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases");
    for case in ["chain_gae", "chain_grpo", "kl_mse_adaptive"] {
        let dir = root.join(case);
        let expected = read(&dir.join("expected.parquet"), 1 << 20);
        for batch_rows in [1, 3, 1 << 20] {
            let input = read(&dir.join("input.parquet"), batch_rows);
            let out = engine(&dir, Some("config.yaml"), None, &input)
                .compute(&input)
                .unwrap();
            for name in ["token_level_rewards", "advantages", "returns"] {
                if expected[0].column_by_name(name).is_none() {
                    continue;
                }
                let (a, la) = column(&out.batches, name);
                let (e, le) = column(&expected, name);
                assert_eq!(la, le, "{case} {name}: list lengths");
                common::assert_close(
                    &format!("{case} {name} (batches of {batch_rows})"),
                    &a,
                    &e,
                    2e-5,
                    2e-4,
                );
            }
        }
    }
}

/// The demo dump: the same advantages and returns as the binary writes.
#[test]
fn compute_matches_the_cli_on_the_demo() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let tmp = tempfile::tempdir().unwrap();
    let out_path = tmp.path().join("out.parquet");
    let status = common::advcalc()
        .args(["run", "-e", "grpo", "--quiet"])
        .arg(&demo)
        .arg(&out_path)
        .status()
        .unwrap();
    assert!(status.success());
    let cli = read(&out_path, 1 << 20);
    let input = read(&demo, 50);
    let dir = demo.parent().unwrap();
    let out = engine(dir, None, Some("grpo"), &input)
        .compute(&input)
        .unwrap();
    assert_eq!(
        out.batches[0].schema().fields().len(),
        cli[0].schema().fields().len()
    );
    for name in ["advantages", "returns", "token_level_rewards", "loss_mask"] {
        assert_eq!(column(&out.batches, name), column(&cli, name), "{name}");
    }
}
