//! One row group's Arrow columns to the plain per-row data the pipeline works on.

use arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::groups::GroupKey;
use crate::io::columns::{self, ColumnRef, TokenColumn, TokenKind};
use crate::io::schema::{InputColumns, ScoreSource};
use crate::scores::{Layout, place_scalar_scores};

/// The rows of one row group, as plain slices.
#[derive(Debug, Clone)]
pub struct RowGroup {
    /// Global index of the first row.
    pub first_row: usize,
    /// `response_mask` as 0.0/1.0, with the row offsets every token column shares.
    pub mask: TokenColumn,
    /// `token_level_scores`, aligned with `mask.offsets`.
    pub scores: Vec<f32>,
    pub uid: Option<Vec<GroupKey>>,
    pub step: Option<Vec<i64>>,
    pub session: Option<(Vec<GroupKey>, Vec<i64>)>,
    /// Rows whose scalar score had no position to go to.
    pub dropped_scores: usize,
}

impl RowGroup {
    pub fn rows(&self) -> usize {
        self.mask.rows()
    }
}

/// What to decode besides the mask and scores.
#[derive(Debug, Clone, Copy)]
pub struct DecodeKeys {
    pub labels: bool,
}

pub fn decode(
    batch: &RecordBatch,
    columns: &InputColumns,
    layout: Layout,
    keys: DecodeKeys,
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
    let (scores, dropped_scores) = match &columns.scores {
        ScoreSource::Tokens { index, .. } => {
            let (array, col) = get(*index)?;
            let scores = columns::token_column(array, TokenKind::Values, &col)?;
            if let Some(row) = (0..mask.rows()).find(|&i| mask.row_len(i) != scores.row_len(i)) {
                return Err(col.error(
                    row,
                    format!(
                        "list has {} elements but `response_mask` has {} (token columns of a row must have equal lengths)",
                        scores.row_len(row),
                        mask.row_len(row)
                    ),
                ));
            }
            (scores.values, 0)
        }
        ScoreSource::Scalar { index } => {
            let (array, col) = get(*index)?;
            let scalars = columns::float_scalars(array, &col)?;
            place_scalar_scores(&scalars, &mask.offsets, &mask.values, layout)
        }
    };
    let mut group = RowGroup {
        first_row,
        mask,
        scores,
        uid: None,
        step: None,
        session: None,
        dropped_scores,
    };
    if keys.labels {
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
