//! Masked statistics shared by the estimators: verl's `masked_whiten` (docs/reference/verl-0.9.1.md §4.1),
//! accumulated as mergeable moments so that row groups can be reduced in parallel and merged
//! in a fixed order; and the state the whitening estimators keep between the passes
//! ([`RowMoments`] in pass 1, [`StepWhitening`] in the plan).

use std::collections::BTreeMap;
use std::hash::Hasher;

use crate::error::Result;
use crate::estimators::fingerprint::V1;
use crate::estimators::state::{OwnPlan, OwnStats, Reading, StateValue, Written, malformed};

/// Count, mean and sum of squared deviations of the masked values (Chan et al.'s mergeable
/// form of Welford's algorithm), in f64.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    pub n: f64,
    pub mean: f64,
    pub m2: f64,
}

impl Moments {
    /// The moments of a row's values at its valid (mask ≠ 0) positions.
    pub fn of_valid(values: &[f32], mask: &[f32]) -> Self {
        let mut m = Moments::default();
        for (&x, &mk) in values.iter().zip(mask) {
            if mk != 0.0 {
                m.push(x as f64);
            }
        }
        m
    }

    pub fn push(&mut self, x: f64) {
        self.n += 1.0;
        let d = x - self.mean;
        self.mean += d / self.n;
        self.m2 += d * (x - self.mean);
    }

    /// `count` copies of `x` at once (an outcome scalar broadcast over a row's valid tokens).
    pub fn push_repeated(&mut self, x: f64, count: f64) {
        if count > 0.0 {
            self.merge(&Moments {
                n: count,
                mean: x,
                m2: 0.0,
            });
        }
    }

    pub fn merge(&mut self, other: &Moments) {
        if other.n == 0.0 {
            return;
        }
        if self.n == 0.0 {
            *self = *other;
            return;
        }
        let n = self.n + other.n;
        let d = other.mean - self.mean;
        self.mean += d * other.n / n;
        self.m2 += other.m2 + d * d * self.n * other.n / n;
        self.n = n;
    }
}

/// Why verl's `masked_whiten` refuses a batch (its `masked_var(unbiased=True)` errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhitenError {
    /// "At least one element in the mask has to be 1."
    NoValidToken,
    /// "The sum of the mask is one, which can cause a division by zero."
    OneValidToken,
}

impl WhitenError {
    pub fn verl_message(self) -> &'static str {
        match self {
            WhitenError::NoValidToken => "At least one element in the mask has to be 1.",
            WhitenError::OneValidToken => {
                "The sum of the mask is one, which can cause a division by zero."
            }
        }
    }
}

/// `masked_whiten(v, m)`: `out = (v − μ) · rsqrt(var + 1e-8)` with μ and the unbiased variance
/// taken over the valid tokens of the whole batch. Returns (μ, rsqrt(var + 1e-8)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Whitening {
    pub mean: f64,
    pub inv_std: f64,
}

impl Whitening {
    pub fn from_moments(m: &Moments) -> Result<Self, WhitenError> {
        if m.n == 0.0 {
            return Err(WhitenError::NoValidToken);
        }
        if m.n == 1.0 {
            return Err(WhitenError::OneValidToken);
        }
        let var = m.m2 / (m.n - 1.0);
        Ok(Whitening {
            mean: m.mean,
            inv_std: 1.0 / (var + 1e-8).sqrt(),
        })
    }

    pub fn apply(&self, v: f32) -> f32 {
        ((v as f64 - self.mean) * self.inv_std) as f32
    }
}

/// Pass-1 statistics of the estimators that whiten over the batch's valid tokens: per row,
/// the moments of the values they whiten (or, for SkyRL's batch normalisation, the row's
/// length as the count of an empty [`Moments`]), in row order; empty when the configuration
/// does not whiten.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowMoments(pub Vec<Moments>);

impl OwnStats for RowMoments {
    fn append(&mut self, next: Self) {
        self.0.extend(next.0);
    }

    fn write(&self, out: &mut Written) {
        if !self.0.is_empty() {
            let column = |f: fn(&Moments) -> f64| self.0.iter().map(f).collect::<Vec<f64>>();
            out.f64s("moments_n", &column(|m| m.n));
            out.f64s("moments_mean", &column(|m| m.mean));
            out.f64s("moments_m2", &column(|m| m.m2));
        }
    }

    fn read(input: &Reading) -> Result<Self> {
        if !input.has("moments_n") {
            return Ok(RowMoments::default());
        }
        let (n, mean, m2) = (
            input.f64s("moments_n")?,
            input.f64s("moments_mean")?,
            input.f64s("moments_m2")?,
        );
        Ok(RowMoments(
            (0..n.len())
                .map(|i| Moments {
                    n: n[i],
                    mean: mean[i],
                    m2: m2[i],
                })
                .collect(),
        ))
    }
}

/// The plan part of the estimators that whiten over the batch: each step's whitening
/// (inserted by the batch work of the steps it whitens).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepWhitening(pub BTreeMap<Option<i64>, Whitening>);

impl StepWhitening {
    /// The whitening of a step the estimator whitens (its batch work inserted it).
    pub fn of(&self, step: Option<i64>) -> Whitening {
        self.0[&step]
    }

    pub fn insert(&mut self, step: Option<i64>, w: Whitening) {
        self.0.insert(step, w);
    }
}

impl OwnPlan for StepWhitening {
    fn new(_: usize) -> Self {
        StepWhitening::default()
    }

    fn restrict(&self, _: &[usize], steps: &[Option<i64>]) -> Self {
        StepWhitening(
            self.0
                .iter()
                .filter(|(s, _)| steps.contains(s))
                .map(|(s, w)| (*s, *w))
                .collect(),
        )
    }

    fn write(&self, out: &mut Written) {
        // per step: [step, mean's bits, inv_std's bits]
        out.value(
            "whitening",
            self.0
                .iter()
                .map(|(s, w)| {
                    StateValue::from(vec![
                        (*s).into(),
                        w.mean.to_bits().into(),
                        w.inv_std.to_bits().into(),
                    ])
                })
                .collect(),
        );
    }

    fn read(input: &Reading) -> Result<Self> {
        let entries = input
            .value("whitening")
            .as_list()
            .ok_or_else(|| malformed("whitening"))?;
        let mut whitening = BTreeMap::new();
        for entry in entries {
            let bits = |i: usize| entry.at(i).as_u64().ok_or_else(|| malformed("whitening"));
            whitening.insert(
                entry.at(0).step()?,
                Whitening {
                    mean: f64::from_bits(bits(1)?),
                    inv_std: f64::from_bits(bits(2)?),
                },
            );
        }
        Ok(StepWhitening(whitening))
    }

    fn fingerprint<H: Hasher>(&self, rows: usize, h: &mut H) {
        V1 {
            whitening: Some(&self.0),
            ..V1::default()
        }
        .encode(rows, h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_merge_like_one_pass() {
        let xs = [1.0, 2.0, 4.0, 7.0, -3.0];
        let mut all = Moments::default();
        xs.iter().for_each(|&x| all.push(x));
        let mut a = Moments::default();
        let mut b = Moments::default();
        xs[..2].iter().for_each(|&x| a.push(x));
        xs[2..].iter().for_each(|&x| b.push(x));
        a.merge(&b);
        assert!((a.mean - 2.2).abs() < 1e-12 && (all.mean - 2.2).abs() < 1e-12);
        // Σ(x − 2.2)² = 1.44 + 0.04 + 3.24 + 23.04 + 27.04 = 54.8
        assert!((a.m2 - 54.8).abs() < 1e-9 && (all.m2 - 54.8).abs() < 1e-9);
    }

    #[test]
    fn repeated_equals_pushing_each() {
        let mut a = Moments::default();
        a.push(1.0);
        a.push_repeated(3.0, 3.0);
        let mut b = Moments::default();
        [1.0, 3.0, 3.0, 3.0].iter().for_each(|&x| b.push(x));
        assert!((a.mean - b.mean).abs() < 1e-12 && (a.m2 - b.m2).abs() < 1e-12);
    }

    // verl: whitening needs at least two valid tokens in the batch (§4.1).
    #[test]
    fn whitening_refuses_fewer_than_two_tokens() {
        assert_eq!(
            Whitening::from_moments(&Moments::default()),
            Err(WhitenError::NoValidToken)
        );
        let mut m = Moments::default();
        m.push(1.0);
        assert_eq!(Whitening::from_moments(&m), Err(WhitenError::OneValidToken));
    }

    // A constant batch is amplified ×1e4 by the 1e-8 inside the rsqrt (§4.1, §9.8).
    #[test]
    fn whitening_by_hand() {
        let mut m = Moments::default();
        [1.0, 3.0].iter().for_each(|&x| m.push(x));
        let w = Whitening::from_moments(&m).unwrap();
        // μ = 2, var = 2, rsqrt(2 + 1e-8)
        assert_eq!(w.mean, 2.0);
        assert!((w.inv_std - 1.0 / (2.0f64 + 1e-8).sqrt()).abs() < 1e-15);
    }
}
