//! Group labels (`uid`, `session_id`) and their mapping to dense group ids within a batch,
//! and the per-group sums and means the group estimators share.

use std::collections::HashMap;

/// Dense ids for the labels of one batch, in order of first appearance.
#[derive(Debug, Clone, PartialEq)]
pub struct Grouping {
    /// Group id of each row of the batch.
    pub group_of_row: Vec<usize>,
    pub n_groups: usize,
}

impl Grouping {
    /// Group rows by label equality.
    pub fn by_key<'a, K: std::hash::Hash + Eq + 'a>(keys: impl IntoIterator<Item = &'a K>) -> Self {
        let mut ids: HashMap<&K, usize> = HashMap::new();
        let group_of_row = keys
            .into_iter()
            .map(|k| {
                let next = ids.len();
                *ids.entry(k).or_insert(next)
            })
            .collect();
        Grouping {
            group_of_row,
            n_groups: ids.len(),
        }
    }

    /// Members of each group, in row order.
    pub fn members(&self) -> Vec<Vec<usize>> {
        let mut members = vec![Vec::new(); self.n_groups];
        for (row, &g) in self.group_of_row.iter().enumerate() {
            members[g].push(row);
        }
        members
    }
}

/// Row count and score sum of each group.
pub fn group_sums(scores: &[f64], grouping: &Grouping) -> (Vec<usize>, Vec<f64>) {
    let mut count = vec![0usize; grouping.n_groups];
    let mut sum = vec![0.0f64; grouping.n_groups];
    for (&s, &g) in scores.iter().zip(&grouping.group_of_row) {
        count[g] += 1;
        sum[g] += s;
    }
    (count, sum)
}

/// Each row's value from its score and its group's size and score sum (`f(s, n, Σ)`): the
/// shape of the leave-one-out and mean-baseline estimators.
pub fn per_row_from_group(
    scores: &[f64],
    grouping: &Grouping,
    f: impl Fn(f64, usize, f64) -> f64,
) -> Vec<f64> {
    let (count, sum) = group_sums(scores, grouping);
    scores
        .iter()
        .zip(&grouping.group_of_row)
        .map(|(&s, &g)| f(s, count[g], sum[g]))
        .collect()
}

/// Group means; a singleton group's mean is 0, as in verl's loop estimators (`grpo`,
/// `gpg`, `reinforce_plus_plus_baseline`).
pub fn group_means(scores: &[f64], grouping: &Grouping) -> Vec<f64> {
    let (count, sum) = group_sums(scores, grouping);
    (0..grouping.n_groups)
        .map(|g| {
            if count[g] > 1 {
                sum[g] / count[g] as f64
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::GroupKey;

    #[test]
    fn first_appearance_order() {
        let keys = [
            GroupKey::Str("b".into()),
            GroupKey::Str("a".into()),
            GroupKey::Str("b".into()),
        ];
        let g = Grouping::by_key(keys.iter());
        assert_eq!(g.group_of_row, vec![0, 1, 0]);
        assert_eq!(g.n_groups, 2);
        assert_eq!(g.members(), vec![vec![0, 2], vec![1]]);
    }
}
