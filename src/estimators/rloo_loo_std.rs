//! `rloo_loo_std`: NeMo-RL's default GRPO — a leave-one-out baseline scaled by a
//! leave-one-out standard deviation, only where that std is positive
//! (`docs/conventions.md` B4).
//!
//! **Computes**, per group of n rows, in f32 as NeMo does (one-pass `E[x²] − E[x]²`):
//! ```text
//! n ≤ 1:   b = s, σ = 0                                      → a = 0
//! n > 1:   M = 1 − I (leave one out), nv = n − 1
//!          b_i = (M·s)_i / nv;   q_i = (M·s²)_i / nv
//!          σ_i = nan_to_num( sqrt((q_i − b_i²) · nv/(nv − 1)) )    (NaN → 0, ±inf → ±max)
//! a_i = s_i − b_i;   a_i /= (σ_i + 1e-6) only where σ_i > 0;   advantages = returns = a_i · m
//! ```
//! **Inputs**: outcome scores, `uid` groups (NeMo groups rows with identical prompt token
//! ids; `uid` stands in for them). **Parameters** ([`NemoOptions`]): `use_leave_one_out_baseline`
//! (false: M = all ones, nv = n, the ordinary one-pass sample std) and `normalize_rewards`
//! (false: `a = s − b`). `-e rloo_loo_std` uses NeMo's defaults (both true); under
//! `--convention nemo-rl` the `nemo.*` keys set them for `grpo`.
//! **Edge cases**: n = 2 gives `nv/(nv−1) = inf`; `0·inf = NaN → 0`, so `a = s_i − s_j`
//! unscaled. The f32 one-pass variance can leave a residue for equal non-dyadic scores, which
//! is then divided by a tiny σ — NeMo#1518; reproduced, not fixed. advcalc writes `a·m`;
//! NeMo broadcasts `a` over every position (advcalc choice, C3).
//! **Source**: NeMo-RL `nemo_rl/algorithms/advantage_estimator.py`
//! (`GRPOAdvantageEstimator`), `nemo_rl/algorithms/utils.py`
//! `calculate_baseline_and_std_per_prompt` (line 104), defaults in `nemo_rl/algorithms/grpo.py`.

use crate::error::Result;
use crate::estimators::groups::Grouping;
use crate::estimators::{
    Column, Estimate, Info, Kind, Plan, Rows, Tokens, TrainingBatch, broadcast_scalars,
};

/// NeMo-RL's `grpo.*` switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NemoOptions {
    pub use_leave_one_out_baseline: bool,
    pub normalize_rewards: bool,
}

impl Default for NemoOptions {
    fn default() -> Self {
        NemoOptions {
            use_leave_one_out_baseline: true,
            normalize_rewards: true,
        }
    }
}

/// `nemo.group_by`: what makes NeMo's groups. NeMo itself groups rows whose prompt token ids
/// are identical (`torch.unique(prompts, dim=0)` in `calculate_baseline_and_std_per_prompt`);
/// `uid` (the default) stands in for them, `prompt_ids` reads them from the `prompt_ids`
/// column (a list of integers per row, compared exactly as stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NemoGroupBy {
    #[default]
    Uid,
    PromptIds,
}

impl NemoGroupBy {
    pub fn name(self) -> &'static str {
        match self {
            NemoGroupBy::Uid => "uid",
            NemoGroupBy::PromptIds => "prompt_ids",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [NemoGroupBy::Uid, NemoGroupBy::PromptIds]
            .into_iter()
            .find(|g| g.name() == name)
    }
}

/// torch's `nan_to_num(x, nan=0.0)`.
fn nan_to_num(x: f32) -> f32 {
    if x.is_nan() {
        0.0
    } else if x == f32::INFINITY {
        f32::MAX
    } else if x == f32::NEG_INFINITY {
        f32::MIN
    } else {
        x
    }
}

pub fn rloo_loo_std(scores: &[f64], grouping: &Grouping, opts: NemoOptions) -> Vec<f64> {
    let mut out = vec![0.0f64; scores.len()];
    for rows in grouping.members() {
        let n = rows.len();
        if n <= 1 {
            continue; // baseline = s, std = 0 → 0
        }
        let s: Vec<f32> = rows.iter().map(|&r| scores[r] as f32).collect();
        let loo = opts.use_leave_one_out_baseline;
        let nv = if loo { (n - 1) as f32 } else { n as f32 };
        let correction = nv / (nv - 1.0);
        for (k, &r) in rows.iter().enumerate() {
            let (mut sum, mut sq) = (0.0f32, 0.0f32);
            for (j, &x) in s.iter().enumerate() {
                if loo && j == k {
                    continue;
                }
                sum += x;
                sq += x * x;
            }
            let b = sum / nv;
            let q = sq / nv;
            let std = nan_to_num(((q - b * b) * correction).sqrt());
            let a = s[k] - b;
            out[r] = if opts.normalize_rewards && std > 0.0 {
                (a / (std + 1e-6)) as f64
            } else {
                a as f64
            };
        }
    }
    out
}

/// `-e rloo_loo_std`: one scalar per row ([`Kind::Outcome`]).
pub struct RlooLooStd;

impl Estimate for RlooLooStd {
    const INFO: Info = Info {
        source: "NeMo-RL",
        summary: "leave-one-out baseline and leave-one-out std, divided only where the std > 0",
        kind: Kind::Outcome,
        columns: &[Column::Uid],
        settings: &["nemo.group_by"],
        weights_in_pass1: false,
        needs_tokens: None,
    };

    fn batch(batch: &TrainingBatch<'_>, plan: &mut Plan) -> Result<()> {
        batch.set_scalars(
            plan,
            rloo_loo_std(&batch.scores(), &batch.grouping(), NemoOptions::default()),
        );
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &Plan) -> Result<Tokens> {
        Ok(broadcast_scalars(rows, plan))
    }
}

#[cfg(test)]
#[allow(clippy::approx_constant)] // hand-worked numbers, written as computed
mod tests {
    use super::*;
    use crate::estimators::test_support::{assert_close, grouping};

    const PLAIN: NemoOptions = NemoOptions {
        use_leave_one_out_baseline: false,
        normalize_rewards: true,
    };
    const LOO_NO_STD: NemoOptions = NemoOptions {
        use_leave_one_out_baseline: true,
        normalize_rewards: false,
    };

    // conventions.md: group of 8 with one success. The success's others are all 0, so its
    // LOO std is 0 and it is not divided: 1.0; a failure: b = 1/7, σ = √(1/7) → −.377963.
    #[test]
    fn group_of_eight_one_success() {
        let mut s = vec![0.0; 8];
        s[0] = 1.0;
        let a = rloo_loo_std(&s, &grouping(&["g"; 8]), NemoOptions::default());
        assert_close(&a[..2], &[1.0, -0.377963]);
        let a = rloo_loo_std(&s, &grouping(&["g"; 8]), LOO_NO_STD);
        assert_close(&a[..2], &[1.0, -1.0 / 7.0]);
    }

    // conventions.md T1: uid [a,a,a,b], s = [1,0,.5,.7].
    #[test]
    fn with_a_singleton() {
        let g = grouping(&["a", "a", "a", "b"]);
        let s = [1.0, 0.0, 0.5, 0.7];
        assert_close(
            &rloo_loo_std(&s, &g, NemoOptions::default()),
            &[2.121314, -2.121314, 0.0, 0.0],
        );
        assert_close(
            &rloo_loo_std(&s, &g, PLAIN),
            &[0.999998, -0.999998, 0.0, 0.0],
        );
        assert_close(&rloo_loo_std(&s, &g, LOO_NO_STD), &[0.75, -0.75, 0.0, 0.0]);
    }

    // conventions.md T2: n = 2 → LOO std NaN → 0, not divided.
    #[test]
    fn pairs() {
        let g = grouping(&["a", "a", "b", "b"]);
        let s = [1.0, 0.0, 0.25, 0.25];
        assert_close(
            &rloo_loo_std(&s, &g, NemoOptions::default()),
            &[1.0, -1.0, 0.0, 0.0],
        );
        assert_close(
            &rloo_loo_std(&s, &g, PLAIN),
            &[0.707106, -0.707106, 0.0, 0.0],
        );
    }

    // conventions.md T3: LOO b = [1/6,.5,.5,1/3], LOO σ = [.288675,.5,.5,.577350].
    #[test]
    fn group_of_four() {
        let a = rloo_loo_std(
            &[1.0, 0.0, 0.0, 0.5],
            &grouping(&["a"; 4]),
            NemoOptions::default(),
        );
        assert_close(&a, &[2.886741, -0.999998, -0.999998, 0.288675]);
    }
}
