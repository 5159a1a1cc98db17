//! How verl's engine cuts a training batch for the actor update (docs/reference/loss-replay.md §2, "How a batch
//! is split"), with one data-parallel rank: the step's rows, in the order they come (verl's
//! `balance_batch` has already reordered them; a hook dump is written in that order), cut into
//! mini-batches of G = `ppo_mini_batch_size × rollout.n` rows (verl asserts that G divides
//! the batch), each cut into micro-batches of `ppo_micro_batch_size_per_gpu` rows (verl's
//! engine asserts that they divide G, and the configuration refuses other sizes; the cut
//! itself leaves a shorter last one). The gradient does not depend on the rank count or the micro-batch split,
//! except for the losses that work per micro-batch (geo_mean, kl_cov, bypass mode's
//! correction) and the micro-averaged metrics.

/// Every row's mini-batch and micro-batch, numbered over the whole input.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Partition {
    /// Per row (global index): its mini-batch.
    pub mini: Vec<u32>,
    /// Per row: its micro-batch.
    pub micro: Vec<u32>,
    /// Per mini-batch: its step and its micro-batches (a range of micro-batch ids).
    pub minis: Vec<Mini>,
    /// Per micro-batch: its rows (global indices, in order).
    pub micros: Vec<Vec<usize>>,
}

/// One mini-batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Mini {
    pub step: Option<i64>,
    pub micros: std::ops::Range<usize>,
}

/// Why a training batch cannot be cut as verl cuts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Uneven {
    pub step: Option<i64>,
    pub rows: usize,
    pub mini_batch_rows: usize,
}

/// Cut each training batch (`batches`: a step and its global rows, in order) of an input of
/// `rows` rows.
pub fn partition(
    batches: &[(Option<i64>, Vec<usize>)],
    rows: usize,
    mini_batch_rows: usize,
    micro_batch_rows: Option<usize>,
) -> Result<Partition, Uneven> {
    let mut p = Partition {
        mini: vec![0; rows],
        micro: vec![0; rows],
        ..Default::default()
    };
    for (step, batch) in batches {
        if batch.len() % mini_batch_rows != 0 {
            return Err(Uneven {
                step: *step,
                rows: batch.len(),
                mini_batch_rows,
            });
        }
        for chunk in batch.chunks(mini_batch_rows) {
            let first = p.micros.len();
            for micro in chunk.chunks(micro_batch_rows.unwrap_or(mini_batch_rows)) {
                for &r in micro {
                    p.mini[r] = p.minis.len() as u32;
                    p.micro[r] = p.micros.len() as u32;
                }
                p.micros.push(micro.to_vec());
            }
            p.minis.push(Mini {
                step: *step,
                micros: first..p.micros.len(),
            });
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    // two steps of 4 rows, interleaved in the file; G = 2, micro-batches of 1
    #[test]
    fn steps_cut_in_order() {
        let batches = vec![(Some(1), vec![0, 2, 4, 6]), (Some(2), vec![1, 3, 5, 7])];
        let p = partition(&batches, 8, 2, Some(1)).unwrap();
        assert_eq!(p.mini, [0, 2, 0, 2, 1, 3, 1, 3]);
        assert_eq!(p.micro, [0, 4, 1, 5, 2, 6, 3, 7]);
        assert_eq!(
            p.minis[3],
            Mini {
                step: Some(2),
                micros: 6..8
            }
        );
        let whole = partition(&batches, 8, 4, None).unwrap();
        assert_eq!(whole.micros, [vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        // a short last micro-batch
        let short = partition(&batches, 8, 4, Some(3)).unwrap();
        assert_eq!(short.micros[1], [6]);
    }

    #[test]
    fn an_uneven_batch_is_refused() {
        let e = partition(&[(None, vec![0, 1, 2])], 3, 2, None).unwrap_err();
        assert_eq!((e.rows, e.mini_batch_rows), (3, 2));
    }
}
