//! `dro` (`core_algos.py:2014`): the policy gradient with a quadratic penalty on the
//! log-ratio.
//!
//! ℓ = −(A·log π − ½·β·Δ²), dℓ/d log π = −A + β·Δ (Δ unclamped).
//!
//! - Inputs: A, log π, log π_old.
//! - Parameters: `policy_loss.dro_beta` (β > 0, at most 1e30; verl raises without it).
//! - Metrics: `ppo_kl` alone, −Δ per token.
//! - Edge cases: none beyond β's range.

use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// DRO's penalised policy gradient.
pub struct Dro;

impl PolicyLoss for Dro {
    const INFO: LossInfo = LossInfo {
        summary: "DRO: −(A·log π − ½β·Δ²), the policy gradient with a quadratic log-ratio penalty",
        line: 2014,
        loss_type: None,
        scope: LossScope::Token,
        metrics: Metrics::PPO_KL,
        parameters: &["policy_loss.dro_beta"],
        clip_range: None,
        refused: None,
        notes: &[],
    };
    type Stats = ();

    fn token(p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
        let d = logp - old;
        let beta = p.dro_beta as f32;
        Term {
            loss: -(logp * a - 0.5 * beta * (d * d)),
            grad: -a + beta * d,
            clipped: false,
            lower: false,
            kl: -d,
        }
    }
}
