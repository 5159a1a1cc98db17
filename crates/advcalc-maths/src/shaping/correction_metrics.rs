//! verl's `rollout_corr/...` metrics (docs/reference/verl-0.9.1.md §3.2 IS weights, §3.3 rejection, §3.4
//! off-policy diagnostics), beside the correction that they describe.
//!
//! A row group contributes [`CorrectionParts`] per step ([`correction_parts`]): token sums
//! and per-row values under the original (pre-rejection) mask. Parts merge in row-group
//! order ([`CorrectionParts::merge`]) and [`correction_metrics`] finishes a step into named
//! values. Masked means carry verl's `1e-8` guard (`Σ x·m / (Σ m + 1e-8)`); token values are
//! f32 as torch computes them, the sums f64.

use std::collections::BTreeMap;

use crate::data::RowGroup;
use crate::shaping::correction::{
    self, Correction, IsLevel, RsAggregate, RsOption, SAFETY_BOUND, token_statistic,
};

/// Token-level sums of one rejection option over a step.
#[derive(Debug, Clone, Default)]
struct RsTokens {
    stat: f64,
    clamped: f64,
    clamped_sq: f64,
    high: f64,
    low: f64,
    rejected: f64,
    max: Option<f64>,
    min: Option<f64>,
}

/// Per-row values of one step.
#[derive(Debug, Clone, Default)]
struct RowValues {
    valid: bool,
    l_old: f64,
    l_rollout: f64,
    seq_log_ratio: f64,
    is_mean: f64,
    is_raw_mean: f64,
    rs_value: Vec<f64>,
    rs_rejected: Vec<bool>,
    any_rejected: bool,
}

/// One step's partial rollout-correction metrics: token sums over the valid tokens and one
/// entry per row seen, in row order. `Default` is a step with no rows.
#[derive(Debug, Clone, Default)]
pub struct CorrectionParts {
    n: f64,
    kl: f64,
    k3: f64,
    rho2: f64,
    w: f64,
    w_clamped: f64,
    w_clamped_sq: f64,
    above: f64,
    below: f64,
    oob: f64,
    w_max: Option<f64>,
    w_min: Option<f64>,
    rs: Vec<RsTokens>,
    rejected: f64,
    rows: Vec<RowValues>,
}

/// `f64::max` and `f64::min` (a NaN ignored) with one answer between +0.0 and −0.0: +0.0,
/// as verl's metrics show it (−0.0 only when both are). The standard library leaves that
/// choice open, and a debug and a release build made different ones (`rollout_is_seq_min`
/// of the corpus case `is_sequence_icepop_bn`).
fn larger(a: f64, b: f64) -> f64 {
    if a == 0.0 && b == 0.0 {
        zeros(a, b)
    } else {
        a.max(b)
    }
}
fn smaller(a: f64, b: f64) -> f64 {
    if a == 0.0 && b == 0.0 {
        zeros(a, b)
    } else {
        a.min(b)
    }
}
/// Of two zeros, −0.0 only when both are: the sign bits and-ed.
fn zeros(a: f64, b: f64) -> f64 {
    f64::from_bits(a.to_bits() & b.to_bits())
}

fn fmax(a: Option<f64>, b: f64) -> Option<f64> {
    Some(a.map_or(b, |a| larger(a, b)))
}
fn fmin(a: Option<f64>, b: f64) -> Option<f64> {
    Some(a.map_or(b, |a| smaller(a, b)))
}

/// The larger / smaller of two optional extremes (`None`: nothing seen yet).
fn max_of_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    b.map_or(a, |v| fmax(a, v))
}
fn min_of_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    b.map_or(a, |v| fmin(a, v))
}

impl CorrectionParts {
    /// Add the parts of later rows of the same step (`o`'s rows after this one's).
    pub fn merge(&mut self, o: CorrectionParts) {
        self.n += o.n;
        self.kl += o.kl;
        self.k3 += o.k3;
        self.rho2 += o.rho2;
        self.w += o.w;
        self.w_clamped += o.w_clamped;
        self.w_clamped_sq += o.w_clamped_sq;
        self.above += o.above;
        self.below += o.below;
        self.oob += o.oob;
        self.w_max = max_of_opt(self.w_max, o.w_max);
        self.w_min = min_of_opt(self.w_min, o.w_min);
        if self.rs.len() < o.rs.len() {
            self.rs.resize(o.rs.len(), RsTokens::default());
        }
        for (a, b) in self.rs.iter_mut().zip(o.rs) {
            a.stat += b.stat;
            a.clamped += b.clamped;
            a.clamped_sq += b.clamped_sq;
            a.high += b.high;
            a.low += b.low;
            a.rejected += b.rejected;
            a.max = max_of_opt(a.max, b.max);
            a.min = min_of_opt(a.min, b.min);
        }
        self.rejected += o.rejected;
        self.rows.extend(o.rows);
    }
}

/// The thresholds a rejection option's metrics compare with: (upper, lower-or-0, is_k1).
fn rs_bounds(o: &RsOption) -> (f64, f64, bool) {
    match o.lower {
        Some(lo) => (o.upper, lo, true),
        None => (o.upper, 0.0, false),
    }
}

/// The metric parts of a row group under correction `c`, by step (`group.step_of`; `None`
/// without a step column). `old` and `rollout` are the group's flat log-prob columns (the
/// caller picks `old`: in bypass mode it is the rollout's), read under the group's original
/// mask; `log ρ = old − rollout`. A row without a valid token adds to the row count only.
pub fn correction_parts(
    c: &Correction,
    group: &RowGroup,
    old: &[f32],
    rollout: &[f32],
) -> BTreeMap<Option<i64>, CorrectionParts> {
    let mut parts = BTreeMap::<Option<i64>, CorrectionParts>::new();
    let mask = &group.mask.values;
    for i in 0..group.rows() {
        let s = group.span(i);
        let (o, r, m) = (&old[s.clone()], &rollout[s.clone()], &mask[s.clone()]);
        let p = parts.entry(group.step_of(i)).or_default();
        let mut lr = vec![0.0f32; m.len()];
        correction::log_ratio_row(o, r, &mut lr);
        let n: f64 = m.iter().map(|&x| x as f64).sum();
        let mut row = RowValues {
            valid: n > 0.0,
            l_old: correction::masked_sum(o, m) / (n + 1e-8),
            l_rollout: correction::masked_sum(r, m) / (n + 1e-8),
            seq_log_ratio: correction::masked_sum(&lr, m),
            ..Default::default()
        };
        p.n += n;
        for t in 0..m.len() {
            if m[t] == 0.0 {
                continue;
            }
            p.kl += (r[t] - o[t]) as f64;
            p.k3 += (lr[t].exp() - lr[t] - 1.0) as f64;
            let rho = lr[t].clamp(-SAFETY_BOUND, SAFETY_BOUND).exp();
            p.rho2 += (rho * rho) as f64;
        }
        if let Some(spec) = &c.is {
            let mut raw = vec![0.0f32; m.len()];
            correction::raw_weights_row(spec, &lr, m, &mut raw);
            let mut w = raw.clone();
            correction::truncate_weights(spec, &mut w);
            let upper = spec.upper as f32;
            let lower_m = spec.lower.unwrap_or(1.0 / spec.upper) as f32;
            for t in 0..m.len() {
                if m[t] == 0.0 {
                    continue;
                }
                let c = w[t].clamp(0.0, upper) as f64;
                p.w += w[t] as f64;
                p.w_clamped += c;
                p.w_clamped_sq += c * c;
                if raw[t] > upper {
                    p.above += 1.0;
                }
                if raw[t] < lower_m {
                    p.below += 1.0;
                }
                if let Some(lo) = spec.lower
                    && (raw[t] < lo as f32 || raw[t] > upper)
                {
                    p.oob += 1.0;
                }
                p.w_max = fmax(p.w_max, w[t] as f64);
                p.w_min = fmin(p.w_min, w[t] as f64);
            }
            row.is_mean = correction::masked_sum(&w, m) / (n + 1e-8);
            row.is_raw_mean = correction::masked_sum(&raw, m) / (n + 1e-8);
        }
        if !c.rs.is_empty() {
            if p.rs.len() < c.rs.len() {
                p.rs.resize(c.rs.len(), RsTokens::default());
            }
            let mut combined = vec![1.0f32; m.len()];
            for (k, option) in c.rs.iter().enumerate() {
                let (upper, lower, k1) = rs_bounds(option);
                let sequence = option.aggregate != RsAggregate::Token;
                let seq_value = option.sequence_statistic(&lr, m);
                let mut keep = vec![1.0f32; m.len()];
                option.apply(&lr, m, &mut keep);
                let acc = &mut p.rs[k];
                let mut token_sum = 0.0;
                for t in 0..m.len() {
                    combined[t] *= keep[t];
                    if m[t] == 0.0 {
                        continue;
                    }
                    let stat = if sequence {
                        seq_value as f32
                    } else {
                        token_statistic(option.statistic, lr[t])
                    } as f64;
                    token_sum += stat;
                    acc.stat += stat;
                    let clamped = stat.clamp(lower, upper);
                    acc.clamped += clamped;
                    acc.clamped_sq += clamped * clamped;
                    if stat > upper {
                        acc.high += 1.0;
                    }
                    if k1 && stat < lower {
                        acc.low += 1.0;
                    }
                    acc.rejected += 1.0 - keep[t] as f64;
                    acc.max = fmax(acc.max, stat);
                    acc.min = fmin(acc.min, stat);
                }
                row.rs_value.push(if sequence {
                    seq_value
                } else {
                    token_sum / (n + 1e-8)
                });
                row.rs_rejected
                    .push((0..m.len()).any(|t| m[t] != 0.0 && keep[t] == 0.0));
            }
            for t in 0..m.len() {
                if m[t] != 0.0 {
                    p.rejected += 1.0 - combined[t] as f64;
                }
            }
            row.any_rejected = (0..m.len()).any(|t| m[t] != 0.0 && combined[t] <= 0.5);
        }
        p.rows.push(row);
    }
    parts
}

/// The mean of `v`, 0 when empty.
fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0.0), |(s, n), x| (s + x, n + 1.0));
    if n > 0.0 { s / n } else { 0.0 }
}

/// torch's unbiased std (n − 1), 0 for fewer than two values.
fn unbiased_std(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v.iter().copied());
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// The largest of `v`, −∞ when empty.
fn max_of(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(f64::NEG_INFINITY, larger)
}

/// The smallest of `v`, +∞ when empty.
fn min_of(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(f64::INFINITY, smaller)
}

/// verl's std of the clamped values from their sum and sum of squares over `n` valid
/// tokens: `sqrt(max(E[x²] − E[x]², 0))` with its 1e-8 guards, 0 for n ≤ 1.
fn clamped_std(sum: f64, sum_sq: f64, n: f64) -> f64 {
    let (ec, ec2) = (sum / (n + 1e-8), sum_sq / (n + 1e-8));
    if n > 1.0 {
        (ec2 - ec * ec).max(0.0).sqrt()
    } else {
        0.0
    }
}

/// verl's `rollout_corr/...` metrics of one step from its merged parts, as (full name,
/// value) in a fixed order, each name once (a later value would replace an earlier one).
/// The caller writes them out (as JSON numbers: a non-finite value is `null` there).
///
/// - Always the 13 off-policy diagnostics (§3.4): `training_ppl` = mean over rows of
///   `exp(−ℓ)` (ℓ the row's masked mean old log-prob), `kl` = token mean of
///   `rollout − old`, `k3_kl` = token mean of `e^{log ρ} − log ρ − 1`, `chi2_token` =
///   token mean of `ρ²` − 1, `chi2_seq` = row mean of `exp(2·clamp(S, ±20))` − 1 (S the
///   row's Σ log ρ), and the rollout / difference perplexities.
/// - With IS weights (§3.2), before batch normalisation: the weights' mean, extremes,
///   fractions beyond the bounds, clamped std and effective sample size `E[c]²/E[c²]`,
///   and the same per row; `rollout_is_oob_ratio` for IcePop, and
///   `rollout_is_batch_norm_factor` (`is_norm`, 1 when none was computed) when normalising.
/// - With rejection (§3.3): per option `rollout_rs_{name}_...` (sequence options' extremes
///   and fractions over the valid rows' values; `seq_fraction_low` for k1 only; zeros for the
///   `seq_*` values of a step without a valid row), then the combined
///   `rollout_rs_masked_fraction` and `rollout_rs_seq_masked_fraction`.
///
/// A step without a valid token gives guarded zeros, or ±∞ for empty extremes.
pub fn correction_metrics(
    c: &Correction,
    p: &CorrectionParts,
    is_norm: Option<f64>,
) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut put = |k: &str, v: f64| out.push((format!("rollout_corr/{k}"), v));
    let n = p.n;
    let rows = &p.rows;
    // off-policy diagnostics (§3.4)
    put("training_ppl", mean(rows.iter().map(|r| (-r.l_old).exp())));
    put("training_log_ppl", mean(rows.iter().map(|r| -r.l_old)));
    put("kl", p.kl / (n + 1e-8));
    put("k3_kl", p.k3 / (n + 1e-8));
    put(
        "rollout_ppl",
        mean(rows.iter().map(|r| (-r.l_rollout).exp())),
    );
    put("rollout_log_ppl", mean(rows.iter().map(|r| -r.l_rollout)));
    let diff: Vec<f64> = rows.iter().map(|r| r.l_rollout - r.l_old).collect();
    put("log_ppl_diff", mean(diff.iter().copied()));
    put("log_ppl_abs_diff", mean(diff.iter().map(|d| d.abs())));
    put("log_ppl_diff_max", max_of(diff.iter().copied()));
    put("log_ppl_diff_min", min_of(diff.iter().copied()));
    put("ppl_ratio", mean(diff.iter().map(|d| d.exp())));
    put("chi2_token", p.rho2 / (n + 1e-8) - 1.0);
    let bound = SAFETY_BOUND as f64;
    put(
        "chi2_seq",
        mean(
            rows.iter()
                .map(|r| (2.0 * r.seq_log_ratio.clamp(-bound, bound)).exp()),
        ) - 1.0,
    );
    // importance-sampling weights (§3.2), before batch normalisation
    if let Some(spec) = &c.is {
        let upper = spec.upper;
        let lower_m = spec.lower.unwrap_or(1.0 / upper);
        match spec.level {
            IsLevel::Sequence => {
                let s = rows.iter().map(|r| r.seq_log_ratio);
                put("rollout_is_max", max_of(s.clone()).min(bound).exp());
                put("rollout_is_min", min_of(s.clone()).exp());
                put(
                    "rollout_is_ratio_fraction_high",
                    mean(s.clone().map(|x| f64::from(x > upper.ln()))),
                );
                put(
                    "rollout_is_ratio_fraction_low",
                    mean(s.map(|x| f64::from(x < lower_m.ln()))),
                );
            }
            IsLevel::Token => {
                put("rollout_is_ratio_fraction_high", p.above / (n + 1e-8));
                put("rollout_is_ratio_fraction_low", p.below / (n + 1e-8));
                put("rollout_is_max", p.w_max.unwrap_or(f64::NEG_INFINITY));
                put("rollout_is_min", p.w_min.unwrap_or(f64::INFINITY));
            }
        }
        put("rollout_is_mean", p.w / (n + 1e-8));
        let (ec, ec2) = (p.w_clamped / (n + 1e-8), p.w_clamped_sq / (n + 1e-8));
        put(
            "rollout_is_std",
            clamped_std(p.w_clamped, p.w_clamped_sq, n),
        );
        put(
            "rollout_is_eff_sample_size",
            1.0 / (ec2 / ((ec + 1e-8) * (ec + 1e-8))),
        );
        let seq: Vec<f64> = rows.iter().map(|r| r.is_mean).collect();
        put("rollout_is_seq_mean", mean(seq.iter().copied()));
        put("rollout_is_seq_std", unbiased_std(&seq));
        put("rollout_is_seq_max", max_of(seq.iter().copied()));
        put("rollout_is_seq_min", min_of(seq.iter().copied()));
        put(
            "rollout_is_seq_max_deviation",
            max_of(seq.iter().map(|s| (s - 1.0).abs())),
        );
        put(
            "rollout_is_seq_fraction_high",
            mean(rows.iter().map(|r| f64::from(r.is_raw_mean > upper))),
        );
        put(
            "rollout_is_seq_fraction_low",
            mean(rows.iter().map(|r| f64::from(r.is_raw_mean < lower_m))),
        );
        if spec.lower.is_some() {
            put("rollout_is_oob_ratio", p.oob / (n + 1e-8));
        }
        if spec.batch_normalize {
            put("rollout_is_batch_norm_factor", is_norm.unwrap_or(1.0));
        }
    }
    // rejection sampling (§3.3)
    if !c.rs.is_empty() {
        for (k, option) in c.rs.iter().enumerate() {
            let (upper, lower, k1) = rs_bounds(option);
            let sequence = option.aggregate != RsAggregate::Token;
            let acc = p.rs.get(k).cloned().unwrap_or_default();
            let valid: Vec<f64> = rows
                .iter()
                .filter(|r| r.valid)
                .map(|r| r.rs_value[k])
                .collect();
            let prefix = format!("rollout_rs_{}", option.name);
            let mut put = |k: &str, v: f64| out.push((format!("rollout_corr/{prefix}_{k}"), v));
            put("mean", acc.stat / (n + 1e-8));
            if sequence && !valid.is_empty() {
                put("max", max_of(valid.iter().copied()));
                put("min", min_of(valid.iter().copied()));
                put(
                    "fraction_high",
                    mean(valid.iter().map(|&v| f64::from(v > upper))),
                );
                put(
                    "fraction_low",
                    if k1 {
                        mean(valid.iter().map(|&v| f64::from(v < lower)))
                    } else {
                        0.0
                    },
                );
            } else {
                put("max", acc.max.unwrap_or(f64::NEG_INFINITY));
                put("min", acc.min.unwrap_or(f64::INFINITY));
                put("fraction_high", acc.high / (n + 1e-8));
                put("fraction_low", if k1 { acc.low / (n + 1e-8) } else { 0.0 });
            }
            put("std", clamped_std(acc.clamped, acc.clamped_sq, n));
            if valid.is_empty() {
                for key in [
                    "seq_mean",
                    "seq_std",
                    "seq_max",
                    "seq_min",
                    "seq_max_deviation",
                    "seq_fraction_high",
                    "seq_fraction_low",
                ] {
                    put(key, 0.0);
                }
            } else {
                put("seq_mean", mean(valid.iter().copied()));
                put("seq_std", unbiased_std(&valid));
                put("seq_max", max_of(valid.iter().copied()));
                put("seq_min", min_of(valid.iter().copied()));
                put("seq_max_deviation", max_of(valid.iter().map(|v| v.abs())));
                put(
                    "seq_fraction_high",
                    mean(valid.iter().map(|&v| f64::from(v > upper))),
                );
                if k1 {
                    put(
                        "seq_fraction_low",
                        mean(valid.iter().map(|&v| f64::from(v < lower))),
                    );
                }
            }
            put("masked_fraction", acc.rejected / (n + 1e-8));
            let valid_rows = rows.iter().filter(|r| r.valid).count();
            let rejected_rows = rows.iter().filter(|r| r.valid && r.rs_rejected[k]).count();
            put(
                "seq_masked_fraction",
                if valid_rows > 0 {
                    rejected_rows as f64 / valid_rows as f64
                } else {
                    0.0
                },
            );
        }
        out.push((
            "rollout_corr/rollout_rs_masked_fraction".into(),
            p.rejected / (n + 1e-8),
        ));
        out.push((
            "rollout_corr/rollout_rs_seq_masked_fraction".into(),
            mean(rows.iter().map(|r| f64::from(r.any_rejected))),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    //! Expected numbers are worked by hand from the reference's formulas (§3.2 IS metrics,
    //! §3.3 RS metrics, §3.4 off-policy diagnostics) on a two-row batch, never taken from
    //! advcalc. The batch (padding marked by mask 0):
    //!
    //! ```text
    //! row 0: mask [1, 1, 0]  old [-1, -0.5, -3]  rollout [-1, -1, -2]     log ρ [0, 0.5, (-1)]
    //! row 1: mask [1, 1]     old [-2, -1]        rollout [-1.5, -0.75]    log ρ [-0.5, -0.25]
    //! ```
    //!
    //! 4 valid tokens; ℓ = masked_mean(old) = [-0.75, -1.5], r = masked_mean(rollout) =
    //! [-1, -1.125]; S = Σ log ρ·m = [0.5, -0.75]. The values carry the 1e-8 guards of verl's
    //! masked means (≤ 4e-9 here) and f32 token arithmetic (exp in f32: ~1e-7), hence the
    //! tolerance.
    use super::*;

    use crate::data::TokenRole;
    use crate::shaping::correction::{IsSpec, RsStatistic};
    use crate::test_support::assert_close;

    // A tie between +0.0 and −0.0 is +0.0 whichever comes first (the bits, not ==), −0.0
    // only when every zero is; otherwise the standard library's answer, a NaN ignored.
    #[test]
    fn extremes_of_signed_zeros_are_positive_zero() {
        for v in [[0.0, -0.0], [-0.0, 0.0]] {
            assert_eq!(min_of(v.into_iter()).to_bits(), 0.0f64.to_bits());
            assert_eq!(max_of(v.into_iter()).to_bits(), 0.0f64.to_bits());
        }
        let negative = [-0.0, -0.0].into_iter();
        assert_eq!(min_of(negative).to_bits(), (-0.0f64).to_bits());
        assert_eq!(
            min_of([1.0, -0.0, f64::NAN].into_iter()).to_bits(),
            (-0.0f64).to_bits()
        );
        assert_eq!(
            max_of([-1.0, f64::NAN, -0.0].into_iter()).to_bits(),
            (-0.0f64).to_bits()
        );
        assert_eq!(
            fmin(Some(-0.0), 0.0).map(f64::to_bits),
            Some(0.0f64.to_bits())
        );
        assert_eq!(min_of(std::iter::empty()), f64::INFINITY);
    }

    const ATOL: f64 = 3e-7;
    const RTOL: f64 = 1e-6;

    const MASK: [&[f32]; 2] = [&[1.0, 1.0, 0.0], &[1.0, 1.0]];
    const OLD: [&[f32]; 2] = [&[-1.0, -0.5, -3.0], &[-2.0, -1.0]];
    const ROLLOUT: [&[f32]; 2] = [&[-1.0, -1.0, -2.0], &[-1.5, -0.75]];

    /// Rows `range` of the batch as one row group, with an optional step per row.
    fn group(range: std::ops::Range<usize>, step: Option<Vec<i64>>) -> RowGroup {
        RowGroup::from_rows(
            range.start,
            &MASK[range.clone()],
            &[
                (TokenRole::OldLogProbs, &OLD[range.clone()]),
                (TokenRole::RolloutLogProbs, &ROLLOUT[range]),
            ],
            step,
        )
    }

    /// IS weight settings as verl's `rollout_is`, `rollout_is_threshold` and
    /// `rollout_is_batch_normalize` read (`lower`: IcePop's, `None` for TIS).
    fn is(level: IsLevel, lower: Option<f64>, upper: f64, batch_normalize: bool) -> IsSpec {
        IsSpec {
            level,
            upper,
            lower,
            batch_normalize,
        }
    }

    /// `rollout_is: token` at 1.5 (TIS) with `rollout_rs: token_k1` at 1.5.
    fn token_tis_and_k1() -> Correction {
        Correction {
            is: Some(is(IsLevel::Token, None, 1.5, false)),
            rs: vec![RsOption::new(
                "token_k1",
                RsAggregate::Token,
                RsStatistic::K1,
                (Some(1.0 / 1.5), 1.5),
            )],
        }
    }

    fn parts_of(c: &Correction, g: &RowGroup) -> BTreeMap<Option<i64>, CorrectionParts> {
        let old = g.token(TokenRole::OldLogProbs).unwrap();
        let rollout = g.token(TokenRole::RolloutLogProbs).unwrap();
        correction_parts(c, g, old, rollout)
    }

    /// The metrics of the whole batch (no step column), by name; no name twice.
    fn metrics_of(c: &Correction, is_norm: Option<f64>) -> BTreeMap<String, f64> {
        let parts = parts_of(c, &group(0..2, None));
        assert_eq!(parts.keys().collect::<Vec<_>>(), [&None]);
        let list = correction_metrics(c, &parts[&None], is_norm);
        let out: BTreeMap<String, f64> = list.iter().cloned().collect();
        assert_eq!(out.len(), list.len(), "a name twice in {list:?}");
        out
    }

    /// `out` has exactly the names of `expected` (after the `rollout_corr/` prefix), each
    /// close to its value.
    #[track_caller]
    fn assert_metrics(out: &BTreeMap<String, f64>, expected: &[(&str, f64)]) {
        let mut want: Vec<String> = expected
            .iter()
            .map(|(k, _)| format!("rollout_corr/{k}"))
            .collect();
        want.sort();
        let got: Vec<String> = out.keys().cloned().collect();
        assert_eq!(got, want, "metric names");
        for (k, e) in expected {
            let key = format!("rollout_corr/{k}");
            assert_close(&key, &[out[&key]], &[*e], ATOL, RTOL);
        }
    }

    /// §3.4 on the batch above (all 13 are always there in decoupled mode).
    const OFFPOLICY: [(&str, f64); 13] = [
        // mean(e^0.75, e^1.5) = (2.1170000166 + 4.4816890703)/2
        ("training_ppl", 3.2993445435),
        ("training_log_ppl", 1.125),
        // masked_mean(rollout − old) = (0 − 0.5 + 0.5 + 0.25)/4
        ("kl", 0.0625),
        // (0 + (e^0.5 − 1.5) + (e^−0.5 − 0.5) + (e^−0.25 − 0.75))/4
        // = (0.1487212707 + 0.1065306597 + 0.0288007831)/4
        ("k3_kl", 0.0710131784),
        // mean(e^1, e^1.125) = (2.7182818285 + 3.0802168489)/2
        ("rollout_ppl", 2.8992493387),
        ("rollout_log_ppl", 1.0625),
        // r − ℓ = [-0.25, 0.375]
        ("log_ppl_diff", 0.0625),
        ("log_ppl_abs_diff", 0.3125),
        ("log_ppl_diff_max", 0.375),
        ("log_ppl_diff_min", -0.25),
        // mean(e^−0.25, e^0.375) = (0.7788007831 + 1.4549914146)/2
        ("ppl_ratio", 1.1168960988),
        // (e^0 + e^1 + e^−1 + e^−0.5)/4 − 1
        ("chi2_token", 0.1731729823),
        // mean(e^(2·0.5), e^(2·−0.75)) − 1 = (2.7182818285 + 0.2231301601)/2 − 1
        ("chi2_seq", 0.4707059943),
    ];

    #[test]
    fn offpolicy_metrics_alone_with_verls_yaml_defaults() {
        // rollout_is and rollout_rs null: the correction step runs for its metrics only.
        let out = metrics_of(&Correction::default(), None);
        assert_metrics(&out, &OFFPOLICY);
    }

    #[test]
    fn token_tis_and_token_k1_rejection_by_hand() {
        let out = metrics_of(&token_tis_and_k1(), None);
        // IS, token TIS upper 1.5 (lower_m = 1/1.5): w_raw = e^logρ = [1, 1.6487213 | 0.6065307,
        // 0.7788008], w = min(w_raw, 1.5) = [1, 1.5 | 0.6065307, 0.7788008].
        // E[c] = 3.8853314/4 = 0.9713329; E[c²] = (1 + 2.25 + e^−1 + e^−0.5)/4 = 1.0561025;
        // std = √(E[c²] − E[c]²) = 0.3355816; ESS = E[c]²/E[c²] = 0.8933674.
        // Per row s = [1.25, 0.6926657]: unbiased std |Δ|/√2 = 0.3940948, max |s − 1| =
        // 0.3073343; raw row means [1.3243606, 0.6926657] are inside [0.667, 1.5].
        //
        // RS, token_k1 1.5: bounds L = ln(1/1.5) = -0.4054651, U = 0.4054651; k1 = −logρ =
        // [0, -0.5 | 0.5, 0.25]: one token above U, one below L, both rejected (2 of 4).
        // c = clamp(k1, L, U) = [0, L | U, 0.25]: E[c] = 0.0625, std = 0.3064633.
        // Per row masked means [-0.25, 0.375]: unbiased std 0.625/√2 = 0.4419417; none
        // outside [L, U]. Both rows lose a token.
        let mut expected = OFFPOLICY.to_vec();
        expected.extend([
            ("rollout_is_mean", 0.9713328607),
            ("rollout_is_max", 1.5),
            ("rollout_is_min", 0.6065306597),
            ("rollout_is_ratio_fraction_high", 0.25),
            ("rollout_is_ratio_fraction_low", 0.25),
            ("rollout_is_std", 0.3355815832),
            ("rollout_is_eff_sample_size", 0.8933673797),
            ("rollout_is_seq_mean", 0.9713328607),
            ("rollout_is_seq_std", 0.3940948478),
            ("rollout_is_seq_max", 1.25),
            ("rollout_is_seq_min", 0.6926657214),
            ("rollout_is_seq_max_deviation", 0.3073342786),
            ("rollout_is_seq_fraction_high", 0.0),
            ("rollout_is_seq_fraction_low", 0.0),
            ("rollout_rs_token_k1_mean", 0.0625),
            ("rollout_rs_token_k1_max", 0.5),
            ("rollout_rs_token_k1_min", -0.5),
            ("rollout_rs_token_k1_fraction_high", 0.25),
            ("rollout_rs_token_k1_fraction_low", 0.25),
            ("rollout_rs_token_k1_std", 0.3064632555),
            ("rollout_rs_token_k1_seq_mean", 0.0625),
            ("rollout_rs_token_k1_seq_std", 0.4419417382),
            ("rollout_rs_token_k1_seq_max", 0.375),
            ("rollout_rs_token_k1_seq_min", -0.25),
            ("rollout_rs_token_k1_seq_max_deviation", 0.375),
            ("rollout_rs_token_k1_seq_fraction_high", 0.0),
            ("rollout_rs_token_k1_seq_fraction_low", 0.0),
            ("rollout_rs_token_k1_masked_fraction", 0.5),
            ("rollout_rs_token_k1_seq_masked_fraction", 1.0),
            ("rollout_rs_masked_fraction", 0.5),
            ("rollout_rs_seq_masked_fraction", 1.0),
        ]);
        // 13 + 14 IS (no oob_ratio for TIS, no batch_norm_factor) + 15 RS (k1) + 2
        assert_eq!(expected.len(), 44);
        assert_metrics(&out, &expected);
    }

    #[test]
    fn sequence_is_and_sequence_k3_rejection_by_hand() {
        let c = Correction {
            is: Some(is(IsLevel::Sequence, None, 2.0, true)),
            rs: vec![RsOption::new(
                "seq_mean_k3",
                RsAggregate::SeqMean,
                RsStatistic::K3,
                (None, 0.07),
            )],
        };
        let out = metrics_of(&c, Some(0.75));
        // IS, sequence TIS 2.0: w = e^S = [e^0.5 ×2 | e^−0.75 ×2] = [1.6487213, 0.4723666],
        // both ≤ 2. max = e^0.5, min = e^−0.75; S > ln 2: none; S < ln 0.5: row 1 (1 of 2).
        // E[w] = 1.0605439; two equally weighted values: std = |Δ|/2 = 0.5881774;
        // ESS = E[w]²/E[w²] = 1.1247533/1.4707060 = 0.7647711. Per row s = the weights:
        // unbiased std |Δ|/√2 = 0.8318084, max |s − 1| = 0.6487213; raw row means below 0.5:
        // row 1. The batch-normalisation factor is the one passed in.
        //
        // RS, seq_mean_k3 0.07: k3 = e^x − 1 − x = [0, 0.1487213 | 0.1065307, 0.0288008],
        // row means [0.0743606, 0.0676657]: row 0 > 0.07 is rejected (2 of 4 tokens, 1 of
        // 2 rows). mean (token-weighted) = 0.0710132; c = min(value, 0.07) = [0.07, 0.0676657]
        // ×2: std = |Δ|/2 = 0.0011671; unbiased row std |Δ|/√2 = 0.0047340. No
        // seq_fraction_low for a k3 option.
        let mut expected = OFFPOLICY.to_vec();
        expected.extend([
            ("rollout_is_max", 1.6487212707),
            ("rollout_is_min", 0.4723665527),
            ("rollout_is_ratio_fraction_high", 0.0),
            ("rollout_is_ratio_fraction_low", 0.5),
            ("rollout_is_mean", 1.0605439117),
            ("rollout_is_std", 0.5881773590),
            ("rollout_is_eff_sample_size", 0.7647710788),
            ("rollout_is_seq_mean", 1.0605439117),
            ("rollout_is_seq_std", 0.8318083981),
            ("rollout_is_seq_max", 1.6487212707),
            ("rollout_is_seq_min", 0.4723665527),
            ("rollout_is_seq_max_deviation", 0.6487212707),
            ("rollout_is_seq_fraction_high", 0.0),
            ("rollout_is_seq_fraction_low", 0.5),
            ("rollout_is_batch_norm_factor", 0.75),
            ("rollout_rs_seq_mean_k3_mean", 0.0710131784),
            ("rollout_rs_seq_mean_k3_max", 0.0743606354),
            ("rollout_rs_seq_mean_k3_min", 0.0676657214),
            ("rollout_rs_seq_mean_k3_fraction_high", 0.5),
            ("rollout_rs_seq_mean_k3_fraction_low", 0.0),
            ("rollout_rs_seq_mean_k3_std", 0.0011671393),
            ("rollout_rs_seq_mean_k3_seq_mean", 0.0710131784),
            ("rollout_rs_seq_mean_k3_seq_std", 0.0047340191),
            ("rollout_rs_seq_mean_k3_seq_max", 0.0743606354),
            ("rollout_rs_seq_mean_k3_seq_min", 0.0676657214),
            ("rollout_rs_seq_mean_k3_seq_max_deviation", 0.0743606354),
            ("rollout_rs_seq_mean_k3_seq_fraction_high", 0.5),
            ("rollout_rs_seq_mean_k3_masked_fraction", 0.5),
            ("rollout_rs_seq_mean_k3_seq_masked_fraction", 0.5),
            ("rollout_rs_masked_fraction", 0.5),
            ("rollout_rs_seq_masked_fraction", 0.5),
        ]);
        assert_metrics(&out, &expected);
        // Normalising without a factor (none computed) reports 1.
        let c = Correction {
            is: Some(is(IsLevel::Sequence, None, 2.0, true)),
            rs: Vec::new(),
        };
        let out = metrics_of(&c, None);
        assert_eq!(out["rollout_corr/rollout_is_batch_norm_factor"], 1.0);
    }

    #[test]
    fn icepop_reports_the_out_of_bounds_ratio() {
        // token IcePop "0.7_1.5": w_raw = [1, 1.6487213 | 0.6065307, 0.7788008]; outside
        // [0.7, 1.5]: 1.6487 and 0.6065, zeroed. w = [1, 0 | 0, 0.7788008]: mean 0.4447002,
        // max 1, min 0 (over valid tokens); high 1/4, low (below 0.7) 1/4, oob 2/4.
        let c = Correction {
            is: Some(is(IsLevel::Token, Some(0.7), 1.5, false)),
            rs: Vec::new(),
        };
        let out = metrics_of(&c, None);
        for (k, e) in [
            ("rollout_is_oob_ratio", 0.5),
            ("rollout_is_mean", 0.4447001958),
            ("rollout_is_max", 1.0),
            ("rollout_is_min", 0.0),
            ("rollout_is_ratio_fraction_high", 0.25),
            ("rollout_is_ratio_fraction_low", 0.25),
        ] {
            let key = format!("rollout_corr/{k}");
            let a = out[&key];
            assert_close(&key, &[a], &[e], ATOL, RTOL);
        }
        // 13 + 14 + oob_ratio
        assert_eq!(out.len(), 28);
    }

    #[test]
    fn row_groups_merge_into_the_batch_and_steps_stay_apart() {
        let c = token_tis_and_k1();
        // Row by row, merged in order, gives the same metrics as the whole batch at once.
        let mut merged = parts_of(&c, &group(0..1, None)).remove(&None).unwrap();
        merged.merge(parts_of(&c, &group(1..2, None)).remove(&None).unwrap());
        let whole = parts_of(&c, &group(0..2, None));
        let a = correction_metrics(&c, &merged, None);
        let b = correction_metrics(&c, &whole[&None], None);
        assert_eq!(
            a.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            b.iter().map(|(k, _)| k).collect::<Vec<_>>()
        );
        for ((k, x), (_, y)) in a.iter().zip(&b) {
            assert_close(k, &[*x], &[*y], 1e-12, 1e-12);
        }
        // With a step column each step is its own batch: step 7 is row 1 alone.
        // kl = (0.5 + 0.25)/2 = 0.375; training_log_ppl = 1.5; one row: seq std 0;
        // k1 = [0.5, 0.25]: one of two tokens rejected.
        let parts = parts_of(&c, &group(0..2, Some(vec![3, 7])));
        assert_eq!(parts.keys().collect::<Vec<_>>(), [&Some(3), &Some(7)]);
        let out: BTreeMap<String, f64> = correction_metrics(&c, &parts[&Some(7)], None)
            .into_iter()
            .collect();
        for (k, e) in [
            ("kl", 0.375),
            ("training_log_ppl", 1.5),
            ("rollout_is_seq_std", 0.0),
            ("rollout_rs_token_k1_masked_fraction", 0.5),
            ("rollout_rs_seq_masked_fraction", 1.0),
        ] {
            let key = format!("rollout_corr/{k}");
            assert_close(&key, &[out[&key]], &[e], ATOL, RTOL);
        }
    }

    #[test]
    fn clamped_std_by_hand() {
        // values {1, 2}: E = 1.5, E[x²] = 2.5, √(2.5 − 2.25) = 0.5 (the 1e-8 guards move it by
        // ~1e-8)
        assert_close("{1, 2}", &[clamped_std(3.0, 5.0, 2.0)], &[0.5], 1e-7, 0.0);
        // a single token: 0 whatever the sums
        assert_eq!(clamped_std(3.0, 100.0, 1.0), 0.0);
        assert_eq!(clamped_std(0.0, 0.0, 0.0), 0.0);
        // E[x²] < E[x]² (rounding in the sums): max(·, 0) gives 0, not NaN
        assert_eq!(clamped_std(3.0, 4.4, 2.0), 0.0);
    }
}
