//! The summary of a distribution of per-row values: extremes, quantiles, mean.

/// min, p5, p25, median, p75, p95, max and mean of a set of finite values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Distribution {
    pub count: usize,
    pub min: f64,
    pub p5: f64,
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub p95: f64,
    pub max: f64,
    pub mean: f64,
}

impl Distribution {
    /// Summarise `values` (sorted in place); `None` when empty. The caller leaves out
    /// non-finite values (they are counted elsewhere).
    pub fn of(values: &mut [f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable_by(f64::total_cmp);
        let q = |p| quantile(values, p);
        Some(Distribution {
            count: values.len(),
            min: values[0],
            p5: q(0.05),
            p25: q(0.25),
            median: q(0.5),
            p75: q(0.75),
            p95: q(0.95),
            max: values[values.len() - 1],
            mean: values.iter().sum::<f64>() / values.len() as f64,
        })
    }
}

/// The `p`-quantile of sorted, non-empty `values` by linear interpolation between the two
/// nearest ranks (numpy's default, "type 7"): position h = (n − 1)·p.
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn close(what: &str, a: f64, b: f64) {
        crate::test_support::assert_close(what, &[a], &[b], 1e-12, 0.0);
    }

    #[test]
    fn quantiles_interpolate_between_ranks() {
        // n = 5: h = 4p. p5 → h = 0.2 → 1 + 0.2·(2 − 1) = 1.2; p95 → h = 3.8 → 4.8.
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        close("quantile 0.05 of v", quantile(&v, 0.05), 1.2);
        close("quantile 0.25 of v", quantile(&v, 0.25), 2.0);
        close("quantile 0.5 of v", quantile(&v, 0.5), 3.0);
        close("quantile 0.95 of v", quantile(&v, 0.95), 4.8);
        // n = 4: median at h = 1.5 → 0 + 0.5·(10 − 0) = 5; p25 at h = 0.75 → 0.
        let v = [0.0, 0.0, 10.0, 10.0];
        close("quantile 0.5 of v", quantile(&v, 0.5), 5.0);
        close("quantile 0.25 of v", quantile(&v, 0.25), 0.0);
        close("quantile 0.95 of [7.0]", quantile(&[7.0], 0.95), 7.0);
    }

    #[test]
    fn summary_sorts_and_averages() {
        let mut v = vec![4.0, -1.0, 2.0, 3.0];
        let d = Distribution::of(&mut v).unwrap();
        // Sorted [-1, 2, 3, 4]: h = 3p. p25 → 0.75 → -1 + 0.75·3 = 1.25; median → 1.5 → 2.5;
        // p75 → 2.25 → 3.25; p5 → 0.15 → -1 + 0.15·3 = -0.55; p95 → 2.85 → 3.85.
        assert_eq!((d.count, d.min, d.max), (4, -1.0, 4.0));
        close("p5", d.p5, -0.55);
        close("p25", d.p25, 1.25);
        close("median", d.median, 2.5);
        close("p75", d.p75, 3.25);
        close("p95", d.p95, 3.85);
        close("mean", d.mean, 2.0);
        assert_eq!(Distribution::of(&mut []), None);
    }
}
