//! `reinforce`: the agent-RL tutorial's REINFORCE return — a discounted return-to-go over the
//! policy tokens of a masked sequence, carried across tool spans, not whitened
//! (`docs/conventions.md` A1).
//!
//! **Computes**, right to left over one row (f32):
//! ```text
//! run = 0
//! m_t = 1:  run = r_t + γ·run;  G_t = run      (γ applied once per policy token)
//! m_t = 0:  G_t = 0                            (run carried unchanged: tool tokens take no
//!                                               discount step and reset nothing)
//! advantages = returns = G
//! ```
//! **Inputs**: `token_level_rewards`, the response mask. **Parameters**: γ (`gamma`).
//! **Edge cases**: a reward on a mask-0 (tool) position is dropped (advcalc choice, as verl's
//! `gae` and 0.9 `reinforce_plus_plus`); a row with no policy token is all 0; no batch
//! statistics, so no "≤ 1 valid token" error. **Source**: the agent-RL tutorial's worked
//! example (the issue); it equals verl 0.9's `reinforce_plus_plus` returns (reference
//! §5.11) without the whitening.

use crate::error::Result;
use crate::estimators::{
    Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
};

/// The masked discounted return-to-go of one row.
pub fn reinforce(rewards: &[f32], mask: &[f32], gamma: f64, out: &mut [f32]) {
    let g = gamma as f32;
    let mut run = 0.0f32;
    for t in (0..rewards.len()).rev() {
        if mask[t] != 0.0 {
            run = rewards[t] + g * run;
            out[t] = run;
        } else {
            out[t] = 0.0;
        }
    }
}

/// `-e reinforce` ([`Kind::Token`]).
pub struct Reinforce;

impl Estimate for Reinforce {
    const INFO: Info = Info {
        source: "agent-RL tutorial",
        summary: "discounted return-to-go carried across tool spans, not whitened",
        kind: Kind::Token,
        columns: &[],
        settings: &["gamma"],
        weights_in_pass1: false,
        needs_tokens: Some("per-token rewards (a return-to-go over the policy tokens)"),
        rewards_under_mask: true,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: Some("A1"),
            needs: None,
            returns: "= advantages",
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
        let mut advantages = vec![0.0f32; rows.mask.len()];
        for i in 0..rows.rows() {
            let s = rows.span(i);
            reinforce(
                &rows.rewards[s.clone()],
                &rows.mask[s.clone()],
                rows.settings.gamma,
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
    use crate::estimators::test_support::assert_close;

    const M: [f32; 10] = [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0];
    const R: [f32; 10] = [0.0, -0.1, 0.0, 0.0, 0.0, 0.0, -0.1, 0.0, 0.0, 0.9];

    // The issue's worked example, γ = 1: [.7,.7,0,0,0,.8,.8,0,0,.9].
    #[test]
    fn issue_example_gamma_one() {
        let mut g = [0.0f32; 10];
        reinforce(&R, &M, 1.0, &mut g);
        assert_close(&g, &[0.7, 0.7, 0.0, 0.0, 0.0, 0.8, 0.8, 0.0, 0.0, 0.9]);
    }

    // γ = .9: .9; −.1+.81 = .71; .639; −.1+.5751 = .4751; .42759 (issue: .428, .475).
    #[test]
    fn issue_example_gamma_point_nine() {
        let mut g = [0.0f32; 10];
        reinforce(&R, &M, 0.9, &mut g);
        assert_close(
            &g,
            &[0.42759, 0.4751, 0.0, 0.0, 0.0, 0.639, 0.71, 0.0, 0.0, 0.9],
        );
        assert!((g[0] - 0.428).abs() < 5e-4 && (g[1] - 0.475).abs() < 5e-4);
    }

    // conventions.md T5: a reward of 2 on a masked position is dropped.
    #[test]
    fn reward_on_a_tool_token_is_dropped() {
        let mut g = [0.0f32; 6];
        reinforce(
            &[0.0, 0.0, 2.0, 0.0, 0.0, 0.0],
            &[1.0, 1.0, 0.0, 1.0, 0.0, 0.0],
            0.5,
            &mut g,
        );
        assert_eq!(g, [0.0; 6]);
        reinforce(
            &[0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
            &[1.0, 1.0, 0.0, 0.0, 1.0, 0.0],
            0.5,
            &mut g,
        );
        assert_eq!(g, [0.25, 0.5, 0.0, 0.0, 1.0, 0.0]);
    }
}
