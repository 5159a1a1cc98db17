//! The actor's KL loss (`use_kl_loss`, `workers/utils/losses.py:131-142`): `kl_loss_coef ×
//! agg_loss(kl_penalty(log π, log π_ref, kl_loss_type))`, aggregated like the policy loss.
//! `kl_penalty` (`core_algos.py:2188`, docs/reference/loss-replay.md §3) with d = log π − log π_ref:
//!
//! | type | value | d value / d log π |
//! | --- | --- | --- |
//! | `kl`, `k1` | d | 1 |
//! | `abs` | \|d\| | sign d |
//! | `mse`, `k2` | ½d² | d |
//! | `low_var_kl`, `k3` | clamp(e^k − k − 1, ±10), k = clamp(−d, ±20) | 1 − e^k inside both clamps, else 0 |
//! | `X+` | the value of X | d (k2's gradient, straight through) |

use crate::shaping::kl::KlEstimator;

/// `kl_loss_type` and `kl_loss_coef`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KlLoss {
    pub estimator: KlEstimator,
    /// A trailing `+`: the value of `estimator`, the gradient of k2.
    pub straight_through: bool,
    pub coef: f64,
}

impl KlLoss {
    /// The per-token value and its derivative by log π, in f32 as torch computes them.
    pub fn value_and_grad(&self, logprob: f32, ref_logprob: f32) -> (f32, f32) {
        let d = logprob - ref_logprob;
        let value = self.estimator.value(logprob, ref_logprob);
        if self.straight_through {
            return (value, d);
        }
        let grad = match self.estimator {
            KlEstimator::K1 => 1.0,
            // torch's abs has gradient sign(d), 0 at 0
            KlEstimator::Abs => {
                if d > 0.0 {
                    1.0
                } else if d < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            KlEstimator::K2 => d,
            KlEstimator::K3 => {
                let k = -d;
                let kc = k.clamp(-20.0, 20.0);
                let kld = kc.exp() - kc - 1.0;
                // clamp passes the gradient inside its closed range only
                if !(-20.0..=20.0).contains(&k) || !(-10.0..=10.0).contains(&kld) {
                    0.0
                } else {
                    // d kld / d k = e^k − 1, and dk / d log π = −1
                    1.0 - kc.exp()
                }
            }
        };
        (value, grad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_close;

    fn kl(estimator: KlEstimator, straight_through: bool) -> KlLoss {
        KlLoss {
            estimator,
            straight_through,
            coef: 1.0,
        }
    }

    // d = log π − log π_ref = −0.25 − (−0.5) = 0.25 by hand:
    // k1 0.25 (grad 1); abs 0.25 (1); k2 0.03125 (0.25); k3: k = −0.25,
    // e^−0.25 + 0.25 − 1 = 0.0288007830714 (grad 1 − e^−0.25 = 0.2211992169)
    #[test]
    fn values_and_gradients_by_hand() {
        let cases = [
            (kl(KlEstimator::K1, false), 0.25, 1.0),
            (kl(KlEstimator::Abs, false), 0.25, 1.0),
            (kl(KlEstimator::K2, false), 0.03125, 0.25),
            (kl(KlEstimator::K3, false), 0.028800783, 0.2211992169),
            (kl(KlEstimator::K3, true), 0.028800783, 0.25),
            (kl(KlEstimator::K1, true), 0.25, 0.25),
        ];
        for (k, value, grad) in cases {
            let (v, g) = k.value_and_grad(-0.25, -0.5);
            assert_close("value", &[v], &[value], 1e-7, 0.0);
            assert_close("grad", &[g], &[grad], 1e-7, 0.0);
        }
        // abs below 0 and k3 beyond its value clamp (k = 20: e^20 − 21 ≫ 10)
        assert_eq!(
            kl(KlEstimator::Abs, false).value_and_grad(-1.0, -0.5).1,
            -1.0
        );
        assert_eq!(
            kl(KlEstimator::K3, false).value_and_grad(-25.0, -5.0),
            (10.0, 0.0)
        );
    }
}
