//! The library API: `Engine::compute` on record batches in memory gives verl's numbers (the
//! corpus) and the same columns as `advcalc run`, however the input is cut into batches.

mod common;

use std::path::Path;

use advcalc::{Config, ConfigSources, Engine, Exchange, PlanShard, RowStats};
use arrow::array::{Array, Int64Array, ListArray, RecordBatch};
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

/// The engine a corpus case's `case.json` arguments (`--config`, `-e`, `--set`) describe.
fn case_engine(dir: &Path, batches: &[RecordBatch]) -> Engine {
    case_engine_with(dir, batches, &[])
}

/// [`case_engine`] with more `--set` overrides after the case's own.
fn case_engine_with(dir: &Path, batches: &[RecordBatch], extra: &[&str]) -> Engine {
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
    let args: Vec<&str> = spec["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let (mut config, mut estimator, mut sets) = (None, None, Vec::new());
    for pair in args.chunks(2) {
        match pair {
            ["--config", c] => config = Some(dir.join(c)),
            ["-e" | "--estimator", e] => estimator = Some(*e),
            ["--set", s] => sets.push(s.to_string()),
            other => panic!("case argument {other:?} not handled here"),
        }
    }
    sets.extend(extra.iter().map(|s| s.to_string()));
    let config = Config::load(&ConfigSources {
        file: config.as_deref(),
        estimator,
        sets: &sets,
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

/// The passes as a Ray job would run them: pass 1 per record batch with the statistics sent
/// as bytes, the plan cut into one shard per step and sent as bytes, pass 2 per record batch
/// with only its step's shard — the same bits as `compute`, and verl's numbers.
#[test]
fn sharded_serialised_passes_equal_compute() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases");
    for case in [
        "chain_gae",
        "kl_mse_adaptive",
        "chain_rloo",
        "grpo_steps",
        "steps_adaptive_gae",
        // the estimators with their own pass-1 statistics and plan parts
        "optimal_token_baseline_is",
        "tir_optimal_token_baseline_holes",
        "opo_empty_group",
        "chain_reinforce_plus_plus",
    ] {
        let dir = root.join(case);
        let input = read(&dir.join("input.parquet"), 1);
        let engine = case_engine(&dir, &input);
        let whole = engine.compute(&input).unwrap();

        let constants = if engine.needs_prepass() {
            let mut pre = RowStats::default();
            for (row, batch) in input.iter().enumerate() {
                let bytes = engine
                    .prepass_stats(batch, row)
                    .unwrap()
                    .to_bytes()
                    .unwrap();
                pre.append(RowStats::from_bytes(&bytes).unwrap());
            }
            engine.constants(&pre).unwrap()
        } else {
            engine.start()
        };
        let mut stats = RowStats::default();
        for (row, batch) in input.iter().enumerate() {
            let s = engine.row_stats(batch, row, &constants).unwrap();
            let back = RowStats::from_bytes(&s.to_bytes().unwrap()).unwrap();
            assert_eq!(back, s, "{case}: row stats round trip");
            stats.append(back);
        }
        let prepared = engine.plan(stats).unwrap();
        let steps = prepared.steps();
        let shards: Vec<PlanShard> = steps
            .iter()
            .map(|&s| {
                let shard = prepared.for_step(s);
                let back = PlanShard::from_bytes(&shard.to_bytes().unwrap()).unwrap();
                assert_eq!(back, shard, "{case}: shard round trip");
                back
            })
            .collect();
        let step_of = |batch: &RecordBatch| -> Option<i64> {
            let s = cast(batch.column_by_name("step")?, &DataType::Int64).unwrap();
            Some(s.as_any().downcast_ref::<Int64Array>().unwrap().value(0))
        };
        let mut out = Vec::new();
        for (row, batch) in input.iter().enumerate() {
            let shard = &shards[steps.iter().position(|&s| s == step_of(batch)).unwrap()];
            out.push(engine.token_outputs(batch, row, shard).unwrap());
            // another step's shard does not hold this row
            if let Some(other) = shards.iter().find(|s| s.steps() != shard.steps()) {
                let err = engine.token_outputs(batch, row, other).unwrap_err();
                assert!(err.message().contains("is not in the plan shard"), "{err}");
            }
        }
        for name in ["token_level_rewards", "advantages", "returns"] {
            let (a, la) = column(&out, name);
            let (e, le) = column(&whole.batches, name);
            assert_eq!(la, le, "{case} {name}");
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&a),
                bits(&e),
                "{case} {name}: the same bits as compute"
            );
        }
    }
}

#[test]
fn bytes_of_another_kind_are_refused() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases/grpo_steps");
    let input = read(&dir.join("input.parquet"), 1 << 20);
    let engine = case_engine(&dir, &input);
    let stats = engine.row_stats(&input[0], 0, &engine.start()).unwrap();
    let bytes = engine.plan(stats).unwrap().whole().to_bytes().unwrap();
    let err = RowStats::from_bytes(&bytes).unwrap_err();
    assert_eq!(err.message(), "not advcalc row_stats bytes");
    assert!(PlanShard::from_bytes(b"not arrow").is_err());
}

/// The pass API refuses the pieces of another pass or configuration instead of computing
/// with them: pass 1 without the pre-pass a configuration needs, pre-pass statistics given
/// to the plan, statistics or a shard of another configuration.
#[test]
fn the_passes_refuse_pieces_that_do_not_fit() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases/steps_adaptive_gae");
    let input = read(&dir.join("input.parquet"), 1 << 20);
    let engine = case_engine(&dir, &input);
    assert!(engine.needs_prepass());
    let message = |e: advcalc::Error| format!("{} | {}", e.message(), e.hint().unwrap_or(""));

    // pass 1 with the start constants where the adaptive controller needs the pre-pass's
    let stats = engine.row_stats(&input[0], 0, &engine.start()).unwrap();
    let err = message(engine.plan(stats).unwrap_err());
    assert!(err.contains("without the pre-pass's constants"), "{err}");

    // pre-pass statistics given to the plan, and pass-1 statistics to `constants`
    let pre = engine.prepass_stats(&input[0], 0).unwrap();
    let err = message(engine.plan(pre.clone()).unwrap_err());
    assert!(err.contains("come from the pre-pass"), "{err}");
    let constants = engine.constants(&pre).unwrap();
    let stats = engine.row_stats(&input[0], 0, &constants).unwrap();
    let err = message(engine.constants(&stats).unwrap_err());
    assert!(err.contains("come from pass 1"), "{err}");

    // the right order works; its shard and statistics do not fit another configuration
    let prepared = engine.plan(stats.clone()).unwrap();
    let other = {
        let config = Config::load(&ConfigSources {
            file: Some(&dir.join("config.yaml")),
            sets: &["algorithm.lam=0.5".to_string()],
            ..Default::default()
        })
        .unwrap();
        Engine::new(&config, input[0].schema(), "input").unwrap()
    };
    let err = message(other.plan(stats).unwrap_err());
    assert!(err.contains("another configuration"), "{err}");
    let err = message(
        other
            .token_outputs(&input[0], 0, &prepared.whole())
            .unwrap_err(),
    );
    assert!(err.contains("another configuration"), "{err}");

    // statistics of two configurations appended together
    let mut mixed = engine.row_stats(&input[0], 0, &constants).unwrap();
    let other_constants = other
        .constants(&other.prepass_stats(&input[0], 0).unwrap())
        .unwrap();
    mixed.append(other.row_stats(&input[0], 0, &other_constants).unwrap());
    let err = message(engine.plan(mixed).unwrap_err());
    assert!(err.contains("different passes or configurations"), "{err}");
}

#[test]
fn a_first_row_that_overflows_is_refused() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases/steps_adaptive_gae");
    let input = read(&dir.join("input.parquet"), 1 << 20);
    let engine = case_engine(&dir, &input);
    let err = engine.prepass_stats(&input[0], usize::MAX).unwrap_err();
    assert_eq!(err.kind(), advcalc::ErrorKind::Usage);
    assert!(
        err.message().contains("leaves no room"),
        "{}",
        err.message()
    );
    assert!(
        engine
            .row_stats(&input[0], usize::MAX, &engine.start())
            .is_err()
    );
}

/// Each step computed alone (what `advcalc.ray`'s per-step tasks do) gives the bits it gets
/// in the whole input, for every multi-step corpus case whose configuration carries nothing
/// across steps; where it does (an adaptive KL controller), a later step alone differs, so
/// the runner must not cut those per step.
#[test]
fn steps_alone_equal_the_whole_unless_state_crosses_steps() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases");
    let (mut alone, mut carried) = (0, 0);
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let input = dir.join("input.parquet");
        if !input.is_file()
            || dir
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("err_")
        {
            continue;
        }
        let input = read(&input, 1 << 20);
        let Some(step) = input[0].column_by_name("step") else {
            continue;
        };
        let step = cast(step, &DataType::Int64).unwrap();
        let step = step.as_any().downcast_ref::<Int64Array>().unwrap();
        let mut steps: Vec<i64> = step.values().to_vec();
        steps.sort_unstable();
        steps.dedup();
        if steps.len() < 2 {
            continue;
        }
        let adaptive = case_engine(&dir, &input);
        // an adaptive case runs twice: as it is, and with a fixed controller
        let mut engines = vec![adaptive];
        if engines[0].carries_across_steps() {
            let fixed = case_engine_with(&dir, &input, &["algorithm.kl_ctrl.type=fixed"]);
            assert!(!fixed.carries_across_steps());
            engines.push(fixed);
        }
        for engine in engines {
            let whole = engine.compute(&input).unwrap();
            let mut differs = false;
            for s in &steps {
                let keep = arrow::array::BooleanArray::from(
                    step.values().iter().map(|v| v == s).collect::<Vec<_>>(),
                );
                let part = arrow::compute::filter_record_batch(&input[0], &keep).unwrap();
                let want = arrow::compute::filter_record_batch(&whole.batches[0], &keep).unwrap();
                let got = engine.compute(std::slice::from_ref(&part)).unwrap();
                for name in ["token_level_rewards", "advantages", "returns"] {
                    if want.column_by_name(name).is_none() {
                        continue;
                    }
                    let bits = |b: &[RecordBatch]| {
                        let (v, l) = column(b, name);
                        (v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), l)
                    };
                    let same = bits(std::slice::from_ref(&want)) == bits(&got.batches);
                    if !engine.carries_across_steps() {
                        assert!(same, "{}: step {s} alone, {name}", dir.display());
                    }
                    differs |= !same;
                }
            }
            if engine.carries_across_steps() {
                assert!(
                    differs,
                    "{}: adaptive KL, yet every step alone is the same",
                    dir.display()
                );
                carried += 1;
            } else {
                alone += 1;
            }
        }
    }
    // grpo_steps(_vectorized), and the adaptive cases (kl_*_adaptive, chain_gae, chain_rloo,
    // steps_adaptive_gae) each also with a fixed controller
    assert!(
        alone >= 14 && carried >= 12,
        "cases: {alone} alone, {carried} carried"
    );
}

/// The mask after rejection is written back in the input mask's own type (list or large
/// list; booleans, integers or floats), with verl's rejected mask as its values.
#[test]
fn the_rejected_mask_keeps_the_input_type() {
    use arrow::datatypes::Field;
    use std::sync::Arc;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases/chain_gae");
    let input = read(&dir.join("input.parquet"), 1 << 20);
    let expected = read(&dir.join("expected.parquet"), 1 << 20);
    let (want, want_lengths) = column(&expected, "response_mask");
    let item = |t: DataType| Arc::new(Field::new("element", t, true));
    for mask_type in [
        DataType::List(item(DataType::Boolean)),
        DataType::LargeList(item(DataType::UInt8)),
        DataType::LargeList(item(DataType::Float64)),
        DataType::List(item(DataType::Float16)),
    ] {
        let batches: Vec<RecordBatch> = input
            .iter()
            .map(|b| {
                let i = b.schema().index_of("response_mask").unwrap();
                let mut columns = b.columns().to_vec();
                columns[i] = cast(&columns[i], &mask_type).unwrap();
                let mut fields = b.schema().fields().to_vec();
                fields[i] = Arc::new(Field::new("response_mask", mask_type.clone(), true));
                let schema = Arc::new(arrow::datatypes::Schema::new(fields));
                RecordBatch::try_new(schema, columns).unwrap()
            })
            .collect();
        let out = engine(&dir, Some("config.yaml"), None, &batches)
            .compute(&batches)
            .unwrap();
        let written = out.batches[0].column_by_name("response_mask").unwrap();
        assert_eq!(written.data_type(), &mask_type);
        // `column` reads lists of i32 offsets: widen a large list's through a cast
        let as_list = DataType::List(item(DataType::Float64));
        let got: Vec<RecordBatch> = out
            .batches
            .iter()
            .map(|b| {
                let m = cast(b.column_by_name("response_mask").unwrap(), &as_list).unwrap();
                let schema = Arc::new(arrow::datatypes::Schema::new(vec![Field::new(
                    "response_mask",
                    as_list.clone(),
                    true,
                )]));
                RecordBatch::try_new(schema, vec![m]).unwrap()
            })
            .collect();
        let (values, lengths) = column(&got, "response_mask");
        assert_eq!(lengths, want_lengths, "{mask_type}");
        assert_eq!(values, want, "{mask_type}");
    }
}
