//! The computed token columns of one row group, before the I/O layer encodes them.

use crate::data::FloatBuffer;

/// The computed token columns of one row group, flat, aligned with the row offsets.
#[derive(Debug, Clone)]
pub struct TokenOutputs {
    pub token_level_rewards: FloatBuffer,
    pub advantages: Vec<f32>,
    /// `None` when returns equal advantages (the outcome estimators).
    pub returns: Option<Vec<f32>>,
    /// The mask after rejection, when rollout correction ran (written back in the input's type).
    pub response_mask: Option<FloatBuffer>,
    pub rollout_is_weights: Option<Vec<f32>>,
    /// The loss stage's columns, when it runs.
    pub loss: Option<LossColumns>,
}

/// The loss stage's token columns of one row group (`loss::row`).
#[derive(Debug, Clone)]
pub struct LossColumns {
    pub pg_losses: Vec<f32>,
    pub grad_weights: Vec<f32>,
    /// With the KL loss only.
    pub kl_losses: Option<Vec<f32>>,
}
