//! The passes on one file of a larger input (`advcalc::dataset::{part_stats, part_outputs}`,
//! what `advcalc.ray`'s two passes run in each task) give `advcalc run`'s numbers: each file's
//! statistics gathered alone, merged and planned by an engine on the whole input's schema,
//! and each file's output written with the plan shard of its steps.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use advcalc::dataset::{PartOf, PartStats, StatsOf, part_outputs, part_stats};
use advcalc::{Config, ConfigSources, Engine, Layout, RowStats, RunOptions};
use arrow::array::{Array, Int64Array, RecordBatch, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema};

use common::{DEMO_CORRECTION, advcalc, lists_f32, read_parquet, stderr, write_parquet};

fn options(input: &Path, output: &Path) -> RunOptions {
    RunOptions {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        force: true,
        threads: Some(2),
        progress: false,
        layout: Layout::default(),
        allow_nonfinite: false,
        input_format: None,
        output_format: None,
        metrics: None,
        memory: None,
    }
}

/// `batch`'s rows `rows`, in that order.
fn rows_of(batch: &RecordBatch, rows: &[u32]) -> RecordBatch {
    let idx = UInt32Array::from(rows.to_vec());
    let columns = batch
        .columns()
        .iter()
        .map(|c| take(c.as_ref(), &idx, None).unwrap())
        .collect();
    RecordBatch::try_new(batch.schema(), columns).unwrap()
}

/// The two passes over `files` (in input order; each with the step its path names) as a
/// runner makes them, the plan made by an engine on `schema`: the output paths.
fn two_passes(
    config: &Config,
    schema: Arc<Schema>,
    files: &[(PathBuf, Option<i64>)],
    out: &Path,
) -> Vec<PathBuf> {
    let engine = Engine::new(config, schema, "dataset").unwrap();
    let mut first_rows = Vec::new();
    let mut row = 0;
    for (path, _) in files {
        first_rows.push(row);
        row += read_parquet(path).num_rows();
    }
    let part = |i: usize| PartOf {
        first_row: first_rows[i],
        path_step: files[i].1,
        version: None,
    };
    let stats_of = |of: StatsOf<'_>| -> Vec<PartStats> {
        (0..files.len())
            .map(|i| part_stats(config, &options(&files[i].0, out), part(i), of).unwrap())
            .collect()
    };
    let prepass = engine.needs_prepass().then(|| {
        let mut all = RowStats::default();
        stats_of(StatsOf::Prepass)
            .into_iter()
            .for_each(|s| all.append(s.stats));
        all
    });
    let parts = stats_of(StatsOf::Pass1(prepass.as_ref()));
    let steps: Vec<Vec<Option<i64>>> = parts.iter().map(|p| p.stats.steps()).collect();
    let versions: Vec<Option<String>> = parts.iter().map(|p| p.version.clone()).collect();
    assert!(versions.iter().all(Option::is_some));
    let mut all = RowStats::default();
    parts.into_iter().for_each(|s| all.append(s.stats));
    let plan = engine.plan(all).unwrap();
    (0..files.len())
        .map(|i| {
            let dest = out.join(files[i].0.file_name().unwrap());
            let shard = plan.for_steps(&steps[i]);
            let opts = options(&files[i].0, &dest);
            let part = PartOf {
                version: versions[i].as_deref(),
                ..part(i)
            };
            let rows = part_outputs(config, &opts, part, "dataset", &shard).unwrap();
            assert_eq!(rows, read_parquet(&files[i].0).num_rows());
            dest
        })
        .collect()
}

fn same_outputs(got: &RecordBatch, want: &RecordBatch, what: &str) {
    for column in ["advantages", "returns"] {
        let bits = |b: &RecordBatch| -> Vec<Vec<u32>> {
            lists_f32(b, column)
                .into_iter()
                .map(|r| r.into_iter().map(f32::to_bits).collect())
                .collect()
        };
        assert_eq!(bits(got), bits(want), "{what}: {column}");
    }
}

#[test]
fn files_with_groups_split_across_them_and_a_pre_pass_give_run_s_numbers() {
    // chain_gae: an adaptive KL controller (a pre-pass), token IS with rejection, GAE; two
    // steps, every group split across the two files
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verl/cases/chain_gae");
    let config = Config::load(&ConfigSources {
        file: Some(&case.join("config.yaml")),
        ..Default::default()
    })
    .unwrap();
    let input = read_parquet(&case.join("input.parquet"));
    let dir = tempfile::tempdir().unwrap();
    let n = input.num_rows() as u32;
    let halves = [
        (0..n).filter(|r| r % 2 == 0).collect::<Vec<_>>(),
        (0..n).filter(|r| r % 2 == 1).collect::<Vec<_>>(),
    ];
    let mut files = Vec::new();
    let mut concatenated = Vec::new();
    for (k, rows) in halves.iter().enumerate() {
        let path = dir.path().join(format!("part{k}.parquet"));
        write_parquet(&path, &rows_of(&input, rows), 5);
        files.push((path, None));
        concatenated.extend(rows);
    }
    let all = dir.path().join("all.parquet");
    write_parquet(&all, &rows_of(&input, &concatenated), 7);
    let cli = dir.path().join("cli.parquet");
    let done = advcalc()
        .arg("run")
        .arg("-q")
        .arg("-c")
        .arg(case.join("config.yaml"))
        .arg(&all)
        .arg(&cli)
        .output()
        .unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    let want = read_parquet(&cli);

    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let outputs = two_passes(&config, input.schema(), &files, &out);
    let got: Vec<RecordBatch> = outputs.iter().map(|p| read_parquet(p)).collect();
    let got = arrow::compute::concat_batches(&got[0].schema(), &got).unwrap();
    same_outputs(&got, &want, "chain_gae");
}

#[test]
fn steps_named_by_the_path_only_give_the_dataset_run_s_files() {
    // the demo in two step files whose step is only in the path: the per-file engines read
    // it from there, the plan's engine sees the column the runner adds; with IS weights and
    // rejection
    let dir = tempfile::tempdir().unwrap();
    let stepped = read_parquet(&common::stepped_demo(dir.path()));
    let steps = stepped
        .column_by_name("step")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .clone();
    let src = dir.path().join("dumps");
    std::fs::create_dir(&src).unwrap();
    let mut files = Vec::new();
    for step in [1i64, 2] {
        let rows: Vec<u32> = (0..steps.len() as u32)
            .filter(|&r| steps.value(r as usize) == step)
            .collect();
        let batch = rows_of(&stepped, &rows);
        let without = batch.project(&[0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        assert!(without.schema().index_of("step").is_err());
        let path = src.join(format!("step={step}.parquet"));
        write_parquet(&path, &without, 40);
        files.push((path, Some(step)));
    }
    let cli = dir.path().join("cli");
    let mut cmd = advcalc();
    cmd.args(["run", "-q", "-e", "grpo"]).args(DEMO_CORRECTION);
    let done = cmd.arg(&src).arg(&cli).output().unwrap();
    assert!(done.status.success(), "{}", stderr(&done));

    let set: Vec<String> = DEMO_CORRECTION
        .chunks(2)
        .map(|pair| pair[1].to_string())
        .collect();
    let config = Config::load(&ConfigSources {
        estimator: Some("grpo"),
        sets: &set,
        ..Default::default()
    })
    .unwrap();
    let file_schema = read_parquet(&files[0].0).schema();
    let mut fields: Vec<Field> = file_schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("step", DataType::Int64, false));
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let outputs = two_passes(&config, Arc::new(Schema::new(fields)), &files, &out);
    for path in outputs {
        let name = path.file_name().unwrap();
        let got = read_parquet(&path);
        let want = read_parquet(&cli.join(name));
        assert_eq!(got.schema().fields(), want.schema().fields(), "{name:?}");
        same_outputs(&got, &want, &name.to_string_lossy());
        for column in ["response_mask", "rollout_is_weights"] {
            assert_eq!(
                got.column_by_name(column).unwrap().to_data(),
                want.column_by_name(column).unwrap().to_data(),
                "{name:?}: {column}"
            );
        }
    }
}

#[test]
fn a_file_rewritten_between_the_passes_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo.parquet");
    let file = dir.path().join("part0.parquet");
    std::fs::copy(&demo, &file).unwrap();
    let config = Config::load(&ConfigSources {
        estimator: Some("grpo"),
        ..Default::default()
    })
    .unwrap();
    let out = dir.path().join("out.parquet");
    let part = PartOf {
        first_row: 0,
        path_step: None,
        version: None,
    };
    let found = part_stats(&config, &options(&file, &out), part, StatsOf::Pass1(None)).unwrap();
    let engine = Engine::new(&config, read_parquet(&file).schema(), "dataset").unwrap();
    let shard = engine.plan(found.stats).unwrap().whole();
    // the same rows written again: another file (inode, time), the same row count
    let batch = read_parquet(&file);
    std::fs::remove_file(&file).unwrap();
    write_parquet(&file, &batch, 100);
    let part = PartOf {
        version: found.version.as_deref(),
        ..part
    };
    let err = part_outputs(&config, &options(&file, &out), part, "dataset", &shard).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("part0.parquet: changed between the passes"),
        "{text}"
    );
    assert!(!out.exists());
}
