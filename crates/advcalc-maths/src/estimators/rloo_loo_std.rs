//! `rloo_loo_std`: NeMo-RL's default GRPO — a leave-one-out baseline scaled by a
//! leave-one-out standard deviation, only where that std is positive
//! (`docs/conventions.md` B4).
//!
//! **Computes**, per group of n rows, exactly (f64, two-pass; the exact answer NeMo's formula
//! gives in real arithmetic), written as f32:
//! ```text
//! n ≤ 1:   b = s, σ = 0                                      → a = 0
//! n > 1:   others_i = the group's rows but i (leave-one-out; all rows without it), nv = |others_i|
//!          b_i = mean(others_i);   σ_i = sample std of others_i (0 when nv ≤ 1)
//! a_i = s_i − b_i;   a_i /= (σ_i + 1e-6) only where σ_i > 0;   advantages = returns = a_i · m
//! ```
//! **Inputs**: outcome scores, groups by `uid` or, with `nemo.group_by: prompt_ids`, by
//! identical prompt token ids (NeMo's rule). **Parameters** ([`NemoOptions`]):
//! `use_leave_one_out_baseline` (false: every row, the ordinary sample std) and
//! `normalize_rewards` (false: `a = s − b`). `-e rloo_loo_std` uses NeMo's defaults (both
//! true); under `--convention nemo-rl` the `nemo.*` keys set them for `grpo`.
//! **Edge cases**: n = 2 leaves one other row: NeMo's `nv/(nv−1) = inf` gives `0·inf = NaN →
//! 0`, so `a = s_i − s_j` unscaled — the same as the exact σ = 0 here.
//! **Float residue (not reproduced)**: NeMo evaluates `E[x²] − E[x]²` in float32 through a
//! matrix multiply whose summation order is unspecified, so no fixed order reproduces it bit
//! for bit (the corpus measured NeMo on a CPU giving a residue on two rows of a group and 0 on
//! the other six, where a row-order emulation gives it on all eight).
//! Where the other rows are equal but not exactly representable sums (seven rows of 0.3),
//! NeMo's residue σ is tiny but positive and its advantage explodes (NeMo#1518: 7428.4 where
//! the exact answer is 0.7). advcalc writes the exact answer; [`one_pass_f32`] emulates the
//! float32 formula in row order for `inspect`'s fragile-group finding. advcalc writes `a·m`;
//! NeMo broadcasts `a` over every position (advcalc choice, C3).
//! **Source**: NeMo-RL `nemo_rl/algorithms/advantage_estimator.py`
//! (`GRPOAdvantageEstimator`), `nemo_rl/algorithms/utils.py`
//! `calculate_baseline_and_std_per_prompt` (line 104), defaults in `nemo_rl/algorithms/grpo.py`.

use crate::error::Result;
use crate::estimators::groups::Grouping;
use crate::estimators::{
    Column, Estimate, EstimatorPlan, Family, Info, Kind, Overview, Rows, Tokens, TrainingBatch,
    broadcast_scalars,
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

/// `nemo.group_by` reads one of these names.
impl crate::settings::Named for NemoGroupBy {
    const ALL: &'static [Self] = &[NemoGroupBy::Uid, NemoGroupBy::PromptIds];
    fn name(self) -> &'static str {
        NemoGroupBy::name(self)
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

/// Groups up to this size get a two-pass std per row (O(n²)); larger ones the O(n)
/// leave-one-out update with an exact test for equal others (see [`rloo_loo_std`]).
const TWO_PASS_MAX_ROWS: usize = 256;

/// The exact leave-one-out (or plain) baseline and std of NeMo's formula; see the module.
/// Per row, the other rows' mean and sample std are taken two-pass in f64 for groups of up to
/// `TWO_PASS_MAX_ROWS` (256) rows; a larger group (a `uid` that is not a prompt, usually) uses
/// `SS₋ᵢ = SS − (s_i − μ)²·n/(n − 1)` from the group's two-pass `SS`, with σ = 0 exactly when
/// the other rows are all equal (the `σ > 0` gate must not see a rounding residue).
pub fn rloo_loo_std(scores: &[f64], grouping: &Grouping, opts: NemoOptions) -> Vec<f64> {
    let mut out = vec![0.0f64; scores.len()];
    for rows in grouping.members() {
        let n = rows.len();
        if n <= 1 {
            continue; // baseline = s, std = 0 → 0
        }
        let loo = opts.use_leave_one_out_baseline;
        if n > TWO_PASS_MAX_ROWS {
            large_group(scores, &rows, opts, &mut out);
            continue;
        }
        for (k, &r) in rows.iter().enumerate() {
            let others = || {
                rows.iter()
                    .enumerate()
                    .filter(move |&(j, _)| !(loo && j == k))
                    .map(|(_, &q)| scores[q])
            };
            let nv = others().count() as f64;
            let b = others().sum::<f64>() / nv;
            let std = if nv > 1.0 {
                (others().map(|x| (x - b) * (x - b)).sum::<f64>() / (nv - 1.0)).sqrt()
            } else {
                0.0 // NeMo: 0·inf = NaN → 0
            };
            let a = scores[r] - b;
            out[r] = if opts.normalize_rewards && std > 0.0 {
                a / (std + 1e-6)
            } else {
                a
            };
        }
    }
    out
}

/// [`rloo_loo_std`] for a group above [`TWO_PASS_MAX_ROWS`] rows, in O(n).
fn large_group(scores: &[f64], rows: &[usize], opts: NemoOptions, out: &mut [f64]) {
    let s: Vec<f64> = rows.iter().map(|&r| scores[r]).collect();
    let n = s.len() as f64;
    let sum: f64 = s.iter().sum();
    let mean = sum / n;
    let ss: f64 = s.iter().map(|x| (x - mean) * (x - mean)).sum();
    // the two smallest and two largest values decide whether the others of a row are equal
    let mut sorted = s.clone();
    sorted.sort_by(f64::total_cmp);
    let (lo, hi) = (sorted[0], sorted[sorted.len() - 1]);
    let (lo2, hi2) = (sorted[1], sorted[sorted.len() - 2]);
    for (k, &r) in rows.iter().enumerate() {
        let x = s[k];
        let (b, std) = if opts.use_leave_one_out_baseline {
            let nv = n - 1.0;
            let (min_o, max_o) = (
                if x == lo { lo2 } else { lo },
                if x == hi { hi2 } else { hi },
            );
            let std = if min_o == max_o || nv < 2.0 {
                0.0
            } else {
                ((ss - (x - mean) * (x - mean) * n / nv).max(0.0) / (nv - 1.0)).sqrt()
            };
            ((sum - x) / nv, std)
        } else {
            let std = if lo == hi {
                0.0
            } else {
                (ss / (n - 1.0)).sqrt()
            };
            (mean, std)
        };
        let a = x - b;
        out[r] = if opts.normalize_rewards && std > 0.0 {
            a / (std + 1e-6)
        } else {
            a
        };
    }
}

/// NeMo's formula as float32 one-pass arithmetic, the sums taken in row order:
/// `b = Σ_others s / nv`, `q = Σ_others s² / nv`, `σ = nan_to_num(√((q − b²)·nv/(nv − 1)))`.
/// Not advcalc's output (NeMo's matrix multiply sums in an unspecified order, so this is one
/// possible residue, not NeMo's): `inspect` uses it to show how far float32 departs.
pub fn one_pass_f32(scores: &[f64], grouping: &Grouping, opts: NemoOptions) -> Vec<f64> {
    let mut out = vec![0.0f64; scores.len()];
    for rows in grouping.members() {
        let n = rows.len();
        if n <= 1 {
            continue;
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
        rewards_under_mask: false,
        family: Family::Independent,
        ignores: &[],
        overview: Overview {
            section: Some("B4"),
            needs: Some("`uid`, or `prompt_ids` (`nemo.group_by`)"),
            returns: "= advantages",
            whitening: "no",
            masked: true,
            masked_note: None,
            singleton: "0",
            variants: &[],
        },
    };
    type Stats = ();
    type Plan = ();
    type Options = ();

    fn batch(batch: &TrainingBatch<'_>, plan: &mut EstimatorPlan) -> Result<()> {
        batch.set_scalars(
            plan,
            rloo_loo_std(&batch.scores(), &batch.grouping(), NemoOptions::default()),
        );
        Ok(())
    }

    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan) -> Result<Tokens> {
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

    // The corpus's fragile NeMo groups: equal others → exact σ = 0, no division. Seven rows
    // of 0.3 and one of 1.0: the 1.0 row's others are all 0.3 → a = 1.0 − 0.3 = .7 (NeMo's
    // float32 gives 7428.4); a 0.3 row: b = (6·.3 + 1)/7 = .4, σ = √((6·.01 + .36)/6) =
    // .264575 → (.3 − .4)/(.264575 + 1e-6) = −.377963. Eight rows of 0.3: 0 everywhere.
    #[test]
    fn equal_others_are_exactly_undivided() {
        let x = 0.3f32 as f64;
        let mut s = vec![x; 8];
        s[7] = 1.0;
        let g = grouping(&["g"; 8]);
        let a = rloo_loo_std(&s, &g, NemoOptions::default());
        assert_close(&[a[0], a[7]], &[-0.377963, 0.7]);
        assert_eq!(
            rloo_loo_std(&[x; 8], &g, NemoOptions::default()),
            vec![0.0; 8]
        );
        // the float32 row-order emulation keeps NeMo's residue: far from .7
        let f = one_pass_f32(&s, &g, NemoOptions::default());
        assert!(f[7] > 100.0, "{f:?}");
    }

    // A group above the two-pass size (732 rows of 0.3, one of them set to .5, the last to
    // 1.0) against the two-pass formula written out here; then without the .5, the 1.0 row's
    // others are all equal: exactly 1.0 − 0.3, undivided.
    #[test]
    fn large_groups_agree_with_two_pass() {
        let x = 0.3f32 as f64;
        let n = TWO_PASS_MAX_ROWS + 476;
        let mut s = vec![x; n];
        s[n - 1] = 1.0;
        s[3] = 0.5;
        let g = grouping(&vec!["g"; n]);
        let a = rloo_loo_std(&s, &g, NemoOptions::default());
        // by hand for the 1.0 row: others 1498 × x and one .5
        let others: Vec<f64> = s[..n - 1].to_vec();
        let b = others.iter().sum::<f64>() / (n - 1) as f64;
        let sd = (others.iter().map(|v| (v - b) * (v - b)).sum::<f64>() / (n - 2) as f64).sqrt();
        assert!((a[n - 1] - (1.0 - b) / (sd + 1e-6)).abs() < 1e-9 * a[n - 1].abs());
        // without the .5, the 1.0 row's others are all equal: 0.7 exactly as f32
        s[3] = x;
        let a = rloo_loo_std(&s, &g, NemoOptions::default());
        assert!((a[n - 1] - (1.0 - x)).abs() < 1e-12, "{}", a[n - 1]);
        // and a 0.3 row matches the two-pass formula
        let others: Vec<f64> = s[1..].to_vec();
        let b = others.iter().sum::<f64>() / (n - 1) as f64;
        let sd = (others.iter().map(|v| (v - b) * (v - b)).sum::<f64>() / (n - 2) as f64).sqrt();
        assert!((a[0] - (x - b) / (sd + 1e-6)).abs() < 1e-9);
        let plain = NemoOptions {
            use_leave_one_out_baseline: false,
            normalize_rewards: true,
        };
        assert_eq!(rloo_loo_std(&vec![x; n], &g, plain), vec![0.0; n]);
    }
}
