//! What pass 2 needs to replay the loss, worked out between the passes: the steps cut into
//! mini- and micro-batches ([`partition`](super::partition)), each mini-batch's aggregation
//! constants (N_M from pass 1's per-row valid-token counts, G, H) and kl_cov's choice per
//! micro-batch.

use crate::loss::aggregate::BatchInfo;
use crate::loss::partition::{Partition, Uneven, partition};
use crate::loss::policy::AnyLossStats;
use crate::loss::policy::kl_cov::KlCovRows;
use crate::loss::row::{KlCovCut, RowPlace, kl_cov_cut};
use crate::loss::{LossMode, LossSpec};

/// The loss stage's part of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct LossPlan {
    pub partition: Partition,
    /// Per mini-batch.
    pub minis: Vec<BatchInfo>,
    /// Per micro-batch: kl_cov's choice (`None` for the other losses).
    pub kl_cov: Vec<Option<KlCovCut>>,
}

impl LossPlan {
    /// The plan for an input of `valid.len()` rows (`valid`: each row's loss-mask tokens),
    /// whose training batches are `batches`. `stats`: the loss's own pass-1 statistics
    /// (kl_cov's: each row's mask-1 tokens as (A, log π, token index)).
    pub fn new(
        spec: &LossSpec,
        batches: &[(Option<i64>, Vec<usize>)],
        valid: &[f64],
        stats: Option<&AnyLossStats>,
    ) -> Result<LossPlan, Uneven> {
        let partition = partition(
            batches,
            valid.len(),
            spec.mini_batch_rows,
            spec.micro_batch_rows,
        )?;
        let horizon = spec
            .loss_scale_factor
            .unwrap_or(spec.response_length as f64);
        let minis = partition
            .minis
            .iter()
            .map(|mini| BatchInfo {
                tokens: partition.micros[mini.micros.clone()]
                    .iter()
                    .flatten()
                    .map(|&r| valid[r])
                    .sum(),
                rows: spec.mini_batch_rows as f64,
                horizon,
            })
            .collect();
        let kl_cov = partition
            .micros
            .iter()
            .map(|rows| match (spec.mode, stats) {
                (LossMode::KlCov, Some(AnyLossStats::KlCov(KlCovRows(tokens)))) => {
                    let all: Vec<(f32, f32, (usize, usize))> = rows
                        .iter()
                        .flat_map(|&r| tokens[r].iter().map(move |&(a, l, t)| (a, l, (r, t))))
                        .collect();
                    kl_cov_cut(&all, spec.params.kl_cov_ratio)
                }
                _ => None,
            })
            .collect();
        Ok(LossPlan {
            partition,
            minis,
            kl_cov,
        })
    }

    /// Where row `row` (global) sits.
    pub fn place(&self, row: usize) -> RowPlace {
        let micro = self.partition.micro[row] as usize;
        RowPlace {
            info: self.minis[self.partition.mini[row] as usize],
            micro_rows: self.partition.micros[micro].len() as f64,
            kl_cov: self.kl_cov[micro],
            row,
        }
    }
}
