//! Spearman's rank correlation, for the rows' mean advantages of two variants.

/// Ranks 1..=n, ties given their average rank.
fn ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut r = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &o in &order[i..=j] {
            r[o] = avg;
        }
        i = j + 1;
    }
    r
}

/// Spearman's ρ: the Pearson correlation of the ranks (ties averaged); `None` with fewer
/// than two values or a constant side.
pub(super) fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() < 2 {
        return None;
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in rx.iter().zip(&ry) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_average_ties() {
        assert_eq!(ranks(&[10.0, 30.0, 20.0, 30.0]), vec![1.0, 3.5, 2.0, 3.5]);
    }

    #[test]
    fn spearman_by_hand() {
        // Monotone: ρ = 1; reversed: ρ = −1.
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[5.0, 9.0, 10.0]), Some(1.0));
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        // Ranks x = (1,2,3,4), y = (2,1,4,3): d² = 1+1+1+1 = 4, ρ = 1 − 6·4/(4·15) = 0.6.
        let r = spearman(&[1.0, 2.0, 3.0, 4.0], &[20.0, 10.0, 40.0, 30.0]).unwrap();
        assert!((r - 0.6).abs() < 1e-12);
        // A constant side has no rank order.
        assert_eq!(spearman(&[1.0, 2.0], &[7.0, 7.0]), None);
        assert_eq!(spearman(&[1.0], &[1.0]), None);
    }
}
