//! Pipeline stages 1–3: score placement, KL shaping of the reward and rollout correction.

pub mod correction;
pub mod kl;
pub mod openrlhf_kl;
pub mod scores;
