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
            for ((&m, &a), &b) in mask.iter().zip(&old[s.clone()]).zip(&reference[s.clone()]) {
                if m != 0.0 && a.is_finite() && b.is_finite() {
                    let k1 = a as f64 - b as f64;
                    facts.k1 += k1;
                    facts.abs_k1 += k1.abs();
                    t.kl_tokens += 1;
                }
            }
        }
        if let (Some(beta), Some(shaped)) = (checks.beta(), shaped) {
            let shaped_sum: f64 = shaped.rewards[s.clone()].iter().map(|&x| x as f64).sum();
            facts.penalty = beta * shaped.kl_sum[i];
            let flipped =
                (facts.score > 0.0 && shaped_sum < 0.0) || (facts.score < 0.0 && shaped_sum > 0.0);
            t.sign_flips += u64::from(flipped);
        }
        if let (Some(old), Some(rollout)) = (old, rollout) {
            for ((&m, &a), &b) in mask.iter().zip(&old[s.clone()]).zip(&rollout[s.clone()]) {
                if m != 0.0 && a.is_finite() && b.is_finite() {
                    let d = a as f64 - b as f64;
                    let ratio = d.exp();
                    facts.mismatch += d.abs();
                    t.mismatch_tokens += 1;
                    t.ratio_outside += u64::from(!(RATIO_LOW..=RATIO_HIGH).contains(&ratio));
                    t.ratio_extreme += u64::from(ratio > RATIO_EXTREME);
                }
            }
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
    for &v in values {
        c.nan += u64::from(v.is_nan());
        c.inf += u64::from(v.is_infinite());
        c.positive += u64::from(c.log_prob && v > 0.0 && v.is_finite());
    }
}

/// verl V1's synthetic padding rows share one uid `pad<hex>` (reference §1); with a
/// one-token response, mask [0] and score [0] (checked by the caller) they are expected.
fn is_padding_label(uid: &GroupKey) -> bool {
    matches!(uid, GroupKey::Str(s) if s.starts_with("pad"))
}
