//! Group pass-rate buckets: each group (uid within a training batch, as the estimators see
//! them) falls in a bucket by the fraction of its rows that are correct, and each variant's
//! |advantage| is summed per bucket.

use crate::data::GroupKey;
use crate::engine::job::Plan;
use advcalc_maths::estimators::groups::Grouping;

use crate::analysis::tokens::AdvantageSums;

/// Group pass-rate buckets: the fraction of a group's rows that are correct. The two ends
/// are exact: groups all wrong or all right carry no signal for the GRPO family.
pub const BUCKETS: [&str; 6] = [
    "0",
    "(0, 0.25]",
    "(0.25, 0.5]",
    "(0.5, 0.75]",
    "(0.75, 1)",
    "1",
];

/// The index in `BUCKETS` of a pass rate.
fn bucket_of(pass_rate: f64) -> usize {
    match pass_rate {
        p if p <= 0.0 => 0,
        p if p <= 0.25 => 1,
        p if p <= 0.5 => 2,
        p if p <= 0.75 => 3,
        p if p < 1.0 => 4,
        _ => 5,
    }
}

/// One variant's advantages over the groups of one pass-rate bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketSummary {
    /// Groups in the bucket.
    pub groups: usize,
    /// Rows of those groups.
    pub rows: usize,
    /// Valid tokens of those rows.
    pub valid_tokens: u64,
    /// Mean |advantage| over the bucket's valid tokens (`None`: no valid token).
    pub mean_abs: Option<f64>,
}

/// Every row's bucket, and the number of groups in each bucket.
pub struct RowBuckets {
    /// Per row: its group's index in `BUCKETS`.
    bucket: Vec<usize>,
    /// Per bucket: its groups.
    groups: Vec<usize>,
}

impl RowBuckets {
    /// Bucket the groups by their rows' correctness; `None` when no variant read a `uid`.
    pub fn new(prepared: &[Plan], correct: &[bool]) -> Option<Self> {
        let grouping = uid_groups(prepared)?;
        let mut groups = vec![0usize; BUCKETS.len()];
        let mut bucket = vec![0usize; grouping.group_of_row.len()];
        for members in grouping.members() {
            let right = members.iter().filter(|&&r| correct[r]).count();
            let b = bucket_of(right as f64 / members.len() as f64);
            groups[b] += 1;
            for r in members {
                bucket[r] = b;
            }
        }
        Some(RowBuckets { bucket, groups })
    }

    /// One variant's summary per bucket, from its rows' sums.
    pub fn summaries(&self, rows: &[AdvantageSums]) -> Vec<BucketSummary> {
        let mut out: Vec<BucketSummary> = self
            .groups
            .iter()
            .map(|&g| BucketSummary {
                groups: g,
                rows: 0,
                valid_tokens: 0,
                mean_abs: None,
            })
            .collect();
        let mut abs = vec![0.0f64; BUCKETS.len()];
        for (r, &b) in rows.iter().zip(&self.bucket) {
            out[b].rows += 1;
            out[b].valid_tokens += r.valid;
            abs[b] += r.sum_abs;
        }
        for (o, a) in out.iter_mut().zip(abs) {
            o.mean_abs = (o.valid_tokens > 0).then(|| a / o.valid_tokens as f64);
        }
        out
    }
}

/// The groups (uid within step) of the first variant that read a `uid`; `None` when none did.
/// `compare`'s buckets and `report`'s difficulty curve group the rows the same way.
pub fn uid_groups(prepared: &[Plan]) -> Option<Grouping> {
    let uid = prepared
        .iter()
        .map(|p| &p.stats.uid)
        .find(|u| !u.is_empty())?;
    let step = prepared[0].stats.step.as_deref();
    let keys: Vec<(Option<i64>, &GroupKey)> = (0..uid.len())
        .map(|i| (step.map(|s| s[i]), &uid[i]))
        .collect();
    Some(Grouping::by_key(keys.iter()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_rate_buckets() {
        let b: Vec<usize> = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]
            .map(bucket_of)
            .to_vec();
        assert_eq!(b, vec![0, 1, 1, 2, 2, 3, 3, 4, 5]);
    }
}
