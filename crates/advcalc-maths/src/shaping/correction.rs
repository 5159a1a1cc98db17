//! Pipeline stage 3: rollout correction in decoupled mode (docs/reference/verl-0.9.1.md §3, verl
//! `rollout_corr_helper`): importance-sampling weights and rejection sampling, both from
//! the per-token log ratio `log ρ = old_log_probs − rollout_log_probs` under the original
//! (pre-rejection) mask.
//!
//! - **IS weights** (`rollout_is: token | sequence`): `w_raw = exp(clamp(log ρ, ±20))` per
//!   token, or `exp(clamp(Σ_t log ρ·m, ±20))` broadcast over the row; then TIS (`min(w, upper)`)
//!   or IcePop (`"lo_hi"`: 0 outside [lo, hi]); padding gets 0. With
//!   `rollout_is_batch_normalize` the weights are divided by their batch mean μ (when
//!   μ > 1e-8) — after truncation, so they can exceed `upper` (quirk §9.15).
//! - **Rejection** (`rollout_rs`, comma list, all must pass): statistics of
//!   `x = clamp(log ρ, ±20)`: k1 = −x, k2 = ½x², k3 = eˣ − 1 − x, per token, or per row as a
//!   masked sum, masked mean or max over valid tokens. k1 bounds `lo_hi` keep
//!   `ln lo ≤ k1 ≤ ln hi` (they bound π_rollout/π_train, quirk §9.13); k2/k3 keep `≤ upper`.
//!   The new mask is `m · Π keep`.
//!
//! `config::rollout_correction` reads verl's settings into these types (its threshold parsing
//! and messages are verl's).

pub const SAFETY_BOUND: f32 = 20.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsLevel {
    Token,
    Sequence,
}

/// Importance-sampling weight settings.
#[derive(Debug, Clone, PartialEq)]
pub struct IsSpec {
    pub level: IsLevel,
    pub upper: f64,
    /// IcePop's lower bound; `None` means TIS.
    pub lower: Option<f64>,
    pub batch_normalize: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RsStatistic {
    K1,
    K2,
    K3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RsAggregate {
    Token,
    SeqSum,
    SeqMean,
    SeqMax,
}

/// One rejection option with its bounds (k1: log bounds; k2/k3: an upper bound).
#[derive(Debug, Clone, PartialEq)]
pub struct RsOption {
    /// verl's option name, e.g. `seq_mean_k3`.
    pub name: String,
    pub aggregate: RsAggregate,
    pub statistic: RsStatistic,
    /// k1: ln of the lower ratio bound; k2/k3: `None`.
    pub lower: Option<f64>,
    /// k1: ln of the upper ratio bound; k2/k3: the upper bound.
    pub upper: f64,
    /// The bounds as configured, from which `lower` and `upper` derive: k1's ratio bounds
    /// (lo, hi), or (`None`, upper) for k2/k3.
    pub threshold: (Option<f64>, f64),
}

/// What rollout correction does in a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Correction {
    pub is: Option<IsSpec>,
    pub rs: Vec<RsOption>,
}

impl Correction {
    /// IS or RS is configured (beyond metrics).
    pub fn is_some_active(&self) -> bool {
        self.is.is_some() || !self.rs.is_empty()
    }
}

impl RsOption {
    /// The option `name` (verl's spelling) with its configured bounds (see
    /// [`RsOption::threshold`]); k1 bounds are compared in log space.
    pub fn new(
        name: &str,
        aggregate: RsAggregate,
        statistic: RsStatistic,
        threshold: (Option<f64>, f64),
    ) -> Self {
        let (lower, upper) = match (statistic, threshold) {
            (RsStatistic::K1, (lo, hi)) => (Some(lo.unwrap_or(1.0 / hi).ln()), hi.ln()),
            (_, (_, hi)) => (None, hi),
        };
        RsOption {
            name: name.to_string(),
            aggregate,
            statistic,
            lower,
            upper,
            threshold,
        }
    }
}

/// `log ρ` of one row, in f32 as torch.
pub fn log_ratio_row(old: &[f32], rollout: &[f32], out: &mut [f32]) {
    for ((o, &a), &b) in out.iter_mut().zip(old).zip(rollout) {
        *o = a - b;
    }
}

/// `masked_sum(log ρ, m)` of a row (unclamped), in f64.
pub fn masked_sum(values: &[f32], mask: &[f32]) -> f64 {
    values
        .iter()
        .zip(mask)
        .filter(|&(_, &m)| m != 0.0)
        .map(|(&v, &m)| (v * m) as f64)
        .sum()
}

/// Raw IS weights of one row (before truncation), padding 0.
pub fn raw_weights_row(spec: &IsSpec, log_ratio: &[f32], mask: &[f32], out: &mut [f32]) {
    match spec.level {
        IsLevel::Token => {
            for ((o, &lr), &m) in out.iter_mut().zip(log_ratio).zip(mask) {
                *o = lr.clamp(-SAFETY_BOUND, SAFETY_BOUND).exp() * m;
            }
        }
        IsLevel::Sequence => {
            let s = (masked_sum(log_ratio, mask) as f32)
                .clamp(-SAFETY_BOUND, SAFETY_BOUND)
                .exp();
            for (o, &m) in out.iter_mut().zip(mask) {
                *o = s * m;
            }
        }
    }
}

/// Truncate (TIS) or zero out-of-band (IcePop) raw weights, in place.
pub fn truncate_weights(spec: &IsSpec, weights: &mut [f32]) {
    let upper = spec.upper as f32;
    match spec.lower {
        None => weights.iter_mut().for_each(|w| *w = w.min(upper)),
        Some(lower) => {
            let lower = lower as f32;
            weights
                .iter_mut()
                .for_each(|w| *w = if *w >= lower && *w <= upper { *w } else { 0.0 })
        }
    }
}

/// The per-token statistic of one option at log ratio `lr` (clamped).
pub(crate) fn token_statistic(statistic: RsStatistic, lr: f32) -> f32 {
    let x = lr.clamp(-SAFETY_BOUND, SAFETY_BOUND);
    match statistic {
        RsStatistic::K1 => -x,
        RsStatistic::K2 => 0.5 * x * x,
        RsStatistic::K3 => x.exp() - 1.0 - x,
    }
}

impl RsOption {
    fn keeps(&self, stat: f64) -> bool {
        match self.lower {
            Some(lo) => stat >= lo as f32 as f64 && stat <= self.upper as f32 as f64,
            None => stat <= self.upper as f32 as f64,
        }
    }

    /// The row-level statistic of a sequence option (masked sum / mean / max).
    pub fn sequence_statistic(&self, log_ratio: &[f32], mask: &[f32]) -> f64 {
        let stats = log_ratio
            .iter()
            .map(|&lr| token_statistic(self.statistic, lr));
        match self.aggregate {
            RsAggregate::Token => 0.0,
            RsAggregate::SeqSum => stats
                .zip(mask)
                .filter(|(_, m)| **m != 0.0)
                .map(|(s, m)| (s * m) as f64)
                .sum(),
            RsAggregate::SeqMean => {
                let n: f64 = mask.iter().map(|&m| m as f64).sum();
                let sum: f64 = stats
                    .zip(mask)
                    .filter(|(_, m)| **m != 0.0)
                    .map(|(s, m)| (s * m) as f64)
                    .sum();
                sum / (n + 1e-8)
            }
            RsAggregate::SeqMax => stats
                .zip(mask)
                .filter(|(_, m)| **m != 0.0)
                .map(|(s, _)| s as f64)
                .fold(None, |acc: Option<f64>, s| {
                    Some(acc.map_or(s, |a| a.max(s)))
                })
                .unwrap_or(0.0),
        }
    }

    /// Multiply `keep` (1 keep / 0 reject, every position) by this option's decision.
    pub fn apply(&self, log_ratio: &[f32], mask: &[f32], keep: &mut [f32]) {
        if self.aggregate == RsAggregate::Token {
            for (k, &lr) in keep.iter_mut().zip(log_ratio) {
                if !self.keeps(token_statistic(self.statistic, lr) as f64) {
                    *k = 0.0;
                }
            }
        } else if !self.keeps(self.sequence_statistic(log_ratio, mask)) {
            keep.iter_mut().for_each(|k| *k = 0.0);
        }
    }
}

/// The rejected mask of one row: `m · Π_options keep`.
pub fn reject_row(options: &[RsOption], log_ratio: &[f32], mask: &[f32], new_mask: &mut [f32]) {
    new_mask.copy_from_slice(mask);
    let mut keep = vec![1.0f32; mask.len()];
    for option in options {
        option.apply(log_ratio, mask, &mut keep);
    }
    for (m, k) in new_mask.iter_mut().zip(keep) {
        *m *= k;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_rows_close;

    /// TIS (`lower`: `None`) or IcePop weights capped at `upper`, without batch normalisation.
    fn is(level: IsLevel, lower: Option<f64>, upper: f64) -> IsSpec {
        IsSpec {
            level,
            upper,
            lower,
            batch_normalize: false,
        }
    }

    // Reference §3.2: log ratios of three rows (padding marked by mask 0).
    const LR: [[f32; 4]; 3] = [
        [0.1, 0.0, -1.5, 0.0],
        [0.0, 0.05, 0.0, -2.9],
        [0.0, 0.0, 0.0, 0.0],
    ];
    const M: [[f32; 4]; 3] = [[1., 1., 1., 0.], [1., 1., 1., 1.], [1., 1., 0., 0.]];

    fn weights(spec: &IsSpec) -> Vec<Vec<f32>> {
        (0..3)
            .map(|i| {
                let mut w = [0.0f32; 4];
                raw_weights_row(spec, &LR[i], &M[i], &mut w);
                truncate_weights(spec, &mut w);
                w.to_vec()
            })
            .collect()
    }

    /// Every row (three, four tokens each) within 2e-6 of the reference's numbers.
    #[track_caller]
    fn close(what: &str, a: &[Vec<f32>], e: &[[f32; 4]; 3]) {
        assert_rows_close(what, a, e, 2e-6, 0.0);
    }

    #[test]
    fn token_tis_worked_example() {
        close(
            "token TIS 2.0",
            &weights(&is(IsLevel::Token, None, 2.0)),
            &[
                [1.105171, 1.0, 0.223130, 0.0],
                [1.0, 1.051271, 1.0, 0.055023],
                [1.0, 1.0, 0.0, 0.0],
            ],
        );
    }

    #[test]
    fn sequence_worked_example() {
        let w = 0.246597;
        let v = 0.057844;
        close(
            "sequence TIS 2.0",
            &weights(&is(IsLevel::Sequence, None, 2.0)),
            &[[w, w, w, 0.0], [v, v, v, v], [1.0, 1.0, 0.0, 0.0]],
        );
    }

    #[test]
    fn icepop_worked_example() {
        close(
            "token IcePop 0.5_1.5",
            &weights(&is(IsLevel::Token, Some(0.5), 1.5)),
            &[
                [1.105171, 1.0, 0.0, 0.0],
                [1.0, 1.051271, 1.0, 0.0],
                [1.0, 1.0, 0.0, 0.0],
            ],
        );
    }

    /// The masks after rejection by one option, `name` spelling its aggregation and statistic.
    fn rejected(
        name: &str,
        aggregate: RsAggregate,
        statistic: RsStatistic,
        threshold: (Option<f64>, f64),
    ) -> Vec<Vec<f32>> {
        let options = [RsOption::new(name, aggregate, statistic, threshold)];
        (0..3)
            .map(|i| {
                let mut m = [0.0f32; 4];
                reject_row(&options, &LR[i], &M[i], &mut m);
                m.to_vec()
            })
            .collect()
    }

    // Reference §3.3 worked masks.
    #[test]
    fn rejection_worked_examples() {
        close(
            "token_k1 0.5_1.5",
            &rejected(
                "token_k1",
                RsAggregate::Token,
                RsStatistic::K1,
                (Some(0.5), 1.5),
            ),
            &[[1., 1., 0., 0.], [1., 1., 1., 0.], [1., 1., 0., 0.]],
        );
        let only_last = [[0., 0., 0., 0.], [0., 0., 0., 0.], [1., 1., 0., 0.]];
        close(
            "seq_sum_k1",
            &rejected(
                "seq_sum_k1",
                RsAggregate::SeqSum,
                RsStatistic::K1,
                (Some(0.5), 2.0),
            ),
            &only_last,
        );
        close(
            "seq_mean_k3",
            &rejected(
                "seq_mean_k3",
                RsAggregate::SeqMean,
                RsStatistic::K3,
                (None, 0.01),
            ),
            &only_last,
        );
        close(
            "seq_max_k2",
            &rejected(
                "seq_max_k2",
                RsAggregate::SeqMax,
                RsStatistic::K2,
                (None, 0.1),
            ),
            &only_last,
        );
    }
}
