//! Multi-output agent sessions (docs/reference/verl-0.9.1.md §6.3, verl V1
//! `compute_advantage_for_multi_trajectories`).
//!
//! A session is one sample (`uid`, `session_id`) whose agent loop produced several outputs
//! (`output_index` 0, 1, ...), one row each. For exact `grpo` only, verl scores each session by
//! its **last** output: GRPO runs over the final rows (grouped by `uid`), and the final row's
//! advantage scalar is broadcast to every output of the session, each under its own mask.
//! Earlier outputs' own scores are ignored. If the final row's mask is all zero the session's
//! scalar is 0, but that row's score still counts in its group. Other estimators treat every
//! output as an independent group member, as verl does.

use std::collections::HashMap;

use crate::data::GroupKey;
use crate::estimators::groups::Grouping;
use crate::estimators::grpo;

/// One row of a batch, as the fold needs it.
#[derive(Debug, Clone, Copy)]
pub struct OutputRow<'a> {
    pub uid: &'a GroupKey,
    pub session: &'a GroupKey,
    pub output_index: i64,
    pub score: f64,
    /// Whether the row has any mask-1 token.
    pub has_valid: bool,
}

/// Per-row advantage scalars for `grpo` over multi-output sessions.
pub fn fold_sessions(rows: &[OutputRow<'_>], norm_adv_by_std_in_grpo: bool) -> Vec<f64> {
    // Sessions in order of first appearance; the final row is the largest output_index,
    // the first occurrence winning ties.
    let mut session_ids: HashMap<(&GroupKey, &GroupKey), usize> = HashMap::new();
    let mut final_row: Vec<usize> = Vec::new();
    let session_of_row: Vec<usize> = rows
        .iter()
        .enumerate()
        .map(|(j, r)| {
            let next = session_ids.len();
            let s = *session_ids.entry((r.uid, r.session)).or_insert(next);
            if s == final_row.len() {
                final_row.push(j);
            } else if r.output_index > rows[final_row[s]].output_index {
                final_row[s] = j;
            }
            s
        })
        .collect();
    let grouping = Grouping::by_key(final_row.iter().map(|&j| rows[j].uid));
    let scores: Vec<f64> = final_row.iter().map(|&j| rows[j].score).collect();
    let advantages = grpo::grpo(&scores, &grouping, norm_adv_by_std_in_grpo);
    let session_scalar: Vec<f64> = final_row
        .iter()
        .zip(&advantages)
        .map(|(&j, &a)| if rows[j].has_valid { a } else { 0.0 })
        .collect();
    session_of_row.iter().map(|&s| session_scalar[s]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference §6.3 worked example: keys u1_0_0, u1_0_1, u1_1_0, u2_0_0, u2_1_0, u2_1_1,
    // u2_1_2; final scores u1: [1, 0], u2: [5, 0.5] give ±0.7071058 and ±0.7071065.
    #[test]
    fn worked_example() {
        let u1 = GroupKey::Str("u1".into());
        let u2 = GroupKey::Str("u2".into());
        let s: Vec<GroupKey> = (0..2).map(GroupKey::Int).collect();
        let spec: [(&GroupKey, usize, i64, f64); 7] = [
            (&u1, 0, 0, 9.0), // non-final: its own score is ignored
            (&u1, 0, 1, 1.0),
            (&u1, 1, 0, 0.0),
            (&u2, 0, 0, 5.0),
            (&u2, 1, 0, 7.0),
            (&u2, 1, 1, 7.0),
            (&u2, 1, 2, 0.5),
        ];
        let rows: Vec<OutputRow> = spec
            .iter()
            .map(|&(uid, session, idx, score)| OutputRow {
                uid,
                session: &s[session],
                output_index: idx,
                score,
                has_valid: true,
            })
            .collect();
        let a: Vec<f32> = fold_sessions(&rows, true)
            .iter()
            .map(|&x| x as f32)
            .collect();
        let e = [
            0.7071058f32,
            0.7071058,
            -0.7071058,
            0.7071065,
            -0.7071065,
            -0.7071065,
            -0.7071065,
        ];
        crate::test_support::assert_close("sessions", &a, &e, 2e-7, 0.0);
    }

    #[test]
    fn empty_final_output_gives_the_session_zero_but_still_counts() {
        let u = GroupKey::Str("u".into());
        let s0 = GroupKey::Int(0);
        let s1 = GroupKey::Int(1);
        let rows = [
            OutputRow {
                uid: &u,
                session: &s0,
                output_index: 0,
                score: 1.0,
                has_valid: true,
            },
            OutputRow {
                uid: &u,
                session: &s0,
                output_index: 1,
                score: 1.0,
                has_valid: false,
            },
            OutputRow {
                uid: &u,
                session: &s1,
                output_index: 0,
                score: 0.0,
                has_valid: true,
            },
        ];
        let a = fold_sessions(&rows, false);
        // group {1, 0}: mean 0.5; session 0's final row is empty -> 0; session 1 -> -0.5
        assert_eq!(a, vec![0.0, 0.0, -0.5]);
    }
}
