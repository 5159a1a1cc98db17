//! SkyRL's `trainer.algorithm.advantage_batch_normalize` (`docs/conventions.md` C4): a
//! z-score of the batch's advantages whose mean is taken over the whole padded `B × T`
//! tensor, padding included, and whose variance over the valid tokens only. Read by the
//! GRPO/RLOO family under `--convention skyrl` (`skyrl.advantage_batch_normalize`).
//!
//! **Computes** (SkyRL `skyrl/train/trainer.py` `_normalize_advantages`, line 1467 at
//! `a956457`), with `A = a_i·m` the estimator's advantages:
//! ```text
//! mean = ΣA / (B·T)                           # UNMASKED: every entry of the padded tensor
//! var  = Σ((A − mean)²·m) / Σm                # masked, population
//! A'   = (A − mean)·rsqrt(max(var, 1e-8))     # at every position, padding included
//! ```
//! **Inputs**: each row's scalar `a_i`, valid-token count and length; `T` = the longest row
//! of the training batch (advcalc's choice: SkyRL pads to its own batch width, which a dump
//! does not record — the one padding-dependent number in advcalc). `returns` keep the
//! un-normalised `a·m`, as SkyRL normalises `data["advantages"]` only.
//! **Edge cases**: a batch without valid tokens has no variance (`None`: SkyRL divides 0 by
//! 0). SkyRL's later per-mini-batch loss-reduction scaling belongs to the loss and is not
//! reproduced.

use crate::estimators::moments::Whitening;

/// The batch's normalisation from each row's scalar, valid-token count and length.
pub fn skyrl_batch_normalize(scalars: &[f64], valid: &[f64], lengths: &[f64]) -> Option<Whitening> {
    let rows = scalars.len() as f64;
    let width = lengths.iter().copied().fold(0.0, f64::max);
    let actions: f64 = valid.iter().sum();
    if actions == 0.0 || rows * width == 0.0 {
        return None;
    }
    // the scalars as SkyRL holds them: f32
    let a = |x: f64| x as f32 as f64;
    let mean = scalars
        .iter()
        .zip(valid)
        .map(|(&x, &v)| a(x) * v)
        .sum::<f64>()
        / (rows * width);
    let var = scalars
        .iter()
        .zip(valid)
        .map(|(&x, &v)| v * (a(x) - mean) * (a(x) - mean))
        .sum::<f64>()
        / actions;
    Some(Whitening {
        mean,
        inv_std: 1.0 / var.max(1e-8).sqrt(),
    })
}

#[cfg(test)]
#[allow(clippy::approx_constant)] // hand-worked numbers, written as computed
mod tests {
    use super::*;

    // conventions.md T8: a = [1, −1] on masks [1,1,0] and [1,0,0].
    // T = 3: mean = (2 − 1)/6 = 1/6, var = (2·(5/6)² + (7/6)²)/3 = 2.75/3, rstd = 1.044466:
    // [[.870388, .870388, −.174078], [−1.218544, −.174078, −.174078]].
    // T = 4: mean = 1/8: [[.906217, .906217, −.129460, −.129460], [−1.165136, −.129460, …]].
    #[test]
    fn padding_dependence_t8() {
        let w = skyrl_batch_normalize(&[1.0, -1.0], &[2.0, 1.0], &[3.0, 3.0]).unwrap();
        let got = [w.apply(1.0), w.apply(0.0), w.apply(-1.0)];
        let want = [0.870388, -0.174078, -1.218544];
        crate::test_support::assert_close("skyrl_batch_normalize got", &got, &want, 2e-6, 0.0);
        let w = skyrl_batch_normalize(&[1.0, -1.0], &[2.0, 1.0], &[4.0, 3.0]).unwrap();
        let got = [w.apply(1.0), w.apply(0.0), w.apply(-1.0)];
        let want = [0.906217, -0.12946, -1.165136];
        crate::test_support::assert_close("skyrl_batch_normalize got", &got, &want, 2e-6, 0.0);
        assert!(skyrl_batch_normalize(&[1.0], &[0.0], &[3.0]).is_none());
    }
}
