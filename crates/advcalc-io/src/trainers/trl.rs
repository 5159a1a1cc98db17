//! TRL's `log_completions` dump: `GRPOTrainer.log` writes, every `logging_steps`,
//! `output_dir/completions/completions_{global_step:05d}.parquet` with pandas
//! (`trl/trainer/grpo_trainer.py`, TRL 1.16.0): `step`, `prompt`, `completion` (text, or a
//! list of chat messages), one float column per reward function holding its **unweighted**
//! reward (null where the function returned `None`), any `log_extra` columns, and the scalar
//! `advantage`. A file holds the step's last generation batch in the gathered order.
//!
//! - **Groups** are consecutive blocks of `num_generations` rows (TRL's
//!   `view(-1, num_generations)`), not rows with equal prompts: a prompt drawn twice is two
//!   groups. The size is not in the file: `algorithm.group_size` when set, else the greatest
//!   common divisor of the runs of equal prompts, said in a note.
//! - **Score** = Σ wᵢ·rᵢ over the non-null rewards in float32 (`sum_then_normalize`:
//!   `(rewards_per_func * reward_weights).nansum(dim=1)`), NaN when every reward of the row is
//!   null (TRL gives it advantage 0). The weights are not in the file:
//!   `algorithm.trl.reward_weights`, else 1.0 each (TRL's default), said in a note.
//! - **Reward columns**: the float columns after `completion` and before `advantage` (the
//!   first `len(reward_weights)` of them when weights are given: the rest are `log_extra`).
//!
//! Sequence-level: one score per row, no tokens.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};
use crate::trainers::{
    DumpOptions, DumpRow, LogProbColumns, SpoolWriter, Trainer, TrainerInput, find_files,
    inferred_group_size, number_after, passthrough_name, refused_score, score_fault,
};

/// The completions files at `path` (a file, a run's `output_dir`, or its `completions/`), in
/// step order.
pub fn files(path: &Path, name: &str) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = find_files(path, name, &|f| step_of(f).is_some())?;
    files.sort_by_key(|f| (step_of(f), f.clone()));
    Ok(files)
}

/// The step a file's name gives (`completions_00012.parquet` → 12).
fn step_of(path: &Path) -> Option<i64> {
    number_after(path.file_name()?.to_str()?, "completions_", ".parquet")
}

/// One file's record batches and schema.
fn read_file(path: &Path) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let file_name = path.display().to_string();
    let fail = || Error::data(format!("{file_name}: cannot read it as Parquet"));
    let file = File::open(path)
        .map_err(|e| Error::data(format!("{file_name}: cannot open")).with_source(e))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| fail().with_source(e))?;
    let schema = builder.schema().clone();
    let reader = builder
        .with_batch_size(8192)
        .build()
        .map_err(|e| fail().with_source(e))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| fail().with_source(e))?;
    Ok((schema, batches))
}

/// Where TRL's columns are in a file's schema.
struct Layout {
    step: usize,
    prompt: usize,
    rewards: Vec<usize>,
    advantage: usize,
}

fn layout(schema: &SchemaRef, file: &str, weights: &[f64]) -> Result<Layout> {
    let find = |col: &str| {
        schema.index_of(col).map_err(|_| {
            Error::data(format!(
                "{file}: no `{col}` column (TRL's completions files have step, prompt, completion, one column per reward function and advantage)"
            ))
        })
    };
    let step = find("step")?;
    let prompt = find("prompt")?;
    let completion = find("completion")?;
    let advantage = find("advantage")?;
    if !matches!(
        schema.field(step).data_type(),
        DataType::Int64 | DataType::Int32
    ) {
        return Err(Error::data(format!(
            "{file}: column `step` is {}, not integers",
            schema.field(step).data_type()
        )));
    }
    let is_float = |i: usize| {
        matches!(
            schema.field(i).data_type(),
            DataType::Float64 | DataType::Float32
        )
    };
    if !is_float(advantage) {
        return Err(Error::data(format!(
            "{file}: column `advantage` is {}, not floats",
            schema.field(advantage).data_type()
        )));
    }
    let mut rewards: Vec<usize> = (completion + 1..advantage)
        .filter(|&i| is_float(i))
        .collect();
    if !weights.is_empty() {
        if rewards.len() < weights.len() {
            return Err(Error::usage(format!(
                "{file}: algorithm.trl.reward_weights has {} weights, but the file has {} reward column(s) ({})",
                weights.len(),
                rewards.len(),
                names(schema, &rewards)
            )));
        }
        rewards.truncate(weights.len());
    }
    if rewards.is_empty() {
        return Err(Error::data(format!(
            "{file}: no reward column between `completion` and `advantage`"
        )));
    }
    Ok(Layout {
        step,
        prompt,
        rewards,
        advantage,
    })
}

fn names(schema: &SchemaRef, columns: &[usize]) -> String {
    columns
        .iter()
        .map(|&i| schema.field(i).name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A float column's values as f64 (null → NaN).
fn floats(a: &ArrayRef) -> Vec<f64> {
    let get = |i: usize| -> f64 {
        if a.is_null(i) {
            return f64::NAN;
        }
        match a.data_type() {
            DataType::Float32 => a.as_primitive::<Float32Type>().value(i) as f64,
            _ => a.as_primitive::<Float64Type>().value(i),
        }
    };
    (0..a.len()).map(get).collect()
}

fn ints(a: &ArrayRef) -> Vec<Option<i64>> {
    (0..a.len())
        .map(|i| {
            (!a.is_null(i)).then(|| match a.data_type() {
                DataType::Int32 => a.as_primitive::<Int32Type>().value(i) as i64,
                _ => a.as_primitive::<Int64Type>().value(i),
            })
        })
        .collect()
}

/// TRL's `sum_then_normalize` reward of one row, in float32 as TRL computes it: Σ wᵢ·rᵢ over
/// the non-NaN rewards, NaN when all are NaN.
pub fn reward(rewards: &[f64], weights: &[f64]) -> f64 {
    let mut sum = 0.0f32;
    let mut any = false;
    for (i, &r) in rewards.iter().enumerate() {
        if r.is_nan() {
            continue;
        }
        any = true;
        let w = weights.get(i).copied().unwrap_or(1.0) as f32;
        sum += r as f32 * w;
    }
    if any { sum as f64 } else { f64::NAN }
}

/// How the columns of `schema` differ from `first`'s (the first file's, named `first_file`):
/// the columns only one has, those of another type, else another order, else another
/// nullability or metadata.
fn column_differences(schema: &SchemaRef, first: &SchemaRef, first_file: &str) -> String {
    let quoted = |names: Vec<&str>| {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    let here: Vec<&str> = schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .filter(|n| first.index_of(n).is_err())
        .collect();
    if !here.is_empty() {
        parts.push(format!("{} not in {first_file}", quoted(here)));
    }
    let missing: Vec<&str> = first
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .filter(|n| schema.index_of(n).is_err())
        .collect();
    if !missing.is_empty() {
        parts.push(format!("no {}", quoted(missing)));
    }
    for f in schema.fields() {
        if let Ok(i) = first.index_of(f.name()) {
            let t0 = first.field(i).data_type();
            if f.data_type() != t0 {
                parts.push(format!(
                    "`{}` is {} here, {t0} there",
                    f.name(),
                    f.data_type()
                ));
            }
        }
    }
    if parts.is_empty() {
        let names = |s: &SchemaRef| -> Vec<String> {
            s.fields().iter().map(|f| f.name().to_string()).collect()
        };
        parts.push(if names(schema) != names(first) {
            format!(
                "the same columns in another order ({})",
                names(schema).join(", ")
            )
        } else {
            "the same columns, with another nullability or metadata".to_string()
        });
    }
    parts.join("; ")
}

/// TRL's `reward_weights` tensor is float32 (`torch.tensor(args.reward_weights,
/// dtype=torch.float32)`): a weight beyond its range would be inf there.
fn check_weights(weights: &[f64]) -> Result<()> {
    match weights.iter().find(|w| !(**w as f32).is_finite()) {
        Some(w) => Err(Error::usage(format!(
            "algorithm.trl.reward_weights: {w:?} overflows float32 (TRL's reward_weights are a float32 tensor)"
        ))),
        None => Ok(()),
    }
}

/// A consecutive group whose float32 statistics overflow as TRL computes them: the sum of its
/// scorable rewards (`torch.nanmean`), or of their squared deviations from the mean (TRL's
/// `nanstd`). TRL's advantages there are NaN, ±inf or 0; advcalc's exact ones would differ
/// without a word. `None` when both fit float32.
fn group_overflow(scores: &[f64]) -> Option<String> {
    let scored: Vec<f64> = scores.iter().copied().filter(|s| !s.is_nan()).collect();
    if scored.is_empty() {
        return None;
    }
    let sum: f64 = scored.iter().sum();
    if !(sum as f32).is_finite() {
        return Some(format!(
            "its rewards sum to {sum:.3e}, which overflows float32 in TRL's group mean (torch.nanmean over float32)"
        ));
    }
    let mean = sum / scored.len() as f64;
    let squares: f64 = scored.iter().map(|s| (s - mean) * (s - mean)).sum();
    if !(squares as f32).is_finite() {
        return Some(format!(
            "its rewards' squared deviations from their mean sum to {squares:.3e}, which overflows float32 in TRL's group std (trl's nanstd over float32)"
        ));
    }
    None
}

/// Refuse a row's rewards that TRL's float32 `rewards_per_func` cannot hold (±inf, or beyond
/// float32), and a weighted sum Σ wᵢ·rᵢ that overflows float32 as TRL sums it; `at` names the
/// row. A null (NaN) reward is TRL's None, which its `nansum` skips.
fn check_row(at: &str, rewards: &[f64], score: f64, names: &[&str], weights: &[f64]) -> Result<()> {
    for (r, name) in rewards.iter().zip(names) {
        if r.is_nan() {
            continue;
        }
        if let Some(what) = score_fault(*r, None) {
            return Err(refused_score(at, name, &what));
        }
    }
    if score.is_infinite() {
        let terms: Vec<String> = rewards
            .iter()
            .zip(names)
            .enumerate()
            .filter(|(_, (r, _))| !r.is_nan())
            .map(|(i, (r, n))| {
                format!("`{n}` {r:?} × {:?}", weights.get(i).copied().unwrap_or(1.0))
            })
            .collect();
        return Err(Error::data(format!(
            "{at}: the reward Σ wᵢ·rᵢ ({}) overflows float32 as TRL sums it (pass --allow-nonfinite to let non-finite values through)",
            terms.join(" + ")
        )));
    }
    Ok(())
}

/// Spool the dump's files into `sink`; rewards that are not float32 numbers (or whose group
/// statistics overflow float32 in TRL) are refused unless `allow_nonfinite`.
pub fn spool(
    input: &mut TrainerInput,
    opts: &DumpOptions,
    allow_nonfinite: bool,
    sink: BufWriter<File>,
    name: &str,
) -> Result<()> {
    check_weights(&opts.reward_weights)?;
    // TRL's GRPOConfig refuses num_generations < 2 ("GRPO requires at least 2 generations
    // per prompt to calculate the advantages"): a group of one is no TRL run
    if opts.group_size == Some(1) {
        return Err(Error::usage(format!(
            "{name}: algorithm.group_size is 1, but TRL requires num_generations >= 2 (GRPOConfig: \"GRPO requires at least 2 generations per prompt\")"
        ))
        .with_hint("pass --set algorithm.group_size=N, the run's num_generations"));
    }
    // every file read once (a completions file holds one generation batch: small)
    let mut files = Vec::new();
    for path in &input.files {
        files.push((path.display().to_string(), read_file(path)?));
    }
    let (first_file, (schema, _)) = &files[0];
    let layout0 = layout(schema, first_file, &opts.reward_weights)?;
    for (file, (s, _)) in &files[1..] {
        if s.fields() != schema.fields() {
            return Err(Error::data(format!(
                "{file}: its columns differ from {first_file}'s: {}",
                column_differences(s, schema, first_file)
            ))
            .with_hint("give the completions files of one run"));
        }
    }
    // the group size: given, or the gcd of the prompt runs over every file
    let group_size = match opts.group_size {
        Some(n) => n,
        None => {
            let mut keys = Vec::new();
            for (_, (_, batches)) in &files {
                for b in batches {
                    let steps = ints(b.column(layout0.step));
                    let prompts = b.column(layout0.prompt);
                    for (i, step) in steps.into_iter().enumerate() {
                        keys.push((step.unwrap_or(0), prompts.slice(i, 1).to_data()));
                    }
                }
            }
            let n = inferred_group_size(keys.into_iter());
            if n < 2 {
                return Err(Error::data(format!(
                    "{name}: the runs of equal prompts give a group size of 1, but TRL requires num_generations >= 2: a file misses a row of a group, or its groups' prompts differ"
                ))
                .with_hint("pass --set algorithm.group_size=N, the run's num_generations (TRL groups consecutive blocks of N rows)"));
            }
            input.notes.push(format!(
                "TRL groups consecutive blocks of num_generations rows; the file does not record it: group size {n} inferred from the runs of equal prompts (set algorithm.group_size to give it)"
            ));
            n
        }
    };
    input.group_size = Some(group_size);
    let reward_names = names(schema, &layout0.rewards);
    if opts.reward_weights.is_empty() {
        input.notes.push(format!(
            "TRL's reward_weights are not in the file: 1.0 for each reward column ({reward_names}); set algorithm.trl.reward_weights=[...] to give them"
        ));
    }
    let passthrough: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            Field::new(passthrough_name(f.name()), f.data_type().clone(), true)
                .with_metadata(f.metadata().clone())
        })
        .collect();
    let mut writer = SpoolWriter::new(
        sink,
        Trainer::Trl,
        LogProbColumns::default(),
        passthrough,
        name,
    )?;
    let (mut total, mut unscorable) = (0usize, 0usize);
    // under allow_nonfinite: the groups whose statistics overflow, and the first
    let (mut overflowing, mut first_overflow) = (0usize, None::<String>);
    let reward_names: Vec<&str> = layout0
        .rewards
        .iter()
        .map(|&c| schema.field(c).name().as_str())
        .collect();
    for (file, (_, batches)) in &files {
        let rows_in_file: usize = batches.iter().map(|b| b.num_rows()).sum();
        if !rows_in_file.is_multiple_of(group_size) {
            return Err(Error::data(format!(
                "{file}: {rows_in_file} rows is not a multiple of the group size {group_size}"
            ))
            .with_hint(
                "TRL groups consecutive blocks of num_generations rows: set algorithm.group_size to your num_generations",
            ));
        }
        let mut row_in_file = 0usize;
        let mut file_step: Option<i64> = None;
        // the current group's scores, checked when it is complete
        let mut group: Vec<f64> = Vec::with_capacity(group_size);
        for b in batches {
            let steps = ints(b.column(layout0.step));
            let rewards: Vec<Vec<f64>> = layout0
                .rewards
                .iter()
                .map(|&c| floats(b.column(c)))
                .collect();
            let advantages = floats(b.column(layout0.advantage));
            let mut rows = Vec::with_capacity(b.num_rows());
            for (i, step) in steps.into_iter().enumerate() {
                let at = format!("{file} row {}", row_in_file + 1);
                let step = step.ok_or_else(|| Error::data(format!("{at}: `step` is null")))?;
                match file_step {
                    Some(s) if s != step => {
                        return Err(Error::data(format!(
                            "{at}: `step` is {step}, but the file's first row says {s}"
                        )));
                    }
                    _ => file_step = Some(step),
                }
                let r: Vec<f64> = rewards.iter().map(|c| c[i]).collect();
                let score = reward(&r, &opts.reward_weights);
                if !allow_nonfinite {
                    check_row(&at, &r, score, &reward_names, &opts.reward_weights)?;
                    if score.is_nan() && !opts.trl_unscored_rows {
                        return Err(Error::data(format!(
                            "{at}: no reward function scored the row (every reward column, {}, is null), so its score is NaN: TRL gives such a row advantage 0, as --convention trl does, and this convention refuses a NaN score (pass --allow-nonfinite to let non-finite values through)",
                            reward_names
                                .iter()
                                .map(|n| format!("`{n}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    }
                }
                unscorable += usize::from(score.is_nan());
                group.push(score);
                if group.len() == group_size {
                    if let Some(why) = group_overflow(&group) {
                        let rows = format!(
                            "{file} rows {}-{} (a group of {group_size})",
                            row_in_file + 2 - group_size,
                            row_in_file + 1
                        );
                        if !allow_nonfinite {
                            return Err(Error::data(format!(
                                "{rows}: {why}, so TRL's float32 advantages there are NaN, ±inf or 0 (pass --allow-nonfinite to let them through: advcalc then computes them exactly)"
                            )));
                        }
                        overflowing += 1;
                        first_overflow.get_or_insert(rows);
                    }
                    group.clear();
                }
                rows.push(DumpRow {
                    step,
                    group: format!("{step}:{}", row_in_file / group_size),
                    score,
                    mask: vec![1],
                    rollout_log_probs: None,
                    old_log_probs: None,
                    logged_advantage: Some(advantages[i]).filter(|a| !a.is_nan()),
                });
                row_in_file += 1;
            }
            let passthrough: Vec<ArrayRef> = b.columns().iter().map(Arc::clone).collect();
            writer.write(&rows, passthrough)?;
            total += rows.len();
        }
    }
    writer.close()?;
    input.rows = total;
    if let Some(first) = first_overflow {
        input.notes.push(format!(
            "{overflowing} TRL group(s) have rewards whose group mean or std overflows float32 as TRL computes them (first: {first}): TRL's float32 advantages there were NaN, ±inf or 0; advcalc's are exact"
        ));
    }
    if unscorable > 0 {
        input.notes.push(format!(
            "{unscorable} TRL row(s) have no reward (every reward function returned None): their score is NaN, which TRL, and --convention trl, turn into advantage 0"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reward_is_the_weighted_nansum_in_float32() {
        // TRL's fixture run: weights [1.0, 0.5]; a null keyword reward counts as 0
        assert_eq!(reward(&[1.5, f64::NAN], &[1.0, 0.5]), 1.5);
        assert_eq!(reward(&[1.0, 1.0], &[1.0, 0.5]), 1.5);
        assert!(reward(&[f64::NAN, f64::NAN], &[1.0, 0.5]).is_nan());
        // float32: 0.1 + 0.2 rounds as TRL's tensors do
        assert_eq!(reward(&[0.1, 0.2], &[]), (0.1f32 + 0.2f32) as f64);
    }
}
