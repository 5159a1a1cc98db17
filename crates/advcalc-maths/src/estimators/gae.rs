//! `gae`: generalised advantage estimation with a critic (docs/reference/verl-0.9.1.md §5.1, verl
//! `compute_gae_advantage_return`).
//!
//! **Computes**, right to left over a row (f32, as torch):
//! ```text
//! δ_t      = r_t + γ·nextv − V_t
//! g_t      = δ_t + (γλ)·lastgae
//! nextv    = V_t·m_t + (1 − m_t)·nextv        (tool tokens are skipped)
//! lastgae  = g_t·m_t + (1 − m_t)·lastgae
//! A_raw[t] = lastgae;   returns = A_raw + V
//! advantages = masked_whiten(A_raw, m)       over the whole batch, NOT re-masked
//! ```
//! **Inputs**: `token_level_rewards`, `values`, mask. **Parameters**: γ (`gamma`), λ (`lam`);
//! γλ is multiplied in f64 first, as Python does. **Edge cases**: the value past the end
//! bootstraps as 0; masked positions carry the next valid token's A_raw (0 after the last),
//! so padding and tool tokens get whitened values, not 0 (quirk §9.3); rewards on masked
//! positions are dropped (§9.2); a batch with ≤ 1 valid token is an error.
//!
//! **`whiten_advantages: false`** (advcalc extension; the agent-RL tutorial's "GAE as
//! computed", `docs/conventions.md` A2): `advantages = A_raw · m` — not whitened, 0 at mask-0
//! positions, so a value at a tool position never reaches the output (it never enters a δ
//! either: `nextv` skips it). `returns = A_raw + V` as verl. No batch statistics, so no
//! "≤ 1 valid token" error.

use crate::data::TokenRole;
use crate::error::Result;
use crate::estimators::moments::{Moments, RowMoments, StepWhitening};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL,
};

/// A_raw of one row.
pub fn gae_row(
    rewards: &[f32],
    values: &[f32],
    mask: &[f32],
    gamma: f64,
    lam: f64,
    a_raw: &mut [f32],
) {
    let g = gamma as f32;
    let gl = (gamma * lam) as f32;
    let mut nextv = 0.0f32;
    let mut lastgae = 0.0f32;
    for t in (0..rewards.len()).rev() {
        let delta = rewards[t] + g * nextv - values[t];
        let gae = delta + gl * lastgae;
        let m = mask[t];
        nextv = values[t] * m + (1.0 - m) * nextv;
        lastgae = gae * m + (1.0 - m) * lastgae;
        a_raw[t] = lastgae;
    }
}

/// `whiten_advantages: false`: the row's A_raw under its mask.
pub fn unwhitened(a_raw: &[f32], mask: &[f32], out: &mut [f32]) {
    for ((o, &a), &m) in out.iter_mut().zip(a_raw).zip(mask) {
        *o = a * m;
    }
}

/// Row `i`'s A_raw into `out` (both passes compute it: pass 1 for the batch moments).
fn a_raw_of_row(rows: &Rows<'_>, values: &[f32], i: usize, out: &mut Vec<f32>) {
    let s = rows.settings;
    let span = rows.span(i);
    out.resize(span.len(), 0.0f32);
    gae_row(
        &rows.rewards[span.clone()],
        &values[span.clone()],
        &rows.mask[span],
        s.gamma,
        s.lam,
        out,
    );
}

/// `-e gae` ([`Kind::Token`]).
pub struct Gae;

impl Estimate for Gae {
    const INFO: Info = Info {
        source: VERL,
        summary: "generalised advantage estimation with a critic; advantages whitened over the batch (not re-masked)",
        kind: Kind::Token,
        columns: &[Column::Values],
        settings: &["gamma", "lam", "whiten_advantages"],
        weights_in_pass1: false,
        needs_tokens: Some("per-token rewards and the critic's values (values)"),
        rewards_under_mask: true,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: None,
            needs: None,
            returns: "A_raw + V",
            whitening: "batch",
            masked: false,
            masked_note: None,
            singleton: "n/a (no groups)",
            variants: &[(
                "whiten_advantages: false",
                Overview {
                    section: Some("A2"),
                    needs: None,
                    returns: "A_raw + V",
                    whitening: "no",
                    masked: true,
                    masked_note: None,
                    singleton: "n/a",
                    variants: &[],
                },
            )],
        },
    };
    type Stats = RowMoments;
    type Plan = StepWhitening;
    type Options = ();

    fn row_stats(rows: &Rows<'_>, stats: &mut RowMoments) -> Result<()> {
        let s = rows.settings;
        // gae without whitening needs no batch statistics
        if !s.ext.whiten_advantages {
            return Ok(());
        }
        let values = rows.token(TokenRole::Values)?;
        let mut a_raw = Vec::new();
        for i in 0..rows.rows() {
            a_raw_of_row(rows, values, i, &mut a_raw);
            stats
                .0
                .push(Moments::of_valid(&a_raw, &rows.mask[rows.span(i)]));
        }
        Ok(())
    }

    fn batch(
        batch: &TrainingBatch<'_, RowMoments>,
        plan: &mut EstimatorPlan<StepWhitening>,
    ) -> Result<()> {
        if batch.settings.ext.whiten_advantages {
            let w = batch.whiten(&batch.merged_moments())?;
            plan.own.insert(batch.step, w);
        }
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<StepWhitening>) -> Result<Tokens> {
        let s = rows.settings;
        let values = rows.token(TokenRole::Values)?;
        let n = rows.mask.len();
        let (mut advantages, mut returns) = (vec![0.0f32; n], vec![0.0f32; n]);
        let mut a_raw = Vec::new();
        for i in 0..rows.rows() {
            let span = rows.span(i);
            let m = &rows.mask[span.clone()];
            a_raw_of_row(rows, values, i, &mut a_raw);
            for (j, t) in span.clone().enumerate() {
                returns[t] = a_raw[j] + values[t];
            }
            if s.ext.whiten_advantages {
                let w = plan.own.of(rows.group.step_of(i));
                for (j, t) in span.enumerate() {
                    advantages[t] = w.apply(a_raw[j]);
                }
            } else {
                unwhitened(&a_raw, m, &mut advantages[span]);
            }
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

    fn unwhitened_row(lam: f64) -> Vec<f32> {
        let mut a_raw = [0.0f32; 10];
        gae_row(&R, &V, &M, 1.0, lam, &mut a_raw);
        let mut out = vec![9.0f32; 10];
        unwhitened(&a_raw, &M, &mut out);
        out
    }

    // The issue's worked example, γ = λ = 1: A = RTG − V′ = [.2,.3,0,0,0,.2,.1,0,0,.1].
    #[test]
    fn issue_example_unwhitened_lambda_one() {
        assert_close(
            &unwhitened_row(1.0),
            &[0.2, 0.3, 0.0, 0.0, 0.0, 0.2, 0.1, 0.0, 0.0, 0.1],
        );
    }

    // λ = 0: δ over policy tokens only; the 9s at tool positions do not leak in.
    #[test]
    fn issue_example_unwhitened_lambda_zero() {
        assert_close(
            &unwhitened_row(0.0),
            &[-0.1, 0.1, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.1],
        );
    }

    // conventions.md T6: verl's verified input, not whitened.
    #[test]
    fn verified_input_unwhitened() {
        let r = [[0.0f32, 0.0, 1.0, 0.0], [0.0, 0.5, 0.0, 0.0]];
        let v = [[0.1f32, 0.2, 0.3, 0.0], [0.4, 0.5, 0.0, 0.0]];
        let m = [[1.0f32, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]];
        let expect = [[0.6515675, 0.6685, 0.7, 0.0], [0.05, 0.0, 0.0, 0.0]];
        for i in 0..2 {
            let mut a = [0.0f32; 4];
            gae_row(&r[i], &v[i], &m[i], 0.9, 0.95, &mut a);
            let mut out = [0.0f32; 4];
            unwhitened(&a, &m[i], &mut out);
            assert_close(&out, &expect[i]);
        }
    }
    use crate::estimators::moments::{Moments, Whitening};

    // Reference §5.1: γ = .9, λ = .95, two rows.
    #[test]
    fn worked_example() {
        let r = [[0.0f32, 0.0, 1.0, 0.0], [0.0, 0.5, 0.0, 0.0]];
        let v = [[0.1f32, 0.2, 0.3, 0.0], [0.4, 0.5, 0.0, 0.0]];
        let m = [[1.0f32, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]];
        let mut a = [[0.0f32; 4]; 2];
        let mut moments = Moments::default();
        for i in 0..2 {
            gae_row(&r[i], &v[i], &m[i], 0.9, 0.95, &mut a[i]);
            for t in 0..4 {
                if m[i][t] == 1.0 {
                    moments.push(a[i][t] as f64);
                }
            }
        }
        let ret: Vec<f32> = (0..8).map(|k| a[k / 4][k % 4] + v[k / 4][k % 4]).collect();
        let e_ret: [f32; 8] = [
            0.751567543,
            0.868499994,
            1.0,
            0.0,
            0.449999988,
            0.5,
            0.0,
            0.0,
        ];
        crate::test_support::assert_close("gae ret", &ret, &e_ret, 1e-6, 0.0);
        let w = Whitening::from_moments(&moments).unwrap();
        let adv: Vec<f32> = (0..8).map(|k| w.apply(a[k / 4][k % 4])).collect();
        let e_adv: [f32; 8] = [
            0.667317808,
            0.714883208,
            0.803370416,
            -1.16301346,
            -1.02255762,
            -1.16301346,
            -1.16301346,
            -1.16301346,
        ];
        crate::test_support::assert_close("gae adv", &adv, &e_adv, 2e-6, 0.0);
    }

    // Reference §5.1: V = [.5, 9, 9, .7, 0], m = [1,0,0,1,0], r_3 = 1 → returns [1, 9.3, 9.3, 1, 0]
    // (γ = λ = 1).
    #[test]
    fn masked_values_are_skipped() {
        let v = [0.5f32, 9.0, 9.0, 0.7, 0.0];
        let mut a = [0.0f32; 5];
        gae_row(
            &[0.0, 0.0, 0.0, 1.0, 0.0],
            &v,
            &[1.0, 0.0, 0.0, 1.0, 0.0],
            1.0,
            1.0,
            &mut a,
        );
        let ret: Vec<f32> = a.iter().zip(v).map(|(a, v)| a + v).collect();
        let e: [f32; 5] = [1.0, 9.3, 9.3, 1.0, 0.0];
        crate::test_support::assert_close("gae ret", &ret, &e, 1e-6, 0.0);
    }
}
