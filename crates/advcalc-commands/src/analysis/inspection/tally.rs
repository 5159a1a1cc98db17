//! What one step's rows add up to: exact integer counts, plus the per-row scalars that
//! distributions, groups and f64 means need (O(rows), never tokens). Tallies of row groups
//! merge in row-group order, and f64 sums run over the per-row values in row order, so the
//! report depends neither on the thread count nor on the row-group layout.

use crate::data::GroupKey;

/// Per-row scalars of one step, in row order.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RowFacts {
    /// Σ token_level_scores over every position (what GRPO-family estimators sum).
    pub score: f64,
    /// A verl V1 padding row (left out of group and score checks).
    pub padding: bool,
    /// Σ k1 = old − ref over the row's valid tokens where both are finite.
    pub k1: f64,
    /// Σ |k1| over the same tokens.
    pub abs_k1: f64,
    /// β·Σ kld·m, the configured KL penalty taken from the row's reward (KL in reward only).
    pub penalty: f64,
    /// Σ |old − rollout| over the row's valid tokens where both are finite.
    pub mismatch: f64,
    /// Mask-1 tokens (the loss checks' response lengths).
    pub valid: f64,
}

/// NaN, ±inf and positive values of one column.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnCounts {
    /// The column's name in the input.
    pub name: String,
    /// A log-probability column, whose positive values are counted.
    pub log_prob: bool,
    /// NaN values, at any position (mask 0 included).
    pub nan: u64,
    /// +inf and −inf values, at any position.
    pub inf: u64,
    /// Finite values above 0 (log π ≤ 0); always 0 unless `log_prob`.
    pub positive: u64,
}

/// One step's tally.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepTally {
    pub rows: u64,
    pub tokens: u64,
    /// Mask-1 tokens of the input mask.
    pub valid_tokens: u64,
    pub rows_without_valid_token: u64,
    pub padding_rows: u64,
    /// Rows with a policy token whose last position is mask 0 (ragged layout only).
    pub rows_ending_in_tool_token: u64,
    /// Non-zero (non-NaN) scores on mask-0 positions: rows, tokens.
    pub masked_reward_rows: u64,
    pub masked_reward_tokens: u64,
    /// Rows with 0, 1, 2, 3 or more tool spans; their total and maximum.
    pub span_rows: [u64; 4],
    pub spans: u64,
    pub max_spans: u64,
    /// Valid tokens with finite old and ref log-probs (the k1 means' denominator).
    pub kl_tokens: u64,
    /// Rows whose KL-shaped reward sum has the opposite sign of the score sum (both non-zero).
    pub sign_flips: u64,
    /// Valid tokens with finite old and rollout log-probs, and those with a ratio
    /// exp(old − rollout) outside [RATIO_LOW, RATIO_HIGH] and above RATIO_EXTREME.
    pub mismatch_tokens: u64,
    pub ratio_outside: u64,
    pub ratio_extreme: u64,
    /// Valid tokens rejected (mask 1 → 0), rows with a valid token that lost all of them,
    /// rows with a valid token, and mask-0 positions the rejected mask sets (never expected).
    pub rejected_tokens: u64,
    pub rows_fully_rejected: u64,
    pub rows_with_valid_token: u64,
    pub rejection_outside_mask: u64,
    pub columns: Vec<ColumnCounts>,
    pub row_facts: Vec<RowFacts>,
    /// `(uid, score sum)` of the rows that take part in group checks (not padding rows);
    /// empty without a `uid` column.
    pub groups: Vec<(GroupKey, f64)>,
}

impl StepTally {
    /// Add `other`, whose rows come after this tally's rows.
    pub fn merge(&mut self, other: StepTally) {
        self.rows += other.rows;
        self.tokens += other.tokens;
        self.valid_tokens += other.valid_tokens;
        self.rows_without_valid_token += other.rows_without_valid_token;
        self.padding_rows += other.padding_rows;
        self.rows_ending_in_tool_token += other.rows_ending_in_tool_token;
        self.masked_reward_rows += other.masked_reward_rows;
        self.masked_reward_tokens += other.masked_reward_tokens;
        for (a, b) in self.span_rows.iter_mut().zip(other.span_rows) {
            *a += b;
        }
        self.spans += other.spans;
        self.max_spans = self.max_spans.max(other.max_spans);
        self.kl_tokens += other.kl_tokens;
        self.sign_flips += other.sign_flips;
        self.mismatch_tokens += other.mismatch_tokens;
        self.ratio_outside += other.ratio_outside;
        self.ratio_extreme += other.ratio_extreme;
        self.rejected_tokens += other.rejected_tokens;
        self.rows_fully_rejected += other.rows_fully_rejected;
        self.rows_with_valid_token += other.rows_with_valid_token;
        self.rejection_outside_mask += other.rejection_outside_mask;
        if self.columns.is_empty() {
            self.columns = other.columns;
        } else {
            for (a, b) in self.columns.iter_mut().zip(other.columns) {
                debug_assert_eq!(a.name, b.name);
                a.nan += b.nan;
                a.inf += b.inf;
                a.positive += b.positive;
            }
        }
        self.row_facts.extend(other.row_facts);
        self.groups.extend(other.groups);
    }

    /// The counts of column `name`, created (zero) on first use.
    pub fn column(&mut self, name: &str, log_prob: bool) -> &mut ColumnCounts {
        match self.columns.iter().position(|c| c.name == name) {
            Some(i) => &mut self.columns[i],
            None => {
                self.columns.push(ColumnCounts {
                    name: name.to_string(),
                    log_prob,
                    ..Default::default()
                });
                self.columns.last_mut().expect("just pushed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_and_appends_rows() {
        let mut a = StepTally {
            rows: 2,
            span_rows: [1, 1, 0, 0],
            max_spans: 1,
            row_facts: vec![RowFacts::default(); 2],
            ..Default::default()
        };
        a.column("rm_scores", false).nan = 1;
        let mut b = StepTally {
            rows: 1,
            span_rows: [0, 0, 0, 1],
            max_spans: 4,
            row_facts: vec![RowFacts {
                score: 3.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        b.column("rm_scores", false).nan = 2;
        a.merge(b);
        assert_eq!(a.rows, 3);
        assert_eq!(a.span_rows, [1, 1, 0, 1]);
        assert_eq!(a.max_spans, 4);
        assert_eq!(a.columns[0].nan, 3);
        assert_eq!(a.row_facts[2].score, 3.0);
        let mut empty = StepTally::default();
        empty.merge(a.clone());
        assert_eq!(empty, a);
    }
}
