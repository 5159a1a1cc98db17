//! One row group's Arrow columns to the plain per-row data the pipeline works on.

use arrow_array::RecordBatch;

use crate::columns::{self, ColumnRef, TokenKind};
use crate::data::{FloatBuffer, PositiveLogProbs, RowGroup, TokenColumn, token_position};
use crate::error::{Error, Result};
use crate::schema::{InputColumns, ScoreSource};

/// Which value checks decoding runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecodeOptions {
    /// Check values (refuse NaN/±inf, count positive log-probs). The output pass decodes
    /// what the statistics pass already checked, so it turns this off.
    pub check_values: bool,
    /// Let NaN/±inf through (`--allow-nonfinite`).
    pub allow_nonfinite: bool,
    /// In a dataset: the dataset index of the file's first row; messages count rows from
    /// the file's first (row `first_row - row_base` of the file).
    pub row_base: usize,
    /// In a dataset: the step the file's path names (`step=N`): every row's step when the
    /// file has no `step` column, else what that column must hold.
    pub path_step: Option<i64>,
    /// Leave the metrics-only columns (`InputColumns::metrics_only`) undecoded, even when
    /// the batch holds them: a run without metrics never reads them from a file (its
    /// projection leaves them out), so a batch held in memory must not be refused for them.
    pub skip_metrics_only: bool,
}

impl DecodeOptions {
    fn refuse_nonfinite(&self) -> bool {
        self.check_values && !self.allow_nonfinite
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
                first_row: first_row - options.row_base,
            },
        ))
    };
    let (array, col) = get(columns.mask)?;
    let mask = columns::token_column(array, TokenKind::Mask, &col)?;
    let same_lengths = |values: TokenColumn, col: &ColumnRef<'_>| -> Result<FloatBuffer> {
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
        if options.skip_metrics_only && columns.metrics_only.contains(&role) {
            continue; // what the CLI's projection would not have read
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
    let (scores, scalar_scores) = match &columns.scores {
        ScoreSource::Tokens { index, .. } => {
            let (array, col) = get(*index)?;
            let scores = columns::token_column(array, TokenKind::Values, &col)?;
            if options.refuse_nonfinite() {
                columns::check_finite_tokens(&scores.values, &scores.offsets, &col)?;
            }
            (same_lengths(scores, &col)?, None)
        }
        ScoreSource::Scalar { index } => {
            let (array, col) = get(*index)?;
            let scalars = columns::float_scalars(array, &col)?;
            if options.refuse_nonfinite() {
                columns::check_finite_scalars(&scalars, &col)?;
            }
            // placed on the tokens by stage 1 (`shaping::scores::place`)
            (Default::default(), Some(scalars))
        }
        // the loss stage on IN's advantages: no rewards are computed from these
        ScoreSource::Absent => (vec![0.0f32; mask.values.len()].into(), None),
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
        scalar_scores,
        dropped_scores: 0,
        positive_log_probs,
    };
    {
        if let Some(i) = columns.uid {
            let (array, col) = get(i)?;
            group.uid = Some(if columns.uid_is_prompt_ids {
                columns::id_list_keys(array, &col)?
            } else {
                columns::group_keys(array, &col)?
            });
        }
        if let Some(i) = columns.step {
            let (array, col) = get(i)?;
            let steps = columns::int_scalars(array, &col)?;
            if let Some(n) = options.path_step
                && let Some(row) = steps.iter().position(|&s| s != n)
            {
                return Err(col
                    .error(
                        row,
                        format!("step {}, but the file's path says step={n}", steps[row]),
                    )
                    .with_hint("keep each step's rows in the file named after it"));
            }
            group.step = Some(steps);
        } else if let Some(n) = options.path_step {
            group.step = Some(vec![n; group.rows()]);
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
    let (row, token) = token_position(&values.offsets, token);
    Some(PositiveLogProbs {
        count,
        column,
        row: first_row + row,
        token,
    })
}
