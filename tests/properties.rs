//! Property tests on the kernels: identities that hold for any input. Each expectation is
//! computed here independently of the estimator under test (from the labels and scores
//! directly, not through advcalc's grouping or another estimator), and compared with the
//! shared oracle (`check_close`).

mod common;

use advcalc_maths::data::GroupKey;
use advcalc_maths::estimators::groups::Grouping;
use advcalc_maths::estimators::{
    gae, gpg, grpo, opo, reinforce_plus_plus, reinforce_plus_plus_baseline, rloo, rloo_vectorized,
};
use advcalc_maths::shaping::kl::KlEstimator;
use common::check_close;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// A row: (reward, value, mask) per token.
fn row() -> impl Strategy<Value = Vec<(f32, f32, bool)>> {
    prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0, any::<bool>()), 0..24)
}

/// Scores and group labels of a batch.
fn batch() -> impl Strategy<Value = (Vec<f64>, Vec<u8>)> {
    prop::collection::vec((-3.0f64..3.0, 0u8..5), 1..40).prop_map(|v| v.into_iter().unzip())
}

fn grouping(labels: &[u8]) -> Grouping {
    let keys: Vec<GroupKey> = labels.iter().map(|&l| GroupKey::Int(l.into())).collect();
    Grouping::by_key(keys.iter())
}

/// Every per-row outcome estimator, as (name, scalars).
fn outcome_estimators(scores: &[f64], labels: &[u8]) -> Vec<(&'static str, Vec<f64>)> {
    let g = grouping(labels);
    let lengths: Vec<f64> = scores
        .iter()
        .map(|s| (s.abs() * 3.0).floor() + 1.0)
        .collect();
    vec![
        ("grpo", grpo::grpo(scores, &g, true)),
        ("grpo_no_std", grpo::grpo(scores, &g, false)),
        ("rloo", rloo::rloo(scores, &g)),
        (
            "rloo_vectorized",
            rloo_vectorized::rloo_vectorized(scores, &g),
        ),
        ("opo", opo::opo(scores, &lengths, &g).0),
        ("gpg", gpg::gpg(scores, &g)),
        (
            "rf++_baseline",
            reinforce_plus_plus_baseline::reinforce_plus_plus_baseline(scores, &g),
        ),
    ]
}

proptest! {
    // GAE with λ = 1 is the return-to-go over policy tokens minus V (tool tokens skipped, γ once
    // per policy token), on every policy token.
    #[test]
    fn gae_lambda_one_is_return_to_go_minus_value(tokens in row(), gamma in 0.5f64..1.0) {
        let r: Vec<f32> = tokens.iter().map(|t| t.0).collect();
        let v: Vec<f32> = tokens.iter().map(|t| t.1).collect();
        let m: Vec<f32> = tokens.iter().map(|t| if t.2 { 1.0 } else { 0.0 }).collect();
        let mut a = vec![0.0f32; r.len()];
        gae::gae_row(&r, &v, &m, gamma, 1.0, &mut a);
        let (mut got, mut expected) = (Vec::new(), Vec::new());
        let mut rtg = 0.0f64;
        for t in (0..r.len()).rev() {
            if m[t] == 1.0 {
                rtg = r[t] as f64 + gamma * rtg;
                got.push(a[t]);
                expected.push(rtg - v[t] as f64);
            }
        }
        check_close("policy tokens, last first", &got, &expected, 1e-4, 1e-4)
            .map_err(TestCaseError::fail)?;
    }

    // RLOO is the score minus the mean of the other members of its group; a singleton keeps
    // its score (docs/reference/verl-0.9.1.md §5.7). The leave-one-out mean is computed here by scanning the labels.
    #[test]
    fn rloo_is_score_minus_leave_one_out_mean((scores, labels) in batch()) {
        let a = rloo::rloo(&scores, &grouping(&labels));
        let expected: Vec<f64> = (0..scores.len())
            .map(|i| {
                let others: Vec<f64> = (0..scores.len())
                    .filter(|&j| j != i && labels[j] == labels[i])
                    .map(|j| scores[j])
                    .collect();
                if others.is_empty() {
                    scores[i]
                } else {
                    scores[i] - others.iter().sum::<f64>() / others.len() as f64
                }
            })
            .collect();
        check_close("rloo", &a, &expected, 1e-9, 1e-9).map_err(TestCaseError::fail)?;
    }

    // GRPO is (s − μ)/(σ + 1e-6) with the group's mean and unbiased std, and s − μ without the
    // std; a singleton has μ = 0, σ = 1 (docs/reference/verl-0.9.1.md §5.2). μ and σ are computed here from the
    // labels, two-pass.
    #[test]
    fn grpo_is_the_group_z_score((scores, labels) in batch()) {
        let g = grouping(&labels);
        let (mut with_std, mut without) = (Vec::new(), Vec::new());
        for i in 0..scores.len() {
            let members: Vec<f64> = (0..scores.len())
                .filter(|&j| labels[j] == labels[i])
                .map(|j| scores[j])
                .collect();
            let n = members.len() as f64;
            let (mu, sigma) = if members.len() == 1 {
                (0.0, 1.0)
            } else {
                let mu = members.iter().sum::<f64>() / n;
                let var = members.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (n - 1.0);
                (mu, var.sqrt())
            };
            with_std.push((scores[i] - mu) / (sigma + 1e-6));
            without.push(scores[i] - mu);
        }
        // 1e-8: a group of equal scores divides a rounding-sized s − μ by 1e-6
        check_close("grpo", &grpo::grpo(&scores, &g, true), &with_std, 1e-8, 1e-9)
            .map_err(TestCaseError::fail)?;
        check_close("grpo without std", &grpo::grpo(&scores, &g, false), &without, 1e-12, 1e-12)
            .map_err(TestCaseError::fail)?;
    }

    // Reordering the rows of a batch changes no row's result.
    #[test]
    fn row_order_does_not_matter((scores, labels) in batch(), seed in any::<u64>()) {
        let n = scores.len();
        let mut perm: Vec<usize> = (0..n).collect();
        let mut state = seed | 1;
        for i in (1..n).rev() {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            perm.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let s2: Vec<f64> = perm.iter().map(|&i| scores[i]).collect();
        let l2: Vec<u8> = perm.iter().map(|&i| labels[i]).collect();
        for ((name, a), (_, b)) in outcome_estimators(&scores, &labels).into_iter().zip(outcome_estimators(&s2, &l2)) {
            // row k of the shuffled batch is row perm[k] of the original
            let a_permuted: Vec<f64> = perm.iter().map(|&i| a[i]).collect();
            check_close(name, &b, &a_permuted, 1e-9, 0.0).map_err(TestCaseError::fail)?;
        }
    }

    // Finite inputs give finite outputs.
    #[test]
    fn outputs_are_finite((scores, labels) in batch(), tokens in row()) {
        for (name, a) in outcome_estimators(&scores, &labels) {
            prop_assert!(a.iter().all(|x| x.is_finite()), "{}", name);
        }
        let r: Vec<f32> = tokens.iter().map(|t| t.0).collect();
        let v: Vec<f32> = tokens.iter().map(|t| t.1).collect();
        let m: Vec<f32> = tokens.iter().map(|t| if t.2 { 1.0 } else { 0.0 }).collect();
        let mut a = vec![0.0f32; r.len()];
        gae::gae_row(&r, &v, &m, 0.99, 0.95, &mut a);
        prop_assert!(a.iter().all(|x| x.is_finite()));
        reinforce_plus_plus::reinforce_plus_plus_row(&r, &m, 0.99, &mut a);
        prop_assert!(a.iter().all(|x| x.is_finite()));
        for e in [KlEstimator::K1, KlEstimator::Abs, KlEstimator::K2, KlEstimator::K3] {
            prop_assert!(r.iter().zip(&v).all(|(&x, &y)| e.value(x * 20.0, y * 20.0).is_finite()));
        }
    }

    // Tokens with mask 0 get 0 where verl masks: outcome broadcasts and REINFORCE++ returns.
    #[test]
    fn masked_tokens_get_zero(tokens in row(), a in -5.0f32..5.0) {
        let r: Vec<f32> = tokens.iter().map(|t| t.0).collect();
        let m: Vec<f32> = tokens.iter().map(|t| if t.2 { 1.0 } else { 0.0 }).collect();
        let mut out = vec![1.0f32; r.len()];
        advcalc_maths::estimators::broadcast_outcome(a, &m, &mut out);
        let mut ret = vec![1.0f32; r.len()];
        reinforce_plus_plus::reinforce_plus_plus_row(&r, &m, 0.9, &mut ret);
        for t in 0..r.len() {
            if m[t] == 0.0 {
                prop_assert_eq!(out[t], 0.0);
                prop_assert_eq!(ret[t], 0.0);
            }
        }
    }
}

/// A number as Python's `json.dumps` may write it: an integer, or a float's shortest
/// repr (`NaN`, `Infinity` bare).
fn json_number() -> impl Strategy<Value = (String, Option<i64>, f64)> {
    prop_oneof![
        any::<i64>().prop_map(|i| (i.to_string(), Some(i), i as f64)),
        any::<f64>().prop_map(|x| {
            let text = if x.is_nan() {
                "NaN".to_string()
            } else if x.is_infinite() {
                if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
            } else {
                // `{:?}` is the shortest text that reads back to x, as Python's repr
                format!("{x:?}")
            };
            (text, None, x)
        }),
        (-1.0e3f64..1.0e3).prop_map(|x| (
            format!("{:.6}", x),
            None,
            format!("{x:.6}").parse().unwrap()
        )),
    ]
}

proptest! {
    // A trainer dump's token and log-prob lists: an array of numbers becomes one compact
    // vector whose items are exactly the numbers written (integers as i64, or every item as
    // f64 once one is not an integer), whatever the spacing.
    #[test]
    fn arrays_of_numbers_read_back_exactly(items in proptest::collection::vec(json_number(), 1..40), spaced in any::<bool>()) {
        use advcalc_io::json_line::{parse_json, Json};
        let sep = if spaced { ", " } else { "," };
        let text = format!("[{}]", items.iter().map(|i| i.0.as_str()).collect::<Vec<_>>().join(sep));
        let tree = parse_json(&text).unwrap();
        let all_ints: Option<Vec<i64>> = items.iter().map(|i| i.1).collect();
        match all_ints {
            Some(ints) => prop_assert_eq!(tree, Json::Ints(ints)),
            None => {
                let got = tree.floats().expect("an array of numbers");
                prop_assert_eq!(got.len(), items.len());
                for (g, i) in got.iter().zip(&items) {
                    prop_assert!(g.to_bits() == i.2.to_bits() || (g.is_nan() && i.2.is_nan()), "{} read as {}", i.0, g);
                }
                prop_assert_eq!(tree.ints(), None);
            }
        }
    }
}
