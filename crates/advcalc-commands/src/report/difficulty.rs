//! The difficulty-bias curve: mean |advantage| per valid token against the group's pass
//! rate, one line per variant. A flat line weighs prompts of every difficulty alike; GRPO's
//! std normalisation lifts the groups near 0 and 1 that few rows got right or wrong.

use super::groups::PassRates;

/// More distinct pass rates than this (groups of many sizes): the curve is drawn over
/// `compare`'s six buckets instead.
pub const MAX_POINTS: usize = 21;

/// One point of the curve: a pass rate and what its groups hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub pass_rate: f64,
    pub groups: usize,
    pub rows: usize,
    /// Per variant: Σ|advantage| / valid tokens over the groups' rows (`None`: no valid token).
    pub mean_abs: Vec<Option<f64>>,
}

/// The curve at each distinct pass rate, ascending; `None` when there are more than
/// `MAX_POINTS` of them. `row_abs[v][row]` is variant v's (Σ |advantage|, valid tokens).
pub fn curve(groups: &PassRates, row_abs: &[Vec<(f64, u64)>]) -> Option<Vec<Point>> {
    // pass rates are k/n: equal rates from different sizes (2/4, 4/8) are one point
    let mut keys: Vec<(f64, usize)> = groups.rate.iter().copied().zip(0..).collect();
    keys.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut points: Vec<(Point, Vec<(f64, u64)>)> = Vec::new();
    for (rate, g) in keys {
        let same = points
            .last()
            .is_some_and(|(p, _)| (p.pass_rate - rate).abs() < 1e-12);
        if !same {
            if points.len() == MAX_POINTS {
                return None;
            }
            points.push((
                Point {
                    pass_rate: rate,
                    groups: 0,
                    rows: 0,
                    mean_abs: Vec::new(),
                },
                vec![(0.0, 0); row_abs.len()],
            ));
        }
        let (p, acc) = points.last_mut().expect("pushed");
        p.groups += 1;
        p.rows += groups.members[g].len();
        for (a, rows) in acc.iter_mut().zip(row_abs) {
            for &r in &groups.members[g] {
                a.0 += rows[r].0;
                a.1 += rows[r].1;
            }
        }
    }
    Some(
        points
            .into_iter()
            .map(|(mut p, acc)| {
                p.mean_abs = acc
                    .into_iter()
                    .map(|(s, n)| (n > 0).then(|| s / n as f64))
                    .collect();
                p
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_by_distinct_pass_rate() {
        // groups: {0,1} rate 1/2, {2,3,4,5} rate 2/4 = 1/2, {6} rate 1
        let correct = [true, false, true, true, false, false, true];
        let g = PassRates::of(vec![vec![0, 1], vec![2, 3, 4, 5], vec![6]], &correct);
        // one variant: row r has |adv| sum r and 2 valid tokens
        let rows: Vec<(f64, u64)> = (0..7).map(|r| (r as f64, 2)).collect();
        let c = curve(&g, &[rows]).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].pass_rate, c[0].groups, c[0].rows), (0.5, 2, 6));
        // (0+1+2+3+4+5) / 12
        assert_eq!(c[0].mean_abs, vec![Some(15.0 / 12.0)]);
        assert_eq!(
            (c[1].pass_rate, c[1].mean_abs.clone()),
            (1.0, vec![Some(3.0)])
        );
    }

    #[test]
    fn too_many_rates_give_no_curve() {
        let members: Vec<Vec<usize>> = (0..30).map(|g| (g * 30..g * 30 + 30).collect()).collect();
        // group g has g correct rows out of 30: 30 distinct rates
        let correct: Vec<bool> = (0..900).map(|r| r % 30 < r / 30).collect();
        let g = PassRates::of(members, &correct);
        assert!(curve(&g, &[vec![(1.0, 1); 900]]).is_none());
    }
}
