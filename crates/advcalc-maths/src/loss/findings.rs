//! What `advcalc loss` flags about the replayed update, with its numbers (`docs/loss.md`):
//!
//! - `bypass_token_mean_divisor`: bypass mode rejects tokens inside the loss while
//!   `token-mean` keeps dividing by every token of the mini-batch (verl #4852), so the loss
//!   and every gradient weight shrink by the kept fraction;
//! - `seq_mean_token_mean_length_bias`: under `seq-mean-token-mean` (configured, or sapo's
//!   fixed aggregation) a token weighs 1/(G·L_i), so when response lengths differ by
//!   [`LENGTH_RATIO`]× or more, one token of the shortest row outweighs one of the longest
//!   by that factor (verl #957, #2776).
//!
//! (`entropy_coeff ≠ 0` is a configuration note: the replay cannot include the entropy term.)

use crate::loss::plan::LossPlan;
use crate::loss::row::RowSums;
use crate::loss::{AggMode, LossMode, LossSpec};

/// The spread of response lengths from which `seq-mean-token-mean`'s bias is flagged.
pub const LENGTH_RATIO: f64 = 4.0;

/// "1 token", "3 tokens".
fn tokens(n: f64) -> String {
    if n == 1.0 {
        "1 token".into()
    } else {
        format!("{n} tokens")
    }
}

/// `seq_mean_token_mean_length_bias`'s message when the rows' response lengths (`valid`:
/// mask-1 tokens, 0 for none) span [`LENGTH_RATIO`]× or more; `sapo`: the aggregation is
/// sapo's fixed one. Shared by `loss` and `inspect`.
pub fn length_bias(valid: impl Iterator<Item = f64>, sapo: bool) -> Option<String> {
    let live = valid.filter(|&l| l > 0.0);
    let (short, long) = live.fold((f64::INFINITY, 0.0f64), |(s, l), x| (s.min(x), l.max(x)));
    (long > 0.0 && long / short >= LENGTH_RATIO).then(|| {
        format!(
            "under seq-mean-token-mean{} each row weighs the same whatever its length, so a token of the shortest response ({}) weighs {:.1}× a token of the longest ({} tokens) (verl #957, #2776); token-mean weighs every token alike (`advcalc loss --json` compares the modes on this dump)",
            if sapo { " (sapo's fixed aggregation)" } else { "" },
            tokens(short),
            long / short,
            long
        )
    })
}

/// The findings of a replay: `rows` the rows' sums, `valid` their loss-mask tokens.
pub fn findings(spec: &LossSpec, plan: &LossPlan, rows: &[RowSums], valid: &[f64]) -> Vec<String> {
    let mut out = Vec::new();
    if spec
        .bypass
        .as_ref()
        .is_some_and(|b| !b.correction.rs.is_empty())
        && spec.agg == AggMode::TokenMean
    {
        let (mut before, mut kept) = (0.0, 0.0);
        let (mut verl, mut renormalised) = (0.0, 0.0);
        for (m, mini) in plan.partition.minis.iter().enumerate() {
            let members = plan.partition.micros[mini.micros.clone()].iter().flatten();
            let (mut pg, mut k) = (0.0, 0.0);
            for &r in members {
                pg += rows[r].pg_loss;
                k += rows[r].tokens;
                before += rows[r].tokens_before;
            }
            kept += k;
            verl += pg;
            renormalised += if k > 0.0 {
                pg * plan.minis[m].tokens / k
            } else {
                0.0
            };
        }
        let minis = plan.partition.minis.len().max(1) as f64;
        if before > 0.0 && kept < before {
            out.push(format!(
                "bypass_token_mean_divisor: bypass mode's rejection drops {:.1}% of the tokens inside the loss, but token-mean still divides by all of them (verl #4852): actor/pg_loss and every gradient weight are scaled by the kept fraction {:.3} (pg_loss {:.6}; {:.6} with the divisor counting kept tokens only)",
                100.0 * (1.0 - kept / before),
                kept / before,
                verl / minis,
                renormalised / minis
            ));
        }
    }
    let sapo = spec.mode == LossMode::Sapo;
    if sapo || spec.agg == AggMode::SeqMeanTokenMean {
        out.extend(
            length_bias(valid.iter().copied(), sapo)
                .map(|m| format!("seq_mean_token_mean_length_bias: {m}")),
        );
    }
    out
}
