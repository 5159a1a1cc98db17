//! Tool spans in a response mask: where the policy's tokens (mask 1) are interrupted by tool
//! or observation tokens (mask 0) of a multi-turn rollout.

/// The number of tool spans in one row's mask: maximal runs of mask-0 tokens followed later
/// by a mask-1 token. A trailing run is not a span (padding, or a tool reply the policy
/// never answered: [`ends_in_tool_token`] reports that). Each span ends where a 0 is followed
/// by a 1, so these are counted (pairwise, which the compiler vectorises).
pub fn tool_spans(mask: &[f32]) -> u64 {
    mask.windows(2)
        .map(|w| u64::from((w[0] == 0.0) & (w[1] != 0.0)))
        .sum()
}

/// Whether a row with at least one policy token ends in a tool token (ragged layout, where
/// the last position is the response's last real token: verl places a scalar reward there).
pub fn ends_in_tool_token(mask: &[f32]) -> bool {
    mask.last() == Some(&0.0) && mask.contains(&1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_count_runs_followed_by_a_policy_token() {
        // Runs [1, 2] and [4] are followed by a 1; the trailing run [6, 7] is not.
        assert_eq!(tool_spans(&[1., 0., 0., 1., 0., 1., 0., 0.]), 2);
        // A leading run counts: a 1 follows it.
        assert_eq!(tool_spans(&[0., 1.]), 1);
        assert_eq!(tool_spans(&[0., 0., 1., 0., 1., 0., 1.]), 3);
        assert_eq!(tool_spans(&[1., 1.]), 0);
        assert_eq!(tool_spans(&[0., 0.]), 0);
        assert_eq!(tool_spans(&[]), 0);
    }

    #[test]
    fn ending_in_a_tool_token_needs_a_policy_token_before_it() {
        assert!(ends_in_tool_token(&[1., 0.]));
        assert!(ends_in_tool_token(&[0., 1., 0., 0.]));
        assert!(!ends_in_tool_token(&[1., 0., 1.]));
        // No policy token at all: that is a row without a valid token, not a tool ending.
        assert!(!ends_in_tool_token(&[0., 0.]));
        assert!(!ends_in_tool_token(&[]));
    }
}
