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
        let kl = kl_old
            .zip(reference)
            .map(|(a, b)| (&a[s.clone()], &b[s.clone()]));
        let mismatch = old
            .zip(rollout)
            .map(|(a, b)| (&a[s.clone()], &b[s.clone()]));
        let sums = row_tokens(mask, scores, kl, mismatch, &bounds);
        let valid = sums.valid;
        let uid = group.uid.as_ref().map(|u| &u[i]);
        let padding = uid.is_some_and(is_padding_label) && mask == [0.0] && scores == [0.0];
        let mut facts = RowFacts {
            score: sums.score,
            padding,
            k1: sums.k1,
            abs_k1: sums.abs_k1,
            mismatch: sums.mismatch,
            valid: valid as f64,
            ..Default::default()
        };
        t.rows += 1;
        t.tokens += mask.len() as u64;
        t.valid_tokens += valid;
        if valid == 0 {
            t.rows_without_valid_token += 1;
        } else {
            t.rows_with_valid_token += 1;
        }
        t.padding_rows += u64::from(padding);
        if checks.layout == Layout::Ragged && ends_in_tool_token(mask) {
            t.rows_ending_in_tool_token += 1;
        }
        t.masked_reward_tokens += sums.masked_rewards;
        t.masked_reward_rows += u64::from(sums.masked_rewards > 0);
        t.span_rows[sums.spans.min(3) as usize] += 1;
        t.spans += sums.spans;
        t.max_spans = t.max_spans.max(sums.spans);
        t.kl_tokens += sums.kl_tokens;
        t.mismatch_tokens += sums.mismatch_tokens;
        t.ratio_outside += sums.ratio_outside;
        t.ratio_extreme += sums.ratio_extreme;
        if let (Some(beta), Some(shaped)) = (checks.beta(), shaped) {
            let shaped_sum: f64 = shaped.rewards[s.clone()].iter().map(|&x| x as f64).sum();
            facts.penalty = beta * shaped.kl_sum[i];
            let flipped =
                (facts.score > 0.0 && shaped_sum < 0.0) || (facts.score < 0.0 && shaped_sum > 0.0);
            t.sign_flips += u64::from(flipped);
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

/// What one row's tokens add up to, from [`row_tokens`].
#[derive(Debug, Default)]
struct RowTokens {
    /// Mask-1 tokens.
    valid: u64,
    /// Σ scores over every position.
    score: f64,
    /// Non-zero, non-NaN scores on mask-0 positions.
    masked_rewards: u64,
    /// Tool spans (`spans::tool_spans`).
    spans: u64,
    /// Σ k1 and Σ |k1| (k1 = old − ref) over valid tokens where both are finite, and those
    /// tokens.
    k1: f64,
    abs_k1: f64,
    kl_tokens: u64,
    /// Σ |old − rollout| over valid tokens where both are finite, those tokens, and those
    /// whose ratio is outside the bounds and above the extreme one.
    mismatch: f64,
    mismatch_tokens: u64,
    ratio_outside: u64,
    ratio_extreme: u64,
}

/// One row's token checks, `kl` = (old, ref) and `mismatch` = (old, rollout) when the file
/// has them: the f64 sums in one loop (each in token order, so the bits are those of a loop
/// per check; together they no longer wait on each other's latency), the counts in another.
fn row_tokens(
    mask: &[f32],
    scores: &[f32],
    kl: Option<(&[f32], &[f32])>,
    mismatch: Option<(&[f32], &[f32])>,
    bounds: &RatioBounds,
) -> RowTokens {
    // one loop per combination, so the loop body has no branch on what the file holds
    match (kl, mismatch) {
        (Some(kl), Some(mm)) => row_tokens_with::<true, true>(mask, scores, kl, mm, bounds),
        (Some(kl), None) => row_tokens_with::<true, false>(mask, scores, kl, (&[], &[]), bounds),
        (None, Some(mm)) => row_tokens_with::<false, true>(mask, scores, (&[], &[]), mm, bounds),
        (None, None) => {
            row_tokens_with::<false, false>(mask, scores, (&[], &[]), (&[], &[]), bounds)
        }
    }
}

// Tokens index several parallel columns. Not inlined: inside `scan` the loops ran out of
// registers and kept the sums in memory, each add then waiting on a store and a load.
#[allow(clippy::needless_range_loop)]
#[inline(never)]
fn row_tokens_with<const KL: bool, const MISMATCH: bool>(
    mask: &[f32],
    scores: &[f32],
    (kl_old, reference): (&[f32], &[f32]),
    (old, rollout): (&[f32], &[f32]),
    bounds: &RatioBounds,
) -> RowTokens {
    let n = mask.len();
    let scores = &scores[..n];
    let (kl_old, reference) = if KL {
        (&kl_old[..n], &reference[..n])
    } else {
        (kl_old, reference)
    };
    let (old, rollout) = if MISMATCH {
        (&old[..n], &rollout[..n])
    } else {
        (old, rollout)
    };
    let mut r = RowTokens {
        // as `Iterator::sum` starts (an empty row's score is −0.0, as it was)
        score: -0.0,
        ..Default::default()
    };
    // The f64 sums, each in token order, in one loop without a call (a call would keep the
    // sums in memory): a token that does not count adds 0.0, which leaves a sum as it is.
    for t in 0..n {
        let on = mask[t] != 0.0;
        r.score += scores[t] as f64;
        if KL {
            let (a, b) = (kl_old[t], reference[t]);
            let on = on & a.is_finite() & b.is_finite();
            let k1 = if on { a as f64 - b as f64 } else { 0.0 };
            r.k1 += k1;
            r.abs_k1 += k1.abs();
        }
        if MISMATCH {
            let (a, b) = (old[t], rollout[t]);
            let on = on & a.is_finite() & b.is_finite();
            let d = if on { a as f64 - b as f64 } else { 0.0 };
            r.mismatch += d.abs();
        }
    }
    // The counts in another loop: integer sums only (32-bit per block), which the compiler
    // vectorises. A ratio within rounding of a bound is settled after it.
    let mut near = 0u64;
    for from in (0..n).step_by(COUNT_BLOCK) {
        let mut c = [0u32; 7];
        for t in from..n.min(from + COUNT_BLOCK) {
            let on = mask[t] != 0.0;
            let score = scores[t];
            c[0] += u32::from(on);
            c[1] += u32::from(!on & (score != 0.0) & !score.is_nan());
            if KL {
                let (a, b) = (kl_old[t], reference[t]);
                c[2] += u32::from(on & a.is_finite() & b.is_finite());
            }
            if MISMATCH {
                let (a, b) = (old[t], rollout[t]);
                let on = on & a.is_finite() & b.is_finite();
                let (out, ext, close) = bounds.flags_unless_near(a as f64 - b as f64);
                c[3] += u32::from(on);
                c[4] += u32::from(on & out);
                c[5] += u32::from(on & ext);
                c[6] += u32::from(on & close);
            }
        }
        let [valid, masked, kl, mm, out, ext, close] = c.map(u64::from);
        r.valid += valid;
        r.masked_rewards += masked;
        r.kl_tokens += kl;
        r.mismatch_tokens += mm;
        r.ratio_outside += out;
        r.ratio_extreme += ext;
        near += close;
    }
    r.spans = tool_spans(mask);
    if MISMATCH && near > 0 {
        // some ratio is within rounding of a bound: count this row's again through `exp`
        (r.ratio_outside, r.ratio_extreme) = (0, 0);
        for t in 0..n {
            let (a, b) = (old[t], rollout[t]);
            if mask[t] != 0.0 && a.is_finite() && b.is_finite() {
                let (out, ext) = bounds.flags(a as f64 - b as f64);
                r.ratio_outside += u64::from(out);
                r.ratio_extreme += u64::from(ext);
            }
        }
    }
    r
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

/// Count `values`' NaN, ±inf and (for a log-prob column) positive finite values.
fn count(c: &mut super::tally::ColumnCounts, values: &[f32]) {
    // On the bits, with 32-bit counts per block: the compiler vectorises this, which it
    // did not for float tests summed into 64-bit counts (half of the scan's time).
    const INF: u32 = 0x7f80_0000;
    for block in values.chunks(COUNT_BLOCK) {
        let (mut nan, mut inf, mut positive) = (0u32, 0u32, 0u32);
        for &v in block {
            let bits = v.to_bits();
            let magnitude = bits & 0x7fff_ffff;
            nan += u32::from(magnitude > INF);
            inf += u32::from(magnitude == INF);
            // sign clear, not zero, below inf: 1 ..= 0x7f7f_ffff
            positive += u32::from(bits.wrapping_sub(1) < INF - 1);
        }
        c.nan += u64::from(nan);
        c.inf += u64::from(inf);
        if c.log_prob {
            c.positive += u64::from(positive);
        }
    }
}

/// Values counted in 32-bit counts before they are added to the 64-bit ones.
const COUNT_BLOCK: usize = 1 << 20;

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
        let (outside, extreme, near) = self.flags_unless_near(d);
        if near {
            let ratio = d.exp();
            return (
                !(RATIO_LOW..=RATIO_HIGH).contains(&ratio),
                ratio > RATIO_EXTREME,
            );
        }
        (outside, extreme)
    }

    /// [`Self::flags`] from the logarithms alone, and whether `d` is within 1e-9 of a bound
    /// (or NaN), where only `exp` can decide (`flags` then differs from the first two).
    #[inline]
    fn flags_unless_near(&self, d: f64) -> (bool, bool, bool) {
        const NEAR: f64 = 1e-9;
        let near = |bound: f64| (d - bound).abs() < NEAR;
        let close = near(self.low) | near(self.high) | near(self.extreme) | d.is_nan();
        ((d < self.low) | (d > self.high), d > self.extreme, close)
    }
}

/// verl V1's synthetic padding rows share one uid `pad<hex>` (docs/reference/verl-0.9.1.md §1); with a
/// one-token response, mask [0] and score [0] (checked by the caller) they are expected.
fn is_padding_label(uid: &GroupKey) -> bool {
    matches!(uid, GroupKey::Str(s) if s.starts_with("pad"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tool spans as the state machine `scan` first counted them.
    fn spans_one_by_one(mask: &[f32]) -> u64 {
        let (mut spans, mut in_run) = (0, false);
        for &m in mask {
            if m == 0.0 {
                in_run = true;
            } else {
                spans += u64::from(in_run);
                in_run = false;
            }
        }
        spans
    }

    /// The row sums equal the checks written one loop each, as they were first written, bit
    /// for bit, with NaN, ±inf, masked rewards, tool spans and ratios at the bounds.
    #[test]
    fn row_sums_equal_a_loop_per_check() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let bounds = RatioBounds::new();
        for len in [0usize, 1, 2, 7, 64, 301] {
            let value = |x: u64, special: bool| -> f32 {
                match x % 41 {
                    0 if special => f32::NAN,
                    1 if special => f32::INFINITY,
                    2 if special => f32::NEG_INFINITY,
                    3 => 0.0,
                    _ => -(((x >> 8) % 5000) as f32) / 997.0,
                }
            };
            let mask: Vec<f32> = (0..len).map(|_| (next() % 3 != 0) as u8 as f32).collect();
            let scores: Vec<f32> = (0..len).map(|_| -value(next(), true)).collect();
            let cols: Vec<Vec<f32>> = (0..4)
                .map(|_| (0..len).map(|_| value(next(), true)).collect())
                .collect();
            let (mut mask, mut cols) = (mask, cols);
            // log ratios within 1e-15 of each bound's logarithm (old = the f32 nearest the
            // bound, rollout = what is left), so that only `exp` can tell
            for (t, bound) in [RATIO_LOW, RATIO_HIGH, RATIO_EXTREME]
                .into_iter()
                .enumerate()
            {
                if t + 1 < len {
                    let a = bound.ln() as f32;
                    cols[2][t] = a;
                    cols[3][t] = (a as f64 - bound.ln()) as f32;
                    mask[t] = 1.0;
                }
            }
            let (kl, mm) = ((&cols[0][..], &cols[1][..]), (&cols[2][..], &cols[3][..]));

            let mut want = RowTokens {
                valid: mask.iter().filter(|&&m| m != 0.0).count() as u64,
                score: scores.iter().map(|&x| x as f64).sum(),
                masked_rewards: mask
                    .iter()
                    .zip(&scores)
                    .filter(|&(&m, &r)| m == 0.0 && r != 0.0 && !r.is_nan())
                    .count() as u64,
                spans: spans_one_by_one(&mask),
                ..Default::default()
            };
            let no_kl = RowTokens { ..want };
            for ((&m, &a), &b) in mask.iter().zip(kl.0).zip(kl.1) {
                if m != 0.0 && a.is_finite() && b.is_finite() {
                    want.k1 += a as f64 - b as f64;
                    want.abs_k1 += (a as f64 - b as f64).abs();
                    want.kl_tokens += 1;
                }
            }
            for ((&m, &a), &b) in mask.iter().zip(mm.0).zip(mm.1) {
                if m != 0.0 && a.is_finite() && b.is_finite() {
                    let d = a as f64 - b as f64;
                    let ratio = d.exp();
                    want.mismatch += d.abs();
                    want.mismatch_tokens += 1;
                    want.ratio_outside += u64::from(!(RATIO_LOW..=RATIO_HIGH).contains(&ratio));
                    want.ratio_extreme += u64::from(ratio > RATIO_EXTREME);
                }
            }
            // the sums bit for bit (NaN included), the counts exactly
            let bits = |r: &RowTokens| {
                let floats = [r.score, r.k1, r.abs_k1, r.mismatch].map(f64::to_bits);
                let counts = [r.valid, r.masked_rewards, r.spans, r.kl_tokens];
                let ratios = [r.mismatch_tokens, r.ratio_outside, r.ratio_extreme];
                (floats, counts, ratios)
            };
            let got = row_tokens(&mask, &scores, Some(kl), Some(mm), &bounds);
            assert_eq!(bits(&got), bits(&want), "len {len}");
            let got = row_tokens(&mask, &scores, None, None, &bounds);
            assert_eq!(bits(&got), bits(&no_kl), "len {len}");
        }
    }

    /// The counts on the bits equal the float tests, on every kind of value.
    #[test]
    fn counts_on_the_bits_equal_the_float_tests() {
        let mut values = vec![
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xffc0_1234),
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            -f32::from_bits(1),
            f32::MAX,
            f32::MIN,
            1.0,
            -1.0,
            -0.25,
        ];
        values.extend((0..1000).map(|i| (i as f32 - 500.0) * 0.37));
        for log_prob in [true, false] {
            let mut c = super::super::tally::ColumnCounts {
                log_prob,
                ..Default::default()
            };
            count(&mut c, &values);
            count(&mut c, &values[3..9]);
            let both = values.iter().chain(&values[3..9]);
            let nan = both.clone().filter(|v| v.is_nan()).count() as u64;
            let inf = both.clone().filter(|v| v.is_infinite()).count() as u64;
            let positive = both.filter(|&&v| v > 0.0 && v.is_finite()).count() as u64;
            assert_eq!((c.nan, c.inf), (nan, inf));
            assert_eq!(c.positive, if log_prob { positive } else { 0 });
        }
        // across a block's end
        let mut c = super::super::tally::ColumnCounts::default();
        count(&mut c, &vec![f32::INFINITY; COUNT_BLOCK + 3]);
        assert_eq!(c.inf, COUNT_BLOCK as u64 + 3);
    }

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
