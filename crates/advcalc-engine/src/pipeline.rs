//! The per-row stages before the estimator (docs/architecture.md's data flow): token scores → KL-shaped rewards →
//! rollout correction (rejected mask, IS weights). Built once from the validated config; the
//! same code shapes a row group in the statistics pass and again in the output pass.

use std::collections::BTreeMap;

use crate::config::{AlgoConfig, Extensions};
use crate::data::{FloatBuffer, RowGroup, TokenRole};
use crate::error::{Error, Result};
use crate::estimators::conventions;
use crate::estimators::{Column, Estimator, Rows, Settings};
use crate::io::schema::Needs;
use crate::loss::LossSpec;
use crate::shaping::correction::{self, Correction, IsLevel};
use crate::shaping::kl::{KlController, KlEstimator};

/// What a run computes, derived from the configuration.
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub estimator: Estimator,
    pub kl: Option<KlEstimator>,
    /// The controller as configured (its state is carried across steps by the driver).
    pub controller: KlController,
    /// Decoupled-mode rollout correction, when configured (verl's trainer YAML always has
    /// the section; with rollout_is and rollout_rs null it computes metrics only).
    pub correction: Option<Correction>,
    /// Bypass mode: `old_log_probs` are replaced by `rollout_log_probs`, nothing is corrected.
    pub bypass: bool,
    pub gamma: f64,
    pub lam: f64,
    pub norm_adv_by_std_in_grpo: bool,
    pub gdpo_keys: Vec<String>,
    pub gdpo_weights: Vec<f64>,
    /// advcalc's settings (`--convention`, `whiten_advantages`, ...), as validated.
    pub ext: Extensions,
    /// Stage 5, the loss (`advcalc loss`), when configured.
    pub loss: Option<LossStage>,
}

/// The loss stage of a run: its configuration, and whether IN carries the advantages it
/// replays (then stages 2–4 do not run: IN's mask, IS weights and advantages are used as
/// they are).
#[derive(Debug, Clone)]
pub struct LossStage {
    pub spec: LossSpec,
    pub given: bool,
}

/// Constants per training batch, with a default for steps not (yet) known.
#[derive(Debug, Clone, PartialEq)]
pub struct Constants {
    /// For a step not listed (the configured β, no normalisation).
    pub default: StepConstants,
    /// The steps' own constants.
    pub per_step: BTreeMap<Option<i64>, StepConstants>,
}

impl Constants {
    /// The same constants for every step.
    pub fn uniform(default: StepConstants) -> Self {
        Constants {
            default,
            per_step: BTreeMap::new(),
        }
    }

    /// The constants of `step`.
    pub fn get(&self, step: Option<i64>) -> StepConstants {
        self.per_step.get(&step).copied().unwrap_or(self.default)
    }
}

/// Per training batch constants that the stages need before they can run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepConstants {
    /// The KL coefficient β used for this step (before the controller's update).
    pub beta: f64,
    /// Batch mean of the IS weights, to divide by (`None`: not normalising, or not known yet).
    pub is_norm: Option<f64>,
}

impl Pipeline {
    /// The stages and estimator settings of a validated configuration (a projection: every
    /// setting was checked by `Config::load`).
    pub fn new(algo: &AlgoConfig) -> Pipeline {
        Self::with_loss(algo, None)
    }

    /// The stages with the loss stage (`spec`), which replays IN's advantages when `given`.
    pub fn with_loss(algo: &AlgoConfig, loss: Option<(&LossSpec, bool)>) -> Pipeline {
        let given = loss.is_some_and(|(_, given)| given);
        let (kl, controller) = match &algo.kl_in_reward {
            Some(k) if !given => (Some(k.estimator), k.controller.clone()),
            // without KL in the reward β is never used
            _ => (None, KlController::Fixed { value: 0.0 }),
        };
        // the reward components, for the estimator that reads them (gdpo)
        let gdpo = algo.adv_estimator.info().reads(Column::RewardComponents);
        Pipeline {
            ext: algo.ext.clone(),
            estimator: algo.adv_estimator,
            kl,
            controller,
            correction: algo
                .rollout_correction
                .decoupled()
                .cloned()
                .filter(|_| !given),
            bypass: algo.rollout_correction.bypass(),
            gamma: algo.gamma,
            lam: algo.lam,
            norm_adv_by_std_in_grpo: algo.norm_adv_by_std_in_grpo,
            gdpo_keys: if gdpo {
                algo.gdpo_reward_keys.clone()
            } else {
                Vec::new()
            },
            gdpo_weights: if gdpo {
                algo.gdpo_reward_weights.clone()
            } else {
                Vec::new()
            },
            loss: loss.map(|(spec, given)| LossStage {
                spec: spec.clone(),
                given,
            }),
        }
    }

    /// Whether IN's own advantages are replayed (stages 2–4 skipped).
    pub fn advantages_given(&self) -> bool {
        self.loss.as_ref().is_some_and(|l| l.given)
    }

    /// The settings the estimator reads.
    pub fn settings(&self) -> Settings<'_> {
        Settings {
            estimator: self.estimator,
            gamma: self.gamma,
            lam: self.lam,
            norm_adv_by_std_in_grpo: self.norm_adv_by_std_in_grpo,
            gdpo_weights: &self.gdpo_weights,
            ext: &self.ext,
        }
    }

    /// The columns this run needs: the estimator's declared ones and the stages'.
    pub fn needs(&self) -> Needs {
        let mut needs = if self.advantages_given() {
            Needs {
                purpose: "advcalc loss".into(),
                no_scores: true,
                tokens: vec![TokenRole::Advantages],
                if_present: vec![TokenRole::IsWeights],
                ..Default::default()
            }
        } else {
            self.advantage_needs()
        };
        if let Some(loss) = &self.loss {
            let old = if self.bypass {
                TokenRole::RolloutLogProbs
            } else {
                TokenRole::OldLogProbs
            };
            needs.tokens.extend([old, TokenRole::OldLogProbs]);
            if loss.spec.kl.is_some() {
                needs.tokens.push(TokenRole::RefLogProb);
            }
            needs.if_present.push(TokenRole::LogProbs);
            needs.tokens.sort();
            needs.tokens.dedup();
            needs.purpose = format!(
                "{} with the loss ({})",
                needs.purpose,
                loss.spec.mode.name()
            );
            needs
                .token_data
                .push("the loss needs the log-probs of every token".into());
            needs.loss = true;
        }
        needs
    }

    /// The advantage pipeline's columns (stages 1–4).
    fn advantage_needs(&self) -> Needs {
        let e = self.estimator;
        let mut tokens = Vec::new();
        let mut purpose = vec![format!("estimator {}", e.name())];
        if self.ext.convention != conventions::Convention::Verl && conventions::in_family(e) {
            purpose[0] += &format!(" (--convention {})", self.ext.convention.name());
        }
        let old_log_probs = if self.bypass {
            TokenRole::RolloutLogProbs
        } else {
            TokenRole::OldLogProbs
        };
        if self.kl.is_some() {
            tokens.extend([old_log_probs, TokenRole::RefLogProb]);
            purpose.push("KL in reward".into());
        }
        if self.correction.as_ref().is_some_and(|c| c.is_some_active()) {
            tokens.extend([TokenRole::OldLogProbs, TokenRole::RolloutLogProbs]);
            purpose.push("rollout correction".into());
        }
        let openrlhf_kl = e.is_openrlhf() && self.ext.openrlhf_kl().active();
        if openrlhf_kl {
            tokens.extend([old_log_probs, TokenRole::RefLogProb]);
            purpose.push("OpenRLHF's KL in the reward (openrlhf.kl_coef)".into());
        }
        let mut needs = Needs {
            optional: if self.correction.is_some() {
                vec![TokenRole::OldLogProbs, TokenRole::RolloutLogProbs]
            } else {
                Vec::new()
            },
            purpose: purpose.join(" with "),
            ..Default::default()
        };
        if self.ext.groups_by_prompt_ids(e) {
            needs.prompt_ids = true;
            needs.purpose += " (nemo.group_by: prompt_ids)";
        }
        for &column in e.info().columns {
            match column {
                Column::Uid => needs.uid = true,
                Column::Values => tokens.push(TokenRole::Values),
                Column::SumPiSquared => tokens.push(TokenRole::SumPiSquared),
                Column::OldLogProbs => tokens.push(old_log_probs),
                Column::RewardBaselines => needs.reward_baselines = true,
                Column::RewardComponents => needs.components = self.gdpo_keys.clone(),
            }
        }
        tokens.sort();
        tokens.dedup();
        needs.tokens = tokens;
        if let Some(what) = e.info().needs_tokens {
            needs
                .token_data
                .push(format!("estimator {} needs {what}", e.name()));
        }
        if self.kl.is_some() {
            needs.token_data.push(format!(
                "KL in reward needs {} and ref_log_prob",
                old_log_probs.column()
            ));
        }
        if openrlhf_kl {
            needs.token_data.push(format!(
                "OpenRLHF's KL in the reward (openrlhf.kl_coef > 0) needs {} and ref_log_prob",
                old_log_probs.column()
            ));
        }
        if self.ext.skyrl_normalizes(e) {
            needs.token_data.push(
                "skyrl.advantage_batch_normalize needs each row's tokens (it normalises over the padded batch)".into(),
            );
        }
        if self.correction.as_ref().is_some_and(|c| c.is_some_active()) {
            needs.token_data.push(
                "rollout correction (rollout_is / rollout_rs) needs old_log_probs and rollout_log_probs"
                    .into(),
            );
        }
        needs
    }

    /// Whether correction runs on this file: configured, decoupled, and the file has
    /// `rollout_log_probs` (verl's condition).
    pub fn correction_runs(&self, has_rollout: bool) -> Option<&Correction> {
        self.correction.as_ref().filter(|_| has_rollout)
    }

    /// verl's `old_log_probs` for this run: `rollout_log_probs` in bypass mode.
    pub fn old_log_probs<'g>(&self, group: &'g RowGroup) -> Option<&'g [f32]> {
        group.token(if self.bypass {
            TokenRole::RolloutLogProbs
        } else {
            TokenRole::OldLogProbs
        })
    }

    /// The columns a run computes into OUT (`io::schema::computed_columns`).
    pub fn computed_columns(&self, has_rollout: bool) -> Vec<&'static str> {
        crate::io::schema::computed_columns(
            !self.advantages_given(),
            self.is_weights(has_rollout),
            self.loss.as_ref().map(|l| l.spec.kl.is_some()),
        )
    }

    /// Whether IS weights are produced.
    pub fn is_weights(&self, has_rollout: bool) -> bool {
        self.correction_runs(has_rollout)
            .is_some_and(|c| c.is.is_some())
    }
}

/// The shaped tokens of one row group, flat like the group's columns.
#[derive(Debug, Clone, Default)]
pub struct Shaped {
    /// `token_level_rewards`: the scores themselves (shared, not copied) without KL.
    pub rewards: FloatBuffer,
    /// The mask after rejection: the input mask itself (shared) without RS.
    pub mask: FloatBuffer,
    /// IS weights (normalised when the step's factor is known).
    pub is_weights: Option<Vec<f32>>,
    /// Per row: Σ_t kld·m (0 without KL).
    pub kl_sum: Vec<f64>,
    /// Per row: the two partial sums of the IS batch-normalisation mean.
    pub is_norm_parts: Vec<(f64, f64)>,
}

impl Shaped {
    /// The estimator's view of the shaped row group.
    pub fn rows<'a>(
        &'a self,
        pipeline: &Pipeline,
        settings: &'a Settings<'a>,
        group: &'a RowGroup,
        file: &'a str,
    ) -> Rows<'a> {
        Rows {
            settings,
            group,
            rewards: &self.rewards,
            mask: &self.mask,
            is_weights: self.is_weights.as_deref(),
            old_log_probs: pipeline.old_log_probs(group),
            file,
        }
    }
}

/// Run stages 2 and 3 on every row of a group.
pub fn shape(
    pipeline: &Pipeline,
    group: &RowGroup,
    constants: &Constants,
    file: &str,
) -> Result<Shaped> {
    let rows = group.rows();
    let n = group.mask.values.len();
    let mask = &group.mask.values;
    let old = pipeline.old_log_probs(group);
    let mut out = Shaped {
        rewards: group.scores.clone(),
        mask: mask.clone(),
        is_weights: None,
        kl_sum: vec![0.0; rows],
        is_norm_parts: vec![(0.0, 0.0); rows],
    };
    let constant = |i: usize| -> Result<StepConstants> { Ok(constants.get(group.step_of(i))) };
    if let Some(estimator) = pipeline.kl {
        let (Some(old), Some(reference)) = (old, group.token(TokenRole::RefLogProb)) else {
            return Err(Error::data(format!(
                "{file}: KL in reward needs old_log_probs and ref_log_prob"
            )));
        };
        let mut rewards = vec![0.0f32; n];
        for i in 0..rows {
            let s = group.span(i);
            let beta = constant(i)?.beta as f32;
            out.kl_sum[i] = crate::shaping::kl::penalize_row(
                estimator,
                beta,
                &group.scores[s.clone()],
                &old[s.clone()],
                &reference[s.clone()],
                &mask[s.clone()],
                &mut rewards[s],
            );
        }
        out.rewards = rewards.into();
    }
    let rollout = group.token(TokenRole::RolloutLogProbs);
    if let (Some(c), Some(rollout), Some(old)) =
        (pipeline.correction_runs(rollout.is_some()), rollout, old)
    {
        // One sweep per row: its log ratio (in a buffer reused across rows), then rejection
        // and the IS weights from it, while the row is in cache.
        let mut rejected = (!c.rs.is_empty()).then(|| vec![0.0f32; n]);
        let mut weights = c.is.as_ref().map(|_| vec![0.0f32; n]);
        let mut log_ratio = Vec::new();
        for i in 0..rows {
            let s = group.span(i);
            let m = &mask[s.clone()];
            log_ratio.resize(s.len(), 0.0f32);
            correction::log_ratio_row(&old[s.clone()], &rollout[s.clone()], &mut log_ratio);
            if let Some(rejected) = &mut rejected {
                correction::reject_row(&c.rs, &log_ratio, m, &mut rejected[s.clone()]);
            }
            if let (Some(spec), Some(w)) = (&c.is, &mut weights) {
                let w = &mut w[s];
                correction::raw_weights_row(spec, &log_ratio, m, w);
                correction::truncate_weights(spec, w);
                let valid: f64 = m.iter().map(|&x| x as f64).sum();
                let wsum: f64 = w.iter().zip(m).map(|(&a, &b)| (a * b) as f64).sum();
                out.is_norm_parts[i] = match spec.level {
                    IsLevel::Token => (wsum, valid),
                    IsLevel::Sequence if valid > 0.0 => (wsum / (valid + 1e-8), 1.0),
                    IsLevel::Sequence => (0.0, 0.0),
                };
                if let Some(norm) = constant(i)?.is_norm {
                    w.iter_mut().for_each(|x| *x = (*x as f64 / norm) as f32);
                }
            }
        }
        if let Some(rejected) = rejected {
            out.mask = rejected.into();
        }
        out.is_weights = weights;
    }
    Ok(out)
}

/// The IS batch-normalisation divisor from the summed parts: `None` when it is ≤ 1e-8
/// (verl then leaves the weights as they are).
pub fn is_norm_factor(level: IsLevel, sum: f64, count: f64) -> Option<f64> {
    let mean = match level {
        IsLevel::Token => sum / (count + 1e-8),
        IsLevel::Sequence => sum / count.max(1e-8),
    };
    (mean > 1e-8).then_some(mean)
}
