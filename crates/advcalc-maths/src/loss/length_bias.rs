//! The length-bias view: how each `loss_agg_mode` would distribute this dump's update
//! (`advcalc loss --json`, `docs/loss.md`). A token's gradient weight is c·g, with g its
//! dℓ/d log π (mode-independent, replayed under the configured loss) and c the aggregation
//! weight of [`aggregate`]; so under mode M a row carries
//! W_i = c_M(L_i)·Σ_t |g_t|. The view reports, per mode, the share of Σ W over the rows'
//! response-length quartiles (by valid tokens L_i) and over the two sides of the split
//! (correct vs incorrect rows by score, or rows above vs below their group by advantage
//! when IN has no scores), and the per-token weight of the shortest row relative to the
//! longest.

use crate::loss::aggregate::{self, AggMode, BatchInfo};
use crate::loss::plan::LossPlan;
use crate::loss::row::RowSums;

/// One mode's view.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeView {
    pub mode: AggMode,
    /// Share of Σ|grad| per length quartile, shortest first.
    pub quartiles: [f64; 4],
    /// Share on the split's first side (correct rows, or rows with A > 0).
    pub positive: f64,
    /// A token of the shortest row against one of the longest (same mini-batch constants).
    pub short_to_long: f64,
}

/// The view over every mode, with the quartile bounds (valid tokens) and the split's name.
#[derive(Debug, Clone, PartialEq)]
pub struct LengthBias {
    pub bounds: [f64; 3],
    pub lengths: (f64, f64),
    pub split: &'static str,
    pub modes: Vec<ModeView>,
}

/// The view of the rows with valid tokens (`valid`: L_i; `correct`: the split, per row).
pub fn length_bias(
    plan: &LossPlan,
    rows: &[RowSums],
    valid: &[f64],
    correct: &[bool],
    split: &'static str,
) -> Option<LengthBias> {
    let mut live: Vec<usize> = (0..rows.len()).filter(|&r| valid[r] > 0.0).collect();
    if live.is_empty() {
        return None;
    }
    // quartiles by rank (shortest first; equal lengths in row order)
    live.sort_by(|&a, &b| valid[a].total_cmp(&valid[b]).then(a.cmp(&b)));
    let n = live.len();
    let mut quartile_of = vec![0usize; rows.len()];
    for (rank, &r) in live.iter().enumerate() {
        quartile_of[r] = 4 * rank / n;
    }
    let bounds = [1, 2, 3].map(|q| valid[live[(q * n / 4).min(n - 1)]]);
    let (shortest, longest) = (valid[live[0]], valid[live[live.len() - 1]]);
    let modes = AggMode::ALL
        .into_iter()
        .map(|mode| {
            let mut q = [0.0; 4];
            let mut positive = 0.0;
            let mut total = 0.0;
            for &r in &live {
                let info = plan.minis[plan.partition.mini[r] as usize];
                let w = aggregate::weight(mode, &info, valid[r]) as f64 * rows[r].grad_base;
                q[quartile_of[r]] += w;
                if correct[r] {
                    positive += w;
                }
                total += w;
            }
            let share = |x: f64| if total > 0.0 { x / total } else { 0.0 };
            let info = BatchInfo {
                tokens: 1.0,
                rows: 1.0,
                horizon: 1.0,
            };
            ModeView {
                mode,
                quartiles: q.map(share),
                positive: share(positive),
                short_to_long: aggregate::weight(mode, &info, shortest) as f64
                    / aggregate::weight(mode, &info, longest) as f64,
            }
        })
        .collect();
    Some(LengthBias {
        bounds,
        lengths: (shortest, longest),
        split,
        modes,
    })
}

impl LengthBias {
    /// The view as an aligned table.
    pub fn to_table(&self, configured: AggMode) -> String {
        let (a, b) = match self.split {
            "score" => ("correct", "incorrect"),
            _ => ("A > 0", "A ≤ 0"),
        };
        let mut t = format!(
            "How each loss_agg_mode weighs this dump (share of Σ|grad_weights|; response lengths {}–{} tokens, quartiles from {}, {}, {} tokens):\n",
            self.lengths.0, self.lengths.1, self.bounds[0], self.bounds[1], self.bounds[2]
        );
        t += &format!(
            "  {:<25} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>16}\n",
            "loss_agg_mode", "Q1", "Q2", "Q3", "Q4", a, b, "short/long token"
        );
        for m in &self.modes {
            let pct = |x: f64| format!("{:.1}%", 100.0 * x);
            let mark = if m.mode == configured { " *" } else { "" };
            t += &format!(
                "  {:<25} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>15.2}×{mark}\n",
                m.mode.name(),
                pct(m.quartiles[0]),
                pct(m.quartiles[1]),
                pct(m.quartiles[2]),
                pct(m.quartiles[3]),
                pct(m.positive),
                pct(1.0 - m.positive),
                m.short_to_long
            );
        }
        t += "  (* the configured mode; Q1 holds the shortest quarter of the rows)\n";
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::partition::partition;
    use crate::test_support::assert_close;

    // Four rows of 1, 2, 3 and 6 valid tokens, |g| = 1 per token, one mini-batch of 4 rows,
    // 12 tokens: token-mean gives each row L/12 (shares 1/12, 2/12, 3/12, 6/12);
    // seq-mean-token-mean 1/(4·L) per token, so each row ¼ (the length bias: the 1-token
    // row's token weighs 6× the 6-token row's).
    #[test]
    fn token_mean_and_seq_mean_token_mean_by_hand() {
        let batches = vec![(None, vec![0, 1, 2, 3])];
        let plan = LossPlan {
            partition: partition(&batches, 4, 4, None).unwrap(),
            minis: vec![BatchInfo {
                tokens: 12.0,
                rows: 4.0,
                horizon: 8.0,
            }],
            kl_cov: vec![None],
        };
        let valid = [1.0, 2.0, 3.0, 6.0];
        let rows: Vec<RowSums> = valid
            .iter()
            .map(|&l| RowSums {
                grad_base: l,
                ..Default::default()
            })
            .collect();
        let view = length_bias(&plan, &rows, &valid, &[true, false, true, false], "score").unwrap();
        let mode = |m: AggMode| view.modes.iter().find(|v| v.mode == m).unwrap().clone();
        let tm = mode(AggMode::TokenMean);
        assert_close(
            "token-mean",
            &tm.quartiles,
            &[1.0 / 12.0, 2.0 / 12.0, 3.0 / 12.0, 0.5],
            1e-6,
            0.0,
        );
        assert_close(
            "token-mean correct",
            &[tm.positive],
            &[4.0 / 12.0],
            1e-6,
            0.0,
        );
        let sm = mode(AggMode::SeqMeanTokenMean);
        assert_close("seq-mean-token-mean", &sm.quartiles, &[0.25; 4], 1e-6, 0.0);
        assert_close(
            "short/long",
            &[sm.short_to_long, tm.short_to_long],
            &[6.0, 1.0],
            1e-6,
            0.0,
        );
    }
}
