//! The optional per-token float columns a run may read, by verl's names.

/// Optional per-token float columns, by verl's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TokenRole {
    OldLogProbs,
    RefLogProb,
    RolloutLogProbs,
    Values,
    SumPiSquared,
}

impl TokenRole {
    pub const ALL: [TokenRole; 5] = [
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
            TokenRole::OldLogProbs | TokenRole::RefLogProb | TokenRole::RolloutLogProbs
        )
    }

    pub fn column(self) -> &'static str {
        match self {
            TokenRole::OldLogProbs => "old_log_probs",
            TokenRole::RefLogProb => "ref_log_prob",
            TokenRole::RolloutLogProbs => "rollout_log_probs",
            TokenRole::Values => "values",
            TokenRole::SumPiSquared => "sum_pi_squared",
        }
    }
}
