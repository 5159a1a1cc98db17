//! verl's logged actor metrics from the rows' sums, as the trainer aggregates them
//! (`workers/utils/losses.py`, `engine_workers.train_mini_batch`, `utils/metric/utils.py`):
//!
//! - `actor/pg_loss`, `actor/kl_loss`, `actor/loss`: summed over a mini-batch's
//!   micro-batches, which is the mini-batch's loss Σ c·ℓ;
//! - `actor/pg_clipfrac`, `actor/pg_clipfrac_lower`, `actor/ppo_kl`: each micro-batch's
//!   masked mean Σ x·m / (Σ m + 1e-8), then the unweighted mean over the mini-batch's
//!   micro-batches (so they depend on the micro-batch split);
//! - then each the mean over the step's mini-batches; `actor/kl_coef` is `kl_loss_coef`.
//!
//! advcalc's own figures (`advcalc/loss/...`) weigh every token of the step alike, whatever
//! the split: `pg_clipfrac`, `pg_clipfrac_lower` and `ppo_kl` over the step's tokens, and in
//! bypass mode the fraction of tokens rejected inside the loss and what `actor/pg_loss`
//! would be with the token-mean divisor counting only the kept tokens (verl #4852).

use std::collections::BTreeMap;

use crate::loss::partition::Partition;
use crate::loss::row::RowSums;
use crate::loss::{AggMode, LossSpec};

/// One step's metrics as (name, value), each name once, in a fixed order. The callers write
/// them out (as JSON numbers: a non-finite value is `null` there).
pub type StepMetrics = Vec<(&'static str, f64)>;

/// The metrics of every step, in step order.
pub fn step_metrics(
    spec: &LossSpec,
    bypass: bool,
    partition: &Partition,
    rows: &[RowSums],
) -> Vec<(Option<i64>, StepMetrics)> {
    let (has_clip, has_lower, has_kl) = spec.mode.metrics();
    let mut steps: BTreeMap<Option<i64>, Vec<[f64; 6]>> = BTreeMap::new();
    // advcalc's token-weighted figures: every row of the step added once
    let mut own: BTreeMap<Option<i64>, RowSums> = BTreeMap::new();
    for mini in &partition.minis {
        let step_sums = own.entry(mini.step).or_default();
        let mut whole = RowSums::default();
        let (mut clip, mut lower, mut ppo_kl) = (0.0, 0.0, 0.0);
        let micros = &partition.micros[mini.micros.clone()];
        for micro in micros {
            let mut s = RowSums::default();
            for &r in micro {
                s.add(&rows[r]);
            }
            let mean = |x: f64| x / (s.tokens + 1e-8);
            clip += mean(s.clipped);
            lower += mean(s.lower);
            ppo_kl += mean(s.ppo_kl);
            whole.add(&s);
        }
        step_sums.add(&whole);
        let n = micros.len() as f64;
        steps.entry(mini.step).or_default().push([
            whole.pg_loss,
            whole.kl_loss,
            whole.pg_loss + whole.kl_loss * spec.kl.map_or(0.0, |k| k.coef),
            clip / n,
            lower / n,
            ppo_kl / n,
        ]);
    }
    steps
        .into_iter()
        .map(|(step, minis)| {
            let k = minis.len() as f64;
            let mean = |i: usize| minis.iter().map(|m| m[i]).sum::<f64>() / k;
            let mut m = StepMetrics::new();
            m.push(("actor/pg_loss", mean(0)));
            if has_clip {
                m.push(("actor/pg_clipfrac", mean(3)));
            }
            if has_lower {
                m.push(("actor/pg_clipfrac_lower", mean(4)));
            }
            if has_kl {
                m.push(("actor/ppo_kl", mean(5)));
            }
            if let Some(kl) = &spec.kl {
                m.push(("actor/kl_loss", mean(1)));
                m.push(("actor/kl_coef", kl.coef));
            }
            m.push(("actor/loss", mean(2)));
            let s = &own[&step];
            let frac = |x: f64| if s.tokens > 0.0 { x / s.tokens } else { 0.0 };
            if has_clip {
                m.push(("advcalc/loss/pg_clipfrac", frac(s.clipped)));
            }
            if has_lower {
                m.push(("advcalc/loss/pg_clipfrac_lower", frac(s.lower)));
            }
            if has_kl {
                m.push(("advcalc/loss/ppo_kl", frac(s.ppo_kl)));
            }
            m.push(("advcalc/loss/tokens", s.tokens_before));
            m.push(("advcalc/loss/mini_batches", k));
            if bypass {
                let rejected = if s.tokens_before > 0.0 {
                    s.rejected / s.tokens_before
                } else {
                    0.0
                };
                m.push(("advcalc/loss/rejected_fraction", rejected));
                if spec.agg == AggMode::TokenMean && s.tokens > 0.0 {
                    // the same loss over the kept tokens only: N_M / N_kept times verl's
                    let kept = s.tokens / s.tokens_before;
                    m.push(("advcalc/loss/pg_loss_kept_tokens", mean(0) / kept));
                }
            }
            (step, m)
        })
        .collect()
}
