//! Advantage statistics over valid tokens (response mask after rejection = 1): per row, the
//! sums compare's pass keeps (`AdvantageSums`), and over a set of rows added in row order, the
//! statistics compare and `inspect -e` report (`TokenStats`).

use serde_json::{Map, Value, json};

/// Per row and variant: sums over the row's valid tokens' advantages.
#[derive(Debug, Clone, Copy)]
pub struct AdvantageSums {
    /// Valid tokens.
    pub valid: u64,
    /// Σ advantage.
    pub sum: f64,
    /// Σ advantage².
    pub sum_sq: f64,
    /// Σ |advantage|.
    pub sum_abs: f64,
    /// Valid tokens whose advantage is exactly 0.
    pub zeros: u64,
    /// Smallest advantage (+∞ without a valid token).
    pub min: f64,
    /// Largest advantage (−∞ without a valid token).
    pub max: f64,
}

impl AdvantageSums {
    /// No token yet.
    pub fn empty() -> Self {
        AdvantageSums {
            valid: 0,
            sum: 0.0,
            sum_sq: 0.0,
            sum_abs: 0.0,
            zeros: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

/// Advantage statistics over a set of valid tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenStats {
    /// Valid tokens counted.
    pub valid_tokens: u64,
    /// Mean advantage.
    pub mean: f64,
    /// Population standard deviation.
    pub std: f64,
    /// Smallest advantage.
    pub min: f64,
    /// Largest advantage.
    pub max: f64,
    /// Fraction of the valid tokens whose advantage is exactly 0.
    pub zero_fraction: f64,
}

impl TokenStats {
    /// Add up rows' sums in the given order (0 everywhere without a valid token).
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a AdvantageSums>) -> Self {
        let mut t = AdvantageSums::empty();
        for r in rows {
            t.valid += r.valid;
            t.sum += r.sum;
            t.sum_sq += r.sum_sq;
            t.zeros += r.zeros;
            t.min = t.min.min(r.min);
            t.max = t.max.max(r.max);
        }
        if t.valid == 0 {
            return TokenStats {
                valid_tokens: 0,
                mean: 0.0,
                std: 0.0,
                min: 0.0,
                max: 0.0,
                zero_fraction: 0.0,
            };
        }
        let n = t.valid as f64;
        let mean = t.sum / n;
        TokenStats {
            valid_tokens: t.valid,
            mean,
            std: (t.sum_sq / n - mean * mean).max(0.0).sqrt(),
            min: t.min,
            max: t.max,
            zero_fraction: t.zeros as f64 / n,
        }
    }

    /// The statistics as JSON fields.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("valid_tokens".into(), json!(self.valid_tokens));
        m.insert("mean".into(), json!(self.mean));
        m.insert("std".into(), json!(self.std));
        m.insert("min".into(), json!(self.min));
        m.insert("max".into(), json!(self.max));
        m.insert("zero_fraction".into(), json!(self.zero_fraction));
        m
    }
}
