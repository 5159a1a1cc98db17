//! The thresholds above which a finding becomes a warning (each documented in
//! docs/inspect.md). Findings without a constant here warn on any occurrence.

/// Warn when more than this fraction of a step's groups have all-equal score sums. Such a
/// group gives each member the group mean as baseline (GRPO/RLOO advantage 0), so it adds no
/// gradient; past half the batch the effective batch size has halved, and the task is
/// likely too easy or too hard for the policy, or the reward is saturated or broken.
pub const NO_SIGNAL_GROUP_FRACTION: f64 = 0.5;

/// The train/rollout probability ratio exp(old − rollout) is "outside" outside
/// [RATIO_LOW, RATIO_HIGH]: 2 is verl's default `rollout_is_threshold` (TIS truncates there),
/// and 0.5 its mirror; a token outside is one that IS or rejection would act on.
pub const RATIO_LOW: f64 = 0.5;
pub const RATIO_HIGH: f64 = 2.0;

/// A ratio above this is an extreme mismatch: the trainer finds the token ten times more
/// likely than the rollout engine did (a wrong temperature, stale weights, a tokenizer
/// mismatch), far beyond bf16 noise.
pub const RATIO_EXTREME: f64 = 10.0;

/// Warn when more than this fraction of valid tokens has a ratio outside
/// [RATIO_LOW, RATIO_HIGH]. Numerical noise between an inference engine and the trainer
/// (bf16 kernels, batch-variant reductions) leaves well under 1 % of tokens there.
pub const MISMATCH_OUTSIDE_FRACTION: f64 = 0.01;

/// Warn when more than this fraction of valid tokens has a ratio above RATIO_EXTREME: one
/// token in a thousand already means many rows carry a badly off-policy token.
pub const MISMATCH_EXTREME_FRACTION: f64 = 0.001;

/// Warn when rejection sampling removes more than this fraction of a step's valid tokens
/// or of its rows: most of the batch then carries no gradient, and the threshold is probably
/// too tight (or the mismatch too large).
pub const REJECTED_FRACTION: f64 = 0.5;

/// Warn when the mean |β·Σ KL| per row exceeds this multiple of the mean |score sum|: the
/// KL penalty, not the task reward, then decides the advantages.
pub const KL_DOMINANCE_RATIO: f64 = 1.0;

/// Warn when more than this fraction of a step's valid tokens has an advantage of exactly
/// 0 (with `-e`): those tokens add no gradient, so most of the batch is wasted (groups
/// with equal scores under the GRPO family, or rewards the estimator never sees).
pub const ZERO_ADVANTAGE_FRACTION: f64 = 0.5;

/// Warn when an advantage's magnitude exceeds this (with `-e`). Normalised advantages sit
/// within a few units (GRPO's are bounded by (n − 1)/√n: 2.47 for groups of 8, 5.3 for 32);
/// estimators that pass the reward's scale through (RLOO, Dr. GRPO, REINFORCE, unwhitened
/// GAE) give such values when the rewards are unscaled.
pub const EXTREME_ADVANTAGE: f64 = 20.0;
