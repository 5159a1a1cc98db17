//! `gpg` (`core_algos.py:1707`): the plain policy gradient, no ratio and no clip.
//!
//! ℓ = −A·log π, dℓ/d log π = −A.
//!
//! - Inputs: A and log π (log π_old is not read).
//! - Parameters: none.
//! - Metrics: verl's gpg returns none of `pg_clipfrac`, `pg_clipfrac_lower`, `ppo_kl`.
//! - Edge cases: none; ℓ is −A·log π even far off-policy.

use super::{LossInfo, LossScope, Metrics, PolicyLoss, PolicyParams, Term};

/// GPG's plain policy gradient.
pub struct GpgLoss;

impl PolicyLoss for GpgLoss {
    const INFO: LossInfo = LossInfo {
        summary: "GPG: −A·log π, the plain policy gradient",
        line: 1707,
        loss_type: None,
        scope: LossScope::Token,
        metrics: Metrics::NONE,
        parameters: &[],
        clip_range: None,
        refused: None,
        notes: &[],
    };
    type Stats = ();

    fn token(_p: &PolicyParams, a: f32, logp: f32, _old: f32) -> Term {
        Term {
            loss: -logp * a,
            grad: -a,
            ..Term::default()
        }
    }
}
