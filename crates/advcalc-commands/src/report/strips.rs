//! Token strips: a few rows drawn token by token, coloured by each variant's advantage.
//!
//! Which rows, when not asked for: a strip shows something beyond one colour where the row
//! has tool spans (grey cells between the policy's turns) or rejected tokens (dark cells);
//! without them, an outcome-level estimator gives every token of a row the same advantage.
//! So the rows drawn are:
//!
//! 1. a pair, one correct and one incorrect row of one group (the same prompt, so the group
//!    baseline shows), from the group with both correct and incorrect rows whose pair shows
//!    the most (its correct row and its incorrect row each count 1 for tool spans and 1 for
//!    rejected tokens; within the group, the correct row and the incorrect row that show the
//!    most, the first on a tie), the group nearest pass rate 0.5 on a tie, then the first.
//!    Without a `uid` column (or without a group holding both), the dump's rows are one
//!    pool;
//! 2. for tool spans and for rejected tokens, when the dump has rows with them but neither
//!    row of the pair does: one row with them, in a group with both correct and incorrect
//!    rows first, then the one that shows the most, then nearest pass rate 0.5, then the
//!    first;
//! 3. the rows asked for with `--rows`, each once, in that order.

use crate::data::GroupKey;
use crate::engine::job::GroupOutputs;

use super::groups::PassRates;

/// Why a row is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripReason {
    /// The correct (`true`) or incorrect row of the pair.
    Pair(bool),
    /// A row with this feature, which neither row of the pair has.
    Shows(Feature),
    /// Asked for with `--rows`.
    Asked,
}

/// What makes a strip more than one colour under an outcome-level estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    ToolSpans,
    Rejected,
}

/// What a row's strip would show besides its advantages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowFeatures {
    /// Tool spans: runs of mask-0 tokens followed by a policy token (inspect's count).
    pub tool_spans: u32,
    /// Tokens rejected by rollout correction (mask 1 → 0), the most under any variant.
    pub rejected: u32,
}

impl RowFeatures {
    /// Row `i` of a row group under every variant.
    pub fn of(outputs: &[GroupOutputs], i: usize) -> Self {
        let g = &outputs[0].group;
        let s = g.span(i);
        let mask = &g.mask.values[s.clone()];
        let tool_spans = mask
            .windows(2)
            .filter(|w| w[0] == 0.0 && w[1] != 0.0)
            .count() as u32;
        let rejected = outputs
            .iter()
            .map(|o| {
                let s = o.group.span(i);
                o.group.mask.values[s.clone()]
                    .iter()
                    .zip(&o.mask[s])
                    .filter(|&(&before, &after)| before != 0.0 && after == 0.0)
                    .count() as u32
            })
            .max()
            .unwrap_or(0);
        RowFeatures {
            tool_spans,
            rejected,
        }
    }

    pub fn has(&self, f: Feature) -> bool {
        match f {
            Feature::ToolSpans => self.tool_spans > 0,
            Feature::Rejected => self.rejected > 0,
        }
    }

    /// How much the strip shows: 1 for tool spans, 1 for rejected tokens.
    pub fn interest(&self) -> u32 {
        u32::from(self.has(Feature::ToolSpans)) + u32::from(self.has(Feature::Rejected))
    }
}

/// One row's tokens under every variant.
#[derive(Debug, Clone)]
pub struct Strip {
    /// The row's index in the input (dataset order).
    pub row: usize,
    pub reason: StripReason,
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
    /// Its tool spans and rejected tokens.
    pub shape: RowFeatures,
}

/// The rows to draw, with why (the module's rule): a pair of one correct and one incorrect
/// row, rows with tool spans or rejected tokens the pair lacks, then `asked`.
pub fn choose(
    groups: Option<&PassRates>,
    correct: &[bool],
    shapes: &[RowFeatures],
    asked: &[usize],
) -> Vec<(usize, StripReason)> {
    let all: Vec<usize> = (0..correct.len()).collect();
    // (members, distance of the pass rate from 0.5) of the groups with both kinds of rows;
    // the whole dump as one pool without groups or without such a group
    let mut pools: Vec<(&[usize], f64)> = match groups {
        Some(g) => g
            .members
            .iter()
            .zip(&g.rate)
            .filter(|(_, r)| **r > 0.0 && **r < 1.0)
            .map(|(m, r)| (m.as_slice(), (r - 0.5).abs()))
            .collect(),
        None => Vec::new(),
    };
    if pools.is_empty() {
        pools.push((&all, 0.0));
    }
    // the row of `pool` that shows the most, the first on a tie
    let best = |pool: &[usize], want: bool| -> Option<usize> {
        pool.iter()
            .copied()
            .filter(|&r| correct[r] == want)
            .fold(None, |b: Option<usize>, r| match b {
                Some(b) if shapes[b].interest() >= shapes[r].interest() => Some(b),
                _ => Some(r),
            })
    };
    let mut chosen: Option<(u32, f64, Option<usize>, Option<usize>)> = None;
    for &(pool, distance) in &pools {
        let (c, i) = (best(pool, true), best(pool, false));
        let shows = [c, i]
            .iter()
            .flatten()
            .map(|&r| shapes[r].interest())
            .sum::<u32>();
        if chosen.is_none_or(|(s, d, _, _)| shows > s || (shows == s && distance < d)) {
            chosen = Some((shows, distance, c, i));
        }
    }
    let mut out = Vec::new();
    if let Some((_, _, c, i)) = chosen {
        out.extend(c.map(|r| (r, StripReason::Pair(true))));
        out.extend(i.map(|r| (r, StripReason::Pair(false))));
    }
    // a row for each feature the dump has and the pair lacks
    let signal: Vec<Option<f64>> = match groups {
        Some(g) => {
            let mut d = vec![None; correct.len()];
            for (m, r) in g.members.iter().zip(&g.rate) {
                for &row in m {
                    d[row] = (*r > 0.0 && *r < 1.0).then_some((r - 0.5).abs());
                }
            }
            d
        }
        None => vec![Some(0.0); correct.len()],
    };
    for feature in [Feature::ToolSpans, Feature::Rejected] {
        if out.iter().any(|&(r, _)| shapes[r].has(feature)) {
            continue;
        }
        // key: (no signal, shows less, distance from 0.5); the first row on a tie
        let key = |r: usize| {
            (
                signal[r].is_none(),
                u32::MAX - shapes[r].interest(),
                signal[r].unwrap_or(0.5),
            )
        };
        let pick = (0..correct.len()).filter(|&r| shapes[r].has(feature)).fold(
            None,
            |b: Option<usize>, r| match b {
                Some(b) if key(b) <= key(r) => Some(b),
                _ => Some(r),
            },
        );
        if let Some(r) = pick {
            out.push((r, StripReason::Shows(feature)));
        }
    }
    for &r in asked {
        if !out.iter().any(|&(o, _)| o == r) {
            out.push((r, StripReason::Asked));
        }
    }
    out
}

/// Row `i` of a row group (every variant's outputs of it).
pub fn extract(
    outputs: &[GroupOutputs],
    i: usize,
    row: usize,
    reason: StripReason,
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
        shape: RowFeatures::of(outputs, i),
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

    fn shapes(tools: &[usize], rejected: &[usize], rows: usize) -> Vec<RowFeatures> {
        (0..rows)
            .map(|r| RowFeatures {
                tool_spans: u32::from(tools.contains(&r)),
                rejected: 2 * u32::from(rejected.contains(&r)),
            })
            .collect()
    }

    #[test]
    fn without_tool_spans_or_rejection_one_correct_and_one_incorrect_row_of_the_most_mixed_group() {
        let correct = [true, false, false, true, false, true];
        let plain = shapes(&[], &[], 6);
        // groups {0,2} 1/2, {1,3,4,5} 1/2: the first wins the tie
        let g = PassRates::of(vec![vec![0, 2], vec![1, 3, 4, 5]], &correct);
        let rows = choose(Some(&g), &correct, &plain, &[4, 0]);
        assert_eq!(
            rows,
            vec![
                (0, StripReason::Pair(true)),
                (2, StripReason::Pair(false)),
                (4, StripReason::Asked)
            ]
        );
        // without groups: the input's first correct and first incorrect rows
        assert_eq!(
            choose(None, &correct, &plain, &[]),
            vec![(0, StripReason::Pair(true)), (1, StripReason::Pair(false))]
        );
        // all correct: one row
        assert_eq!(
            choose(None, &[true, true], &plain[..2], &[]),
            vec![(0, StripReason::Pair(true))]
        );
    }

    #[test]
    fn rows_with_tool_spans_or_rejected_tokens_come_first() {
        // rows 0..12 in groups of 4: {0..4} 1/2, {4..8} 1/4, {8..12} 3/4
        let correct = [
            true, false, true, false, true, false, false, false, true, true, true, false,
        ];
        let g = PassRates::of(
            vec![(0..4).collect(), (4..8).collect(), (8..12).collect()],
            &correct,
        );
        // tool spans on row 5 (incorrect, group 2), rejection on row 10 (correct, group 3):
        // groups 2 and 3 show 1 each, group 2 is as near 1/2 as group 3: group 2's pair is
        // its correct row 4 and its incorrect row with tool spans, 5; then the rejected row
        let rows = choose(Some(&g), &correct, &shapes(&[5], &[10], 12), &[]);
        assert_eq!(
            rows,
            vec![
                (4, StripReason::Pair(true)),
                (5, StripReason::Pair(false)),
                (10, StripReason::Shows(Feature::Rejected))
            ]
        );
        // both kinds in group 3: its pair (9 with tool spans, 11 rejected), nothing more
        let rows = choose(Some(&g), &correct, &shapes(&[9, 2], &[11], 12), &[]);
        assert_eq!(
            rows,
            vec![(9, StripReason::Pair(true)), (11, StripReason::Pair(false))]
        );
        // a row in a group without signal is drawn only when no other row has the feature
        let correct = [true, true, true, false];
        let g = PassRates::of(vec![vec![0, 1], vec![2, 3]], &correct);
        assert_eq!(
            choose(Some(&g), &correct, &shapes(&[0], &[], 4), &[]),
            vec![
                (2, StripReason::Pair(true)),
                (3, StripReason::Pair(false)),
                (0, StripReason::Shows(Feature::ToolSpans))
            ]
        );
    }
}
