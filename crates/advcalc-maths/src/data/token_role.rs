//! The optional per-token float columns a run may read, by verl's names.

/// Optional per-token float columns, by verl's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TokenRole {
    OldLogProbs,
    RefLogProb,
    RolloutLogProbs,
    Values,
    SumPiSquared,
    /// `log_probs`: the current policy's, which the loss stage reads.
    LogProbs,
    /// `advantages` of the input (the loss stage's, when IN carries them).
    Advantages,
    /// `rollout_is_weights` of the input (the loss stage's, with IN's advantages).
    IsWeights,
}

impl TokenRole {
    pub const ALL: [TokenRole; 8] = [
        TokenRole::OldLogProbs,
        TokenRole::RefLogProb,
        TokenRole::RolloutLogProbs,
        TokenRole::Values,
        TokenRole::SumPiSquared,
        TokenRole::LogProbs,
        TokenRole::Advantages,
        TokenRole::IsWeights,
    ];

    /// The columns the advantage pipeline reads (stages 2–4): what `inspect` checks.
    pub const PIPELINE: [TokenRole; 5] = [
        TokenRole::OldLogProbs,
        TokenRole::RefLogProb,
        TokenRole::RolloutLogProbs,
        TokenRole::Values,
        TokenRole::SumPiSquared,
    ];

    /// Whether the column holds log-probabilities (which are ≤ 0).
    pub fn is_log_prob(self) -> bool {
        matches!(
            self,
            TokenRole::OldLogProbs
                | TokenRole::RefLogProb
                | TokenRole::RolloutLogProbs
                | TokenRole::LogProbs
        )
    }

    pub fn column(self) -> &'static str {
        match self {
            TokenRole::OldLogProbs => "old_log_probs",
            TokenRole::RefLogProb => "ref_log_prob",
            TokenRole::RolloutLogProbs => "rollout_log_probs",
            TokenRole::Values => "values",
            TokenRole::SumPiSquared => "sum_pi_squared",
            TokenRole::LogProbs => "log_probs",
            TokenRole::Advantages => "advantages",
            TokenRole::IsWeights => "rollout_is_weights",
        }
    }
}
