//! `loss_agg_mode`: how verl's `agg_loss` (`core_algos.py:1140`) turns a micro-batch's
//! per-token losses into a scalar, with the global batch information the engine passes
//! (`workers/utils/losses.py:65-68`: one data-parallel rank, N_M = Σ loss_mask over the whole
//! mini-batch, G = `ppo_mini_batch_size × rollout.n`). Summed over a mini-batch's
//! micro-batches (each `backward()` adds its gradient, no 1/k), the mini-batch loss is
//! Σ_{i,t} c_{i,t}·ℓ_{i,t}·m_{i,t} with
//!
//! | mode | c_{i,t} |
//! | --- | --- |
//! | `token-mean` | 1 / N_M |
//! | `token-sum` | 1 |
//! | `seq-mean-token-sum` | 1 / G |
//! | `seq-mean-token-mean` | 1 / (G·(L_i + 1e-8)), L_i = Σ_t m_{i,t} |
//! | `seq-mean-token-sum-norm` | 1 / (G·H), H = `loss_scale_factor` or the padded width |
//!
//! so c is also each token's weight in the gradient. G counts fully masked rows (a constant),
//! and the seq-mean modes drop those rows from the sum (their tokens have m = 0 anyway).

/// verl 0.9.1's `loss_agg_mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggMode {
    TokenMean,
    TokenSum,
    SeqMeanTokenSum,
    SeqMeanTokenMean,
    SeqMeanTokenSumNorm,
}

impl AggMode {
    pub const ALL: [AggMode; 5] = [
        AggMode::TokenMean,
        AggMode::TokenSum,
        AggMode::SeqMeanTokenSum,
        AggMode::SeqMeanTokenMean,
        AggMode::SeqMeanTokenSumNorm,
    ];

    /// verl's name.
    pub fn name(self) -> &'static str {
        match self {
            AggMode::TokenMean => "token-mean",
            AggMode::TokenSum => "token-sum",
            AggMode::SeqMeanTokenSum => "seq-mean-token-sum",
            AggMode::SeqMeanTokenMean => "seq-mean-token-mean",
            AggMode::SeqMeanTokenSumNorm => "seq-mean-token-sum-norm",
        }
    }

    pub fn from_name(name: &str) -> Option<AggMode> {
        AggMode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// What the weights of one mini-batch depend on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchInfo {
    /// N_M: the mini-batch's tokens with loss mask 1 (before bypass mode's rejection).
    pub tokens: f64,
    /// G: the configured mini-batch size in rows.
    pub rows: f64,
    /// H: `loss_scale_factor`, or the padded response width.
    pub horizon: f64,
}

/// c for the tokens of a row with `row_tokens` (L_i) mask-1 tokens, in f32 as verl's
/// division gives it.
pub fn weight(mode: AggMode, info: &BatchInfo, row_tokens: f64) -> f32 {
    match mode {
        AggMode::TokenMean => (1.0 / info.tokens) as f32,
        AggMode::TokenSum => 1.0,
        AggMode::SeqMeanTokenSum => (1.0 / info.rows) as f32,
        AggMode::SeqMeanTokenMean => {
            let per_row = 1.0f32 / (row_tokens as f32 + 1e-8);
            per_row / info.rows as f32
        }
        AggMode::SeqMeanTokenSumNorm => (1.0 / (info.rows * info.horizon)) as f32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_close;

    // docs/reference/loss-replay.md §6: 23 mask-1 tokens over 6 rows of lengths 8, 3, 5, 1, 6, 0, G = 6, H = 8
    #[test]
    fn weights_of_the_reference_example() {
        let info = BatchInfo {
            tokens: 23.0,
            rows: 6.0,
            horizon: 8.0,
        };
        let lengths = [8.0, 3.0, 5.0, 1.0, 6.0];
        let c = |m| lengths.map(|l| weight(m, &info, l) as f64);
        // the reference's printed c_agg per row: token-mean 0.0435 each
        assert_close(
            "token-mean",
            &c(AggMode::TokenMean),
            &[0.0435; 5],
            5e-5,
            0.0,
        );
        let printed = [0.0208, 0.0556, 0.0333, 0.1667, 0.0278];
        assert_close(
            "seq-mean-token-mean",
            &c(AggMode::SeqMeanTokenMean),
            &printed,
            5e-5,
            0.0,
        );
        assert_close("token-sum", &c(AggMode::TokenSum), &[1.0; 5], 0.0, 0.0);
        assert_close(
            "seq-mean-token-sum",
            &c(AggMode::SeqMeanTokenSum),
            &[1.0 / 6.0; 5],
            1e-7,
            0.0,
        );
        let norm = c(AggMode::SeqMeanTokenSumNorm);
        assert_close(
            "seq-mean-token-sum-norm",
            &norm,
            &[1.0 / 48.0; 5],
            1e-7,
            0.0,
        );
    }

    #[test]
    fn names_round_trip() {
        for m in AggMode::ALL {
            assert_eq!(AggMode::from_name(m.name()), Some(m));
        }
        assert_eq!(AggMode::from_name("token_mean"), None);
    }
}
