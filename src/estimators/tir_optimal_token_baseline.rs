//! `tir_optimal_token_baseline`: the optimal token baseline aligned by the k-th *generated*
//! token instead of the absolute column (reference §5.14, verl
//! `compute_multi_turn_optimal_token_baseline_advantage`).
//!
//! **Computes** G, w, W as [`optimal_token_baseline`](super::optimal_token_baseline), then
//! compacts each row to its valid tokens (index k = 0, 1, ... over mask-1 positions):
//! `b_k = Σ_{i∈g} G_ik·W_ik / (Σ_{i∈g} W_ik + 1e-8)`, zero-tail on the compacted index, and
//! scatters `G − b` back to the valid positions; `returns = G`. **Edge cases**: rows with no
//! valid token are left out of their group (and get 0); a group of one has b = 0. Without
//! holes in the mask this equals `optimal_token_baseline`.

/// Compacted index of each valid position of a row (`None` for mask-0 positions).
pub fn compact_index(mask: &[f32]) -> Vec<Option<usize>> {
    let mut k = 0;
    mask.iter()
        .map(|&m| {
            (m != 0.0).then(|| {
                k += 1;
                k - 1
            })
        })
        .collect()
}
