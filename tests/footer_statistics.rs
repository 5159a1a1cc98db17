//! OUT keeps the statistics of the columns it copies from IN: the chunks are copied byte for
//! byte, their statistics go into OUT's footer unchanged, and the float columns carry the
//! type-defined column order IN's writer gave them (parquet 60 would mark them IEEE 754
//! total order, under which Arrow C++ readers drop min/max: python/tests/test_footer.py reads
//! OUT with pyarrow). Checked on the demo (written by pyarrow) for `run` and `loss`.

mod common;

use std::fs::File;
use std::path::Path;

use parquet::basic::{ColumnOrder, SortOrder, Type};
use parquet::file::reader::{FileReader, SerializedFileReader};

use common::{run_in, stderr};

fn footer(path: &Path) -> parquet::file::metadata::ParquetMetaData {
    SerializedFileReader::new(File::open(path).unwrap())
        .unwrap()
        .metadata()
        .clone()
}

#[test]
fn out_s_footer_has_in_s_statistics_for_every_copied_column() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ppo.yaml");
    std::fs::write(
        &config,
        "algorithm:\n  adv_estimator: grpo\nactor_rollout_ref:\n  actor:\n    ppo_mini_batch_size: 16\n  rollout:\n    n: 8\n",
    )
    .unwrap();
    let (demo_s, config_s) = (demo.to_str().unwrap(), config.to_str().unwrap());
    for args in [
        vec!["run", "-q", "-e", "grpo", demo_s, "out.parquet"],
        vec!["loss", "-q", "-c", config_s, demo_s, "out.parquet"],
    ] {
        std::fs::remove_file(dir.path().join("out.parquet")).ok();
        let out = run_in(dir.path(), &args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let (a, b) = (footer(&demo), footer(&dir.path().join("out.parquet")));
        assert_eq!(a.num_row_groups(), b.num_row_groups());
        let leaves_in = a.file_metadata().schema_descr().num_columns();
        for rg in 0..a.num_row_groups() {
            for leaf in 0..leaves_in {
                let (ca, cb) = (a.row_group(rg).column(leaf), b.row_group(rg).column(leaf));
                assert_eq!(ca.column_path(), cb.column_path());
                assert_eq!(
                    ca.statistics(),
                    cb.statistics(),
                    "{args:?}: row group {rg}, {}",
                    ca.column_path()
                );
                assert!(cb.statistics().is_some());
            }
        }
        // every float column (copied or computed) under the type-defined order
        let descr = b.file_metadata().schema_descr();
        let orders = b.file_metadata().column_orders().expect("column orders");
        for (k, order) in orders.iter().enumerate() {
            if matches!(descr.column(k).physical_type(), Type::FLOAT | Type::DOUBLE) {
                assert_eq!(
                    *order,
                    ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::SIGNED),
                    "{args:?}: {}",
                    descr.column(k).path()
                );
            }
        }
    }
}
