//! Token strips: a few rows drawn token by token, coloured by each variant's advantage.
//! Which rows: one correct and one incorrect row of the most mixed group (pass rate nearest
//! 0.5; without a `uid` column, the first correct and the first incorrect row), then the
//! rows asked for with `--rows`, each once, in that order.

use crate::data::GroupKey;
use crate::engine::job::GroupOutputs;

use super::groups::PassRates;

/// Why a row is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The correct row of the most mixed group.
    MixedCorrect,
    /// The incorrect row of the most mixed group.
    MixedIncorrect,
    /// Asked for with `--rows`.
    Asked,
}

/// One row's tokens under every variant.
#[derive(Debug, Clone)]
pub struct Strip {
    /// The row's index in the input (dataset order).
    pub row: usize,
    pub reason: Reason,
    pub step: Option<i64>,
    pub uid: Option<String>,
    /// Σ token scores.
    pub score: f64,
    pub correct: bool,
    /// The input's `response_mask` (0: a tool or padding token).
    pub mask: Vec<f32>,
    /// Positions holding a non-zero score (after a scalar score is placed); with none (a
    /// score of 0), the last policy token, where verl puts a sequence's reward.
    pub reward_at: Vec<usize>,
    /// Per variant: its advantages, and its mask after rejection.
    pub variants: Vec<(Vec<f32>, Vec<f32>)>,
}

/// The rows to draw, with why: the most mixed group's first correct and first incorrect row
/// (or the input's, without groups), then `asked`.
pub fn choose(
    groups: Option<&PassRates>,
    correct: &[bool],
    asked: &[usize],
) -> Vec<(usize, Reason)> {
    let pool: Vec<usize> = match groups {
        Some(g) => g
            .most_mixed()
            .map(|m| g.members[m].clone())
            .unwrap_or_default(),
        None => (0..correct.len()).collect(),
    };
    let mut out = Vec::new();
    if let Some(&r) = pool.iter().find(|&&r| correct[r]) {
        out.push((r, Reason::MixedCorrect));
    }
    if let Some(&r) = pool.iter().find(|&&r| !correct[r]) {
        out.push((r, Reason::MixedIncorrect));
    }
    for &r in asked {
        if !out.iter().any(|&(o, _)| o == r) {
            out.push((r, Reason::Asked));
        }
    }
    out
}

/// Row `i` of a row group (every variant's outputs of it).
pub fn extract(
    outputs: &[GroupOutputs],
    i: usize,
    row: usize,
    reason: Reason,
    correct: bool,
) -> Strip {
    let g = &outputs[0].group;
    let s = g.span(i);
    let scores = &g.scores[s.clone()];
    Strip {
        row,
        reason,
        step: g.step_of(i),
        uid: g.uid.as_ref().map(|u| label(&u[i])),
        score: scores.iter().map(|&x| x as f64).sum(),
        correct,
        mask: g.mask.values[s.clone()].to_vec(),
        reward_at: reward_positions(scores, &g.mask.values[s.clone()]),
        variants: outputs
            .iter()
            .map(|o| {
                (
                    o.outputs.advantages[s.clone()].to_vec(),
                    o.mask[s.clone()].to_vec(),
                )
            })
            .collect(),
    }
}

/// Where a row's reward sits: its non-zero scores, else its last mask-1 token.
fn reward_positions(scores: &[f32], mask: &[f32]) -> Vec<usize> {
    let at: Vec<usize> = (0..scores.len()).filter(|&t| scores[t] != 0.0).collect();
    if !at.is_empty() {
        return at;
    }
    mask.iter().rposition(|&m| m != 0.0).into_iter().collect()
}

/// A uid as written in the dump (a string without quotes).
fn label(k: &GroupKey) -> String {
    match k {
        GroupKey::Str(s) => s.to_string(),
        GroupKey::Int(i) => i.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reward_sits_on_non_zero_scores_or_else_on_the_last_policy_token() {
        assert_eq!(
            reward_positions(&[0.0, 1.0, 0.0], &[1.0, 1.0, 0.0]),
            vec![1]
        );
        assert_eq!(
            reward_positions(&[0.0, 0.0, 0.0], &[1.0, 1.0, 0.0]),
            vec![1]
        );
        assert_eq!(reward_positions(&[0.0], &[0.0]), Vec::<usize>::new());
    }

    #[test]
    fn one_correct_and_one_incorrect_row_of_the_most_mixed_group_then_the_asked_rows() {
        let correct = [true, false, false, true, false, true];
        // groups {0,2} 1/2, {1,3,4,5} 1/2: the first wins the tie
        let g = PassRates::of(vec![vec![0, 2], vec![1, 3, 4, 5]], &correct);
        let rows = choose(Some(&g), &correct, &[4, 0]);
        assert_eq!(
            rows,
            vec![
                (0, Reason::MixedCorrect),
                (2, Reason::MixedIncorrect),
                (4, Reason::Asked)
            ]
        );
        // without groups: the input's first correct and first incorrect rows
        assert_eq!(
            choose(None, &correct, &[]),
            vec![(0, Reason::MixedCorrect), (1, Reason::MixedIncorrect)]
        );
        // all correct: one row
        assert_eq!(
            choose(None, &[true, true], &[]),
            vec![(0, Reason::MixedCorrect)]
        );
    }
}
