//! `kl_cov` (`core_algos.py:1848`): the unclipped ratio loss, with a KL penalty on the tokens
//! of largest covariance.
//!
//! ℓ = −A·e^Δ (Δ unclamped), dℓ/d log π = −A·e^Δ; on the max(1, ⌊N·`kl_cov_ratio`⌋) of the
//! micro-batch's N valid tokens with the largest (A − Ā)·(log π − mean log π) (`loss::plan`
//! picks them, ties in row-major order),
//! `ppo_kl_coef`·|Δ| is added ([`extra`]), gradient coef·sign Δ.
//!
//! - Inputs: A, log π, log π_old; the micro-batch's valid tokens for the choice.
//! - Parameters: `policy_loss.kl_cov_ratio` (in (0, 1]), `policy_loss.ppo_kl_coef` (0 to
//!   1e30).
//! - Metrics: `ppo_kl` alone, |Δ| per token.
//! - Edge cases: the choice depends on the micro-batch split; a micro-batch with a valid
//!   token always penalises at least one.

use super::{LossInfo, LossRows, LossScope, LossStats, Metrics, PolicyLoss, PolicyParams, Term};
use crate::loss::row::KlCovTokens;

/// kl_cov's pass 1 on IN's advantages: each row's mask-1 tokens as (A, log π, token index),
/// in row order, from which the plan makes each micro-batch's choice (`loss::plan`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KlCovRows(pub Vec<KlCovTokens>);

impl LossStats for KlCovRows {
    fn append(&mut self, next: Self) {
        self.0.extend(next.0);
    }
}

/// KL-Cov.
pub struct KlCov;

impl PolicyLoss for KlCov {
    const INFO: LossInfo = LossInfo {
        summary: "KL-Cov: −A·e^Δ, plus ppo_kl_coef·|Δ| on the top kl_cov_ratio tokens by covariance",
        line: 1848,
        loss_type: None,
        scope: LossScope::Token,
        metrics: Metrics::PPO_KL,
        parameters: &["policy_loss.kl_cov_ratio", "policy_loss.ppo_kl_coef"],
        clip_range: None,
        refused: None,
        notes: &["its tokens are chosen per micro-batch: the gradient depends on the split"],
    };
    type Stats = KlCovRows;

    fn row_stats(rows: &LossRows<'_>, stats: &mut KlCovRows) {
        for i in 0..rows.group.rows() {
            let s = rows.group.span(i);
            let tokens = s
                .clone()
                .enumerate()
                .filter(|&(_, t)| rows.mask[t] > 0.0)
                .map(|(k, t)| (rows.advantages[t], rows.log_probs[t], k))
                .collect();
            stats.0.push(tokens);
        }
    }

    fn token(_p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
        let d = logp - old;
        let r = d.exp();
        Term {
            loss: -a * r,
            grad: -a * r,
            clipped: false,
            lower: false,
            kl: d.abs(),
        }
    }
}

/// What a token chosen by `kl_cov` adds: `ppo_kl_coef`·|Δ| and its gradient.
pub fn extra(p: &PolicyParams, logp: f32, old: f32) -> (f32, f32) {
    let d = logp - old;
    let coef = p.ppo_kl_coef as f32;
    let sign = if d > 0.0 {
        1.0
    } else if d < 0.0 {
        -1.0
    } else {
        0.0
    };
    (coef * d.abs(), coef * sign)
}
