//! Property tests on the kernels: identities that hold for any input.

use advcalc::data::GroupKey;
use advcalc::estimators::groups::Grouping;
use advcalc::estimators::{
    gae, gpg, grpo, opo, reinforce_plus_plus, reinforce_plus_plus_baseline, rloo, rloo_vectorized,
};
use advcalc::shaping::kl::KlEstimator;
use proptest::prelude::*;

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
        let mut rtg = 0.0f64;
        for t in (0..r.len()).rev() {
            if m[t] == 1.0 {
                rtg = r[t] as f64 + gamma * rtg;
                let expected = rtg - v[t] as f64;
                prop_assert!((a[t] as f64 - expected).abs() <= 1e-4 * (1.0 + expected.abs()), "t={} {} vs {}", t, a[t], expected);
            }
        }
    }

    // RLOO is n/(n − 1) times the group-mean-centred score, for groups of two or more.
    #[test]
    fn rloo_is_scaled_mean_centring((scores, labels) in batch()) {
        let g = grouping(&labels);
        let a = rloo::rloo(&scores, &g);
        let centred = grpo::grpo(&scores, &g, false);
        let members = g.members();
        for (i, &grp) in g.group_of_row.iter().enumerate() {
            let n = members[grp].len() as f64;
            if n > 1.0 {
                prop_assert!((a[i] - n / (n - 1.0) * centred[i]).abs() < 1e-9);
            }
        }
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
            for (k, &i) in perm.iter().enumerate() {
                prop_assert!((a[i] - b[k]).abs() < 1e-9, "{}: row {}", name, i);
            }
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
        advcalc::estimators::broadcast_outcome(a, &m, &mut out);
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
