//! The OpenRLHF outcome pipeline shared by `openrlhf_rloo`, `openrlhf_reinforce_baseline`,
//! `openrlhf_group_norm` and `openrlhf_dr_grpo` (`docs/conventions.md` B5). Not an estimator
//! name itself.
//!
//! OpenRLHF `openrlhf/trainer/ppo_utils/experience_maker.py`
//! (`compute_advantages_and_returns`, `get_cumulative_returns`) and
//! `openrlhf/models/utils.py` (`compute_reward`):
//! 1. groups: consecutive `n_samples_per_prompt` rows (advcalc: `group_size`); `n > 1` is
//!    asserted (`openrlhf/cli/train_ppo_ray.py` line 612), so a singleton is an error;
//! 2. a scalar per row from the group ([`Shaping`]);
//! 3. clamped to `reward.clip_range` (default ±10) and placed on the row's last mask-1
//!    position, then masked by the action mask;
//! 4. returns `G_t = r_t + γ·G_{t+1}` over ALL positions with γ = 1 (forced by OpenRLHF for
//!    these estimators): every position up to the last valid token holds the scalar, tool
//!    tokens included; later positions 0; `advantages = returns`;
//! 5. `reinforce_baseline` only: whitening over the batch's valid tokens with the POPULATION
//!    variance, `(A − μ)·rsqrt(max(var, 1e-8))`, written at every position (not re-masked);
//!    with `no_std_norm`, `A − μ`.
//!
//! OpenRLHF's own KL in the reward (`openrlhf.kl_coef`, `openrlhf.kl_estimator`;
//! [`crate::shaping::openrlhf_kl`]) enters at step 3, after the group statistics and the
//! clip: `−c·kl_t` on every valid token, summed into the returns (and into the whitening's
//! moments). verl's `use_kl_in_reward` would shape the scores before the group statistics,
//! unlike OpenRLHF, and is refused for these estimators.

use crate::data::TokenRole;
use crate::error::Error;
use crate::estimators::groups::Grouping;
use crate::estimators::moments::{Moments, RowMoments, StepWhitening, Whitening};
use crate::estimators::{EstimatorPlan, Rows, Tokens, TrainingBatch};

use super::groups::group_sums;

/// The `source` of the `openrlhf_*` estimators' declarations.
pub const SOURCE: &str = "OpenRLHF";

/// How the group turns the batch's scores into each row's scalar (`Err(row)`: a singleton).
pub type ShapingFn = fn(&[f64], &Grouping) -> Result<Vec<f64>, usize>;

/// Steps 1–3 for one batch: each row's clipped scalar.
fn clipped<S, P>(
    batch: &TrainingBatch<'_, S>,
    plan: &mut EstimatorPlan<P>,
    shaping: ShapingFn,
) -> Result<Vec<f64>, Error> {
    let g = batch.family_grouping(plan, true)?;
    let shaped = shaping(&batch.scores(), &g).map_err(|row| batch.singleton_error(&g, row))?;
    let clip_range = batch.settings.ext.openrlhf_reward_clip;
    Ok(shaped.iter().map(|&a| clip(a, clip_range)).collect())
}

/// Steps 1–3's statistics for one batch: each row's clipped scalar.
pub fn batch(
    batch: &TrainingBatch<'_>,
    plan: &mut EstimatorPlan,
    shaping: ShapingFn,
) -> Result<(), Error> {
    let scalars = clipped(batch, plan, shaping)?;
    batch.set_scalars(plan, scalars);
    Ok(())
}

/// Steps 1–3 and 5's statistics for one batch (`openrlhf_reinforce_baseline`): each row's
/// clipped scalar and the batch whitening over the valid tokens.
pub fn whitened_batch(
    batch: &TrainingBatch<'_, RowMoments>,
    plan: &mut EstimatorPlan<StepWhitening>,
    shaping: ShapingFn,
) -> Result<(), Error> {
    let clipped = clipped(batch, plan, shaping)?;
    let m = if batch.settings.ext.openrlhf_kl().active() {
        // each row's valid tokens hold a + (its KL tail): pass 1's moments of the tail,
        // shifted by the row's scalar
        let mut m = Moments::default();
        for (&a, &r) in clipped.iter().zip(batch.rows) {
            let mut row = batch.own.0[r];
            row.mean += a as f32 as f64;
            m.merge(&row);
        }
        m
    } else {
        // every valid token holds the row's scalar (γ = 1, no KL)
        batch.token_moments(&clipped)
    };
    let w = whitening(&m, batch.settings.ext.openrlhf_no_std_norm).ok_or_else(|| {
        Error::data(format!(
            "{} {} whitens over the batch's valid tokens and found none (OpenRLHF divides 0 by 0)",
            batch.at(),
            batch.settings.estimator.name()
        ))
    })?;
    plan.own.insert(batch.step, w);
    batch.set_scalars(plan, clipped);
    Ok(())
}

/// Pass 1 with OpenRLHF's KL and whitening (`openrlhf_reinforce_baseline`): per row, the
/// moments over its valid tokens of the KL part of the returns (the returns of a zero
/// scalar), which the batch shifts by the row's scalar. Nothing without KL.
pub fn row_stats(rows: &Rows<'_>, stats: &mut RowMoments) -> Result<(), Error> {
    if !rows.settings.ext.openrlhf_kl().active() {
        return Ok(());
    }
    let mut tail = vec![0.0f32; rows.mask.len()];
    kl_returns(rows, |_| 0.0, &mut tail)?;
    for i in 0..rows.rows() {
        let s = rows.span(i);
        stats
            .0
            .push(Moments::of_valid(&tail[s.clone()], &rows.mask[s]));
    }
    Ok(())
}

/// Every row's returns from `scalar(i)` with OpenRLHF's KL ([`crate::shaping::openrlhf_kl::OpenrlhfKl::row_returns`]).
fn kl_returns(
    rows: &Rows<'_>,
    scalar: impl Fn(usize) -> f32,
    out: &mut [f32],
) -> Result<(), Error> {
    let old = rows.old_log_probs()?;
    let reference = rows.token(TokenRole::RefLogProb)?;
    let kl = rows.settings.ext.openrlhf_kl();
    for i in 0..rows.rows() {
        let s = rows.span(i);
        kl.row_returns(
            scalar(i),
            &rows.mask[s.clone()],
            &old[s.clone()],
            &reference[s.clone()],
            &mut out[s],
        );
    }
    Ok(())
}

/// Steps 3–5 for one row group: γ = 1 returns of the row's scalar (with OpenRLHF's KL when
/// `openrlhf.kl_coef` > 0); with `whiten` the whitened returns are the advantages and the
/// returns are kept, else advantages = returns.
pub fn token_outputs<P>(
    rows: &Rows<'_>,
    plan: &EstimatorPlan<P>,
    whitening: Option<&StepWhitening>,
) -> Result<Tokens, Error> {
    let n = rows.mask.len();
    let mut returns = vec![0.0f32; n];
    let first = rows.group.first_row;
    if rows.settings.ext.openrlhf_kl().active() {
        kl_returns(rows, |i| plan.scalar(first + i), &mut returns)?;
    } else {
        for i in 0..rows.rows() {
            let s = rows.span(i);
            token_returns(
                plan.scalar(first + i),
                &rows.mask[s.clone()],
                &mut returns[s],
            );
        }
    }
    let Some(whitening) = whitening else {
        return Ok(Tokens {
            advantages: returns,
            returns: None,
        });
    };
    let mut advantages = vec![0.0f32; n];
    for i in 0..rows.rows() {
        let w = whitening.of(rows.group.step_of(i));
        for t in rows.span(i) {
            advantages[t] = w.apply(returns[t]);
        }
    }
    Ok(Tokens {
        advantages,
        returns: Some(returns),
    })
}

/// Step 2: how the group turns a score into the row's scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shaping {
    /// `s_i − (Σ_g s − s_i)/(n − 1)`
    Rloo,
    /// `s_i − μ_g` (`reinforce_baseline`, `dr_grpo`)
    Mean,
    /// `(s_i − μ_g)/(σ_g + 1e-9)`, sample std
    GroupNorm,
}

/// Step 2 for one batch. `Err(row)` names a row of a singleton group (OpenRLHF asserts n > 1).
pub fn group_scalar(
    scores: &[f64],
    grouping: &Grouping,
    shaping: Shaping,
) -> Result<Vec<f64>, usize> {
    let (count, sum) = group_sums(scores, grouping);
    if let Some(row) = grouping.group_of_row.iter().position(|&g| count[g] < 2) {
        return Err(row);
    }
    let mean: Vec<f64> = (0..grouping.n_groups)
        .map(|g| sum[g] / count[g] as f64)
        .collect();
    let mut sq = vec![0.0f64; grouping.n_groups];
    for (&s, &g) in scores.iter().zip(&grouping.group_of_row) {
        sq[g] += (s - mean[g]) * (s - mean[g]);
    }
    Ok(scores
        .iter()
        .zip(&grouping.group_of_row)
        .map(|(&s, &g)| {
            let n = count[g] as f64;
            match shaping {
                Shaping::Rloo => s - (sum[g] - s) / (n - 1.0),
                Shaping::Mean => s - mean[g],
                Shaping::GroupNorm => (s - mean[g]) / ((sq[g] / (n - 1.0)).sqrt() + 1e-9),
            }
        })
        .collect())
}

/// Step 3's clamp (`reward.clip_range`).
pub fn clip(a: f64, range: (f64, f64)) -> f64 {
    a.max(range.0).min(range.1)
}

/// Step 4: the row's returns from its clipped scalar (γ = 1, no KL).
pub fn token_returns(a: f32, mask: &[f32], out: &mut [f32]) {
    let last = mask.iter().rposition(|&m| m != 0.0);
    for (t, o) in out.iter_mut().enumerate() {
        *o = if last.is_some_and(|l| t <= l) { a } else { 0.0 };
    }
}

/// Step 5: OpenRLHF's whitening from the valid tokens' moments (population variance, ε as a
/// floor on it); `None` when the batch has no valid token (OpenRLHF divides 0 by 0).
pub fn whitening(m: &Moments, no_std_norm: bool) -> Option<Whitening> {
    if m.n == 0.0 {
        return None;
    }
    let var = m.m2 / m.n;
    Some(Whitening {
        mean: m.mean,
        inv_std: if no_std_norm {
            1.0
        } else {
            1.0 / var.max(1e-8).sqrt()
        },
    })
}

#[cfg(test)]
#[allow(clippy::approx_constant)] // hand-worked numbers, written as computed
pub mod tests {
    use super::*;

    /// conventions.md T4: group_size 2, s = [1, 0, .25, .25], T = 3 masks.
    pub const SCORES: [f64; 4] = [1.0, 0.0, 0.25, 0.25];
    pub const MASKS: [[f32; 3]; 4] = [
        [1.0, 0.0, 1.0],
        [1.0, 0.0, 0.0],
        [1.0, 1.0, 1.0],
        [1.0, 1.0, 0.0],
    ];

    /// Token returns of the T4 batch under `shaping` (no clip reached).
    pub fn t4(shaping: Shaping) -> Vec<[f32; 3]> {
        let g = crate::estimators::test_support::grouping(&["a", "a", "b", "b"]);
        let a = group_scalar(&SCORES, &g, shaping).unwrap();
        a.iter()
            .zip(MASKS)
            .map(|(&a, m)| {
                let mut out = [0.0f32; 3];
                token_returns(clip(a, (-10.0, 10.0)) as f32, &m, &mut out);
                out
            })
            .collect()
    }

    #[test]
    fn singletons_are_refused() {
        let g = crate::estimators::test_support::grouping(&["a", "a", "b"]);
        assert_eq!(group_scalar(&[1.0, 0.0, 1.0], &g, Shaping::Mean), Err(2));
    }

    #[test]
    fn clip_and_placement() {
        assert_eq!(clip(12.0, (-10.0, 10.0)), 10.0);
        assert_eq!(clip(-0.5, (-0.2, 0.2)), -0.2);
        let mut out = [9.0f32; 4];
        token_returns(0.5, &[0.0, 1.0, 0.0, 0.0], &mut out);
        assert_eq!(out, [0.5, 0.5, 0.0, 0.0]);
        token_returns(0.5, &[0.0; 4], &mut out);
        assert_eq!(out, [0.0; 4]);
    }
}
