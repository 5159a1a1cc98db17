//! `reinforce_plus_plus`: discounted return-to-go, whitened over the batch (docs/reference/verl-0.9.1.md §5.11,
//! verl 0.9 `compute_reinforce_plus_plus_outcome_advantage`).
//!
//! **Computes**, right to left over a row (f32):
//! ```text
//! new   = r_t + γ·run
//! ret_t = new·m_t
//! run   = new·m_t + run·(1 − m_t)       masked spans are transparent: no discount, no reset
//! advantages = masked_whiten(ret, m)·m;  returns = ret
//! ```
//! **Parameters**: γ (`gamma`). **Edge cases**: rewards on masked positions are dropped
//! (§9.1); a batch with ≤ 1 valid token is an error.
//!
//! **`mask_mode`** (advcalc extension, `docs/conventions.md` B6): `carry` (default) is the
//! recursion above, verl ≥ 0.9 (commit `8a1bf6d`, PR #7300). `reset` is verl v0.7–v0.8 before
//! that commit, and SkyRL's `reinforce++` (`skyrl/backends/skyrl_train/utils/ppo_utils.py`):
//! ```text
//! run = r_t + γ·run;  ret_t = run (NOT masked);  run = run·m_t   (reset after a mask-0 token)
//! ```
//! so a reward never crosses an observation span; a reward on a mask-0 position is seen by the
//! policy tokens between it and the next mask-0 position to its right. The whitening is the
//! same (`masked_whiten(ret, m)·m`).

use crate::error::Result;
use crate::estimators::moments::{Moments, RowMoments, StepWhitening};
use crate::estimators::{
    Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch, VERL,
};

/// How the return treats mask-0 (tool/observation) positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaskMode {
    /// verl ≥ 0.9: masked spans are transparent.
    #[default]
    Carry,
    /// verl < 0.9, SkyRL: the running return resets after every mask-0 position.
    Reset,
}

impl MaskMode {
    /// `mask_mode`'s spelling.
    pub fn name(self) -> &'static str {
        match self {
            MaskMode::Carry => "carry",
            MaskMode::Reset => "reset",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "carry" => Some(MaskMode::Carry),
            "reset" => Some(MaskMode::Reset),
            _ => None,
        }
    }
}

/// `mask_mode` reads one of these names.
impl crate::settings::Named for MaskMode {
    const ALL: &'static [Self] = &[MaskMode::Carry, MaskMode::Reset];
    fn name(self) -> &'static str {
        MaskMode::name(self)
    }
}

/// The returns of one row under `mode`.
pub fn returns_row(mode: MaskMode, rewards: &[f32], mask: &[f32], gamma: f64, ret: &mut [f32]) {
    match mode {
        MaskMode::Carry => reinforce_plus_plus_row(rewards, mask, gamma, ret),
        MaskMode::Reset => reset_row(rewards, mask, gamma, ret),
    }
}

/// `mask_mode: reset`: verl < 0.9's recursion (returns not masked).
pub fn reset_row(rewards: &[f32], mask: &[f32], gamma: f64, ret: &mut [f32]) {
    let g = gamma as f32;
    let mut run = 0.0f32;
    for t in (0..rewards.len()).rev() {
        run = rewards[t] + g * run;
        ret[t] = run;
        run *= mask[t];
    }
}

/// The masked discounted returns of one row.
pub fn reinforce_plus_plus_row(rewards: &[f32], mask: &[f32], gamma: f64, ret: &mut [f32]) {
    let g = gamma as f32;
    let mut run = 0.0f32;
    for t in (0..rewards.len()).rev() {
        let new = rewards[t] + g * run;
        let m = mask[t];
        ret[t] = new * m;
        run = new * m + run * (1.0 - m);
    }
}

/// `-e reinforce_plus_plus` ([`Kind::Token`]).
pub struct ReinforcePlusPlus;

impl Estimate for ReinforcePlusPlus {
    const INFO: Info = Info {
        source: VERL,
        summary: "discounted return-to-go over policy tokens, whitened over the batch",
        kind: Kind::Token,
        columns: &[],
        settings: &["gamma", "mask_mode"],
        weights_in_pass1: false,
        needs_tokens: Some(
            "per-token rewards and each row's valid tokens (a return-to-go whitened over the batch's valid tokens)",
        ),
        rewards_under_mask: true,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: None,
            needs: None,
            returns: "masked discounted return",
            whitening: "batch",
            masked: true,
            masked_note: None,
            singleton: "n/a",
            variants: &[],
        },
    };
    type Stats = RowMoments;
    type Plan = StepWhitening;
    type Options = ();

    fn row_stats(rows: &Rows<'_>, stats: &mut RowMoments) -> Result<()> {
        let s = rows.settings;
        let mut ret = Vec::new();
        for i in 0..rows.rows() {
            let span = rows.span(i);
            ret.resize(span.len(), 0.0f32);
            let m = &rows.mask[span.clone()];
            returns_row(s.ext.mask_mode, &rows.rewards[span], m, s.gamma, &mut ret);
            stats.0.push(Moments::of_valid(&ret, m));
        }
        Ok(())
    }

    fn batch(
        batch: &TrainingBatch<'_, RowMoments>,
        plan: &mut EstimatorPlan<StepWhitening>,
    ) -> Result<()> {
        let w = batch.whiten(&batch.merged_moments())?;
        plan.own.insert(batch.step, w);
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<StepWhitening>) -> Result<Tokens> {
        let s = rows.settings;
        let n = rows.mask.len();
        let (mut advantages, mut returns) = (vec![0.0f32; n], vec![0.0f32; n]);
        for i in 0..rows.rows() {
            let span = rows.span(i);
            let w = plan.own.of(rows.group.step_of(i));
            returns_row(
                s.ext.mask_mode,
                &rows.rewards[span.clone()],
                &rows.mask[span.clone()],
                s.gamma,
                &mut returns[span.clone()],
            );
            for t in span {
                advantages[t] = w.apply(returns[t]) * rows.mask[t];
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
    use crate::estimators::moments::{Moments, Whitening};
    use crate::estimators::test_support::assert_close;

    /// Returns and whitened, masked advantages of a batch of rows.
    fn batch(mode: MaskMode, r: &[&[f32]], m: &[&[f32]], gamma: f64) -> Vec<(Vec<f32>, Vec<f32>)> {
        let mut moments = Moments::default();
        let rets: Vec<Vec<f32>> = r
            .iter()
            .zip(m)
            .map(|(r, m)| {
                let mut ret = vec![0.0f32; r.len()];
                returns_row(mode, r, m, gamma, &mut ret);
                for (&x, &mk) in ret.iter().zip(m.iter()) {
                    if mk != 0.0 {
                        moments.push(x as f64);
                    }
                }
                ret
            })
            .collect();
        let w = Whitening::from_moments(&moments).unwrap();
        rets.into_iter()
            .zip(m)
            .map(|(ret, m)| {
                let adv = ret
                    .iter()
                    .zip(m.iter())
                    .map(|(&x, &mk)| w.apply(x) * mk)
                    .collect();
                (ret, adv)
            })
            .collect()
    }

    const M: [f32; 10] = [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0];
    const R: [f32; 10] = [0.0, -0.1, 0.0, 0.0, 0.0, 0.0, -0.1, 0.0, 0.0, 0.9];

    // conventions.md, the issue's row as a one-row batch, γ = 1: valid RTG [.7,.7,.8,.8,.9].
    #[test]
    fn issue_row_carry() {
        let out = batch(MaskMode::Carry, &[&R], &[&M], 1.0);
        assert_close(
            &out[0].0,
            &[0.7, 0.7, 0.0, 0.0, 0.0, 0.8, 0.8, 0.0, 0.0, 0.9],
        );
        assert_close(
            &out[0].1,
            &[
                -0.956182, -0.956182, 0.0, 0.0, 0.0, 0.239046, 0.239046, 0.0, 0.0, 1.434273,
            ],
        );
        let out = batch(MaskMode::Carry, &[&R], &[&M], 0.9);
        assert_close(
            &out[0].1,
            &[
                -1.067301, -0.8172, 0.0, 0.0, 0.0, 0.045598, 0.419355, 0.0, 0.0, 1.419548,
            ],
        );
    }

    // Reset, γ = 1: the .9 never reaches turns 1–2; valid [−.1,−.1,−.1,−.1,.9].
    #[test]
    fn issue_row_reset() {
        let out = batch(MaskMode::Reset, &[&R], &[&M], 1.0);
        assert_close(
            &out[0].0,
            &[-0.1, -0.1, 0.0, 0.0, -0.1, -0.1, -0.1, 0.0, 0.9, 0.9],
        );
        assert_close(
            &out[0].1,
            &[
                -0.447214, -0.447214, 0.0, 0.0, 0.0, -0.447214, -0.447214, 0.0, 0.0, 1.788854,
            ],
        );
        let out = batch(MaskMode::Reset, &[&R], &[&M], 0.9);
        assert_close(
            &out[0].0,
            &[-0.09, -0.1, 0.0, 0.0, -0.081, -0.09, -0.1, 0.0, 0.81, 0.9],
        );
        assert_close(
            &out[0].1,
            &[
                -0.43595, -0.458421, 0.0, 0.0, 0.0, -0.43595, -0.458421, 0.0, 0.0, 1.788741,
            ],
        );
    }

    // conventions.md T5 (verl's verified example) under reset: returns unmasked; valid
    // [0,0,1,0,0,0] → μ = 1/6, unbiased var = 1/6.
    #[test]
    fn verified_example_reset() {
        let r0 = [0.0f32, 0.0, 0.0, 0.0, 1.0, 0.0];
        let r1 = [0.0f32, 0.0, 2.0, 0.0, 0.0, 0.0];
        let m0 = [1.0f32, 1.0, 0.0, 0.0, 1.0, 0.0];
        let m1 = [1.0f32, 1.0, 0.0, 1.0, 0.0, 0.0];
        let out = batch(MaskMode::Reset, &[&r0, &r1], &[&m0, &m1], 0.5);
        assert_eq!(out[0].0, [0.0, 0.0, 0.0, 0.5, 1.0, 0.0]);
        assert_eq!(out[1].0, [0.0, 0.0, 2.0, 0.0, 0.0, 0.0]);
        let x = 0.408248;
        assert_close(&out[0].1, &[-x, -x, 0.0, 0.0, 2.041241, 0.0]);
        assert_close(&out[1].1, &[-x, -x, 0.0, -x, 0.0, 0.0]);
    }

    // Reference §5.11: γ = .5; row 0 r_4 = 1, m = [1,1,0,0,1,0] → ret [.25, .5, 0, 0, 1, 0];
    // row 1 has a reward of 2 on a masked position, m = [1,1,0,1,0,0] → all 0.
    #[test]
    fn worked_example() {
        let r = [
            [0.0f32, 0.0, 0.0, 0.0, 1.0, 0.0],
            [0.0, 0.0, 2.0, 0.0, 0.0, 0.0],
        ];
        let m = [
            [1.0f32, 1.0, 0.0, 0.0, 1.0, 0.0],
            [1.0, 1.0, 0.0, 1.0, 0.0, 0.0],
        ];
        let mut ret = [[0.0f32; 6]; 2];
        let mut moments = Moments::default();
        for i in 0..2 {
            reinforce_plus_plus_row(&r[i], &m[i], 0.5, &mut ret[i]);
            for t in 0..6 {
                if m[i][t] == 1.0 {
                    moments.push(ret[i][t] as f64);
                }
            }
        }
        assert_eq!(ret[0], [0.25, 0.5, 0.0, 0.0, 1.0, 0.0]);
        assert_eq!(ret[1], [0.0; 6]);
        let w = Whitening::from_moments(&moments).unwrap();
        let adv: Vec<f32> = (0..12)
            .map(|k| w.apply(ret[k / 6][k % 6]) * m[k / 6][k % 6])
            .collect();
        let e: [f32; 12] = [
            -0.104031257,
            0.520156443,
            0.0,
            0.0,
            1.76853192,
            0.0,
            -0.728218973,
            -0.728218973,
            0.0,
            -0.728218973,
            0.0,
            0.0,
        ];
        crate::test_support::assert_close("reinforce_plus_plus adv", &adv, &e, 2e-6, 0.0);
    }
}
