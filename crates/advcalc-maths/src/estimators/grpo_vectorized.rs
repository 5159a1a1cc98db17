//! `grpo_vectorized`: verl's tensorised GRPO (docs/reference/verl-0.9.1.md §5.3, §4.3,
//! `compute_grpo_vectorized_outcome_advantage`).
//!
//! **Computes** the same per-row scalar as [`grpo`](super::grpo::Grpo) —
//! `a_i = (s_i − μ_g)/(σ_g + ε)`, unbiased σ, singleton groups (μ, σ) = (0, 1), broadcast onto
//! the mask — with two differences that come from verl's trainer, not from the maths:
//!
//! - **Always divides by σ.** verl's dispatcher never forwards `norm_adv_by_std_in_grpo` to
//!   this estimator (§6.1, quirk §9.4), so advcalc ignores the setting too and says so.
//! - **Label canonicalisation** (`as_torch_index`, §4.3): if every `uid` reads as an integer
//!   (Python `int()`: surrounding whitespace, a sign, `_` between digits), rows are grouped by
//!   that integer, so `"1"` and `"01"` are one group; otherwise labels are opaque strings.
//!   A negative integer label makes verl fail (`index_add_` with a negative index), so it is
//!   an error here too. An integer beyond i64 makes numpy's coercion fail, and verl falls back
//!   to opaque labels; so does advcalc.
//!
//! **Inputs**, **parameters**, **edge cases**: as `grpo`; the f32 rounding path differs
//! (≈1e-6), and equal scores give exactly 0 here as well.

use crate::data::GroupKey;
use crate::estimators::groups::Grouping;

use super::grpo;
use crate::error::{Error, Result};
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    VERL, broadcast_scalars,
};

/// Group rows the way `as_torch_index` does. `Err(row)` names a row whose label would be a
/// negative group index, which verl cannot handle.
pub fn canonical_grouping(labels: &[GroupKey]) -> Result<Grouping, usize> {
    let as_ints: Option<Vec<i64>> = labels
        .iter()
        .map(|k| match k {
            GroupKey::Int(i) => i64::try_from(*i).ok(),
            GroupKey::Str(s) => parse_python_int(s),
        })
        .collect();
    match as_ints {
        Some(ints) => {
            if let Some(row) = ints.iter().position(|&i| i < 0) {
                return Err(row);
            }
            Ok(Grouping::by_key(ints.iter()))
        }
        None => Ok(Grouping::by_key(labels.iter())),
    }
}

/// Per-row advantage scalars: GRPO with σ-normalisation always on.
pub fn grpo_vectorized(scores: &[f64], grouping: &Grouping) -> Vec<f64> {
    grpo::grpo(scores, grouping, true)
}

/// Python's `int(str)` for base 10, limited to what fits in i64 (numpy's `astype(int64)`).
fn parse_python_int(s: &str) -> Option<i64> {
    let t = s.trim();
    let (neg, digits) = match t.as_bytes().first()? {
        b'+' => (false, &t[1..]),
        b'-' => (true, &t[1..]),
        _ => (false, t),
    };
    let bytes = digits.as_bytes();
    if bytes.is_empty() || bytes[0] == b'_' || bytes[bytes.len() - 1] == b'_' {
        return None;
    }
    let mut value: i128 = 0;
    let mut prev_underscore = false;
    for &b in bytes {
        match b {
            b'0'..=b'9' => {
                value = value * 10 + i128::from(b - b'0');
                if value > i128::from(i64::MAX) + 1 {
                    return None;
                }
                prev_underscore = false;
            }
            b'_' if !prev_underscore => prev_underscore = true,
            _ => return None,
        }
    }
    i64::try_from(if neg { -value } else { value }).ok()
}

/// `-e grpo_vectorized`: one scalar per row ([`Kind::Outcome`]).
pub struct GrpoVectorized;

impl Estimate for GrpoVectorized {
    const INFO: Info = Info {
        source: VERL,
        summary: "tensorised GRPO: always divides by the std, numeric uids canonicalised",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &[],
        weights_in_pass1: false,
        needs_tokens: None,
        rewards_under_mask: false,
        family: Family::Independent,
        ignores: &[(
            "norm_adv_by_std_in_grpo",
            "divides by the group std whatever norm_adv_by_std_in_grpo says: verl 0.9.1's trainer never passes the setting to it, and advcalc does the same; use -e grpo for Dr. GRPO (no std)",
        )],
        overview: Overview {
            section: None,
            needs: None,
            returns: "= advantages",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "s/(1+1e-6)",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = ();
    type Options = ();

    fn batch(batch: &TrainingBatch<'_>, plan: &mut EstimatorPlan) -> Result<()> {
        let labels = batch.labels();
        let g = canonical_grouping(&labels).map_err(|i| {
            Error::data(format!(
                "{}: column `uid` row {}: label {} is a negative integer, and verl 0.9.1's grpo_vectorized fails on negative group labels (index_add_ with a negative index)",
                batch.file, batch.rows[i], labels[i]
            ))
            .with_hint("use -e grpo, or non-negative uids")
        })?;
        batch.set_scalars(plan, grpo_vectorized(&batch.scores(), &g));
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan) -> Result<Tokens> {
        Ok(broadcast_scalars(rows, plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(labels: &[&str]) -> Vec<GroupKey> {
        labels.iter().map(|l| GroupKey::Str((*l).into())).collect()
    }

    // Reference §5.3: labels ["1","01","1","01"] are one group in grpo_vectorized.
    #[test]
    fn numeric_strings_merge() {
        let g = canonical_grouping(&strs(&["1", "01", "1", "01"])).unwrap();
        assert_eq!(g.n_groups, 1);
    }

    #[test]
    fn non_numeric_labels_stay_opaque() {
        let g = canonical_grouping(&strs(&["1", "01", "x"])).unwrap();
        assert_eq!(g.n_groups, 3);
    }

    #[test]
    fn negative_labels_are_refused() {
        assert_eq!(canonical_grouping(&strs(&["3", "-1"])), Err(1));
        assert_eq!(
            canonical_grouping(&[GroupKey::Int(0), GroupKey::Int(-2)]),
            Err(1)
        );
    }

    #[test]
    fn python_int_syntax() {
        assert_eq!(parse_python_int(" 12 "), Some(12));
        assert_eq!(parse_python_int("+007"), Some(7));
        assert_eq!(parse_python_int("1_000"), Some(1000));
        assert_eq!(parse_python_int("1__0"), None);
        assert_eq!(parse_python_int("_1"), None);
        assert_eq!(parse_python_int("1.5"), None);
        assert_eq!(parse_python_int(""), None);
        assert_eq!(parse_python_int("99999999999999999999"), None);
    }

    // Reference §11: the same worked numbers as grpo with σ on.
    #[test]
    fn worked_example() {
        let g = canonical_grouping(&strs(&["a", "a", "a", "b", "c", "c"])).unwrap();
        let s: Vec<f64> = [1.0f32, 0.0, 1.0, 0.7, 0.1, 0.1]
            .iter()
            .map(|&x| x as f64)
            .collect();
        let a: Vec<f32> = grpo_vectorized(&s, &g).iter().map(|&x| x as f32).collect();
        let e = [
            0.577349246f32,
            -1.15469861,
            0.577349246,
            0.699999332,
            0.0,
            0.0,
        ];
        crate::test_support::assert_close("grpo_vectorized", &a, &e, 1e-6, 0.0);
    }
}
