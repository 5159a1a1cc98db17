//! `optimal_token_baseline`: a per-token, per-group baseline weighted by a score-norm proxy
//! (docs/reference/verl-0.9.1.md §5.13, verl `compute_optimal_token_baseline_advantage`).
//!
//! **Computes**
//! ```text
//! G_t  = Σ_{u ≥ t} r_u·m_u                         reward-to-go (f64 cumsum, f32 prefixes)
//! w_t  = 1 − 2·exp(old_log_probs_t) + sum_pi_squared_t   (× rollout_is_weights_t² when present)
//! W_t  = Σ_{u ≤ t} w_u·m_u                         forward cumulative weight
//! b_t  = Σ_{i∈g} G_it·W_it·m_it / (Σ_{i∈g} W_it·m_it + 1e-8)   per absolute column t
//! advantages = (G − b)·m;  returns = G (unmasked)
//! ```
//! **Inputs**: `token_level_rewards`, mask, `old_log_probs`, `sum_pi_squared`, and the IS
//! weights when rollout correction computes them. **Edge cases**, as verl: a singleton group
//! has b = 0; columns where nobody in the group is valid get b = 0; with `handle_zero_tail`
//! (always on) the unique longest row's baseline is 0 from column `second_max_len` on — a
//! token *count* used as a column index, which is off for masks with holes (quirk §9.12).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;

use crate::data::{GroupKey, TokenRole};
use crate::error::Result;
use crate::estimators::fingerprint::V1;
use crate::estimators::state::{
    OwnPlan, OwnStats, Reading, StateValue, Written, bits, from_bits, key_from_text, key_text,
    malformed,
};
use crate::estimators::tir_optimal_token_baseline::compact_index;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL,
};

/// G and W of one row.
pub fn row_terms(
    rewards: &[f32],
    mask: &[f32],
    old_log_probs: &[f32],
    sum_pi_squared: &[f32],
    is_weights: Option<&[f32]>,
    g: &mut [f32],
    w: &mut [f32],
) {
    super::remax::reward_to_go(rewards, mask, g);
    let mut acc = 0.0f64;
    for t in 0..rewards.len() {
        let mut wt = 1.0 - 2.0 * old_log_probs[t].exp() + sum_pi_squared[t];
        if let Some(is) = is_weights {
            wt *= is[t] * is[t];
        }
        acc += (wt * mask[t]) as f64;
        w[t] = acc as f32;
    }
}

/// Per-column numerator and denominator sums of one group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnSums {
    pub num: Vec<f64>,
    pub den: Vec<f64>,
}

impl ColumnSums {
    /// Add a row's terms at positions `index(t)` for its valid tokens.
    pub fn add(&mut self, g: &[f32], w: &[f32], mask: &[f32], index: impl Fn(usize) -> usize) {
        for t in 0..g.len() {
            if mask[t] == 0.0 {
                continue;
            }
            let k = index(t);
            if k >= self.num.len() {
                self.num.resize(k + 1, 0.0);
                self.den.resize(k + 1, 0.0);
            }
            self.num[k] += (g[t] * w[t] * mask[t]) as f64;
            self.den[k] += (w[t] * mask[t]) as f64;
        }
    }

    pub fn merge(&mut self, other: &ColumnSums) {
        if other.num.len() > self.num.len() {
            self.num.resize(other.num.len(), 0.0);
            self.den.resize(other.den.len(), 0.0);
        }
        for (k, (&n, &d)) in other.num.iter().zip(&other.den).enumerate() {
            self.num[k] += n;
            self.den[k] += d;
        }
    }

    /// The baseline at position k (0 where nobody was valid).
    pub fn baseline(&self, k: usize) -> f32 {
        match (self.num.get(k), self.den.get(k)) {
            (Some(&n), Some(&d)) => (n as f32) / (d as f32 + 1e-8),
            _ => 0.0,
        }
    }
}

/// Pass 1 of both OTB estimators: the column sums of each (step, uid) group, merged in
/// row-group order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupColumns(pub BTreeMap<(Option<i64>, GroupKey), ColumnSums>);

impl GroupColumns {
    /// Per group: [step, its label as text, num's bits, den's bits].
    fn to_value(&self) -> StateValue {
        self.0
            .iter()
            .map(|((s, k), c)| {
                StateValue::from(vec![
                    (*s).into(),
                    key_text(k).into(),
                    bits(&c.num),
                    bits(&c.den),
                ])
            })
            .collect()
    }

    fn from_value(v: &StateValue) -> Result<Self> {
        v.as_list()
            .ok_or_else(|| malformed("expected an array"))?
            .iter()
            .map(|e| {
                let key = key_from_text(e.at(1).as_str().ok_or_else(|| malformed("sums"))?)?;
                let sums = ColumnSums {
                    num: from_bits(e.at(2))?,
                    den: from_bits(e.at(3))?,
                };
                Ok(((e.at(0).step()?, key), sums))
            })
            .collect::<Result<_>>()
            .map(GroupColumns)
    }
}

impl OwnStats for GroupColumns {
    fn append(&mut self, next: Self) {
        for (key, sums) in next.0 {
            self.0.entry(key).or_default().merge(&sums);
        }
    }

    fn write(&self, out: &mut Written) {
        out.value("columns", self.to_value());
    }

    fn read(input: &Reading) -> Result<Self> {
        GroupColumns::from_value(input.value("columns"))
    }
}

/// The plan of both OTB estimators: per row, whether its baseline is 0 (singleton group, or
/// left out) and the position from which the zero-tail rule zeroes it; and the group column
/// sums, moved here from pass 1's statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OtbPlan {
    pub singleton: Vec<bool>,
    pub zero_tail: Vec<Option<usize>>,
    pub columns: GroupColumns,
}

impl OwnPlan for OtbPlan {
    fn new(rows: usize) -> Self {
        OtbPlan {
            singleton: vec![false; rows],
            zero_tail: vec![None; rows],
            columns: GroupColumns::default(),
        }
    }

    fn restrict(&self, positions: &[usize], steps: &[Option<i64>]) -> Self {
        OtbPlan {
            singleton: positions.iter().map(|&p| self.singleton[p]).collect(),
            zero_tail: positions.iter().map(|&p| self.zero_tail[p]).collect(),
            columns: GroupColumns(
                self.columns
                    .0
                    .iter()
                    .filter(|((s, _), _)| steps.contains(s))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
        }
    }

    fn write(&self, out: &mut Written) {
        out.bools("otb_singleton", &self.singleton);
        out.opt_u64s(
            "otb_zero_tail",
            self.zero_tail.iter().map(|t| t.map(|t| t as u64)),
        );
        out.value("columns", self.columns.to_value());
    }

    fn read(input: &Reading) -> Result<Self> {
        Ok(OtbPlan {
            singleton: input.bools("otb_singleton")?,
            zero_tail: input
                .opt_u64s("otb_zero_tail")?
                .into_iter()
                .map(|t| t.map(|t| t as usize))
                .collect(),
            columns: GroupColumns::from_value(input.value("columns"))?,
        })
    }

    fn fingerprint<H: Hasher>(&self, rows: usize, h: &mut H) {
        V1 {
            otb: Some((&self.singleton, &self.zero_tail, &self.columns.0)),
            ..V1::default()
        }
        .encode(rows, h);
    }
}

/// verl's zero-tail rule: given the group's valid-token counts, the member whose baseline is
/// zeroed from position `second_max` on, if exactly one row has the maximum count.
pub fn zero_tail(lengths: &[usize]) -> Option<(usize, usize)> {
    if lengths.len() < 2 {
        return None;
    }
    let mut sorted = lengths.to_vec();
    sorted.sort_unstable();
    let max = sorted[sorted.len() - 1];
    let second = sorted[sorted.len() - 2];
    let holders: Vec<usize> = (0..lengths.len()).filter(|&i| lengths[i] == max).collect();
    (holders.len() == 1 && max > second).then(|| (holders[0], second))
}

/// Row `i`'s G (into `g`, the row's length) and W (into `w`), for both passes, from the
/// run's `old_log_probs` and `sum_pi_squared`.
fn row_terms_of(
    rows: &Rows<'_>,
    (old, spi): (&[f32], &[f32]),
    i: usize,
    g: &mut [f32],
    w: &mut Vec<f32>,
) {
    let s = rows.span(i);
    w.resize(s.len(), 0.0f32);
    row_terms(
        &rows.rewards[s.clone()],
        &rows.mask[s.clone()],
        &old[s.clone()],
        &spi[s.clone()],
        rows.is_weights.map(|x| &x[s]),
        g,
        w,
    );
}

/// Pass 1 of both OTB estimators: each row's G·W and W added into its (step, uid) group's
/// column sums, by absolute position or (`tir`) by the k-th valid token.
pub fn column_sums(rows: &Rows<'_>, stats: &mut GroupColumns, tir: bool) -> Result<()> {
    let old = rows.old_log_probs()?;
    let spi = rows.token(TokenRole::SumPiSquared)?;
    let uid = rows.uid()?;
    let (mut g, mut w) = (Vec::new(), Vec::new());
    for (i, label) in uid.iter().enumerate() {
        let s = rows.span(i);
        g.resize(s.len(), 0.0f32);
        row_terms_of(rows, (old, spi), i, &mut g, &mut w);
        let m = &rows.mask[s];
        let sums = stats
            .0
            .entry((rows.group.step_of(i), label.clone()))
            .or_default();
        if tir {
            let k = compact_index(m);
            sums.add(&g, &w, m, |t| k[t].unwrap_or(0));
        } else {
            sums.add(&g, &w, m, |t| t);
        }
    }
    Ok(())
}

/// Between the passes: which rows have no baseline (singletons; with `tir`, rows without a
/// valid token, left out of their group) and the zero-tail column of each group. Pass 2
/// reads the group column sums from the plan, where [`Estimate::keep`] moves pass 1's.
pub fn baselines(
    batch: &TrainingBatch<'_, GroupColumns>,
    plan: &mut EstimatorPlan<OtbPlan>,
    tir: bool,
) {
    let stats = batch.stats;
    let mut members: HashMap<&GroupKey, Vec<usize>> = HashMap::new();
    for &r in batch.rows {
        if !tir || stats.valid[r] > 0.0 {
            members.entry(&stats.uid[r]).or_default().push(r);
        } else {
            plan.own.singleton[r] = true;
        }
    }
    for rows in members.values() {
        if rows.len() == 1 {
            plan.own.singleton[rows[0]] = true;
            continue;
        }
        let lengths: Vec<usize> = rows.iter().map(|&r| stats.valid[r] as usize).collect();
        if let Some((member, from)) = zero_tail(&lengths) {
            plan.own.zero_tail[rows[member]] = Some(from);
        }
    }
}

/// Pass 2 of both OTB estimators: `advantages = (G − b)·m`, `returns = G`.
pub fn advantages(rows: &Rows<'_>, plan: &EstimatorPlan<OtbPlan>, tir: bool) -> Result<Tokens> {
    let old = rows.old_log_probs()?;
    let spi = rows.token(TokenRole::SumPiSquared)?;
    let uid = rows.uid()?;
    let n = rows.mask.len();
    let (mut advantages, mut returns) = (vec![0.0f32; n], vec![0.0f32; n]);
    let mut w = Vec::new();
    let empty = ColumnSums::default();
    let first = rows.group.first_row;
    for (i, label) in uid.iter().enumerate() {
        let s = rows.span(i);
        row_terms_of(rows, (old, spi), i, &mut returns[s.clone()], &mut w);
        let m = &rows.mask[s.clone()];
        let at = plan.at(first + i);
        let sums = if plan.own.singleton[at] {
            &empty
        } else {
            plan.own
                .columns
                .0
                .get(&(rows.group.step_of(i), label.clone()))
                .unwrap_or(&empty)
        };
        let tail = plan.own.zero_tail[at];
        let k_of = if tir { compact_index(m) } else { Vec::new() };
        for (j, t) in s.enumerate() {
            let k = if tir { k_of[j].unwrap_or(0) } else { j };
            let b = if tail.is_some_and(|from| k >= from) {
                0.0
            } else {
                sums.baseline(k)
            };
            advantages[t] = (returns[t] - b) * rows.mask[t];
        }
    }
    Ok(Tokens {
        advantages,
        returns: Some(returns),
    })
}

/// `-e optimal_token_baseline` ([`Kind::Token`]).
pub struct OptimalTokenBaseline;

impl Estimate for OptimalTokenBaseline {
    const INFO: Info = Info {
        source: VERL,
        summary: "per-token group baseline weighted by a score-norm proxy, by absolute position",
        kind: Kind::Token,
        columns: &[Column::Uid, Column::OldLogProbs, Column::SumPiSquared],
        settings: &[],
        weights_in_pass1: true,
        needs_tokens: Some("per-token log-probabilities (old_log_probs, sum_pi_squared)"),
        rewards_under_mask: true,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: None,
            needs: None,
            returns: "G (unmasked)",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "G·m",
            variants: &[],
        },
    };
    type Stats = GroupColumns;
    type Plan = OtbPlan;
    type Options = ();

    fn row_stats(rows: &Rows<'_>, stats: &mut GroupColumns) -> Result<()> {
        column_sums(rows, stats, false)
    }

    fn batch(
        batch: &TrainingBatch<'_, GroupColumns>,
        plan: &mut EstimatorPlan<OtbPlan>,
    ) -> Result<()> {
        baselines(batch, plan, false);
        Ok(())
    }

    fn keep(stats: GroupColumns, plan: &mut OtbPlan) {
        plan.columns = stats;
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<OtbPlan>) -> Result<Tokens> {
        advantages(rows, plan, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hand computation: two rows, no holes. w_t = 1 − 2e^{lp} + spi with lp = ln 0.5, spi = 0.5
    // gives w = 0.5 per token, W = [0.5, 1.0, 1.5]. Row a: r = [0,0,1] (G = [1,1,1]), 3 tokens;
    // row b: r = [0,2] (G = [2,2]), 2 tokens. Columns 0,1: b = (1·W + 2·W)/(2W) = 1.5;
    // column 2: only a → b = 1 (but zero-tail: a is the unique longest, second max 2 → b = 0).
    #[test]
    fn two_rows_by_hand() {
        let lp = 0.5f32.ln();
        let (mut ga, mut wa) = ([0.0f32; 3], [0.0f32; 3]);
        let (mut gb, mut wb) = ([0.0f32; 2], [0.0f32; 2]);
        row_terms(
            &[0.0, 0.0, 1.0],
            &[1.0; 3],
            &[lp; 3],
            &[0.5; 3],
            None,
            &mut ga,
            &mut wa,
        );
        row_terms(
            &[0.0, 2.0],
            &[1.0; 2],
            &[lp; 2],
            &[0.5; 2],
            None,
            &mut gb,
            &mut wb,
        );
        assert_eq!(wa, [0.5, 1.0, 1.5]);
        let mut sums = ColumnSums::default();
        sums.add(&ga, &wa, &[1.0; 3], |t| t);
        sums.add(&gb, &wb, &[1.0; 2], |t| t);
        assert!((sums.baseline(0) - 1.5).abs() < 1e-6);
        assert!((sums.baseline(1) - 1.5).abs() < 1e-6);
        assert!((sums.baseline(2) - 1.0).abs() < 1e-6);
        assert_eq!(zero_tail(&[3, 2]), Some((0, 2)));
        assert_eq!(zero_tail(&[3, 3]), None);
        assert_eq!(zero_tail(&[3]), None);
    }
}
