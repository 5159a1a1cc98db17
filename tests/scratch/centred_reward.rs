//! `centred_reward`: a scratch estimator, never shipped. `scripts/scratch-estimator` adds it
//! to a copy of the workspace (this file plus its registry lines in `estimators/mod.rs`,
//! nothing else) and runs it through the CLI, to show that a token-level estimator with a
//! setting and pass-1 state of its own needs nothing more (`docs/architecture.md`, "Adding
//! an estimator").
//!
//! **Computes**, per token of a row in step S: `scale · (r_t − μ_S) · m_t`, where μ_S is the
//! step's mean reward per valid token, Σ_rows Σ_t r·m / Σ_rows Σ_t m (0 for a step without a
//! valid token); returns equal advantages. **Inputs**: `token_level_rewards`, the response
//! mask. **Parameters**: `centred_reward.scale` (default 1). **Edge cases**: mask-0 tokens
//! get 0 and do not count in μ.

use std::collections::BTreeMap;
use std::hash::Hasher;

use crate::error::Result;
use crate::estimators::fingerprint::Encode;
use crate::estimators::state::{OwnPlan, OwnStats, Reading, StateValue, Written, malformed};
use crate::estimators::{
    Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
};

/// Σ r·m of one row.
pub fn masked_sum(rewards: &[f32], mask: &[f32]) -> f64 {
    rewards.iter().zip(mask).map(|(&r, &m)| (r * m) as f64).sum()
}

/// μ from the rows' masked sums and valid counts (0 without a valid token).
pub fn step_mean(sums: &[f64], valid: &[f64]) -> f64 {
    let valid: f64 = valid.iter().sum();
    if valid > 0.0 {
        sums.iter().sum::<f64>() / valid
    } else {
        0.0
    }
}

/// One row's advantages: `scale · (r_t − mean) · m_t`.
pub fn centre(rewards: &[f32], mask: &[f32], mean: f64, scale: f64, out: &mut [f32]) {
    let (mean, scale) = (mean as f32, scale as f32);
    for t in 0..out.len() {
        out[t] = scale * (rewards[t] - mean) * mask[t];
    }
}

/// Pass 1: each row's Σ r·m, in row order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RewardSums(pub Vec<f64>);

impl OwnStats for RewardSums {
    fn append(&mut self, next: Self) {
        self.0.extend(next.0);
    }
    fn write(&self, out: &mut Written) {
        out.f64s("reward_sum", &self.0);
    }
    fn read(input: &Reading) -> Result<Self> {
        Ok(RewardSums(input.f64s("reward_sum")?))
    }
}

/// The plan part: each step's mean.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepMeans(pub BTreeMap<Option<i64>, f64>);

impl OwnPlan for StepMeans {
    fn new(_: usize) -> Self {
        StepMeans::default()
    }
    fn restrict(&self, _: &[usize], steps: &[Option<i64>]) -> Self {
        StepMeans(steps.iter().filter_map(|s| Some((*s, *self.0.get(s)?))).collect())
    }
    fn write(&self, out: &mut Written) {
        let entries = self
            .0
            .iter()
            .map(|(s, m)| StateValue::from(vec![(*s).into(), m.to_bits().into()]));
        out.value("means", entries.collect());
    }
    fn read(input: &Reading) -> Result<Self> {
        let entries = input
            .value("means")
            .as_list()
            .ok_or_else(|| malformed("means"))?;
        let mut means = BTreeMap::new();
        for e in entries {
            let bits = e.at(1).as_u64().ok_or_else(|| malformed("means"))?;
            means.insert(e.at(0).step()?, f64::from_bits(bits));
        }
        Ok(StepMeans(means))
    }
    fn fingerprint<H: Hasher>(&self, _: usize, h: &mut H) {
        self.0.encode(h);
    }
}

crate::settings! {
    /// centred_reward's own settings.
    pub struct Options {
        /// `centred_reward.scale`: the factor on the advantages.
        "centred_reward.scale" => scale: f64 = 1.0,
    }
}

/// `-e centred_reward` ([`Kind::Token`]).
pub struct CentredReward;

impl Estimate for CentredReward {
    const INFO: Info = Info {
        source: "scratch",
        summary: "each token's reward minus its step's mean reward per valid token, scaled",
        kind: Kind::Token,
        columns: &[],
        settings: &[],
        weights_in_pass1: false,
        needs_tokens: Some("per-token rewards"),
        rewards_under_mask: false,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: None,
            needs: None,
            returns: "= advantages",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "n/a",
            variants: &[],
        },
    };
    type Stats = RewardSums;
    type Plan = StepMeans;
    type Options = Options;

    fn row_stats(rows: &Rows<'_>, stats: &mut RewardSums) -> Result<()> {
        for i in 0..rows.rows() {
            let s = rows.span(i);
            stats
                .0
                .push(masked_sum(&rows.rewards[s.clone()], &rows.mask[s]));
        }
        Ok(())
    }

    fn batch(
        batch: &TrainingBatch<'_, RewardSums>,
        plan: &mut EstimatorPlan<StepMeans>,
    ) -> Result<()> {
        let sums: Vec<f64> = batch.rows.iter().map(|&r| batch.own.0[r]).collect();
        plan.own
            .0
            .insert(batch.step, step_mean(&sums, &batch.valid()));
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<StepMeans>) -> Result<Tokens> {
        let scale = rows.settings.ext.estimators.centred_reward.scale;
        let mut advantages = vec![0.0f32; rows.mask.len()];
        for i in 0..rows.rows() {
            let s = rows.span(i);
            let mean = plan.own.0[&rows.group.step_of(i)];
            centre(
                &rows.rewards[s.clone()],
                &rows.mask[s.clone()],
                mean,
                scale,
                &mut advantages[s],
            );
        }
        Ok(Tokens {
            advantages,
            returns: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // By hand: rows [1, 2 | mask 1, 1] and [3, 9 | mask 1, 0]: sums 3 and 3, valid 2 and 1,
    // μ = 6/3 = 2; scale 0.5: [-0.5, 0], [0.5, 0].
    #[test]
    fn a_step_by_hand() {
        let sums = [masked_sum(&[1.0, 2.0], &[1.0, 1.0]), masked_sum(&[3.0, 9.0], &[1.0, 0.0])];
        assert_eq!(sums, [3.0, 3.0]);
        let mean = step_mean(&sums, &[2.0, 1.0]);
        assert_eq!(mean, 2.0);
        let mut out = [0.0f32; 2];
        centre(&[1.0, 2.0], &[1.0, 1.0], mean, 0.5, &mut out);
        assert_eq!(out, [-0.5, 0.0]);
        centre(&[3.0, 9.0], &[1.0, 0.0], mean, 0.5, &mut out);
        assert_eq!(out, [0.5, 0.0]);
        assert_eq!(step_mean(&[0.0], &[0.0]), 0.0);
    }
}
