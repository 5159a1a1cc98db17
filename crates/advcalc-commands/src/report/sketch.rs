//! A mergeable sketch of a distribution of f32 values, for the report's histograms: each
//! finite value counted under its bfloat16 truncation (sign, exponent and the top 7 bits of
//! the mantissa), so a row group's sketch is a few hundred counts at most and sketches of
//! row groups add up in any order. Drawn on a linear axis, each count goes to the bin of its
//! bucket's midpoint: a value lands at most 2⁻⁸ of its magnitude away from where it is,
//! which moves it by one bin at most and only next to a bin edge. The stated numbers (mean,
//! std, min, max) never come from the sketch.

/// Counts of finite values by their bfloat16 bucket, sorted by bucket.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sketch {
    counts: Vec<(u16, u64)>,
}

impl Sketch {
    /// The sketch of the `values` whose `mask` is 1 (NaN and ±inf left out).
    pub fn of_valid(values: &[f32], mask: &[f32]) -> Self {
        let n = values.len().min(mask.len());
        let (values, mask) = (&values[..n], &mask[..n]);
        let mut dense = vec![0u64; 1 << 16];
        // A run of one bucket is counted before it is stored: GRPO's advantages repeat a
        // row's value over its tokens, and adding one to the same count at each token waits
        // on the previous add. Eight valid copies of one value join the run at once.
        let (mut key, mut run) = (0usize, 0u64);
        let mut add = |v: f32, times: u64, dense: &mut [u64]| {
            let k = (v.to_bits() >> 16) as usize;
            if k != key {
                dense[key] += run;
                (key, run) = (k, 0);
            }
            run += times;
        };
        const BLOCK: usize = 8;
        let (v8, m8) = (values.chunks_exact(BLOCK), mask.chunks_exact(BLOCK));
        let (v_rest, m_rest) = (v8.remainder(), m8.remainder());
        for (v, m) in v8.zip(m8) {
            let first = v[0].to_bits();
            let same = v.iter().fold(true, |all, x| all & (x.to_bits() == first));
            let valid = m.iter().fold(true, |all, &x| all & (x == 1.0));
            if same & valid & v[0].is_finite() {
                add(v[0], BLOCK as u64, &mut dense);
            } else {
                for (&x, &y) in v.iter().zip(m) {
                    if y == 1.0 && x.is_finite() {
                        add(x, 1, &mut dense);
                    }
                }
            }
        }
        for (&x, &y) in v_rest.iter().zip(m_rest) {
            if y == 1.0 && x.is_finite() {
                add(x, 1, &mut dense);
            }
        }
        dense[key] += run;
        Sketch {
            counts: dense
                .into_iter()
                .enumerate()
                .filter(|&(_, c)| c > 0)
                .map(|(k, c)| (k as u16, c))
                .collect(),
        }
    }

    /// Add another sketch's counts.
    pub fn merge(&mut self, other: &Sketch) {
        let mut out = Vec::with_capacity(self.counts.len() + other.counts.len());
        let (mut a, mut b) = (
            self.counts.iter().peekable(),
            other.counts.iter().peekable(),
        );
        loop {
            match (a.peek(), b.peek()) {
                (Some(&&(ka, ca)), Some(&&(kb, cb))) => {
                    if ka == kb {
                        out.push((ka, ca + cb));
                        a.next();
                        b.next();
                    } else if ka < kb {
                        out.push((ka, ca));
                        a.next();
                    } else {
                        out.push((kb, cb));
                        b.next();
                    }
                }
                (Some(&&x), None) => {
                    out.push(x);
                    a.next();
                }
                (None, Some(&&x)) => {
                    out.push(x);
                    b.next();
                }
                (None, None) => break,
            }
        }
        self.counts = out;
    }

    /// Values counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|&(_, c)| c).sum()
    }

    /// Counts in `bins` equal bins over [lo, hi] (one bin when hi ≤ lo); a bucket whose
    /// midpoint falls outside goes to the nearest end bin.
    pub fn histogram(&self, lo: f64, hi: f64, bins: usize) -> Vec<u64> {
        let bins = if hi > lo { bins.max(1) } else { 1 };
        let mut out = vec![0u64; bins];
        for &(key, count) in &self.counts {
            let x = midpoint(key);
            let i = if hi > lo {
                (((x - lo) / (hi - lo)) * bins as f64).floor()
            } else {
                0.0
            };
            out[(i.max(0.0) as usize).min(bins - 1)] += count;
        }
        out
    }
}

/// The middle of the values whose bfloat16 truncation is `key` (exact 0 for ±0).
fn midpoint(key: u16) -> f64 {
    let bits = u32::from(key) << 16;
    if bits & 0x7fff_ffff == 0 {
        return 0.0;
    }
    f32::from_bits(bits | 0x8000) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sketch of every value.
    fn all<const N: usize>(values: [f32; N]) -> Sketch {
        Sketch::of_valid(&values, &[1.0; N])
    }

    #[test]
    fn only_valid_values_count_in_blocks_and_alone() {
        // three blocks of eight and three left over: eight valid 2.0 (one run); a masked
        // 2.0; a 3.0 among 2.0; then a masked 2.0, +inf and 3.0
        let mut values = vec![2.0f32; 27];
        let mut mask = vec![1.0f32; 27];
        mask[9] = 0.0;
        values[20] = 3.0;
        mask[24] = 0.0;
        values[25] = f32::INFINITY;
        values[26] = 3.0;
        let s = Sketch::of_valid(&values, &mask);
        // 27 - 2 masked - 1 infinite, of which two 3.0
        assert_eq!(s.total(), 24);
        assert_eq!(s.histogram(1.5, 3.5, 2), vec![22, 2]);
        // a mask shorter than the values bounds them
        assert_eq!(Sketch::of_valid(&values, &mask[..8]).total(), 8);
        // a block of one non-finite value counts nothing
        assert_eq!(Sketch::of_valid(&[f32::NAN; 8], &[1.0; 8]).total(), 0);
    }

    #[test]
    fn counts_merge_and_land_in_their_bins() {
        // 1.0, 1.0, -0.5, 0.0, NaN (left out) | 0.25, 1.0, +inf (left out)
        let mut a = all([1.0, 1.0, -0.5, 0.0, f32::NAN]);
        let b = all([0.25, 1.0, f32::INFINITY]);
        assert_eq!(a.total(), 4);
        a.merge(&b);
        assert_eq!(a.total(), 6);
        // bins of [-1, 1] by 4: [-1,-0.5) [-0.5,0) [0,0.5) [0.5,1]
        // -0.5's bucket midpoint is just below -0.5 (magnitude rounded up): bin 0;
        // 0 and 0.25 in bin 2; 1.0's midpoint is above 1: clamped to bin 3.
        assert_eq!(a.histogram(-1.0, 1.0, 4), vec![1, 0, 2, 3]);
        // one bin when the range is empty
        assert_eq!(a.histogram(2.0, 2.0, 10), vec![6]);
    }

    #[test]
    fn runs_count_every_value() {
        // a run broken by NaN and by another value, and ±0 (bucket 0 and 0x8000)
        let a = all([2.0, f32::NAN, 2.0, 3.0, 2.0, 2.0, 0.0, -0.0, 0.0]);
        assert_eq!(a.total(), 8);
        // [-0.5, 1.5) [1.5, 3.5): the zeros, then four 2.0 and one 3.0
        assert_eq!(a.histogram(-0.5, 3.5, 2), vec![3, 5]);
        assert_eq!(a.histogram(1.5, 3.5, 2), vec![7, 1]);
    }

    #[test]
    fn a_midpoint_is_within_its_bucket() {
        // 3.0 = 0x4040_0000: its bucket holds [3.0, 3.015625)
        let m = midpoint((3.0f32.to_bits() >> 16) as u16);
        assert!((3.0..3.015625).contains(&m), "{m}");
        assert_eq!(midpoint(((-0.0f32).to_bits() >> 16) as u16), 0.0);
    }

    #[test]
    fn merge_order_does_not_matter() {
        let (x, y) = (all([1.0, 2.0, 3.0]), all([2.0, -7.5]));
        let mut a = x.clone();
        a.merge(&y);
        let mut b = y.clone();
        b.merge(&x);
        assert_eq!(a, b);
        assert_eq!(a.histogram(-8.0, 4.0, 3), vec![1, 0, 4]);
    }
}
