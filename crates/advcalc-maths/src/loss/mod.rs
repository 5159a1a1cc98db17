//! Stage 5, `advcalc loss`: verl 0.9.1's actor loss replayed token by token
//! (`docs/reference/loss-replay.md`, `docs/loss.md`). Plain slices and scalars, like the estimators:
//!
//! - [`policy`]: every registered policy loss, per token ℓ and dℓ/d log π (what autograd
//!   gives), with the clip flags verl's metrics count;
//! - [`aggregate`]: `loss_agg_mode`, the weight each token's ℓ gets in its mini-batch's loss;
//! - [`kl_loss`]: the actor's KL loss (`use_kl_loss`), value and derivative;
//! - [`partition`]: a step's rows cut into mini-batches and micro-batches as verl's engine
//!   cuts them;
//! - [`row`]: one row's outputs (`pg_losses`, `grad_weights`, `kl_losses`) and metric sums;
//! - [`metrics`]: verl's logged actor metrics from the rows' sums.
//!
//! Values are computed in f32 where verl computes them in f32 (every per-token quantity);
//! sums that make a metric are f64.

pub mod aggregate;
pub mod findings;
pub mod kl_loss;
pub mod length_bias;
pub mod metrics;
pub mod partition;
pub mod plan;
pub mod policy;
pub mod row;

pub use aggregate::AggMode;
pub use kl_loss::KlLoss;
pub use policy::{BypassLoss, LossMode, PolicyParams};

use crate::shaping::correction::Correction;

/// The loss stage as configured (`actor_rollout_ref.actor`, `rollout.n`,
/// `rollout.response_length` and bypass mode's `algorithm.rollout_correction`), validated.
#[derive(Debug, Clone, PartialEq)]
pub struct LossSpec {
    /// `policy_loss.loss_mode` (bypass mode: the `bypass_mode` loss).
    pub mode: LossMode,
    /// `loss_agg_mode`.
    pub agg: AggMode,
    /// Clip ranges and each loss's own parameters.
    pub params: PolicyParams,
    /// `use_kl_loss` with `kl_loss_type` and `kl_loss_coef`; `None`: off.
    pub kl: Option<KlLoss>,
    /// `loss_scale_factor`; `None`: the padded response width ([`Self::response_length`]).
    pub loss_scale_factor: Option<f64>,
    /// `actor_rollout_ref.rollout.response_length`: the padded width verl's
    /// `seq-mean-token-sum-norm` divides by without `loss_scale_factor`.
    pub response_length: usize,
    /// Rows per mini-batch: `ppo_mini_batch_size × rollout.n`.
    pub mini_batch_rows: usize,
    /// Rows per micro-batch (`ppo_micro_batch_size_per_gpu`); `None`: the whole mini-batch.
    /// The configuration checks that it divides [`Self::mini_batch_rows`], as verl asserts.
    pub micro_batch_rows: Option<usize>,
    /// The micro-batch size came from the deprecated `ppo_micro_batch_size` (the global
    /// size, the same with one rank), not `ppo_micro_batch_size_per_gpu`: `advcalc config`
    /// writes it back under that key.
    pub micro_batch_legacy: bool,
    /// `entropy_coeff`: not replayed (a dump has no logits); a note says so when ≠ 0.
    pub entropy_coeff: f64,
    /// `ppo_epochs`: the replay is the first epoch's first pass over each mini-batch.
    pub ppo_epochs: usize,
    /// Bypass mode's loss and the correction it applies; `None` outside bypass mode.
    pub bypass: Option<Bypass>,
}

/// Bypass mode's loss: the correction verl computes inside the loss, per micro-batch, from
/// the current log-probs and the rollout's.
#[derive(Debug, Clone, PartialEq)]
pub struct Bypass {
    pub loss: BypassLoss,
    pub correction: Correction,
}
