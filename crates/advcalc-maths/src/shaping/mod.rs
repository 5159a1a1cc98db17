//! Pipeline stages 1–3: score placement, KL shaping of the reward and rollout correction
//! (with verl's `rollout_corr/...` metrics of it).

pub mod correction;
pub mod correction_metrics;
pub mod kl;
pub mod openrlhf_kl;
pub mod scores;
