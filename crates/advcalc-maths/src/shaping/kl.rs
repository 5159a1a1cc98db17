//! Pipeline stage 2: the KL penalty in the reward (docs/reference/verl-0.9.1.md §2, verl `apply_kl_penalty`).
//!
//! ```text
//! kld[t]     = kl_penalty(old_log_probs[t], ref_log_prob[t]) · m[t]
//! rewards[t] = token_level_scores[t] − β · kld[t]
//! seq_kl_i   = Σ_t kld / (Σ_t m + 1e-8);  current_kl = mean_i seq_kl_i   (all rows count)
//! ```
//! β is the controller's value *before* its update with `current_kl`, and the controller is
//! carried across training batches (steps) in step order. The mask is the one before rollout
//! correction rejects anything (verl shapes first, quirk §9.15).
//!
//! The names in `algorithm.kl_penalty` and `algorithm.kl_ctrl.type` are read into these types
//! by `config::kl`.

/// verl's `kl_penalty` estimators (§2.1). A trailing `+` selects the straight-through
/// gradient variant, whose *value* is the base estimator's, so it maps to the same variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KlEstimator {
    /// `kl`, `k1`: log π − log π_ref.
    K1,
    /// `abs`: |d|.
    Abs,
    /// `mse`, `k2`: ½ d².
    K2,
    /// `low_var_kl`, `k3`: clamp(exp(k) − k − 1, −10, 10) with k = clamp(−d, −20, 20).
    K3,
}

impl KlEstimator {
    /// verl's name for the estimator (`kl`, `abs`, `mse`, `low_var_kl`).
    pub fn name(self) -> &'static str {
        match self {
            KlEstimator::K1 => "kl",
            KlEstimator::Abs => "abs",
            KlEstimator::K2 => "mse",
            KlEstimator::K3 => "low_var_kl",
        }
    }

    /// The per-token value, in f32 as torch computes it.
    pub fn value(self, logprob: f32, ref_logprob: f32) -> f32 {
        let d = logprob - ref_logprob;
        match self {
            KlEstimator::K1 => d,
            KlEstimator::Abs => d.abs(),
            KlEstimator::K2 => 0.5 * d * d,
            KlEstimator::K3 => {
                let k = (-d).clamp(-20.0, 20.0);
                (k.exp() - k - 1.0).clamp(-10.0, 10.0)
            }
        }
    }
}

/// verl's KL controllers (§2.3); `horizon` is positive (checked by `config::kl`).
#[derive(Debug, Clone, PartialEq)]
pub enum KlController {
    Fixed {
        value: f64,
    },
    Adaptive {
        value: f64,
        target: f64,
        horizon: f64,
    },
}

impl KlController {
    /// verl's `kl_ctrl.type`: `fixed` or `adaptive`.
    pub fn kind(&self) -> &'static str {
        match self {
            KlController::Fixed { .. } => "fixed",
            KlController::Adaptive { .. } => "adaptive",
        }
    }

    /// The current coefficient β.
    pub fn value(&self) -> f64 {
        match self {
            KlController::Fixed { value } | KlController::Adaptive { value, .. } => *value,
        }
    }

    /// `update(current_kl, n_steps)`: the adaptive controller moves β toward the target.
    pub fn update(&mut self, current_kl: f64, n_steps: usize) {
        if let KlController::Adaptive {
            value,
            target,
            horizon,
        } = self
        {
            let error = (current_kl / *target - 1.0).clamp(-0.2, 0.2);
            *value *= 1.0 + error * n_steps as f64 / *horizon;
        }
    }
}

/// Apply the penalty to one row: writes `rewards` and returns `Σ_t kld[t]` (masked), in f64.
pub fn penalize_row(
    estimator: KlEstimator,
    beta: f32,
    scores: &[f32],
    old: &[f32],
    reference: &[f32],
    mask: &[f32],
    rewards: &mut [f32],
) -> f64 {
    let mut kl_sum = 0.0f64;
    for t in 0..scores.len() {
        let kld = estimator.value(old[t], reference[t]) * mask[t];
        rewards[t] = scores[t] - beta * kld;
        kl_sum += kld as f64;
    }
    kl_sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_close;

    // Reference §2.1: lp = [-1, -0.5, -30, -2], ref = [-1.2, -0.4, -0.1, -25].
    const LP: [f32; 4] = [-1.0, -0.5, -30.0, -2.0];
    const REF: [f32; 4] = [-1.2, -0.4, -0.1, -25.0];

    fn values(e: KlEstimator) -> Vec<f32> {
        LP.iter().zip(REF).map(|(&l, r)| e.value(l, r)).collect()
    }

    /// The shared oracle at 1e-6 absolute + 1e-6 relative (the numbers are f32 values).
    #[track_caller]
    fn close(what: &str, a: &[f32], e: &[f32]) {
        assert_close(what, a, e, 1e-6, 1e-6);
    }

    #[test]
    fn estimators_worked_numbers() {
        close(
            "k1",
            &values(KlEstimator::K1),
            &[0.200000048, -0.099999994, -29.8999996, 23.0],
        );
        close(
            "k2",
            &values(KlEstimator::K2),
            &[0.0200000089, 0.00499999942, 447.004974, 264.5],
        );
        close(
            "k3",
            &values(KlEstimator::K3),
            &[0.0187307596, 0.00517094135, 10.0, 10.0],
        );
        close(
            "abs",
            &values(KlEstimator::Abs),
            &[0.200000048, 0.099999994, 29.8999996, 23.0],
        );
    }

    // Reference §2.2: two rows, β = 0.1, scores 1.0 at (0,1) and (1,2).
    #[test]
    fn apply_kl_penalty_worked_example() {
        let lp = [[-1.0f32, -0.5, -2.0], [-0.2, -0.3, -0.4]];
        let rf = [[-1.2f32, -0.4, -1.0], [-0.2, -0.1, -0.9]];
        let m = [[1.0f32, 1.0, 0.0], [1.0, 1.0, 1.0]];
        let s = [[0.0f32, 1.0, 0.0], [0.0, 0.0, 1.0]];
        let mut seq_kl = Vec::new();
        let mut rows = Vec::new();
        for i in 0..2 {
            let mut r = [0.0f32; 3];
            let sum = penalize_row(KlEstimator::K1, 0.1, &s[i], &lp[i], &rf[i], &m[i], &mut r);
            let n: f32 = m[i].iter().sum();
            seq_kl.push(sum / (n as f64 + 1e-8));
            rows.push(r);
        }
        close("row 0", &rows[0], &[-0.02, 1.01, 0.0]);
        close("row 1", &rows[1], &[0.0, 0.02, 0.95]);
        let current = (seq_kl[0] + seq_kl[1]) / 2.0;
        assert_close("current kl", &[current], &[0.075], 1e-7, 0.0);
        let mut ctrl = KlController::Adaptive {
            value: 0.1,
            target: 0.05,
            horizon: 100.0,
        };
        ctrl.update(current, 2);
        assert_close("β", &[ctrl.value()], &[0.1004], 1e-9, 0.0);
    }

    // Reference §2.3: 0.001 → 0.00100512 after update(0.5, 256), target 0.1, horizon 1e4.
    #[test]
    fn adaptive_controller() {
        let mut c = KlController::Adaptive {
            value: 0.001,
            target: 0.1,
            horizon: 10000.0,
        };
        c.update(0.5, 256);
        assert_close("β", &[c.value()], &[0.00100512], 1e-12, 0.0);
        let mut f = KlController::Fixed { value: 0.001 };
        f.update(0.5, 256);
        assert_eq!(f.value(), 0.001);
    }
}
