//! The groups the report looks at: each `uid` within a training batch (as the estimators and
//! `compare`'s pass-rate buckets see them) with its pass rate, the fraction of its rows that
//! are correct.

use crate::analysis::buckets::uid_groups;
use crate::engine::job::Plan;

/// Every group's rows (in first-appearance order) and pass rate.
pub struct PassRates {
    /// Per group: its rows' global indices, ascending.
    pub members: Vec<Vec<usize>>,
    /// Per group: correct rows / rows.
    pub rate: Vec<f64>,
}

impl PassRates {
    /// The groups of the first variant that read a `uid`; `None` when none did.
    pub fn new(prepared: &[Plan], correct: &[bool]) -> Option<Self> {
        Some(Self::of(uid_groups(prepared)?.members(), correct))
    }

    /// Pass rates of the given groups.
    pub fn of(members: Vec<Vec<usize>>, correct: &[bool]) -> Self {
        let rate = members
            .iter()
            .map(|m| m.iter().filter(|&&r| correct[r]).count() as f64 / m.len() as f64)
            .collect();
        PassRates { members, rate }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_rate_is_the_share_of_the_group_s_rows_that_are_correct() {
        // rows 0..8; groups {0,1,2,3} 1/4, {4,5} 1/2, {6,7} 1/2
        let correct = [true, false, false, false, true, false, false, true];
        let p = PassRates::of(vec![vec![0, 1, 2, 3], vec![4, 5], vec![6, 7]], &correct);
        assert_eq!(p.rate, vec![0.25, 0.5, 0.5]);
    }
}
