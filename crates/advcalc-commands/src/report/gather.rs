//! The passes behind the page: `compare`'s statistics pass for every variant (each row group
//! read once), then one output pass in which each row group is read once with the union of
//! the variants' and the inspect checks' columns, and reduced to `inspect`'s tallies,
//! `compare`'s per-row sums, the report's own histograms and each row's shape (its tool spans
//! and rejected tokens). The token strips' rows are chosen from the rows' scores, groups and
//! shapes (`strips::choose`), so after the output pass: the row groups holding them (one per
//! drawn row at most) are read once more.

use rayon::prelude::*;
use serde_json::Value;

use crate::analysis::collect::{
    Collected, Variant, jobs_projection, open_input, outputs_of, sorted_union, variant_engines,
};
use crate::analysis::comparison::Comparison;
use crate::analysis::comparison::summary::summarise;
use crate::analysis::inspection::{self, Inspection, Tallies};
use crate::analysis::sums::Sums;
use crate::analysis::tokens::TokenStats;
use crate::engine::Engine;
use crate::engine::job::{GroupOutputs, Job, Plan};
use crate::engine::metrics;
use crate::engine::passes::{prepare_jobs, thread_pool};
use crate::engine::progress::Progress;
use crate::error::{Error, Result};
use crate::io::dataset::Dataset;
use crate::io::jsonl::SEQUENCE_LEVEL_KEY;
use crate::shaping::correction::Correction;
use advcalc_config::Config;

use super::ReportOptions;
use super::groups::PassRates;
use super::sketch::Sketch;
use super::strips::{self, RowFeatures, Strip};

/// Everything the page shows, computed once.
pub struct Facts {
    /// The input's name.
    pub file: String,
    pub rows: usize,
    /// A JSONL dump (one score per row, no tokens).
    pub sequence_level: bool,
    /// The inspect report, checked with the first variant's configuration and with its
    /// advantage statistics (what `inspect -e` gives), and its JSON.
    pub inspect: inspection::Report,
    pub inspect_json: Value,
    /// The estimators the inspect checks ran under: the first variant's, then the others'
    /// (the reward-position checks warn when any of them drops such rewards).
    pub inspect_estimators: Vec<&'static str>,
    /// The comparison (what `compare` gives) and its JSON.
    pub comparison: Comparison,
    pub comparison_json: Value,
    pub variants: Vec<VariantFacts>,
    /// Rows correct (score above `correct_above`).
    pub correct: Vec<bool>,
    /// The threshold: a row is correct when its score is above it.
    pub correct_above: f64,
    /// The distinct finite row scores, up to [`DISTINCT_SCORES`] + 1 of them (more: a graded
    /// or continuous reward, for which "correct" is only the threshold's cut).
    pub distinct_scores: Vec<f64>,
    /// The groups with their pass rates; `None` without a `uid` column.
    pub groups: Option<PassRates>,
    /// Per variant, per row: (Σ |advantage|, valid tokens).
    pub row_abs: Vec<Vec<(f64, u64)>>,
    pub strips: Vec<Strip>,
    /// Per row: its tool spans and rejected tokens.
    pub shapes: Vec<RowFeatures>,
    /// The loss section's facts, or why it is absent.
    pub loss: std::result::Result<super::loss::LossFacts, String>,
}

/// Distinct row scores past which the reward is taken as graded, not pass/fail (0, 1 and a
/// partial 0.5 are three).
pub const DISTINCT_SCORES: usize = 3;

/// One variant's facts beyond the comparison.
pub struct VariantFacts {
    pub label: String,
    /// Per training batch: its step and the advantage statistics of its valid tokens.
    pub by_step: Vec<(Option<i64>, TokenStats)>,
    /// Advantages of the valid tokens (mask after rejection).
    pub advantages: Sketch,
    /// IS weights of the valid tokens, when the variant computes them.
    pub is_weights: Option<Sketch>,
    /// The rollout correction that runs (IS and/or rejection), if any.
    pub correction: Option<Correction>,
    /// `run --metrics` of this variant, without the pass-2 `advcalc/advantage_*` keys'
    /// values (which need pass 2's parts; the page does not state them).
    pub metrics: Value,
    /// The data warnings `run` prints for this variant.
    pub warnings: Vec<String>,
}

/// One unit's share of the output pass.
struct UnitPart {
    tallies: Tallies,
    sums: Sums,
    advantages: Vec<Sketch>,
    is_weights: Vec<Option<Sketch>>,
    /// Each row's tool spans and rejected tokens.
    shapes: Vec<RowFeatures>,
}

/// Run the passes and keep what the page needs.
pub fn gather(variants: &[Variant], opts: &ReportOptions) -> Result<Facts> {
    if variants.is_empty() {
        return Err(Error::usage("report needs at least one estimator"));
    }
    // within a pool of --threads: a trainer dump's reader parses on its threads
    let opened = open_input(&opts.read, &variants[0].config)?;
    let input = &opened.dataset;
    let rows = input.rows();
    if let Some(&bad) = opts.rows.iter().find(|&&r| r >= rows) {
        return Err(Error::usage(format!(
            "--rows {bad}: {} has {rows} rows (rows count from 0)",
            input.name
        )));
    }
    let first: &Config = &variants[0].config;
    // a trainer's own NaN scores, under its convention, are not a fault
    let own_nan_scores = opened.own_nan_scores(variants.iter().map(|v| &v.config));
    let allow_nonfinite = opts.read.allow_nonfinite || own_nan_scores;
    let inspection = Inspection::new(first, input, opts.read.layout)?
        .with_variants(variants[1..].iter().map(|v| &v.config))
        .with_own_nan_scores(own_nan_scores);
    // verl's rollout_corr metrics (section 6) cost a pass over the log-ratios: only for a
    // variant with a correction to show
    let engines = variant_engines(variants, input, opts.read.layout, allow_nonfinite)?;
    let jobs: Vec<Job<'_>> = engines.iter().map(Engine::job).collect();
    let projection = jobs_projection(&jobs);
    let all_columns = sorted_union(projection.iter().copied().chain(inspection.projection()));
    let units = input.units();
    let progress = Progress::new(rows as u64, opts.read.progress);
    let pool = thread_pool(opts.read.threads)?;
    let (prepared, parts) = pool
        .install(|| {
            let prepared = prepare_jobs(input, &jobs, &projection, &progress)?;
            progress.pass("report");
            let parts = (0..units.len())
                .into_par_iter()
                .map(|u| {
                    let batch = input.read_unit(u, Some(&all_columns))?;
                    let tallies = inspection.scan_unit(input, u, &batch)?;
                    let outputs = outputs_of(&jobs, &prepared, input, u, &batch)?;
                    progress.inc(batch.num_rows());
                    Ok(UnitPart {
                        tallies,
                        sums: Sums::of_row_group(&outputs),
                        advantages: outputs.iter().map(valid_advantages).collect(),
                        is_weights: outputs.iter().map(valid_is_weights).collect(),
                        shapes: (0..batch.num_rows())
                            .map(|i| RowFeatures::of(&outputs, i))
                            .collect(),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok::<_, Error>((prepared, parts))
        })
        // an error on a row of a trainer's dump names the user's file and line too
        .map_err(|e| opened.locate_error(e))?;
    progress.finish();

    let n = variants.len();
    let mut sums = Sums::with_capacity(n, rows);
    let mut tallies = Vec::with_capacity(parts.len());
    let mut adv = vec![Sketch::default(); n];
    let mut is: Vec<Option<Sketch>> = vec![None; n];
    let mut shapes: Vec<RowFeatures> = Vec::with_capacity(rows);
    for p in parts {
        shapes.extend(p.shapes);
        tallies.push(p.tallies);
        sums.append(p.sums);
        for (all, s) in adv.iter_mut().zip(&p.advantages) {
            all.merge(s);
        }
        for (all, s) in is.iter_mut().zip(p.is_weights) {
            if let Some(s) = s {
                all.get_or_insert_with(Sketch::default).merge(&s);
            }
        }
    }
    let correct: Vec<bool> = sums
        .score
        .iter()
        .map(|&s| s > opts.read.correct_above)
        .collect();
    let groups = PassRates::new(&prepared, &correct);
    let mut distinct_scores: Vec<f64> = Vec::new();
    for &s in sums.score.iter().filter(|s| s.is_finite()) {
        if !distinct_scores.contains(&s) {
            distinct_scores.push(s);
            if distinct_scores.len() > DISTINCT_SCORES {
                break;
            }
        }
    }
    distinct_scores.sort_by(f64::total_cmp);
    let loss = match &opts.loss {
        Err(e) => Err(format!("the actor section cannot be read: {e}")),
        Ok(config) if !config.actor_given => Err(
            "the configuration has no actor_rollout_ref.actor section, so there is no loss to replay".into(),
        ),
        Ok(config) => pool
            .install(|| {
                super::loss::gather(
                    config,
                    input,
                    opts.read.layout,
                    allow_nonfinite,
                    &correct,
                )
            })
            .map_err(|e| e.to_string()),
    };
    let row_abs: Vec<Vec<(f64, u64)>> = sums
        .rows
        .iter()
        .map(|v| v.iter().map(|r| (r.sum_abs, r.valid)).collect())
        .collect();
    let by_step: Vec<Vec<(Option<i64>, TokenStats)>> = prepared
        .iter()
        .zip(&sums.rows)
        .map(|(p, rows)| {
            p.training_batches
                .iter()
                .map(|(step, batch)| (*step, TokenStats::of(batch.iter().map(|&r| &rows[r]))))
                .collect()
        })
        .collect();

    // the page's strips: the few row groups holding the chosen rows, each read once more
    let chosen = strips::choose(groups.as_ref(), &correct, &shapes, &opts.rows);
    let strips = reread(
        &chosen,
        &correct,
        &jobs,
        &prepared,
        input,
        &projection,
        &pool,
    )?;

    let inspect_estimators = inspection.estimators().iter().map(|e| e.name()).collect();
    let mut report = inspection.finish(input, tallies);
    if let Some(dump) = opened.file.as_ref().and_then(|f| f.trainer.as_ref()) {
        // what the dump's reader assumed, and the check of its logged advantages, as inspect
        // shows them
        report.notes.splice(0..0, dump.notes.iter().cloned());
        report.logged = Some(crate::analysis::logged::check(
            first,
            dump.trainer,
            input,
            &opts.read.input,
            opts.read.layout,
        )?);
    }
    let first_name = first.algorithm.adv_estimator.name();
    inspection::add_advantages(
        &mut report,
        first_name,
        by_step[0].clone(),
        prepared[0].warnings.clone(),
    );
    let inspect_json = report.to_json();
    let metrics: Vec<Value> = jobs
        .iter()
        .zip(&prepared)
        .map(|(job, p)| metrics::to_json(job, p, &p.metric_parts))
        .collect();
    let facts_of: Vec<VariantFacts> = variants
        .iter()
        .zip(&jobs)
        .zip(&prepared)
        .zip(by_step)
        .zip(adv)
        .zip(is)
        .zip(metrics)
        .map(
            |((((((v, job), p), by_step), advantages), is_weights), metrics)| VariantFacts {
                label: v.label.clone(),
                by_step,
                advantages,
                is_weights,
                correction: job
                    .pipeline
                    .correction_runs(job.has_rollout())
                    .filter(|c| c.is_some_active())
                    .cloned(),
                metrics,
                warnings: p.warnings.clone(),
            },
        )
        .collect();
    let comparison = summarise(
        variants,
        Collected { prepared, sums },
        &input.name,
        opts.read.correct_above,
    );
    Ok(Facts {
        file: input.name.clone(),
        rows,
        sequence_level: input.schema().metadata().contains_key(SEQUENCE_LEVEL_KEY),
        inspect: report,
        inspect_json,
        inspect_estimators,
        comparison_json: comparison.to_json(),
        comparison,
        variants: facts_of,
        correct,
        correct_above: opts.read.correct_above,
        distinct_scores,
        groups,
        row_abs,
        strips,
        shapes,
        loss,
    })
}

/// The strips of `chosen` rows, from their row groups read once more (each once).
fn reread(
    chosen: &[(usize, strips::StripReason)],
    correct: &[bool],
    jobs: &[Job<'_>],
    prepared: &[Plan],
    input: &Dataset,
    projection: &[usize],
    pool: &rayon::ThreadPool,
) -> Result<Vec<Strip>> {
    let units = input.units();
    let unit_of = |row: usize| units.partition_point(|x| x.start <= row) - 1;
    let mut needed: Vec<usize> = chosen.iter().map(|&(row, _)| unit_of(row)).collect();
    needed.sort_unstable();
    needed.dedup();
    let read = pool.install(|| {
        needed
            .par_iter()
            .map(|&u| {
                let batch = input.read_unit(u, Some(projection))?;
                Ok((u, outputs_of(jobs, prepared, input, u, &batch)?))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    Ok(chosen
        .iter()
        .map(|&(row, reason)| {
            let u = unit_of(row);
            let (_, outputs) = read.iter().find(|(v, _)| *v == u).expect("read above");
            strips::extract(outputs, row - units[u].start, row, reason, correct[row])
        })
        .collect())
}

/// The advantages of the valid tokens (mask after rejection).
fn valid_advantages(o: &GroupOutputs) -> Sketch {
    Sketch::of_valid(&o.outputs.advantages, &o.mask)
}

/// The IS weights of the valid tokens, when there are any.
fn valid_is_weights(o: &GroupOutputs) -> Option<Sketch> {
    let w = o.outputs.rollout_is_weights.as_ref()?;
    Some(Sketch::of_valid(w, &o.mask))
}
