//! `turn_gae`: turn-level GAE of the agent-RL tutorial — GAE over the calls of a row, one
//! value and one summed reward per call, each call's advantage broadcast to its tokens
//! (`docs/conventions.md` A3).
//!
//! **Computes**, per row (f64, written as f32):
//! ```text
//! calls  = maximal runs [a_k, b_k) of m == 1, k = 0..K−1, in order
//! v_k    = V[a_k]                        the value at the call's FIRST token
//! R_k    = Σ_{t ∈ [a_k, b_k)} r_t       rewards summed per call
//! A_K = v_K = 0                          no bootstrap after the last call
//! δ_k    = R_k + γ·v_{k+1} − v_k;   A_k = δ_k + γλ·A_{k+1}      (k = K−1 .. 0)
//! advantages[t] = A_k,  returns[t] = A_k + v_k   for t in call k;  0 elsewhere
//! ```
//! **Inputs**: `token_level_rewards`, `values`, the response mask. **Parameters**: γ
//! (`gamma`), λ (`lam`), each applied once per call, not per token.
//! **Edge cases**: values at a call's other tokens and at tool tokens are ignored; a reward on
//! a mask-0 position is dropped; a row without a policy token is all 0; nothing is whitened
//! or clipped. The value read (first token), the returns `A_k + v_k` and the dropped tool
//! rewards are advcalc choices. **Source**: the agent-RL tutorial's description (the issue);
//! there is no public source file. RAGEN's `compute_bi_level_gae_advantage_return` is a
//! different (bi-level, whitened) algorithm.

use crate::data::TokenRole;
use crate::error::Result;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
};

/// Advantages and returns of one row.
pub fn turn_gae(
    rewards: &[f32],
    values: &[f32],
    mask: &[f32],
    gamma: f64,
    lam: f64,
    adv: &mut [f32],
    ret: &mut [f32],
) {
    let n = rewards.len();
    adv[..n].fill(0.0);
    ret[..n].fill(0.0);
    // calls as (start, end), in order
    let mut calls = Vec::new();
    let mut t = 0;
    while t < n {
        if mask[t] != 0.0 {
            let start = t;
            while t < n && mask[t] != 0.0 {
                t += 1;
            }
            calls.push((start, t));
        } else {
            t += 1;
        }
    }
    let mut next_value = 0.0f64;
    let mut last = 0.0f64;
    for &(a, b) in calls.iter().rev() {
        let v = values[a] as f64;
        let reward: f64 = rewards[a..b].iter().map(|&x| x as f64).sum();
        last = reward + gamma * next_value - v + gamma * lam * last;
        adv[a..b].fill(last as f32);
        ret[a..b].fill((last + v) as f32);
        next_value = v;
    }
}

/// `-e turn_gae` ([`Kind::Token`]).
pub struct TurnGae;

impl Estimate for TurnGae {
    const INFO: Info = Info {
        source: "agent-RL tutorial",
        summary: "GAE over calls (runs of policy tokens): one value and one summed reward per call",
        kind: Kind::Token,
        columns: &[Column::Values],
        settings: &["gamma", "lam"],
        weights_in_pass1: false,
        needs_tokens: Some(
            "per-token rewards, the calls of the response mask and the critic's values (values)",
        ),
        rewards_under_mask: true,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: Some("A3"),
            needs: None,
            returns: "A_k + v_k on call tokens",
            whitening: "no",
            masked: true,
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
        let s = rows.settings;
        let values = rows.token(TokenRole::Values)?;
        let n = rows.mask.len();
        let (mut advantages, mut returns) = (vec![0.0f32; n], vec![0.0f32; n]);
        for i in 0..rows.rows() {
            let span = rows.span(i);
            turn_gae(
                &rows.rewards[span.clone()],
                &values[span.clone()],
                &rows.mask[span.clone()],
                s.gamma,
                s.lam,
                &mut advantages[span.clone()],
                &mut returns[span],
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
    use crate::estimators::test_support::assert_close;

    const M: [f32; 10] = [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0];
    const R: [f32; 10] = [0.0, -0.1, 0.0, 0.0, 0.0, 0.0, -0.1, 0.0, 0.0, 0.9];
    const V: [f32; 10] = [0.5, 0.4, 9.0, 9.0, 9.0, 0.6, 0.7, 9.0, 9.0, 0.8];

    fn run(r: &[f32], v: &[f32], m: &[f32], g: f64, l: f64) -> (Vec<f32>, Vec<f32>) {
        let (mut a, mut ret) = (vec![9.0; r.len()], vec![9.0; r.len()]);
        turn_gae(r, v, m, g, l, &mut a, &mut ret);
        (a, ret)
    }

    // The issue's row: calls {0,1},{5,6},{9}; v = [.5,.6,.8], R = [−.1,−.1,.9].
    // A₂ = .9−.8 = .1; A₁ = −.1+.8−.6+.1 = .2; A₀ = −.1+.6−.5+.2 = .2.
    #[test]
    fn issue_row_gamma_one_lambda_one() {
        let (a, ret) = run(&R, &V, &M, 1.0, 1.0);
        assert_close(&a, &[0.2, 0.2, 0.0, 0.0, 0.0, 0.2, 0.2, 0.0, 0.0, 0.1]);
        assert_close(&ret, &[0.7, 0.7, 0.0, 0.0, 0.0, 0.8, 0.8, 0.0, 0.0, 0.9]);
    }

    // λ = 0: δ₀ = −.1+.6−.5 = 0, δ₁ = −.1+.8−.6 = .1, δ₂ = .1.
    #[test]
    fn issue_row_lambda_zero() {
        let (a, ret) = run(&R, &V, &M, 1.0, 0.0);
        assert_close(&a, &[0.0, 0.0, 0.0, 0.0, 0.0, 0.1, 0.1, 0.0, 0.0, 0.1]);
        assert_close(&ret, &[0.5, 0.5, 0.0, 0.0, 0.0, 0.7, 0.7, 0.0, 0.0, 0.9]);
    }

    // γ = .9, λ = .95: A₁ = .02 + .855·.1 = .1055; A₀ = −.06 + .855·.1055 = .0302025.
    #[test]
    fn issue_row_discounted() {
        let (a, _) = run(&R, &V, &M, 0.9, 0.95);
        assert_close(
            &a,
            &[
                0.0302025, 0.0302025, 0.0, 0.0, 0.0, 0.1055, 0.1055, 0.0, 0.0, 0.1,
            ],
        );
    }

    // conventions.md T7: the value at a call's second token (9) is ignored.
    #[test]
    fn only_the_first_value_of_a_call_counts() {
        let m = [1.0, 1.0, 0.0, 0.0, 1.0, 1.0];
        let r = [0.0, 0.2, 0.0, 0.0, 0.0, 1.0];
        let v = [0.3, 9.0, 9.0, 9.0, 0.6, 9.0];
        let (a, ret) = run(&r, &v, &m, 1.0, 1.0);
        assert_close(&a, &[0.9, 0.9, 0.0, 0.0, 0.4, 0.4]);
        assert_close(&ret, &[1.2, 1.2, 0.0, 0.0, 1.0, 1.0]);
        let (a, _) = run(&r, &v, &m, 0.5, 0.5);
        assert_close(&a, &[0.3, 0.3, 0.0, 0.0, 0.4, 0.4]);
    }

    #[test]
    fn a_row_without_policy_tokens_is_zero() {
        let (a, ret) = run(&[1.0, 2.0], &[3.0, 4.0], &[0.0, 0.0], 1.0, 1.0);
        assert_eq!((a, ret), (vec![0.0, 0.0], vec![0.0, 0.0]));
    }
}
