//! Which input column plays which role (README.md's Input), checked against the run's needs before
//! any row is read, and the output schema: input columns plus the new ones.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::columns::{ColumnRef, TokenKind, check_token_type};
use crate::data::TokenRole;
use crate::error::{Error, Result};
use crate::jsonl::SEQUENCE_LEVEL_KEY;
use crate::write::ColumnSource;

/// Token-level reward column names, in priority order (verl's name first).
pub const TOKEN_SCORE_COLUMNS: [&str; 2] = ["rm_scores", "token_level_scores"];
/// The scalar alternative, placed on the row's last position.
pub const SCALAR_SCORE_COLUMN: &str = "score";
/// The prompt token ids (a list of integers per row) that group rows under
/// `nemo.group_by: prompt_ids`, as NeMo-RL groups them.
pub const PROMPT_IDS_COLUMN: &str = "prompt_ids";

/// Output columns advcalc writes (replacing input columns of the same name).
pub const OUTPUT_COLUMNS: [&str; 4] = [
    "token_level_rewards",
    "advantages",
    "returns",
    "rollout_is_weights",
];

/// Where the sequence reward comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScoreSource {
    /// A token list (`rm_scores` or `token_level_scores`).
    Tokens { index: usize, name: String },
    /// A scalar float per row (`score`).
    Scalar { index: usize },
    /// None: the loss stage on IN's own advantages reads no scores (zeros stand in).
    Absent,
}

/// Resolved roles of the input columns.
#[derive(Debug, Clone)]
pub struct InputColumns {
    pub schema: SchemaRef,
    /// The group-label column: `uid`, or `prompt_ids` when `uid_is_prompt_ids`.
    pub uid: Option<usize>,
    /// The group labels are read from [`PROMPT_IDS_COLUMN`] (`Needs::prompt_ids`).
    pub uid_is_prompt_ids: bool,
    pub mask: usize,
    pub scores: ScoreSource,
    pub step: Option<usize>,
    /// `(session_id, output_index)`, present together or not at all.
    pub session: Option<(usize, usize)>,
    pub has_loss_mask: bool,
    /// Optional token columns present in the file (role, index).
    pub tokens: Vec<(TokenRole, usize)>,
    /// Roles among `tokens` the run only uses for `--metrics` (`Needs::optional`).
    pub metrics_only: Vec<TokenRole>,
    /// `reward_baselines`, when present.
    pub reward_baselines: Option<usize>,
    /// Scalar reward-component columns for gdpo, in config order (name, index).
    pub components: Vec<(String, usize)>,
}

/// What the run needs from the file, and why (for the error message).
#[derive(Debug, Clone, Default)]
pub struct Needs {
    pub uid: bool,
    /// Group by the `prompt_ids` column instead of `uid` (`nemo.group_by: prompt_ids`).
    pub prompt_ids: bool,
    pub tokens: Vec<TokenRole>,
    /// Token columns used when the file has them (rollout-correction metrics).
    pub optional: Vec<TokenRole>,
    /// Token columns the maths uses when the file has them (the loss stage's `log_probs`).
    pub if_present: Vec<TokenRole>,
    /// No score column is needed (the loss stage on IN's own advantages).
    pub no_scores: bool,
    pub reward_baselines: bool,
    pub components: Vec<String>,
    /// e.g. "estimator gae", "KL in reward (kl_penalty low_var_kl)".
    pub purpose: String,
    /// What the run needs of real token data, one phrase per stage ("estimator opo needs
    /// ..."): refused on sequence-level input (`io::jsonl::SEQUENCE_LEVEL_KEY`), whose one
    /// token per row is synthesized. Empty when the rows' scores suffice.
    pub token_data: Vec<String>,
    /// `advcalc loss` reads these columns: a sequence-level input cannot be replayed by any
    /// choice of estimator (the refusal's hint says what the loss needs instead).
    pub loss: bool,
}

impl InputColumns {
    pub fn resolve(schema: SchemaRef, needs: &Needs, file: &str) -> Result<Self> {
        if let Some(tag) = schema.metadata().get(SEQUENCE_LEVEL_KEY)
            && !needs.token_data.is_empty()
        {
            // the tag names the writer: "verl JSONL", "verl JSONL V1", "TRL dump"
            let what = if tag.starts_with("verl") {
                "a verl JSONL dump".to_string()
            } else {
                format!("a {tag}")
            };
            return Err(Error::data(format!(
                "{file}: {} — {what} has one score per row and no token columns",
                needs.token_data.join("; ")
            ))
            .with_hint(if needs.loss {
                "advcalc loss replays each token's log-probabilities: it needs a token-level dump with response_mask, old_log_probs (log_probs, ref_log_prob with use_kl_loss, rollout_log_probs in bypass mode), as the verl hook writes it (docs/verl.md, docs/loss.md)"
            } else if tag.starts_with("verl") {
                "use a sequence-level estimator (`advcalc estimators` marks them: grpo, rloo, ...) without KL in the reward or rollout correction, or dump token-level Parquet with the verl hook (docs/verl.md)"
            } else {
                "use a sequence-level estimator (`advcalc estimators` marks them: grpo, rloo, ...) without KL in the reward or rollout correction"
            }));
        }
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
        let label = if needs.prompt_ids {
            PROMPT_IDS_COLUMN
        } else {
            "uid"
        };
        let uid = find(label);
        let mut need: Vec<String> = Vec::new();
        if needs.uid {
            need.push(label.into());
        }
        need.push("response_mask".into());
        if !needs.no_scores {
            need.push("rm_scores (or score)".into());
        }
        need.extend(needs.tokens.iter().map(|t| t.column().to_string()));
        if needs.reward_baselines {
            need.push("reward_baselines".into());
        }
        need.extend(needs.components.iter().cloned());
        let mut missing: Vec<String> = Vec::new();
        if needs.uid && uid.is_none() {
            missing.push(label.into());
        }
        if mask.is_none() {
            missing.push("response_mask".into());
        }
        if scores.is_none() && !needs.no_scores {
            missing.push("rm_scores (or token_level_scores, or a scalar score)".into());
        }
        let scores = if needs.no_scores {
            Some(ScoreSource::Absent)
        } else {
            scores
        };
        for t in &needs.tokens {
            if find(t.column()).is_none() {
                missing.push(t.column().into());
            }
        }
        if needs.reward_baselines && find("reward_baselines").is_none() {
            missing.push("reward_baselines".into());
        }
        for c in &needs.components {
            if find(c).is_none() {
                missing.push(c.clone());
            }
        }
        if !missing.is_empty() {
            let have: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            return Err(Error::data(format!(
                "{file}: missing column {} — {} needs {}; the file has: {}",
                missing.join(", "),
                needs.purpose,
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
                check_number_type(schema.field(*index).data_type(), &col("score"))?;
            }
            ScoreSource::Absent => {}
        }
        let uid = if needs.uid { uid } else { None };
        if let Some(i) = uid {
            if needs.prompt_ids {
                check_id_list_type(schema.field(i).data_type(), &col(PROMPT_IDS_COLUMN))?;
            } else {
                check_label_type(schema.field(i).data_type(), &col("uid"))?;
            }
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
        let mut tokens = Vec::new();
        let mut metrics_only = Vec::new();
        for role in TokenRole::ALL {
            if let Some(i) = find(role.column()) {
                // Only the columns the run uses are checked; others pass through untouched.
                if needs.tokens.contains(&role)
                    || needs.optional.contains(&role)
                    || needs.if_present.contains(&role)
                {
                    check_token_type(
                        schema.field(i).data_type(),
                        TokenKind::Values,
                        &col(role.column()),
                    )?;
                    tokens.push((role, i));
                    if needs.optional.contains(&role)
                        && !needs.tokens.contains(&role)
                        && !needs.if_present.contains(&role)
                    {
                        metrics_only.push(role);
                    }
                }
            }
        }
        let reward_baselines = if needs.reward_baselines {
            find("reward_baselines")
        } else {
            None
        };
        if let Some(i) = reward_baselines {
            check_number_type(schema.field(i).data_type(), &col("reward_baselines"))?;
        }
        let mut components = Vec::new();
        for name in &needs.components {
            let i = find(name).unwrap_or_default();
            check_number_type(
                schema.field(i).data_type(),
                &ColumnRef {
                    file,
                    column: name,
                    first_row: 0,
                },
            )?;
            components.push((name.clone(), i));
        }
        Ok(InputColumns {
            uid,
            uid_is_prompt_ids: needs.prompt_ids && uid.is_some(),
            mask,
            scores,
            step,
            session,
            has_loss_mask: find("loss_mask").is_some(),
            tokens,
            metrics_only,
            reward_baselines,
            components,
            schema,
        })
    }

    pub fn token(&self, role: TokenRole) -> Option<usize> {
        self.tokens
            .iter()
            .find(|(r, _)| *r == role)
            .map(|&(_, i)| i)
    }

    /// Root column indices the passes decode: what the maths needs, plus the columns only
    /// `--metrics` uses when `metrics` is set (decoding two log-prob columns nobody reads
    /// would double the cost of a GRPO run).
    pub fn projection(&self, metrics: bool) -> Vec<usize> {
        let mut cols = vec![self.mask];
        cols.extend(self.score_index());
        cols.extend(
            self.tokens
                .iter()
                .filter(|(role, _)| metrics || !self.metrics_only.contains(role))
                .map(|&(_, i)| i),
        );
        cols.extend(self.reward_baselines);
        cols.extend(self.components.iter().map(|&(_, i)| i));
        cols.extend(self.uid);
        cols.extend(self.step);
        if let Some((s, o)) = self.session {
            cols.extend([s, o]);
        }
        cols.sort_unstable();
        cols.dedup();
        cols
    }

    pub fn score_index(&self) -> Option<usize> {
        match self.scores {
            ScoreSource::Tokens { index, .. } | ScoreSource::Scalar { index } => Some(index),
            ScoreSource::Absent => None,
        }
    }

    /// The output schema: every input column (the computed columns replaced in place, as
    /// `list<float32>`), then `loss_mask` when the input has none, then the new columns.
    pub fn output_schema(&self, computed: &[&'static str], rewards_alias: bool) -> SchemaRef {
        let rewards_field = |name: &str| match (&self.rewards_alias(rewards_alias), name) {
            (Some(i), "token_level_rewards") => self.schema.field(*i).clone().with_name(name),
            _ => self.float_list_field(name),
        };
        let mut fields: Vec<Arc<Field>> = self
            .schema
            .fields()
            .iter()
            .map(|f| {
                if computed.contains(&f.name().as_str()) {
                    Arc::new(rewards_field(f.name()))
                } else {
                    f.clone()
                }
            })
            .collect();
        // verl's `loss_mask` beside the advantages (not for the loss stage alone)
        if !self.has_loss_mask && computed.contains(&"advantages") {
            let mask = self.schema.field(self.mask);
            fields.push(Arc::new(mask.clone().with_name("loss_mask")));
        }
        for &name in computed {
            if self.schema.index_of(name).is_err() {
                fields.push(Arc::new(rewards_field(name)));
            }
        }
        Arc::new(Schema::new_with_metadata(
            fields,
            self.schema.metadata().clone(),
        ))
    }

    /// A computed `list<float32>` output column, in the convention of the input's
    /// `response_mask` (`float_list_field`).
    pub fn float_list_field(&self, name: &str) -> Field {
        float_list_field(name, self.schema.field(self.mask))
    }

    /// The input column `token_level_rewards` can be copied from: the token scores, when
    /// nothing changes them (`unchanged`: no KL in the reward) and they are already float32.
    pub fn rewards_alias(&self, unchanged: bool) -> Option<usize> {
        let ScoreSource::Tokens { index, .. } = self.scores else {
            return None;
        };
        let item = match self.schema.field(index).data_type() {
            DataType::List(f) | DataType::LargeList(f) => f.data_type().clone(),
            _ => return None,
        };
        (unchanged && item == DataType::Float32).then_some(index)
    }
}

impl InputColumns {
    /// Per output field: copied unchanged from the input, or computed (the float outputs, the
    /// rejected `response_mask` when correction rewrites it, the `loss_mask` copy).
    pub fn output_sources(
        &self,
        output: &Schema,
        computed: &[&'static str],
        mask_rewritten: bool,
        rewards_unchanged: bool,
    ) -> Vec<ColumnSource> {
        let mask_name = self.schema.field(self.mask).name();
        let rewards_alias = self.rewards_alias(rewards_unchanged);
        output
            .fields()
            .iter()
            .map(|f| {
                let name = f.name().as_str();
                // The original mask and unchanged float32 scores are spliced in under the new
                // names instead of being encoded again.
                if name == "loss_mask" && !self.has_loss_mask {
                    return ColumnSource::Alias(self.mask);
                }
                if let (Some(i), "token_level_rewards") = (rewards_alias, name) {
                    return ColumnSource::Alias(i);
                }
                let is_computed = computed.contains(&name) || (mask_rewritten && name == mask_name);
                match self.schema.index_of(name) {
                    Ok(i) if !is_computed => ColumnSource::Copy(i),
                    _ => ColumnSource::Computed,
                }
            })
            .collect()
    }
}

/// The loss stage's columns (`kl_losses` only with the KL loss).
pub const LOSS_COLUMNS: [&str; 3] = ["pg_losses", "grad_weights", "kl_losses"];

/// The float columns a run writes: the advantage pipeline's (`run`: with IS weights when
/// they are computed), then the loss stage's (`loss`: `Some(with the KL loss)`).
pub fn computed_columns(run: bool, is_weights: bool, loss: Option<bool>) -> Vec<&'static str> {
    let mut columns = Vec::new();
    if run {
        columns.extend(&OUTPUT_COLUMNS[..if is_weights { 4 } else { 3 }]);
    }
    if let Some(kl) = loss {
        columns.extend(&LOSS_COLUMNS[..if kl { 3 } else { 2 }]);
    }
    columns
}

/// `list<float32>`, as advcalc writes every float output, in the list convention of `like`
/// (the input's `response_mask`): its child field's name (`item` from arrow-rs and in Arrow
/// IPC, `element` in Parquet from pyarrow and other compliant writers) and nullability, and
/// the column's own nullability. The values never hold nulls either way.
pub fn float_list_field(name: &str, like: &Field) -> Field {
    let (item, item_nullable) = match like.data_type() {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => (f.name().as_str(), f.is_nullable()),
        // Not a list (the mask's type is checked before): arrow's default name.
        _ => ("item", true),
    };
    Field::new(
        name,
        DataType::List(Arc::new(Field::new(item, DataType::Float32, item_nullable))),
        like.is_nullable(),
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

fn check_id_list_type(dt: &DataType, col: &ColumnRef<'_>) -> Result<()> {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)
            if f.data_type().is_integer() =>
        {
            Ok(())
        }
        _ => Err(col.type_error(dt, "a list of integers (token ids)")),
    }
}

fn check_number_type(dt: &DataType, col: &ColumnRef<'_>) -> Result<()> {
    if dt.is_floating() || dt.is_integer() {
        Ok(())
    } else {
        Err(col.type_error(dt, "numbers (float32 or float64)"))
    }
}

fn check_int_type(dt: &DataType, col: &ColumnRef<'_>) -> Result<()> {
    if dt.is_integer() {
        Ok(())
    } else {
        Err(col.type_error(dt, "integers"))
    }
}
