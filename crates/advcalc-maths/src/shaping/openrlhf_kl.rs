//! OpenRLHF's own KL in the reward, for the `openrlhf_*` estimators (`docs/conventions.md`
//! B5 step 3): `openrlhf.kl_coef` (OpenRLHF `--algo.kl.init_coef`) and
//! `openrlhf.kl_estimator` (`--algo.kl.estimator`).
//!
//! **Computes**, per token, in f32 as OpenRLHF's `compute_approx_kl`
//! (`openrlhf/models/utils.py` at `3c3be62`), with `d = log π_old − log π_ref`:
//! ```text
//! k1: d          k2: d²/2          k3: exp(−d) − 1 + d
//! kl_t = clamp(k, −10, 10)
//! ```
//! and `compute_reward` adds `−c·kl_t` at every position, after the clipped group scalar sits
//! on the row's last valid token; `get_cumulative_returns` then multiplies the rewards by the
//! action mask, so only valid tokens' KL reaches the returns:
//! `G_t = [t ≤ last valid]·a + Σ_{t' ≥ t} m_t'·(−c·kl_t')`, summed in f32 from the end.
//!
//! **Inputs**: `old_log_probs` (the actor's log-probs at rollout, OpenRLHF's
//! `action_log_probs`) and `ref_log_prob` (`base_action_log_probs`), response mask.
//! **Parameters**: `c` (`kl_coef`; `compute_reward` turns c ≤ 0 into 0) and the estimator.
//! **Edge cases**: the KL never enters the group statistics (it is added after the group
//! baseline and the ±clip); OpenRLHF's adaptive controller is not reproduced (`c` is the
//! initial coefficient, which is what its first step uses).

/// `openrlhf.kl_estimator`: OpenRLHF's `compute_approx_kl` estimators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApproxKl {
    #[default]
    K1,
    K2,
    K3,
}

impl ApproxKl {
    pub const ALL: [ApproxKl; 3] = [ApproxKl::K1, ApproxKl::K2, ApproxKl::K3];

    pub fn name(self) -> &'static str {
        match self {
            ApproxKl::K1 => "k1",
            ApproxKl::K2 => "k2",
            ApproxKl::K3 => "k3",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// `compute_approx_kl` for one token, in f32, clamped to ±10.
    pub fn value(self, log_prob: f32, ref_log_prob: f32) -> f32 {
        let d = log_prob - ref_log_prob;
        let k = match self {
            ApproxKl::K1 => d,
            ApproxKl::K2 => d * d / 2.0,
            ApproxKl::K3 => (-d).exp() - 1.0 + d,
        };
        k.clamp(-10.0, 10.0)
    }
}

/// `openrlhf.kl_estimator` reads one of these names.
impl crate::settings::Named for ApproxKl {
    const ALL: &'static [Self] = &ApproxKl::ALL;
    fn name(self) -> &'static str {
        ApproxKl::name(self)
    }
}

/// OpenRLHF's KL in the reward: the coefficient (0: off) and the estimator.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OpenrlhfKl {
    pub coef: f64,
    pub estimator: ApproxKl,
}

impl OpenrlhfKl {
    /// Whether any KL reaches the rewards (`compute_reward` zeroes a coefficient ≤ 0).
    pub fn active(&self) -> bool {
        self.coef > 0.0
    }

    /// One row's returns with the KL: `a` on every position up to the last valid token, plus
    /// the running sum (from the end, in f32) of `−c·kl_t` over valid tokens.
    pub fn row_returns(
        &self,
        a: f32,
        mask: &[f32],
        old: &[f32],
        reference: &[f32],
        out: &mut [f32],
    ) {
        let c = if self.active() { self.coef as f32 } else { 0.0 };
        let last = mask.iter().rposition(|&m| m != 0.0);
        let mut run = 0.0f32;
        for t in (0..mask.len()).rev() {
            // compute_reward: last_reward + (−c·kl); then rewards = action_mask · rewards
            let kl_reward = -c * self.estimator.value(old[t], reference[t]);
            let reward = if Some(t) == last {
                a + kl_reward
            } else {
                kl_reward
            };
            run += mask[t] * reward;
            out[t] = run;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // d = −.5 − (−1) = .5: k1 .5, k2 .125, k3 e^−.5 − 1 + .5 = .106531; d = 30: k1 clamps to 10.
    #[test]
    fn estimators_by_hand() {
        assert_eq!(ApproxKl::K1.value(-0.5, -1.0), 0.5);
        assert_eq!(ApproxKl::K2.value(-0.5, -1.0), 0.125);
        assert!((ApproxKl::K3.value(-0.5, -1.0) - 0.106531).abs() < 1e-6);
        assert_eq!(ApproxKl::K1.value(0.0, -30.0), 10.0);
        assert_eq!(ApproxKl::K3.value(-30.0, 0.0), 10.0);
    }

    // mask [1, 0, 1, 0], a = 1, c = .1, k1 with d = [.5, 2, −1, 3]: rewards after masking
    // [−.05, 0, 1 + .1, 0] (the tool token's and the padding's KL are masked away);
    // returns from the end: [1.05, 1.1, 1.1, 0].
    #[test]
    fn returns_by_hand() {
        let kl = OpenrlhfKl {
            coef: 0.1,
            estimator: ApproxKl::K1,
        };
        let mask = [1.0, 0.0, 1.0, 0.0];
        let old = [0.5, 2.0, -1.0, 3.0];
        let reference = [0.0; 4];
        let mut out = [9.0f32; 4];
        kl.row_returns(1.0, &mask, &old, &reference, &mut out);
        let want: [f32; 4] = [1.05, 1.1, 1.1, 0.0];
        crate::test_support::assert_close("openrlhf kl returns out", &out, &want, 1e-6, 0.0);
        // a coefficient ≤ 0 is 0 (compute_reward)
        let off = OpenrlhfKl { coef: -1.0, ..kl };
        off.row_returns(1.0, &mask, &old, &reference, &mut out);
        assert_eq!(out, [1.0, 1.0, 1.0, 0.0]);
    }
}
