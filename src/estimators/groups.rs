//! Group labels (`uid`, `session_id`) and their mapping to dense group ids within a batch.

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
