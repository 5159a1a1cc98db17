//! `advcalc compare`: several estimators (or configs) on one dump, side by side — "what
//! would my update have looked like under X".
//!
//! Every variant is a full `run` pipeline (KL shaping, rollout correction, estimator), so its
//! advantages are exactly those `advcalc run` writes. The dump is read as often as by one
//! `run` (a statistics pass and an output pass, plus the constants pre-pass when a variant
//! needs it), whatever the number of variants: each row group is read once per pass with
//! the union of the variants' columns, and every variant works on it in turn.
//!
//! Statistics are over valid tokens (response mask after rejection = 1). Token sums are
//! kept per row and added in file order, and pair counts are integers, so the numbers do not
//! depend on the thread count or the row-group layout.

use std::path::PathBuf;

use rayon::prelude::*;
use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::data::GroupKey;
use crate::engine::job::{GroupOutputs, Job, Prepared};
use crate::engine::passes::{prepare_jobs, thread_pool};
use crate::engine::pipeline::Pipeline;
use crate::engine::plan::training_batches;
use crate::engine::progress::Progress;
use crate::error::{Error, Result};
use crate::estimators::groups::Grouping;
use crate::io::format::Format;
use crate::io::input::Input;
use crate::io::read::ParquetInput;
use crate::io::schema::InputColumns;
use crate::shaping::scores::Layout;

/// One column of the comparison: a label and the configuration it runs.
#[derive(Debug, Clone)]
pub struct Variant {
    pub label: String,
    pub config: Config,
}

/// How to compare, beyond the variants.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    pub input: PathBuf,
    pub input_format: Option<Format>,
    pub layout: Layout,
    pub threads: Option<usize>,
    pub progress: bool,
    pub allow_nonfinite: bool,
    /// A row is correct when its score (Σ of its token scores) is above this.
    pub correct_above: f64,
}

/// Group pass-rate buckets: the fraction of a group's rows that are correct. The two ends
/// are exact: groups all wrong or all right carry no signal for the GRPO family.
pub const BUCKETS: [&str; 6] = [
    "0",
    "(0, 0.25]",
    "(0.25, 0.5]",
    "(0.5, 0.75]",
    "(0.75, 1)",
    "1",
];

fn bucket_of(pass_rate: f64) -> usize {
    match pass_rate {
        p if p <= 0.0 => 0,
        p if p <= 0.25 => 1,
        p if p <= 0.5 => 2,
        p if p <= 0.75 => 3,
        p if p < 1.0 => 4,
        _ => 5,
    }
}

/// One variant's advantages, summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantSummary {
    pub label: String,
    pub estimator: String,
    pub tokens: TokenStats,
    /// Per pass-rate bucket (`BUCKETS`); `None` without a `uid` column.
    pub buckets: Option<Vec<BucketSummary>>,
    /// Σ advantage over the valid tokens of correct / incorrect rows.
    pub weight_correct: f64,
    pub weight_incorrect: f64,
    /// Share of Σ |advantage| on correct rows.
    pub abs_share_correct: f64,
    pub warnings: Vec<String>,
}

/// Advantage statistics over a set of valid tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenStats {
    pub valid_tokens: u64,
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    pub min: f64,
    pub max: f64,
    /// Fraction of the valid tokens whose advantage is exactly 0.
    pub zero_fraction: f64,
}

impl TokenStats {
    /// Add up rows' sums in the given order (0 everywhere without a valid token).
    fn of<'a>(rows: impl IntoIterator<Item = &'a RowSums>) -> Self {
        let mut t = RowSums::empty();
        for r in rows {
            t.valid += r.valid;
            t.sum += r.sum;
            t.sum_sq += r.sum_sq;
            t.zeros += r.zeros;
            t.min = t.min.min(r.min);
            t.max = t.max.max(r.max);
        }
        if t.valid == 0 {
            return TokenStats {
                valid_tokens: 0,
                mean: 0.0,
                std: 0.0,
                min: 0.0,
                max: 0.0,
                zero_fraction: 0.0,
            };
        }
        let n = t.valid as f64;
        let mean = t.sum / n;
        TokenStats {
            valid_tokens: t.valid,
            mean,
            std: (t.sum_sq / n - mean * mean).max(0.0).sqrt(),
            min: t.min,
            max: t.max,
            zero_fraction: t.zeros as f64 / n,
        }
    }

    /// The statistics as JSON fields.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("valid_tokens".into(), json!(self.valid_tokens));
        m.insert("mean".into(), json!(self.mean));
        m.insert("std".into(), json!(self.std));
        m.insert("min".into(), json!(self.min));
        m.insert("max".into(), json!(self.max));
        m.insert("zero_fraction".into(), json!(self.zero_fraction));
        m
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct BucketSummary {
    pub groups: usize,
    pub rows: usize,
    pub valid_tokens: u64,
    /// Mean |advantage| over the bucket's valid tokens (`None`: no valid token).
    pub mean_abs: Option<f64>,
}

/// Two variants against each other.
#[derive(Debug, Clone, PartialEq)]
pub struct PairSummary {
    pub a: String,
    pub b: String,
    /// Tokens valid under both.
    pub tokens: u64,
    /// Fraction of those with the same sign (−, 0, +).
    pub sign_agreement: Option<f64>,
    /// Rows with a valid token under both.
    pub rows: usize,
    /// Spearman rank correlation of the rows' mean advantage (`None`: fewer than two rows,
    /// or one side constant).
    pub rank_correlation: Option<f64>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub file: String,
    pub rows: usize,
    pub correct_rows: usize,
    pub correct_above: f64,
    pub variants: Vec<VariantSummary>,
    pub pairs: Vec<PairSummary>,
}

/// Per row and variant: what pass 2 keeps (O(rows) scalars, never tokens).
#[derive(Debug, Clone, Copy)]
struct RowSums {
    valid: u64,
    sum: f64,
    sum_sq: f64,
    sum_abs: f64,
    zeros: u64,
    min: f64,
    max: f64,
}

impl RowSums {
    fn empty() -> Self {
        RowSums {
            valid: 0,
            sum: 0.0,
            sum_sq: 0.0,
            sum_abs: 0.0,
            zeros: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

/// One row group's partial results.
struct Partial {
    /// Raw score (Σ token scores) per row.
    score: Vec<f64>,
    /// `rows[v][i]`: variant v, row i.
    rows: Vec<Vec<RowSums>>,
    /// Per pair (i < j, row-major): (tokens valid under both, same sign).
    pairs: Vec<(u64, u64)>,
}

pub fn compare(variants: &[Variant], opts: &CompareOptions) -> Result<Comparison> {
    let opened = Input::open(&opts.input, opts.input_format)?;
    let input = &opened.parquet;
    let collected = collect(variants, input, opts)?;
    Ok(summarise(
        variants,
        collected,
        input.name(),
        opts.correct_above,
    ))
}

/// One configuration's advantage statistics per training batch, and the data warnings
/// `run` would print.
pub struct StepAdvantages {
    pub by_step: Vec<(Option<i64>, TokenStats)>,
    pub warnings: Vec<String>,
}

/// The advantage statistics of one configuration, per training batch (for `inspect`).
pub fn advantages_by_step(
    config: &Config,
    input: &ParquetInput,
    opts: &CompareOptions,
) -> Result<StepAdvantages> {
    let variant = Variant {
        label: config.algorithm.adv_estimator.name().to_string(),
        config: config.clone(),
    };
    let mut collected = collect(std::slice::from_ref(&variant), input, opts)?;
    let prepared = collected.prepared.pop().expect("one variant");
    let rows = collected.rows.pop().expect("one variant");
    let by_step = training_batches(prepared.stats.step.as_deref(), rows.len())
        .into_iter()
        .map(|(step, batch)| (step, TokenStats::of(batch.iter().map(|&r| &rows[r]))))
        .collect();
    Ok(StepAdvantages {
        by_step,
        warnings: prepared.warnings,
    })
}

/// What the passes leave for the summaries.
struct Collected {
    prepared: Vec<Prepared>,
    /// Raw score (Σ token scores) per row.
    score: Vec<f64>,
    /// `rows[v][i]`: variant v, row i.
    rows: Vec<Vec<RowSums>>,
    /// Per pair (i < j, row-major): (tokens valid under both, same sign).
    pairs: Vec<(u64, u64)>,
}

/// Run every variant's passes over `input`, each row group read once per pass.
fn collect(variants: &[Variant], input: &ParquetInput, opts: &CompareOptions) -> Result<Collected> {
    if variants.is_empty() {
        return Err(Error::usage("compare needs at least one estimator"));
    }
    let pipelines: Vec<Pipeline> = variants
        .iter()
        .map(|v| Pipeline::new(&v.config.algorithm))
        .collect();
    let columns = pipelines
        .iter()
        .map(|p| InputColumns::resolve(input.schema(), &p.needs(), input.name()))
        .collect::<Result<Vec<_>>>()?;
    let jobs: Vec<Job<'_>> = pipelines
        .iter()
        .zip(&columns)
        .map(|(pipeline, columns)| Job {
            pipeline,
            columns,
            file: input.name(),
            layout: opts.layout,
            allow_nonfinite: opts.allow_nonfinite,
            metrics: false,
        })
        .collect();
    for job in &jobs {
        job.check_columns()?;
    }
    let mut projection: Vec<usize> = columns.iter().flat_map(|c| c.projection(false)).collect();
    projection.sort_unstable();
    projection.dedup();
    let starts = input.row_group_starts();
    let rows = *starts.last().unwrap_or(&0);
    let progress = Progress::new(rows as u64, opts.progress);
    thread_pool(opts.threads)?.install(|| {
        let prepared = prepare_jobs(input, &jobs, &projection, &progress)?;
        progress.pass("comparing");
        let partials = (0..input.num_row_groups())
            .into_par_iter()
            .map(|rg| {
                let batch = input.read_row_group(rg, Some(&projection))?;
                let outputs = jobs
                    .iter()
                    .zip(&prepared)
                    .map(|(job, p)| job.row_group_outputs(&batch, starts[rg], p))
                    .collect::<Result<Vec<_>>>()?;
                progress.inc(batch.num_rows());
                Ok(partial(&outputs))
            })
            .collect::<Result<Vec<_>>>()?;
        progress.finish();
        let n = variants.len();
        let mut c = Collected {
            prepared,
            score: Vec::with_capacity(rows),
            rows: vec![Vec::with_capacity(rows); n],
            pairs: vec![(0, 0); n * (n - 1) / 2],
        };
        for p in partials {
            c.score.extend(p.score);
            for (all, part) in c.rows.iter_mut().zip(p.rows) {
                all.extend(part);
            }
            for (total, (both, same)) in c.pairs.iter_mut().zip(p.pairs) {
                total.0 += both;
                total.1 += same;
            }
        }
        Ok(c)
    })
}

/// Reduce one row group's outputs of every variant to per-row sums and pair counts.
fn partial(outputs: &[GroupOutputs]) -> Partial {
    let first = &outputs[0].group;
    let n_rows = first.rows();
    let score = (0..n_rows)
        .map(|i| first.scores[first.span(i)].iter().map(|&x| x as f64).sum())
        .collect();
    let rows = outputs
        .iter()
        .map(|o| {
            (0..n_rows)
                .map(|i| {
                    let s = o.group.span(i);
                    let mut r = RowSums::empty();
                    for (&a, &m) in o.outputs.advantages[s.clone()].iter().zip(&o.mask[s]) {
                        if m == 1.0 {
                            let a = a as f64;
                            r.valid += 1;
                            r.sum += a;
                            r.sum_sq += a * a;
                            r.sum_abs += a.abs();
                            r.zeros += u64::from(a == 0.0);
                            r.min = r.min.min(a);
                            r.max = r.max.max(a);
                        }
                    }
                    r
                })
                .collect()
        })
        .collect();
    let mut pairs = Vec::new();
    for (i, a) in outputs.iter().enumerate() {
        for b in &outputs[i + 1..] {
            let (mut both, mut same) = (0u64, 0u64);
            for t in 0..a.mask.len() {
                if a.mask[t] == 1.0 && b.mask[t] == 1.0 {
                    both += 1;
                    same +=
                        u64::from(sign(a.outputs.advantages[t]) == sign(b.outputs.advantages[t]));
                }
            }
            pairs.push((both, same));
        }
    }
    Partial { score, rows, pairs }
}

fn sign(x: f32) -> i8 {
    if x > 0.0 {
        1
    } else if x < 0.0 {
        -1
    } else {
        0
    }
}

fn summarise(
    variants: &[Variant],
    collected: Collected,
    file: &str,
    correct_above: f64,
) -> Comparison {
    let n = variants.len();
    let Collected {
        prepared,
        score,
        rows,
        pairs: pair_counts,
    } = collected;
    let correct: Vec<bool> = score.iter().map(|&s| s > correct_above).collect();
    // Groups are uid within a training batch, as the estimators see them.
    let uid = prepared
        .iter()
        .map(|p| &p.stats.uid)
        .find(|u| !u.is_empty());
    let step = prepared[0].stats.step.as_deref();
    let prepared = &prepared;
    let row_bucket: Option<(Vec<usize>, Vec<usize>)> = uid.map(|uid| {
        let keys: Vec<(Option<i64>, &GroupKey)> = (0..uid.len())
            .map(|i| (step.map(|s| s[i]), &uid[i]))
            .collect();
        let grouping = Grouping::by_key(keys.iter());
        let mut groups_per_bucket = vec![0usize; BUCKETS.len()];
        let mut bucket = vec![0usize; uid.len()];
        for members in grouping.members() {
            let right = members.iter().filter(|&&r| correct[r]).count();
            let b = bucket_of(right as f64 / members.len() as f64);
            groups_per_bucket[b] += 1;
            for r in members {
                bucket[r] = b;
            }
        }
        (bucket, groups_per_bucket)
    });
    let summaries = variants
        .iter()
        .zip(prepared)
        .zip(&rows)
        .map(|((v, p), rows)| {
            let (mut w_right, mut w_wrong, mut abs_right, mut abs_all) = (0.0, 0.0, 0.0, 0.0);
            for (r, &ok) in rows.iter().zip(&correct) {
                if ok {
                    w_right += r.sum;
                    abs_right += r.sum_abs;
                } else {
                    w_wrong += r.sum;
                }
                abs_all += r.sum_abs;
            }
            let buckets = row_bucket.as_ref().map(|(bucket, groups)| {
                let mut out: Vec<BucketSummary> = groups
                    .iter()
                    .map(|&g| BucketSummary {
                        groups: g,
                        rows: 0,
                        valid_tokens: 0,
                        mean_abs: None,
                    })
                    .collect();
                let mut abs = vec![0.0f64; BUCKETS.len()];
                for (r, &b) in rows.iter().zip(bucket) {
                    out[b].rows += 1;
                    out[b].valid_tokens += r.valid;
                    abs[b] += r.sum_abs;
                }
                for (o, a) in out.iter_mut().zip(abs) {
                    o.mean_abs = (o.valid_tokens > 0).then(|| a / o.valid_tokens as f64);
                }
                out
            });
            VariantSummary {
                label: v.label.clone(),
                estimator: v.config.algorithm.adv_estimator.name().to_string(),
                tokens: TokenStats::of(rows.iter()),
                buckets,
                weight_correct: w_right,
                weight_incorrect: w_wrong,
                abs_share_correct: if abs_all > 0.0 {
                    abs_right / abs_all
                } else {
                    0.0
                },
                warnings: p.warnings.clone(),
            }
        })
        .collect();
    let mut pairs = Vec::new();
    let mut k = 0;
    for i in 0..n {
        for j in i + 1..n {
            let (both, same) = pair_counts[k];
            k += 1;
            let (x, y): (Vec<f64>, Vec<f64>) = rows[i]
                .iter()
                .zip(&rows[j])
                .filter(|(a, b)| a.valid > 0 && b.valid > 0)
                .map(|(a, b)| (a.sum / a.valid as f64, b.sum / b.valid as f64))
                .unzip();
            pairs.push(PairSummary {
                a: variants[i].label.clone(),
                b: variants[j].label.clone(),
                tokens: both,
                sign_agreement: (both > 0).then(|| same as f64 / both as f64),
                rows: x.len(),
                rank_correlation: spearman(&x, &y),
            });
        }
    }
    Comparison {
        file: file.to_string(),
        rows: score.len(),
        correct_rows: correct.iter().filter(|&&c| c).count(),
        correct_above,
        variants: summaries,
        pairs,
    }
}

/// Ranks 1..=n, ties given their average rank.
fn ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut r = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &o in &order[i..=j] {
            r[o] = avg;
        }
        i = j + 1;
    }
    r
}

/// Spearman's ρ: the Pearson correlation of the ranks (ties averaged).
fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() < 2 {
        return None;
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in rx.iter().zip(&ry) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

impl Comparison {
    /// The comparison as JSON (documented in README and `docs/pipelines.md`).
    pub fn to_json(&self) -> Value {
        let variants = self
            .variants
            .iter()
            .map(|v| {
                let mut m = v.tokens.to_json();
                m.insert("label".into(), json!(v.label));
                m.insert("estimator".into(), json!(v.estimator));
                m.insert("weight_correct".into(), json!(v.weight_correct));
                m.insert("weight_incorrect".into(), json!(v.weight_incorrect));
                m.insert("abs_share_correct".into(), json!(v.abs_share_correct));
                m.insert(
                    "pass_rate_buckets".into(),
                    match &v.buckets {
                        Some(b) => Value::Array(
                            b.iter()
                                .zip(BUCKETS)
                                .map(|(b, name)| {
                                    json!({
                                        "pass_rate": name,
                                        "groups": b.groups,
                                        "rows": b.rows,
                                        "valid_tokens": b.valid_tokens,
                                        "mean_abs_advantage": b.mean_abs,
                                    })
                                })
                                .collect(),
                        ),
                        None => Value::Null,
                    },
                );
                m.insert("warnings".into(), json!(v.warnings));
                Value::Object(m)
            })
            .collect::<Vec<_>>();
        let pairs = self
            .pairs
            .iter()
            .map(|p| {
                json!({
                    "a": p.a,
                    "b": p.b,
                    "tokens": p.tokens,
                    "sign_agreement": p.sign_agreement,
                    "rows": p.rows,
                    "rank_correlation": p.rank_correlation,
                })
            })
            .collect::<Vec<_>>();
        json!({
            "file": self.file,
            "rows": self.rows,
            "correct_rows": self.correct_rows,
            "correct_above": self.correct_above,
            "variants": variants,
            "pairs": pairs,
        })
    }

    /// The comparison as aligned tables.
    pub fn render(&self) -> String {
        let mut t = Table::new("", self.variants.iter().map(|v| v.label.clone()));
        let num = |f: &dyn Fn(&VariantSummary) -> String| -> Vec<String> {
            self.variants.iter().map(f).collect()
        };
        t.row("valid tokens", num(&|v| v.tokens.valid_tokens.to_string()));
        t.row("mean", num(&|v| fmt(v.tokens.mean)));
        t.row("std", num(&|v| fmt(v.tokens.std)));
        t.row("min", num(&|v| fmt(v.tokens.min)));
        t.row("max", num(&|v| fmt(v.tokens.max)));
        t.row("exactly zero", num(&|v| percent(v.tokens.zero_fraction)));
        t.row("Σ adv, correct rows", num(&|v| fmt(v.weight_correct)));
        t.row("Σ adv, incorrect rows", num(&|v| fmt(v.weight_incorrect)));
        t.row(
            "|adv| on correct rows",
            num(&|v| percent(v.abs_share_correct)),
        );
        let mut out = format!(
            "{}: {} rows, {} correct (score > {})\n\n",
            self.file, self.rows, self.correct_rows, self.correct_above
        );
        out += &t.render();
        if let Some(first) = self.variants[0].buckets.as_ref() {
            let mut b = Table::new(
                "mean |adv| by group pass rate",
                std::iter::once("groups".to_string())
                    .chain(self.variants.iter().map(|v| v.label.clone())),
            );
            for (k, name) in BUCKETS.iter().enumerate() {
                let mut cells = vec![first[k].groups.to_string()];
                cells.extend(self.variants.iter().map(|v| {
                    v.buckets
                        .as_ref()
                        .and_then(|b| b[k].mean_abs)
                        .map_or("-".into(), fmt)
                }));
                b.row(name, cells);
            }
            out += "\n";
            out += &b.render();
        } else {
            out += "\n(no uid column: no pass-rate buckets)\n";
        }
        if !self.pairs.is_empty() {
            let mut p = Table::new(
                "pair",
                ["sign agreement", "rank corr (rows)"].map(String::from),
            );
            for pair in &self.pairs {
                p.row(
                    &format!("{} vs {}", pair.a, pair.b),
                    vec![
                        pair.sign_agreement.map_or("-".into(), percent),
                        pair.rank_correlation
                            .map_or("-".into(), |r| format!("{r:.4}")),
                    ],
                );
            }
            out += "\n";
            out += &p.render();
        }
        out
    }
}

fn fmt(x: f64) -> String {
    // No "-0.000000" for tiny negative means.
    let s = format!("{x:.6}");
    if s == "-0.000000" {
        "0.000000".into()
    } else {
        s
    }
}

fn percent(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// A left-labelled table with right-aligned value columns.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(corner: &str, columns: impl IntoIterator<Item = String>) -> Self {
        let mut header = vec![corner.to_string()];
        header.extend(columns);
        Table {
            header,
            rows: Vec::new(),
        }
    }

    fn row(&mut self, label: &str, cells: Vec<String>) {
        let mut r = vec![label.to_string()];
        r.extend(cells);
        self.rows.push(r);
    }

    fn render(&self) -> String {
        let width = |c: usize| {
            std::iter::once(&self.header)
                .chain(&self.rows)
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.header.len()).map(width).collect();
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = format!("{:<w$}", r[0], w = widths[0]);
            for (cell, &w) in r[1..].iter().zip(&widths[1..]) {
                line += &format!("  {cell:>w$}");
            }
            out += line.trim_end();
            out += "\n";
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_average_ties() {
        assert_eq!(ranks(&[10.0, 30.0, 20.0, 30.0]), vec![1.0, 3.5, 2.0, 3.5]);
    }

    #[test]
    fn spearman_by_hand() {
        // Monotone: ρ = 1; reversed: ρ = −1.
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[5.0, 9.0, 10.0]), Some(1.0));
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // Ranks x = (1,2,3,4), y = (2,1,4,3): d² = 1+1+1+1 = 4, ρ = 1 − 6·4/(4·15) = 0.6.
        let r = spearman(&[1.0, 2.0, 3.0, 4.0], &[20.0, 10.0, 40.0, 30.0]).unwrap();
        assert!((r - 0.6).abs() < 1e-12);
        // A constant side has no rank order.
        assert_eq!(spearman(&[1.0, 2.0], &[7.0, 7.0]), None);
        assert_eq!(spearman(&[1.0], &[1.0]), None);
    }

    #[test]
    fn pass_rate_buckets() {
        let b: Vec<usize> = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]
            .map(bucket_of)
            .to_vec();
        assert_eq!(b, vec![0, 1, 1, 2, 2, 3, 3, 4, 5]);
    }

    #[test]
    fn table_aligns() {
        let mut t = Table::new("", ["a".to_string(), "bbbb".to_string()]);
        t.row("mean", vec!["1.5".into(), "2".into()]);
        // "mean" sets the label width (4), "1.5" the first column (3), "bbbb" the second.
        assert_eq!(t.render(), "        a  bbbb\nmean  1.5     2\n");
    }
}
