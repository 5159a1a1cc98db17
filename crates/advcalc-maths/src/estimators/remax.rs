//! `remax`: reward-to-go minus the greedy response's reward (docs/reference/verl-0.9.1.md §5.12, verl
//! `compute_remax_outcome_advantage`).
//!
//! **Computes** `G_t = Σ_{u ≥ t} r_u·m_u` (torch's cumsum: f64 accumulator, each prefix
//! rounded to f32), `advantages = G − b·m` with `b = reward_baselines` (a scalar column),
//! `returns = G`. **Edge cases**: the advantage is **not** masked, so mask-0 positions before
//! the last valid reward hold G (quirk §9.3); rewards on masked positions are dropped.

use crate::error::Result;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL,
};

/// Reward-to-go over valid tokens, as `flip(cumsum(flip(r·m)))`.
pub fn reward_to_go(rewards: &[f32], mask: &[f32], out: &mut [f32]) {
    let mut acc = 0.0f64;
    for t in (0..rewards.len()).rev() {
        acc += (rewards[t] * mask[t]) as f64;
        out[t] = acc as f32;
    }
}

/// Advantages and returns of one row.
pub fn remax_row(rewards: &[f32], mask: &[f32], baseline: f32, adv: &mut [f32], ret: &mut [f32]) {
    reward_to_go(rewards, mask, ret);
    for t in 0..rewards.len() {
        adv[t] = ret[t] - baseline * mask[t];
    }
}

/// `-e remax` ([`Kind::Token`]).
pub struct Remax;

impl Estimate for Remax {
    const INFO: Info = Info {
        source: VERL,
        summary: "reward-to-go minus the greedy response's reward (advantages not masked)",
        kind: Kind::Token,
        columns: &[Column::RewardBaselines],
        settings: &[],
        weights_in_pass1: false,
        needs_tokens: Some("per-token rewards and the greedy response's reward (reward_baselines)"),
        rewards_under_mask: true,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: None,
            needs: Some("`reward_baselines` (scalar)"),
            returns: "reward-to-go G",
            whitening: "no",
            masked: false,
            masked_note: None,
            singleton: "n/a",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = ();
    type Options = ();

    fn batch(_: &TrainingBatch<'_>, _: &mut EstimatorPlan) -> Result<()> {
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, _: &EstimatorPlan) -> Result<Tokens> {
        let baselines = rows
            .group
            .reward_baselines
            .as_ref()
            .ok_or_else(|| rows.missing("reward_baselines"))?;
        let n = rows.mask.len();
        let (mut advantages, mut returns) = (vec![0.0f32; n], vec![0.0f32; n]);
        for (i, &baseline) in baselines.iter().enumerate() {
            let s = rows.span(i);
            remax_row(
                &rows.rewards[s.clone()],
                &rows.mask[s.clone()],
                baseline,
                &mut advantages[s.clone()],
                &mut returns[s],
            );
        }
        Ok(Tokens {
            advantages,
            returns: Some(returns),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference §5.12: r = [0,0,0,.5], m = [1,0,1,1], b = 1 → adv [−.5, .5, −.5, −.5].
    #[test]
    fn worked_example() {
        let (mut adv, mut ret) = ([0.0f32; 4], [0.0f32; 4]);
        remax_row(
            &[0.0, 0.0, 0.0, 0.5],
            &[1.0, 0.0, 1.0, 1.0],
            1.0,
            &mut adv,
            &mut ret,
        );
        assert_eq!(adv, [-0.5, 0.5, -0.5, -0.5]);
        assert_eq!(ret, [0.5; 4]);
    }
}
