//! Which checks an input and a configuration allow: the columns the file has decide what
//! can be measured, the configuration what is shaped (KL in reward) and rejected. A
//! configured check whose columns are missing is skipped with a note, never an error.

use std::collections::BTreeSet;

use crate::data::TokenRole;
use crate::engine::pipeline::Pipeline;
use crate::error::Result;
use crate::io::schema::{InputColumns, ScoreSource};
use crate::loss::{AggMode, LossMode};
use crate::shaping::kl::KlController;
use crate::shaping::scores::Layout;
use advcalc_config::Config;
use advcalc_maths::estimators::Estimator;
use advcalc_maths::estimators::conventions::Convention;

/// What to measure, and how.
#[derive(Debug, Clone)]
pub struct Checks {
    pub layout: Layout,
    /// The score column's name (`rm_scores`, `token_level_scores` or `score`).
    pub score_column: String,
    /// IN has one score per row and no tokens (verl's JSONL, a TRL dump): the token checks
    /// do not apply.
    pub sequence_level: bool,
    /// The file has `uid`.
    pub groups: bool,
    /// `actor_rollout_ref.rollout.n`.
    pub rollout_n: Option<i64>,
    /// The trainer the run is for (`--convention`): fragile-group findings that concern
    /// only other trainers are notes, not warnings.
    pub convention: Convention,
    /// The configured estimators (verl's default `gae` when none is; the report's variants
    /// each add theirs): the findings about rewards on mask-0 tokens warn only for one that
    /// drops them (`Info::rewards_under_mask`).
    pub estimators: Vec<Estimator>,
    /// The columns `advcalc run` reads under these configurations, where it refuses
    /// non-finite values (`None`: some configuration's columns cannot be resolved on this
    /// input, so every column counts).
    pub read: Option<BTreeSet<String>>,
    /// The score's NaNs are the trainer's own (a TRL row without a reward, under
    /// `--convention trl`): its reader's note says what they become, and no warning repeats it.
    pub own_nan_scores: bool,
    /// verl's `old_log_probs` for the KL check: `rollout_log_probs` in bypass mode.
    pub kl_old: Option<TokenRole>,
    /// The file has verl's `old_log_probs` and `ref_log_prob`.
    pub kl: bool,
    /// KL in reward runs: (`algorithm.kl_penalty`, β).
    pub shaping: Option<(String, f64)>,
    /// The file has `old_log_probs` and `rollout_log_probs`.
    pub mismatch: bool,
    /// Rejection sampling is configured and runs.
    pub rejection: bool,
    /// The pipeline that shapes the rows, when KL shaping or rejection runs: the configured
    /// one, without IS weights (not inspected).
    pub shaper: Option<Pipeline>,
    /// Checks skipped and why, then the configuration's notes.
    pub notes: Vec<String>,
    /// With an actor section (`-c` a trainer YAML): what `advcalc loss` would flag.
    pub loss: Option<LossChecks>,
}

/// The loss stage's checks (`loss::findings`): the aggregation its policy loss uses, and
/// whether bypass mode rejects tokens inside the loss (measured here by the rejection check,
/// on-policy: log π = old_log_probs, as verl's first mini-batch sees it).
#[derive(Debug, Clone, PartialEq)]
pub struct LossChecks {
    pub agg: AggMode,
    /// sapo aggregates as seq-mean-token-mean whatever loss_agg_mode says.
    pub sapo: bool,
    pub bypass_rejection: bool,
}

impl Checks {
    pub fn new(config: &Config, columns: &InputColumns, layout: Layout) -> Result<Self> {
        let mut pipeline = Pipeline::new(&config.algorithm);
        let read = read_columns(config, columns);
        let present = |role| columns.token(role).is_some();
        let mut notes = Vec::new();
        let metadata = columns.schema.metadata();
        let sequence_level = metadata.contains_key(crate::io::jsonl::SEQUENCE_LEVEL_KEY);
        if let Some(trainer) = metadata
            .get(crate::io::trainers::TRAINER_KEY)
            .and_then(|t| crate::io::trainers::Trainer::from_name(t))
        {
            notes.push(format!(
                "IN is {} dump, read as {} forms its groups (docs/trainers.md){}",
                trainer.a_title(),
                trainer.title(),
                if trainer.sequence_level() {
                    ": one score per row, no tokens, so each row counts as one valid token and the mask, tool-span, KL and mismatch checks do not apply"
                } else {
                    ""
                }
            ));
        } else if let Some(tag) = metadata.get(crate::io::jsonl::SEQUENCE_LEVEL_KEY) {
            let grouping = crate::io::jsonl::Writer::of_tag(tag)
                .unwrap_or(crate::io::jsonl::Writer::Legacy)
                .grouping();
            notes.push(format!(
                "IN is a verl JSONL dump (one score per row, no tokens): {grouping}; each row counts as one valid token, so the mask, tool-span, KL and mismatch checks do not apply"
            ));
        }
        if columns.uid.is_none() {
            notes.push("the file has no `uid` column: group checks are skipped".to_string());
        }
        if layout == Layout::Padded {
            notes.push(
                "--layout padded: trailing mask-0 tokens are taken for padding, so rows ending in a tool token are not counted".to_string(),
            );
        }
        let kl_old = if pipeline.bypass {
            TokenRole::RolloutLogProbs
        } else {
            TokenRole::OldLogProbs
        };
        let kl = present(kl_old) && present(TokenRole::RefLogProb);
        if pipeline.kl.is_some() {
            if !kl {
                let missing: Vec<&str> = [kl_old, TokenRole::RefLogProb]
                    .into_iter()
                    .filter(|&r| !present(r))
                    .map(TokenRole::column)
                    .collect();
                notes.push(format!(
                    "algorithm.use_kl_in_reward is on but the file has no {}: the KL shaping check is skipped",
                    missing.join(" or ")
                ));
                pipeline.kl = None;
            } else if matches!(pipeline.controller, KlController::Adaptive { .. }) {
                notes.push(
                    "the adaptive KL controller changes β from step to step; the KL shaping check uses the initial algorithm.kl_ctrl.kl_coef".to_string(),
                );
            }
        }
        let mismatch = present(TokenRole::OldLogProbs) && present(TokenRole::RolloutLogProbs);
        // bypass mode's in-loss rejection, measured on-policy (current log π = old_log_probs)
        let bypass_rs = config
            .loss
            .as_ref()
            .and_then(|l| l.bypass.as_ref())
            .filter(|b| !b.correction.rs.is_empty());
        if let Some(b) = bypass_rs {
            pipeline.bypass = false;
            pipeline.correction = Some(b.correction.clone());
        }
        let rs_configured = pipeline
            .correction
            .as_ref()
            .is_some_and(|c| !c.rs.is_empty());
        if rs_configured && !mismatch {
            notes.push(
                "rollout rejection (rollout_rs) is configured but the file lacks old_log_probs or rollout_log_probs: the rejection check is skipped".to_string(),
            );
        }
        let rejection = rs_configured && mismatch;
        match &mut pipeline.correction {
            Some(c) if rejection => c.is = None,
            _ => pipeline.correction = None,
        }
        notes.extend(config.notes.iter().cloned());
        let shaping = pipeline
            .kl
            .map(|k| (k.name().to_string(), pipeline.controller.value()));
        Ok(Checks {
            layout,
            score_column: match &columns.scores {
                ScoreSource::Tokens { name, .. } => name.clone(),
                ScoreSource::Scalar { .. } => "score".into(),
                ScoreSource::Absent => String::new(),
            },
            sequence_level,
            groups: columns.uid.is_some(),
            rollout_n: config.rollout_n,
            convention: config.algorithm.ext.convention,
            estimators: vec![config.algorithm.adv_estimator],
            read,
            own_nan_scores: false,
            kl_old: kl.then_some(kl_old),
            kl,
            mismatch,
            rejection,
            shaper: (shaping.is_some() || rejection).then_some(pipeline),
            shaping,
            notes,
            loss: config.loss.as_ref().map(|l| LossChecks {
                agg: l.agg,
                sapo: l.mode == LossMode::Sapo,
                bypass_rejection: bypass_rs.is_some() && rejection,
            }),
        })
    }

    /// Check for `config`'s estimator and columns too (another of the report's variants).
    pub fn add_variant(&mut self, config: &Config, columns: &InputColumns) {
        let estimator = config.algorithm.adv_estimator;
        if !self.estimators.contains(&estimator) {
            self.estimators.push(estimator);
        }
        self.read = match (self.read.take(), read_columns(config, columns)) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                Some(a)
            }
            _ => None,
        };
    }

    /// β of the KL penalty in the reward, when it runs.
    pub fn beta(&self) -> Option<f64> {
        self.shaping.as_ref().map(|&(_, beta)| beta)
    }
}

/// The columns `advcalc run` reads under `config` (its projection without metrics); `None`
/// when they cannot be resolved on this input (`run` would refuse it for a missing column).
fn read_columns(config: &Config, columns: &InputColumns) -> Option<BTreeSet<String>> {
    let schema = &columns.schema;
    let needs = Pipeline::new(&config.algorithm).needs();
    let read = InputColumns::resolve(schema.clone(), &needs, "IN").ok()?;
    Some(
        read.projection(false)
            .into_iter()
            .map(|i| schema.field(i).name().clone())
            .collect(),
    )
}
