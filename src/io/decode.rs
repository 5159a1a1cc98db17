//! One row group's Arrow columns to the plain per-row data the pipeline works on.

use arrow::buffer::ScalarBuffer;
use arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::groups::GroupKey;
use crate::io::columns::{self, ColumnRef, TokenColumn, TokenKind};
use crate::io::schema::{InputColumns, ScoreSource, TokenRole};
use crate::scores::{Layout, place_scalar_scores};

/// The rows of one row group, as plain slices.
#[derive(Debug, Clone)]
pub struct RowGroup {
    /// Global index of the first row.
    pub first_row: usize,
    /// `response_mask` as 0.0/1.0, with the row offsets every token column shares.
    pub mask: TokenColumn,
    /// `token_level_scores`, aligned with `mask.offsets`.
    pub scores: ScalarBuffer<f32>,
    /// Optional token columns (flat, aligned with `mask.offsets`).
    pub tokens: Vec<(TokenRole, ScalarBuffer<f32>)>,
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

/// How to decode: the layout (scalar score placement) and which value checks run.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecodeOptions {
    pub layout: Layout,
    /// Check values (refuse NaN/±inf, count positive log-probs). The output pass decodes
    /// what the statistics pass already checked, so it turns this off.
    pub check_values: bool,
    /// Let NaN/±inf through (`--allow-nonfinite`).
    pub allow_nonfinite: bool,
}

impl DecodeOptions {
    fn refuse_nonfinite(&self) -> bool {
        self.check_values && !self.allow_nonfinite
    }
}

impl RowGroup {
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

pub fn decode(
    batch: &RecordBatch,
    columns: &InputColumns,
    options: &DecodeOptions,
    file: &str,
    first_row: usize,
) -> Result<RowGroup> {
    let schema = &columns.schema;
    let get = |index: usize| {
        let name = schema.field(index).name();
        let array = batch.column_by_name(name).ok_or_else(|| {
            Error::data(format!(
                "{file}: column `{name}` missing from a decoded row group"
            ))
        })?;
        Ok::<_, Error>((
            array,
            ColumnRef {
                file,
                column: name,
                first_row,
            },
        ))
    };
    let (array, col) = get(columns.mask)?;
    let mask = columns::token_column(array, TokenKind::Mask, &col)?;
    let same_lengths = |values: TokenColumn, col: &ColumnRef<'_>| -> Result<ScalarBuffer<f32>> {
        if let Some(row) = (0..mask.rows()).find(|&i| mask.row_len(i) != values.row_len(i)) {
            return Err(col.error(
                row,
                format!(
                    "list has {} elements but `response_mask` has {} (token columns of a row must have equal lengths)",
                    values.row_len(row),
                    mask.row_len(row)
                ),
            ));
        }
        Ok(values.values)
    };
    let mut tokens = Vec::new();
    let mut positive_log_probs = None;
    for &(role, index) in &columns.tokens {
        if batch
            .column_by_name(columns.schema.field(index).name())
            .is_none()
        {
            continue; // not in this pass's projection
        }
        let (array, col) = get(index)?;
        let values = columns::token_column(array, TokenKind::Values, &col)?;
        if options.refuse_nonfinite() {
            columns::check_finite_tokens(&values.values, &values.offsets, &col)?;
        }
        if options.check_values && role.is_log_prob() {
            positive_log_probs = PositiveLogProbs::merge(
                positive_log_probs,
                positives(&values, role.column(), first_row),
            );
        }
        tokens.push((role, same_lengths(values, &col)?));
    }
    let reward_baselines = match columns.reward_baselines {
        Some(i) => {
            let (array, col) = get(i)?;
            let values = columns::float_scalars(array, &col)?;
            if options.refuse_nonfinite() {
                columns::check_finite_scalars(&values, &col)?;
            }
            Some(values)
        }
        None => None,
    };
    let components = columns
        .components
        .iter()
        .map(|&(_, i)| {
            let (array, col) = get(i)?;
            let values = columns::float_scalars(array, &col)?;
            if options.refuse_nonfinite() {
                columns::check_finite_scalars(&values, &col)?;
            }
            Ok(values)
        })
        .collect::<Result<Vec<_>>>()?;
    let (scores, dropped_scores) = match &columns.scores {
        ScoreSource::Tokens { index, .. } => {
            let (array, col) = get(*index)?;
            let scores = columns::token_column(array, TokenKind::Values, &col)?;
            if options.refuse_nonfinite() {
                columns::check_finite_tokens(&scores.values, &scores.offsets, &col)?;
            }
            (same_lengths(scores, &col)?, 0)
        }
        ScoreSource::Scalar { index } => {
            let (array, col) = get(*index)?;
            let scalars = columns::float_scalars(array, &col)?;
            if options.refuse_nonfinite() {
                columns::check_finite_scalars(&scalars, &col)?;
            }
            let (placed, dropped) =
                place_scalar_scores(&scalars, &mask.offsets, &mask.values, options.layout);
            (placed.into(), dropped)
        }
    };
    let mut group = RowGroup {
        first_row,
        mask,
        scores,
        tokens,
        reward_baselines,
        components,
        uid: None,
        step: None,
        session: None,
        dropped_scores,
        positive_log_probs,
    };
    {
        if let Some(i) = columns.uid {
            let (array, col) = get(i)?;
            group.uid = Some(columns::group_keys(array, &col)?);
        }
        if let Some(i) = columns.step {
            let (array, col) = get(i)?;
            group.step = Some(columns::int_scalars(array, &col)?);
        }
        if let Some((s, o)) = columns.session {
            let (array, col) = get(s)?;
            let sessions = columns::group_keys(array, &col)?;
            let (array, col) = get(o)?;
            group.session = Some((sessions, columns::int_scalars(array, &col)?));
        }
    }
    Ok(group)
}

/// Count the values above 0 of a log-probability column.
fn positives(
    values: &TokenColumn,
    column: &'static str,
    first_row: usize,
) -> Option<PositiveLogProbs> {
    let count = values.values.iter().filter(|&&v| v > 0.0).count();
    let token = values.values.iter().position(|&v| v > 0.0)?;
    let row = values.offsets.partition_point(|&o| o <= token) - 1;
    Some(PositiveLogProbs {
        count,
        column,
        row: first_row + row,
        token: token - values.offsets[row],
    })
}
