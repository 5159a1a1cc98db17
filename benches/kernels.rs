//! Micro-benchmarks of the hot kernels (divan): `cargo bench --bench kernels`.

use advcalc_maths::data::GroupKey;
use advcalc_maths::estimators::groups::Grouping;
use advcalc_maths::estimators::{broadcast_outcome, gae, grpo, reinforce_plus_plus};
use advcalc_maths::shaping::kl::{KlEstimator, penalize_row};

fn main() {
    divan::main();
}

/// A deterministic pseudo-random row of `n` values in [-1, 1).
fn row(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

const TOKENS: usize = 1024;

#[divan::bench]
fn grpo_8192_rows_groups_of_8(bencher: divan::Bencher) {
    let scores: Vec<f64> = row(8192, 1).iter().map(|&x| x as f64).collect();
    let keys: Vec<GroupKey> = (0..8192)
        .map(|i| GroupKey::Int((i % 1024) as i128))
        .collect();
    let grouping = Grouping::by_key(keys.iter());
    bencher.bench(|| grpo::grpo(divan::black_box(&scores), &grouping, true));
}

#[divan::bench]
fn broadcast_outcome_1024_tokens(bencher: divan::Bencher) {
    let mask: Vec<f32> = row(TOKENS, 2)
        .iter()
        .map(|&x| if x > -0.5 { 1.0 } else { 0.0 })
        .collect();
    let mut out = vec![0.0f32; TOKENS];
    bencher.bench_local(|| broadcast_outcome(divan::black_box(0.5), &mask, &mut out));
}

#[divan::bench]
fn gae_row_1024_tokens(bencher: divan::Bencher) {
    let (r, v) = (row(TOKENS, 3), row(TOKENS, 4));
    let mask: Vec<f32> = row(TOKENS, 5)
        .iter()
        .map(|&x| if x > -0.5 { 1.0 } else { 0.0 })
        .collect();
    let mut out = vec![0.0f32; TOKENS];
    bencher.bench_local(|| gae::gae_row(divan::black_box(&r), &v, &mask, 1.0, 0.95, &mut out));
}

#[divan::bench]
fn reinforce_plus_plus_row_1024_tokens(bencher: divan::Bencher) {
    let r = row(TOKENS, 6);
    let mask: Vec<f32> = row(TOKENS, 7)
        .iter()
        .map(|&x| if x > -0.5 { 1.0 } else { 0.0 })
        .collect();
    let mut out = vec![0.0f32; TOKENS];
    bencher.bench_local(|| {
        reinforce_plus_plus::reinforce_plus_plus_row(divan::black_box(&r), &mask, 0.99, &mut out)
    });
}

#[divan::bench]
fn kl_k1_row_1024_tokens(bencher: divan::Bencher) {
    kl_penalty_row(bencher, KlEstimator::K1);
}

#[divan::bench]
fn kl_low_var_kl_row_1024_tokens(bencher: divan::Bencher) {
    kl_penalty_row(bencher, KlEstimator::K3);
}

fn kl_penalty_row(bencher: divan::Bencher, estimator: KlEstimator) {
    let scores = row(TOKENS, 8);
    let old: Vec<f32> = row(TOKENS, 9).iter().map(|&x| x - 1.0).collect();
    let reference: Vec<f32> = row(TOKENS, 10).iter().map(|&x| x - 1.0).collect();
    let mask = vec![1.0f32; TOKENS];
    let mut out = vec![0.0f32; TOKENS];
    bencher.bench_local(|| {
        penalize_row(
            estimator,
            0.001,
            divan::black_box(&scores),
            &old,
            &reference,
            &mask,
            &mut out,
        )
    });
}

/// Rollout correction's per-row sweep (`engine::pipeline::shape`): the row's log ratio, then
/// `token_k1` rejection (threshold 2.0) and token IS weights (TIS 2.0) from it.
#[divan::bench]
fn correction_token_is_and_k1_rejection_row_1024_tokens(bencher: divan::Bencher) {
    use advcalc_maths::shaping::correction::{
        IsLevel, IsSpec, RsAggregate, RsOption, RsStatistic, log_ratio_row, raw_weights_row,
        reject_row, truncate_weights,
    };
    let old: Vec<f32> = row(TOKENS, 11).iter().map(|&x| x - 1.0).collect();
    let rollout: Vec<f32> = old
        .iter()
        .zip(row(TOKENS, 12))
        .map(|(&o, d)| o + 0.1 * d)
        .collect();
    let mask: Vec<f32> = row(TOKENS, 13)
        .iter()
        .map(|&x| if x > -0.5 { 1.0 } else { 0.0 })
        .collect();
    let rs = [RsOption::new(
        "token_k1",
        RsAggregate::Token,
        RsStatistic::K1,
        (None, 2.0),
    )];
    let spec = IsSpec {
        level: IsLevel::Token,
        upper: 2.0,
        lower: None,
        batch_normalize: false,
    };
    let (mut log_ratio, mut rejected, mut weights) = (
        vec![0.0f32; TOKENS],
        vec![0.0f32; TOKENS],
        vec![0.0f32; TOKENS],
    );
    bencher.bench_local(|| {
        log_ratio_row(divan::black_box(&old), &rollout, &mut log_ratio);
        reject_row(&rs, &log_ratio, &mask, &mut rejected);
        raw_weights_row(&spec, &log_ratio, &mask, &mut weights);
        truncate_weights(&spec, &mut weights);
    });
}

/// A Parquet file of one row group: `rows` lists of `TOKENS` float32 values, written by
/// parquet's Arrow writer with its defaults (what a pyarrow-written dump looks like).
fn list_file(rows: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    use arrow::array::{Float32Builder, ListBuilder};
    let mut b = ListBuilder::new(Float32Builder::new());
    for r in 0..rows {
        b.values().append_slice(&row(TOKENS, r as u64));
        b.append(true);
    }
    let batch = arrow::record_batch::RecordBatch::try_from_iter([(
        "old_log_probs",
        std::sync::Arc::new(b.finish()) as _,
    )])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lists.parquet");
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    (dir, path)
}

/// advcalc's list reader (`io::list_chunk`, through `ParquetInput`): 1 M tokens.
#[divan::bench]
fn list_column_decode_1024_rows_of_1024_tokens(bencher: divan::Bencher) {
    let (_dir, path) = list_file(1024);
    let input = advcalc_io::read::ParquetInput::open(&path).unwrap();
    bencher.bench(|| input.read_row_group(0, None).unwrap());
}

/// The same column through parquet's own Arrow reader, for comparison.
#[divan::bench]
fn list_column_decode_parquet_reader_1024_rows_of_1024_tokens(bencher: divan::Bencher) {
    let (_dir, path) = list_file(1024);
    bencher.bench(|| {
        let file = std::fs::File::open(&path).unwrap();
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .with_batch_size(1 << 16)
            .build()
            .unwrap()
            .map(|b| b.unwrap().num_rows())
            .sum::<usize>()
    });
}

/// advcalc's writer of a computed float list column chunk (`io::float_lists`): 1 M tokens.
#[divan::bench]
fn float_list_chunk_encode_1024_rows_of_1024_tokens(bencher: divan::Bencher) {
    use arrow::datatypes::{DataType, Field, Schema};
    let item = Field::new("element", DataType::Float32, true);
    let schema = Schema::new(vec![Field::new(
        "advantages",
        DataType::List(std::sync::Arc::new(item)),
        true,
    )]);
    let descr = parquet::arrow::ArrowSchemaConverter::new()
        .convert(&schema)
        .unwrap();
    let offsets: Vec<i32> = (0..=1024).map(|r| (r * TOKENS) as i32).collect();
    let values: Vec<f32> = (0..1024).flat_map(|r| row(TOKENS, r as u64)).collect();
    bencher.bench(|| {
        advcalc_io::float_lists::encode(&descr, 0, &offsets, divan::black_box(&values))
            .unwrap()
            .unwrap()
    });
}
