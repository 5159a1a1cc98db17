//! One row group decoded into plain per-row data: flat `f32` token slices with row offsets,
//! labels and scalars. The engine, shaping and estimators work on this, never on Arrow arrays.

use crate::data::{FloatBuffer, GroupKey, TokenRole};

/// A token column of one batch: row `i` owns `values[offsets[i]..offsets[i + 1]]`. The
/// values share the decoded column's buffer (no copy when the column is already float32).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenColumn {
    pub offsets: Vec<usize>,
    pub values: FloatBuffer,
}

impl TokenColumn {
    pub fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.values[self.offsets[i]..self.offsets[i + 1]]
    }

    pub fn row_len(&self, i: usize) -> usize {
        self.offsets[i + 1] - self.offsets[i]
    }
}

/// Where flat token index `token` is, given the rows' `offsets`: its row and its index in
/// that row (for messages that name both).
pub fn token_position(offsets: &[usize], token: usize) -> (usize, usize) {
    let row = offsets.partition_point(|&o| o <= token) - 1;
    (row, token - offsets[row])
}

/// The rows of one row group, as plain slices.
#[derive(Debug, Clone)]
pub struct RowGroup {
    /// Global index of the first row.
    pub first_row: usize,
    /// `response_mask` as 0.0/1.0, with the row offsets every token column shares.
    pub mask: TokenColumn,
    /// `token_level_scores`, aligned with `mask.offsets` (empty until stage 1 places
    /// `scalar_scores`).
    pub scores: FloatBuffer,
    /// A scalar `score` per row, when the input has no token scores: stage 1 places it.
    pub scalar_scores: Option<Vec<f32>>,
    /// Optional token columns (flat, aligned with `mask.offsets`).
    pub tokens: Vec<(TokenRole, FloatBuffer)>,
    pub reward_baselines: Option<Vec<f32>>,
    /// gdpo reward components, `components[k][row]`.
    pub components: Vec<Vec<f32>>,
    pub uid: Option<Vec<GroupKey>>,
    pub step: Option<Vec<i64>>,
    pub session: Option<(Vec<GroupKey>, Vec<i64>)>,
    /// Rows whose scalar score had no position to go to.
    pub dropped_scores: usize,
    /// Positive log-probabilities seen: count and the first (column, global row, token).
    pub positive_log_probs: Option<PositiveLogProbs>,
}

/// Log-probabilities above 0, which cannot be log-probabilities.
#[derive(Debug, Clone, PartialEq)]
pub struct PositiveLogProbs {
    pub count: usize,
    pub column: &'static str,
    pub row: usize,
    pub token: usize,
}

impl PositiveLogProbs {
    pub fn merge(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(mut a), Some(b)) => {
                a.count += b.count;
                Some(a)
            }
            (a, b) => a.or(b),
        }
    }
}

impl RowGroup {
    /// A row group from per-row values (the rest empty: no labels, scores 0): `mask` the
    /// rows' response masks, `tokens` token columns with a row per mask row, `step` each
    /// row's step. What a test or a client that holds plain rows builds; the I/O layer
    /// decodes its own from Arrow without copying.
    pub fn from_rows(
        first_row: usize,
        mask: &[&[f32]],
        tokens: &[(TokenRole, &[&[f32]])],
        step: Option<Vec<i64>>,
    ) -> RowGroup {
        let mut offsets = vec![0];
        for r in mask {
            offsets.push(offsets.last().unwrap() + r.len());
        }
        let width = *offsets.last().unwrap();
        RowGroup {
            first_row,
            mask: TokenColumn {
                offsets,
                values: FloatBuffer::from(mask.concat()),
            },
            scores: FloatBuffer::from(vec![0.0f32; width]),
            scalar_scores: None,
            tokens: tokens
                .iter()
                .map(|&(role, rows)| (role, FloatBuffer::from(rows.concat())))
                .collect(),
            reward_baselines: None,
            components: Vec::new(),
            uid: None,
            step,
            session: None,
            dropped_scores: 0,
            positive_log_probs: None,
        }
    }

    pub fn rows(&self) -> usize {
        self.mask.rows()
    }

    /// The token range of row `i` in the flat columns.
    pub fn span(&self, i: usize) -> std::ops::Range<usize> {
        self.mask.offsets[i]..self.mask.offsets[i + 1]
    }

    /// A whole optional token column, flat.
    pub fn token(&self, role: TokenRole) -> Option<&[f32]> {
        self.tokens
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, v)| &v[..])
    }

    /// The step of row `i` (None without a step column).
    pub fn step_of(&self, i: usize) -> Option<i64> {
        self.step.as_ref().map(|s| s[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_placed_in_its_row_past_empty_rows() {
        // rows of 3, 0 and 2 tokens
        let offsets = [0, 3, 3, 5];
        assert_eq!(token_position(&offsets, 0), (0, 0));
        assert_eq!(token_position(&offsets, 2), (0, 2));
        assert_eq!(token_position(&offsets, 3), (2, 0));
        assert_eq!(token_position(&offsets, 4), (2, 1));
    }
}
