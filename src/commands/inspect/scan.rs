//! One row group's contribution to each step's tally: the per-row checks, on the decoded
//! slices (and, when the configuration shapes or rejects, on the pipeline's shaped rows).

use std::collections::BTreeMap;

use crate::data::GroupKey;
use crate::data::RowGroup;
use crate::data::TokenRole;
use crate::engine::pipeline::Shaped;
use crate::shaping::scores::Layout;

use super::checks::Checks;
use super::spans::{ends_in_tool_token, tool_spans};
use super::tally::{RowFacts, StepTally};
use super::thresholds::{RATIO_EXTREME, RATIO_HIGH, RATIO_LOW};

/// Tally the rows of `group` by step.
// Rows index several parallel columns through their spans.
#[allow(clippy::needless_range_loop)]
pub fn scan(
    group: &RowGroup,
    shaped: Option<&Shaped>,
    checks: &Checks,
) -> BTreeMap<Option<i64>, StepTally> {
    let old = group.token(TokenRole::OldLogProbs);
    let kl_old = checks.kl_old.and_then(|role| group.token(role));
    let reference = group.token(TokenRole::RefLogProb);
    let rollout = group.token(TokenRole::RolloutLogProbs);
    let bounds = RatioBounds::new();
    let mut tallies: BTreeMap<Option<i64>, StepTally> = BTreeMap::new();
    for i in 0..group.rows() {
        let t = tallies
            .entry(group.step_of(i))
            .or_insert_with(|| fresh(group, checks));
        let s = group.span(i);
        let mask = &group.mask.values[s.clone()];
        let scores = &group.scores[s.clone()];
        let valid = mask.iter().filter(|&&m| m != 0.0).count();
        let uid = group.uid.as_ref().map(|u| &u[i]);
        let padding = uid.is_some_and(is_padding_label) && mask == [0.0] && scores == [0.0];
        let mut facts = RowFacts {
            score: scores.iter().map(|&x| x as f64).sum(),
            padding,
            ..Default::default()
        };
        t.rows += 1;
        t.tokens += mask.len() as u64;
        t.valid_tokens += valid as u64;
        if valid == 0 {
            t.rows_without_valid_token += 1;
        } else {
            t.rows_with_valid_token += 1;
        }
        t.padding_rows += u64::from(padding);
        if checks.layout == Layout::Ragged && ends_in_tool_token(mask) {
            t.rows_ending_in_tool_token += 1;
        }
        let masked_rewards = mask
            .iter()
            .zip(scores)
            .filter(|&(&m, &r)| m == 0.0 && r != 0.0 && !r.is_nan())
            .count() as u64;
        t.masked_reward_tokens += masked_rewards;
        t.masked_reward_rows += u64::from(masked_rewards > 0);
        let spans = tool_spans(mask) as u64;
        t.span_rows[spans.min(3) as usize] += 1;
        t.spans += spans;
        t.max_spans = t.max_spans.max(spans);

        if let (Some(old), Some(reference)) = (kl_old, reference) {
            // Without a branch per token (masks are random 0s and 1s): a token that does not
            // count adds 0.0, which leaves the sums as they are.
            let (mut k1_sum, mut abs_sum, mut tokens) = (0.0, 0.0, 0u64);
            for ((&m, &a), &b) in mask.iter().zip(&old[s.clone()]).zip(&reference[s.clone()]) {
                let on = (m != 0.0) & a.is_finite() & b.is_finite();
                let k1 = if on { a as f64 - b as f64 } else { 0.0 };
                k1_sum += k1;
                abs_sum += k1.abs();
                tokens += u64::from(on);
            }
            facts.k1 = k1_sum;
            facts.abs_k1 = abs_sum;
            t.kl_tokens += tokens;
        }
        if let (Some(beta), Some(shaped)) = (checks.beta(), shaped) {
            let shaped_sum: f64 = shaped.rewards[s.clone()].iter().map(|&x| x as f64).sum();
            facts.penalty = beta * shaped.kl_sum[i];
            let flipped =
                (facts.score > 0.0 && shaped_sum < 0.0) || (facts.score < 0.0 && shaped_sum > 0.0);
            t.sign_flips += u64::from(flipped);
        }
        if let (Some(old), Some(rollout)) = (old, rollout) {
            let (mut mismatch, mut tokens, mut outside, mut extreme) = (0.0, 0u64, 0u64, 0u64);
            for ((&m, &a), &b) in mask.iter().zip(&old[s.clone()]).zip(&rollout[s.clone()]) {
                let on = (m != 0.0) & a.is_finite() & b.is_finite();
                let d = if on { a as f64 - b as f64 } else { 0.0 };
                let (out, ext) = bounds.flags(d);
                mismatch += d.abs();
                tokens += u64::from(on);
                outside += u64::from(on & out);
                extreme += u64::from(on & ext);
            }
            facts.mismatch = mismatch;
            t.mismatch_tokens += tokens;
            t.ratio_outside += outside;
            t.ratio_extreme += extreme;
        }
        if let (true, Some(shaped)) = (checks.rejection, shaped) {
            let rejected = &shaped.mask[s.clone()];
            let mut kept = 0;
            for (&m, &r) in mask.iter().zip(rejected) {
                if m != 0.0 && r == 0.0 {
                    t.rejected_tokens += 1;
                }
                if m == 0.0 && r != 0.0 {
                    t.rejection_outside_mask += 1;
                }
                kept += usize::from(m != 0.0 && r != 0.0);
            }
            t.rows_fully_rejected += u64::from(valid > 0 && kept == 0);
        }

        // Non-finite and positive values, in the column order `fresh` set up.
        let mut k = 0;
        count(&mut t.columns[k], scores);
        for (_, values) in &group.tokens {
            k += 1;
            count(&mut t.columns[k], &values[s.clone()]);
        }
        if let Some(b) = &group.reward_baselines {
            k += 1;
            count(&mut t.columns[k], &b[i..=i]);
        }
        if let (Some(uid), false) = (uid, padding) {
            t.groups.push((uid.clone(), facts.score));
        }
        t.row_facts.push(facts);
    }
    tallies
}

/// An empty tally with the columns of `group` in a fixed order: scores, the token columns,
/// `reward_baselines`.
fn fresh(group: &RowGroup, checks: &Checks) -> StepTally {
    let mut t = StepTally::default();
    t.column(&checks.score_column, false);
    for (role, _) in &group.tokens {
        t.column(role.column(), role.is_log_prob());
    }
    if group.reward_baselines.is_some() {
        t.column("reward_baselines", false);
    }
    t
}

fn count(c: &mut super::tally::ColumnCounts, values: &[f32]) {
    let (mut nan, mut inf, mut positive) = (0u64, 0u64, 0u64);
    for &v in values {
        nan += u64::from(v.is_nan());
        inf += u64::from(v.is_infinite());
        positive += u64::from((v > 0.0) & v.is_finite());
    }
    c.nan += nan;
    c.inf += inf;
    if c.log_prob {
        c.positive += positive;
    }
}

/// The ratio bounds' logarithms, computed once per scan.
struct RatioBounds {
    low: f64,
    high: f64,
    extreme: f64,
}

impl RatioBounds {
    fn new() -> Self {
        RatioBounds {
            low: RATIO_LOW.ln(),
            high: RATIO_HIGH.ln(),
            extreme: RATIO_EXTREME.ln(),
        }
    }

    /// Whether the ratio `exp(d)` is outside [`RATIO_LOW`, `RATIO_HIGH`], and above
    /// `RATIO_EXTREME`: `d` is compared with the bounds' logarithms, and `exp` is computed
    /// only within 1e-9 of one, where rounding could decide (the answers are `exp`'s either
    /// way).
    fn flags(&self, d: f64) -> (bool, bool) {
        const NEAR: f64 = 1e-9;
        let near = |bound: f64| (d - bound).abs() < NEAR;
        if near(self.low) || near(self.high) || near(self.extreme) || d.is_nan() {
            let ratio = d.exp();
            return (
                !(RATIO_LOW..=RATIO_HIGH).contains(&ratio),
                ratio > RATIO_EXTREME,
            );
        }
        (d < self.low || d > self.high, d > self.extreme)
    }
}

/// verl V1's synthetic padding rows share one uid `pad<hex>` (reference §1); with a
/// one-token response, mask [0] and score [0] (checked by the caller) they are expected.
fn is_padding_label(uid: &GroupKey) -> bool {
    matches!(uid, GroupKey::Str(s) if s.starts_with("pad"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_flags_agree_with_exp_everywhere_and_at_the_bounds() {
        let bounds = RatioBounds::new();
        let ratio_flags = |d: f64| bounds.flags(d);
        let by_exp = |d: f64| {
            let r = d.exp();
            (!(RATIO_LOW..=RATIO_HIGH).contains(&r), r > RATIO_EXTREME)
        };
        let mut ds: Vec<f64> = (-4000..=4000).map(|i| i as f64 * 1e-3).collect();
        for bound in [RATIO_LOW.ln(), RATIO_HIGH.ln(), RATIO_EXTREME.ln()] {
            let mut d = bound;
            for _ in 0..50 {
                ds.extend([d, -d]);
                d = d.next_up();
            }
            let mut d = bound;
            for _ in 0..50 {
                ds.push(d);
                d = d.next_down();
            }
        }
        ds.extend([f64::MAX, f64::MIN, 800.0, -800.0]);
        for d in ds {
            assert_eq!(ratio_flags(d), by_exp(d), "d = {d:e}");
        }
        // the cases themselves: 0.5 and 2 are inside, 10 is not above 10
        assert_eq!(ratio_flags(2f64.ln() + 1e-3), (true, false));
        assert_eq!(ratio_flags(0.0), (false, false));
        assert_eq!(ratio_flags(3.0), (true, true));
    }
}
