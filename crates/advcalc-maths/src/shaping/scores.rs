//! Pipeline stage 1: `token_level_scores`. A token list (`rm_scores`) is taken as is; a scalar
//! `score` is placed on one position of the row, as verl's reward managers do (docs/reference/verl-0.9.1.md §7.1).

use crate::data::RowGroup;

/// How token lists are laid out, which decides where a scalar score goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Each list is as long as the row's response (verl V1): the score goes on the last
    /// position, verl's `L − 1`, even when that is a tool token with mask 0.
    #[default]
    Ragged,
    /// All lists have one length T with trailing padding: the score goes on the last
    /// mask-1 position, since padding and trailing tool tokens cannot be told apart.
    Padded,
}

/// Stage 1 on a decoded row group: place its scalar scores, if it has them, on its tokens
/// (`scores`), counting the rows whose score had no position (`dropped_scores`).
pub fn place(group: &mut RowGroup, layout: Layout) {
    if let Some(scalars) = group.scalar_scores.take() {
        let (placed, dropped) =
            place_scalar_scores(&scalars, &group.mask.offsets, &group.mask.values, layout);
        group.scores = placed.into();
        group.dropped_scores = dropped;
    }
}

/// Place one scalar score per row; returns flat token scores aligned with `offsets`, and the
/// number of rows whose score had no position (empty rows, or padded rows with no mask-1
/// token) and was dropped.
pub fn place_scalar_scores(
    scores: &[f32],
    offsets: &[usize],
    mask: &[f32],
    layout: Layout,
) -> (Vec<f32>, usize) {
    let mut out = vec![0.0f32; mask.len()];
    let mut dropped = 0;
    for (i, &score) in scores.iter().enumerate() {
        let (start, end) = (offsets[i], offsets[i + 1]);
        let position = match layout {
            Layout::Ragged => (end > start).then(|| end - 1),
            Layout::Padded => (start..end).rev().find(|&t| mask[t] != 0.0),
        };
        match position {
            Some(t) => out[t] = score,
            None if score != 0.0 => dropped += 1,
            None => {}
        }
    }
    (out, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_puts_the_score_on_the_last_token_even_a_tool_token() {
        let (s, dropped) = place_scalar_scores(
            &[1.0, 2.0],
            &[0, 3, 5],
            &[1., 1., 0., 1., 1.],
            Layout::Ragged,
        );
        assert_eq!(s, vec![0., 0., 1., 0., 2.]);
        assert_eq!(dropped, 0);
    }

    #[test]
    fn padded_puts_the_score_on_the_last_policy_token() {
        let (s, _) = place_scalar_scores(&[1.0], &[0, 4], &[1., 1., 0., 0.], Layout::Padded);
        assert_eq!(s, vec![0., 1., 0., 0.]);
    }

    #[test]
    fn empty_rows_drop_their_score() {
        let (s, dropped) = place_scalar_scores(&[1.0, 0.0], &[0, 0, 0], &[], Layout::Ragged);
        assert!(s.is_empty());
        assert_eq!(dropped, 1);
    }
}
