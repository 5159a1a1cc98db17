//! The comparison and its summarise step: every row's sums → each variant's token statistics,
//! correct/incorrect weights and pass-rate buckets, and each pair's sign agreement and rank
//! correlation. `render` writes the [`Comparison`] built here.

use super::spearman::spearman;
use crate::analysis::buckets::{BucketSummary, RowBuckets};
use crate::analysis::collect::{Collected, Variant};
use crate::analysis::fragile::{Fragile, fragile_groups};
use crate::analysis::logged::LoggedCheck;
use crate::analysis::sums::Sums;
use crate::analysis::tokens::{AdvantageSums, TokenStats};
use advcalc_maths::estimators::conventions::Convention;
use advcalc_maths::estimators::groups::Grouping;

/// The whole comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The input's name.
    pub file: String,
    /// Rows in the input.
    pub rows: usize,
    /// Rows whose score is above `correct_above`.
    pub correct_rows: usize,
    /// The score a correct row is above.
    pub correct_above: f64,
    /// One summary per variant, in the order given.
    pub variants: Vec<VariantSummary>,
    /// One summary per pair of variants (i < j, row-major).
    pub pairs: Vec<PairSummary>,
    /// Numerically fragile groups of the input (groups by `step` and `uid`; inspect's
    /// finding): where the trainers' float arithmetic departs from the exact answer, so the
    /// variants' numbers there are advcalc's exact ones, not any trainer's. `None` without
    /// a `uid` column.
    pub fragile: Option<Fragile>,
    /// The conventions the variants run under: a fragile-group finding is a warning when it
    /// concerns one of them, else a note.
    pub conventions: Vec<Convention>,
    /// Another trainer's dump: its logged advantages against advcalc's recomputation under
    /// its convention (`inspect`'s check, docs/trainers.md).
    pub logged: Option<LoggedCheck>,
}

/// One variant's advantages, summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantSummary {
    /// The variant's label.
    pub label: String,
    /// Its estimator's name.
    pub estimator: String,
    /// Statistics over every valid token.
    pub tokens: TokenStats,
    /// Per pass-rate bucket (`BUCKETS`); `None` without a `uid` column.
    pub buckets: Option<Vec<BucketSummary>>,
    /// Σ advantage over the valid tokens of correct rows.
    pub weight_correct: f64,
    /// Σ advantage over the valid tokens of incorrect rows.
    pub weight_incorrect: f64,
    /// Share of Σ |advantage| on correct rows.
    pub abs_share_correct: f64,
    /// The data warnings `run` would print for this variant.
    pub warnings: Vec<String>,
}

/// Two variants against each other.
#[derive(Debug, Clone, PartialEq)]
pub struct PairSummary {
    /// The first variant's label.
    pub a: String,
    /// The second variant's label.
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

/// Every row's sums → the whole comparison.
pub fn summarise(
    variants: &[Variant],
    collected: Collected,
    file: &str,
    correct_above: f64,
) -> Comparison {
    let Collected {
        prepared,
        sums: Sums { score, rows, pairs },
    } = collected;
    let correct: Vec<bool> = score.iter().map(|&s| s > correct_above).collect();
    let row_buckets = RowBuckets::new(&prepared, &correct);
    let summaries = variants
        .iter()
        .zip(&prepared)
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
            VariantSummary {
                label: v.label.clone(),
                estimator: v.config.algorithm.adv_estimator.name().to_string(),
                tokens: TokenStats::of(rows.iter()),
                buckets: row_buckets.as_ref().map(|b| b.summaries(rows)),
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
    Comparison {
        file: file.to_string(),
        rows: score.len(),
        correct_rows: correct.iter().filter(|&&c| c).count(),
        correct_above,
        variants: summaries,
        pairs: pair_summaries(variants, &rows, &pairs),
        fragile: fragile_of(&prepared, &score),
        conventions: variants
            .iter()
            .map(|v| v.config.algorithm.ext.convention)
            .collect(),
        logged: None,
    }
}

/// The input's fragile groups (by `step` and `uid`, from the first variant that read a
/// `uid`), from the rows' scores; `None` when no variant read one.
fn fragile_of(prepared: &[crate::engine::job::Plan], score: &[f64]) -> Option<Fragile> {
    let uid = prepared
        .iter()
        .map(|p| &p.stats.uid)
        .find(|u| !u.is_empty())?;
    let step = prepared[0].stats.step.as_deref();
    let keys: Vec<(Option<i64>, &crate::data::GroupKey)> = (0..uid.len())
        .map(|i| (step.map(|s| s[i]), &uid[i]))
        .collect();
    let groups: Vec<Vec<f64>> = Grouping::by_key(keys.iter())
        .members()
        .into_iter()
        .map(|m| m.into_iter().map(|r| score[r]).collect())
        .collect();
    Some(fragile_groups(&groups))
}

/// Each pair of variants (i < j, row-major, as `pair_counts`): sign agreement over the
/// tokens valid under both, rank correlation over the rows valid under both.
fn pair_summaries(
    variants: &[Variant],
    rows: &[Vec<AdvantageSums>],
    pair_counts: &[(u64, u64)],
) -> Vec<PairSummary> {
    let n = variants.len();
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
    pairs
}
