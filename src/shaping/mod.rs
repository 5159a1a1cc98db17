//! Pipeline stages 2 and 3: KL shaping of the reward and rollout correction.

pub mod correction;
pub mod kl;
