//! Which input column plays which role (design §1), checked against the run's needs before
//! any row is read, and the output schema: input columns plus the new ones.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::{Error, Result};
use crate::io::columns::{ColumnRef, TokenKind, check_token_type};

/// Token-level reward column names, in priority order (verl's name first).
pub const TOKEN_SCORE_COLUMNS: [&str; 2] = ["rm_scores", "token_level_scores"];
/// The scalar alternative, placed on the row's last position.
pub const SCALAR_SCORE_COLUMN: &str = "score";

/// Output columns advcalc writes (replacing input columns of the same name).
pub const OUTPUT_COLUMNS: [&str; 3] = ["token_level_rewards", "advantages", "returns"];

/// Where the sequence reward comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScoreSource {
    /// A token list (`rm_scores` or `token_level_scores`).
    Tokens { index: usize, name: String },
    /// A scalar float per row (`score`).
    Scalar { index: usize },
}

/// Resolved roles of the input columns.
#[derive(Debug, Clone)]
pub struct InputColumns {
    pub schema: SchemaRef,
    pub uid: Option<usize>,
    pub mask: usize,
    pub scores: ScoreSource,
    pub step: Option<usize>,
    /// `(session_id, output_index)`, present together or not at all.
    pub session: Option<(usize, usize)>,
    pub has_loss_mask: bool,
}

/// What the run needs from the file.
#[derive(Debug, Clone, Copy)]
pub struct Needs {
    pub uid: bool,
    pub estimator: &'static str,
}

impl InputColumns {
    pub fn resolve(schema: SchemaRef, needs: Needs, file: &str) -> Result<Self> {
        let find = |name: &str| schema.index_of(name).ok();
        let col = |name: &'static str| ColumnRef {
            file,
            column: name,
            first_row: 0,
        };
        let scores = TOKEN_SCORE_COLUMNS
            .iter()
            .find_map(|&n| {
                find(n).map(|index| ScoreSource::Tokens {
                    index,
                    name: n.to_string(),
                })
            })
            .or_else(|| find(SCALAR_SCORE_COLUMN).map(|index| ScoreSource::Scalar { index }));
        let mask = find("response_mask");
        let uid = find("uid");
        let mut missing = Vec::new();
        if mask.is_none() {
            missing.push("response_mask");
        }
        if scores.is_none() {
            missing.push("rm_scores (or token_level_scores, or a scalar score)");
        }
        if needs.uid && uid.is_none() {
            missing.push("uid");
        }
        if !missing.is_empty() {
            let have: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            let mut need = vec!["response_mask", "rm_scores (or score)"];
            if needs.uid {
                need.insert(0, "uid");
            }
            return Err(Error::data(format!(
                "{file}: missing column {} — estimator {} needs {}; the file has: {}",
                missing.join(", "),
                needs.estimator,
                need.join(", "),
                if have.is_empty() {
                    "no columns".to_string()
                } else {
                    have.join(", ")
                }
            )));
        }
        let (Some(mask), Some(scores)) = (mask, scores) else {
            unreachable!("missing columns reported above")
        };
        check_token_type(
            schema.field(mask).data_type(),
            TokenKind::Mask,
            &col("response_mask"),
        )?;
        match &scores {
            ScoreSource::Tokens { index, .. } => {
                let field = schema.field(*index);
                let name = field.name().clone();
                check_token_type(
                    field.data_type(),
                    TokenKind::Values,
                    &ColumnRef {
                        file,
                        column: &name,
                        first_row: 0,
                    },
                )?;
            }
            ScoreSource::Scalar { index } => {
                let dt = schema.field(*index).data_type();
                if !(dt.is_floating() || dt.is_integer()) {
                    return Err(col("score").type_error(dt, "numbers (float32 or float64)"));
                }
            }
        }
        let uid = if needs.uid { uid } else { None };
        if let Some(i) = uid {
            check_label_type(schema.field(i).data_type(), &col("uid"))?;
        }
        let step = find("step");
        if let Some(i) = step {
            check_int_type(schema.field(i).data_type(), &col("step"))?;
        }
        let session = match (find("session_id"), find("output_index")) {
            (Some(s), Some(o)) => {
                check_label_type(schema.field(s).data_type(), &col("session_id"))?;
                check_int_type(schema.field(o).data_type(), &col("output_index"))?;
                Some((s, o))
            }
            (None, None) => None,
            (Some(_), None) => {
                return Err(Error::data(format!(
                    "{file}: column `session_id` needs a companion `output_index` column (multi-output sessions)"
                )));
            }
            (None, Some(_)) => {
                return Err(Error::data(format!(
                    "{file}: column `output_index` needs a companion `session_id` column (multi-output sessions)"
                )));
            }
        };
        Ok(InputColumns {
            uid,
            mask,
            scores,
            step,
            session,
            has_loss_mask: find("loss_mask").is_some(),
            schema,
        })
    }

    /// Root column indices the statistics pass decodes.
    pub fn statistics_projection(&self) -> Vec<usize> {
        let mut cols = vec![self.mask, self.score_index()];
        cols.extend(self.uid);
        cols.extend(self.step);
        if let Some((s, o)) = self.session {
            cols.extend([s, o]);
        }
        cols.sort_unstable();
        cols.dedup();
        cols
    }

    pub fn score_index(&self) -> usize {
        match self.scores {
            ScoreSource::Tokens { index, .. } | ScoreSource::Scalar { index } => index,
        }
    }

    /// The output schema: every input column (the output columns replaced in place, as
    /// list<float32>), then `loss_mask` when the input has none, then the new columns.
    pub fn output_schema(&self) -> SchemaRef {
        let mut fields: Vec<Arc<Field>> = self
            .schema
            .fields()
            .iter()
            .map(|f| {
                if OUTPUT_COLUMNS.contains(&f.name().as_str()) {
                    Arc::new(float_list_field(f.name()))
                } else {
                    f.clone()
                }
            })
            .collect();
        if !self.has_loss_mask {
            let mask = self.schema.field(self.mask);
            fields.push(Arc::new(mask.clone().with_name("loss_mask")));
        }
        for name in OUTPUT_COLUMNS {
            if self.schema.index_of(name).is_err() {
                fields.push(Arc::new(float_list_field(name)));
            }
        }
        Arc::new(Schema::new_with_metadata(
            fields,
            self.schema.metadata().clone(),
        ))
    }
}

/// `list<float32>` with non-null items, as advcalc writes every float output.
pub fn float_list_field(name: &str) -> Field {
    Field::new(
        name,
        DataType::List(Arc::new(Field::new("item", DataType::Float32, false))),
        false,
    )
}

fn check_label_type(dt: &DataType, col: &ColumnRef<'_>) -> Result<()> {
    let ok = dt.is_integer()
        || matches!(
            dt,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        )
        || matches!(dt, DataType::Dictionary(_, v) if matches!(**v, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) || v.is_integer());
    if ok {
        Ok(())
    } else {
        Err(col.type_error(dt, "strings or integers"))
    }
}

fn check_int_type(dt: &DataType, col: &ColumnRef<'_>) -> Result<()> {
    if dt.is_integer() {
        Ok(())
    } else {
        Err(col.type_error(dt, "integers"))
    }
}
