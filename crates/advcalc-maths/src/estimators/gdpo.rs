//! `gdpo`: group reward-decoupled normalisation (docs/reference/verl-0.9.1.md §5.4, verl
//! `compute_gdpo_outcome_advantage`).
//!
//! **Computes**, for each reward component k named by `algorithm.gdpo_reward_keys` (scalar
//! columns), GRPO over the components' values (σ-normalised: the trainer never forwards the
//! norm flag), sums them with weights `gdpo_reward_weights` (default 1 each), and whitens the
//! masked sum over the batch: `advantages = returns = masked_whiten(Σ_k w_k·a_ik·m, m)·m`.
//! **Edge cases**: `token_level_rewards` (and so the KL penalty) is ignored once the keys are
//! set (quirk §9.11); fewer weights than keys is an error (verl: IndexError), extra weights
//! are ignored; a batch with ≤ 1 valid token is an error.

use crate::estimators::groups::Grouping;

use super::grpo::grpo;
use crate::error::Result;
use crate::estimators::reinforce_plus_plus_baseline::whitened;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL, broadcast_scalars,
};

/// The per-row weighted sum of per-component GRPO advantages, before whitening.
/// `components[k][i]` is component k of row i.
pub fn gdpo(components: &[Vec<f64>], weights: &[f64], grouping: &Grouping) -> Vec<f64> {
    let rows = grouping.group_of_row.len();
    let mut total = vec![0.0f64; rows];
    for (values, &w) in components.iter().zip(weights) {
        // verl holds the weights as f32
        let w = w as f32 as f64;
        for (t, a) in total.iter_mut().zip(grpo(values, grouping, true)) {
            *t += w * (a as f32 as f64);
        }
    }
    total
}

/// `-e gdpo`: one scalar per row ([`Kind::Outcome`]).
pub struct Gdpo;

impl Estimate for Gdpo {
    const INFO: Info = Info {
        source: VERL,
        summary: "GRPO per reward component, weighted sum, whitened over the batch",
        kind: Kind::Outcome,
        columns: &[Column::Uid, Column::RewardComponents],
        settings: &["gdpo_reward_keys", "gdpo_reward_weights"],
        weights_in_pass1: false,
        needs_tokens: Some(
            "each row's valid-token count (it whitens over the batch's valid tokens)",
        ),
        rewards_under_mask: false,
        family: Family::Independent,
        ignores: &[(
            "norm_adv_by_std_in_grpo",
            "divides by the group std whatever norm_adv_by_std_in_grpo says: verl 0.9.1's trainer never passes the setting to it, and advcalc does the same; use -e grpo for Dr. GRPO (no std)",
        )],
        overview: Overview {
            section: None,
            needs: Some("`uid`, one scalar column per `gdpo_reward_keys` entry"),
            returns: "= advantages",
            whitening: "GRPO per key, then batch",
            masked: true,
            masked_note: None,
            singleton: "per key as grpo, then whitened",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = ();
    type Options = ();

    fn batch(batch: &TrainingBatch<'_>, plan: &mut EstimatorPlan) -> Result<()> {
        let components: Vec<Vec<f64>> = batch
            .stats
            .components
            .iter()
            .map(|c| batch.rows.iter().map(|&r| c[r]).collect())
            .collect();
        let centred = gdpo(&components, batch.settings.gdpo_weights, &batch.grouping());
        batch.set_scalars(plan, whitened(batch, &centred)?);
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan) -> Result<Tokens> {
        Ok(broadcast_scalars(rows, plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimators::test_support::grouping;

    // Hand computation: one group of two, components [1, 0] and [0, 2], weights [1, 0.5]:
    // GRPO_0 = ±1/(√0.5 + 1e-6), GRPO_1 = ∓(1/(√2 + 1e-6))… → row sums before whitening.
    #[test]
    fn weighted_sum_of_grpo() {
        let g = grouping(&["x", "x"]);
        let s = gdpo(&[vec![1.0, 0.0], vec![0.0, 2.0]], &[1.0, 0.5], &g);
        let a0 = 0.5 / (0.5f64.sqrt() + 1e-6);
        let a1 = 1.0 / (2f64.sqrt() + 1e-6);
        assert!((s[0] - (a0 - 0.5 * a1)).abs() < 1e-6);
        assert!((s[1] - (-a0 + 0.5 * a1)).abs() < 1e-6);
    }
}
