//! What pass 2 keeps of each row group: per row and variant, sums over the valid tokens'
//! advantages (O(rows) scalars, never tokens), each row's raw score, and per pair of
//! variants integer sign-agreement counts. Row groups' sums are appended in row-group order.

use crate::analysis::tokens::AdvantageSums;
use crate::engine::job::GroupOutputs;

/// Every variant's sums over some rows (one row group's, or the whole file's in order).
pub struct Sums {
    /// Raw score (Σ token scores) per row.
    pub score: Vec<f64>,
    /// `rows[v][i]`: variant v, row i.
    pub rows: Vec<Vec<AdvantageSums>>,
    /// Per pair (i < j, row-major): (tokens valid under both, same sign).
    pub pairs: Vec<(u64, u64)>,
}

impl Sums {
    /// No rows yet, room for `rows` rows of `variants` variants.
    pub fn with_capacity(variants: usize, rows: usize) -> Self {
        Sums {
            score: Vec::with_capacity(rows),
            rows: vec![Vec::with_capacity(rows); variants],
            pairs: vec![(0, 0); variants * (variants - 1) / 2],
        }
    }

    /// Reduce one row group's outputs of every variant to per-row sums and pair counts.
    pub fn of_row_group(outputs: &[GroupOutputs]) -> Self {
        let first = &outputs[0].group;
        let n_rows = first.rows();
        let score = (0..n_rows)
            .map(|i| first.scores[first.span(i)].iter().map(|&x| x as f64).sum())
            .collect();
        let rows = outputs
            .iter()
            .map(|o| {
                (0..n_rows)
                    .map(|i| {
                        let s = o.group.span(i);
                        let mut r = AdvantageSums::empty();
                        // Without a branch per token (masks are random 0s and 1s): a
                        // masked-out token adds 0.0 to the sums, which leaves them as they are.
                        for (&a, &m) in o.outputs.advantages[s.clone()].iter().zip(&o.mask[s]) {
                            let on = m == 1.0;
                            let a = if on { a as f64 } else { 0.0 };
                            r.valid += u64::from(on);
                            r.sum += a;
                            r.sum_sq += a * a;
                            r.sum_abs += a.abs();
                            r.zeros += u64::from(on & (a == 0.0));
                            r.min = if on { r.min.min(a) } else { r.min };
                            r.max = if on { r.max.max(a) } else { r.max };
                        }
                        r
                    })
                    .collect()
            })
            .collect();
        let mut pairs = Vec::new();
        for (i, a) in outputs.iter().enumerate() {
            for b in &outputs[i + 1..] {
                let (mut both, mut same) = (0u64, 0u64);
                let tokens = a.mask.iter().zip(&b.mask);
                for ((&ma, &mb), (&x, &y)) in
                    tokens.zip(a.outputs.advantages.iter().zip(&b.outputs.advantages))
                {
                    let on = (ma == 1.0) & (mb == 1.0);
                    both += u64::from(on);
                    same += u64::from(on & (sign(x) == sign(y)));
                }
                pairs.push((both, same));
            }
        }
        Sums { score, rows, pairs }
    }

    /// Append the next row group's sums (row groups in file order); pair counts add up.
    pub fn append(&mut self, next: Sums) {
        self.score.extend(next.score);
        for (all, part) in self.rows.iter_mut().zip(next.rows) {
            all.extend(part);
        }
        for (total, (both, same)) in self.pairs.iter_mut().zip(next.pairs) {
            total.0 += both;
            total.1 += same;
        }
    }
}

/// −1, 0 or +1.
fn sign(x: f32) -> i8 {
    if x > 0.0 {
        1
    } else if x < 0.0 {
        -1
    } else {
        0
    }
}
