//! The stamps and fingerprints the engine computes, with a specified hash over a specified
//! encoding, so that they are the same on every build: another Rust release, another
//! machine, another thread count. A dataset's outputs record one (`advcalc.plan`) and
//! `--resume` compares it with a later run's, so a value here must never change unless what it
//! fingerprints does; the tests pin them to committed values.
//!
//! **Hash.** FNV-1a, 64 bits ([`fnv1a`]): offset basis `0xcbf29ce484222325`, prime
//! `0x100000001b3`; per byte, `h = (h ^ byte) · prime` (wrapping).
//!
//! **Encoding.** The bytes hashed are defined here, never a `Debug` rendering or a `Hash`
//! derive (neither is specified):
//!
//! - `u64`, `usize` (as `u64`), `i64`: 8 bytes little-endian (two's complement); `i128`:
//!   16 bytes little-endian.
//! - `bool`: one byte, 0 or 1.
//! - `f64`: the 8 bytes little-endian of its IEEE 754 bits, every NaN as `0x7ff8000000000000`
//!   (a NaN's payload differs between CPUs); `f32` likewise in 4 bytes, NaN as `0x7fc00000`.
//!   `-0.0` and `0.0` differ.
//! - `Option<T>`: the byte 0 for `None`; the byte 1 then `T` for `Some`.
//! - a string: its length in bytes (as `u64`), then its UTF-8 bytes.
//! - a sequence (`Vec`, slice): its length (as `u64`), then each item; a map (`BTreeMap`): its
//!   length, then each key followed by its value, keys ascending.
//! - a tuple or struct: its fields one after another, in the order listed on its impl below.
//! - [`GroupKey`]: the byte 0 then the `i128` for `Int`, the byte 1 then the string for `Str`.
//!
//! **What is fingerprinted.**
//!
//! - The configuration ([`config`]): FNV-1a over the UTF-8 bytes of [`Config::to_yaml`]
//!   (itself deterministic, and written into every output as `advcalc.config`).
//! - The step constants ([`constants`]) a pass ran with: [`Constants`].
//! - A dataset output's plan ([`plan`]; `Prepared::fingerprint`, `advcalc.plan`): the
//!   configuration's fingerprint (`u64`), the rows' steps (a sequence of `Option<i64>`), the
//!   steps' constants (a sequence of [`StepConstants`], in the steps' order) and the
//!   estimator's [`Plan`] restricted to the rows (without its `rows` field: the same rows
//!   elsewhere in the input give the same outputs).
//!
//! [`Config::to_yaml`]: crate::Config::to_yaml

use std::collections::BTreeMap;

use crate::config::Config;
use crate::data::GroupKey;
use crate::engine::pipeline::{Constants, StepConstants};
use crate::estimators::Plan;
use crate::estimators::moments::Whitening;
use crate::estimators::optimal_token_baseline::ColumnSums;

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `bytes`.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::default();
    h.write(bytes);
    h.0
}

/// FNV-1a 64, fed in pieces.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(OFFSET_BASIS)
    }
}

impl Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(PRIME);
        }
    }
}

/// A value's bytes in the encoding of the module's documentation, fed to the hash.
trait Encode {
    fn encode(&self, h: &mut Fnv1a);
}

/// The fingerprint of a value: FNV-1a 64 of its encoding.
fn hash(value: &impl Encode) -> u64 {
    let mut h = Fnv1a::default();
    value.encode(&mut h);
    h.0
}

/// The configuration's fingerprint: FNV-1a 64 of its resolved YAML.
pub(crate) fn config(config: &Config) -> u64 {
    fnv1a(config.to_yaml().as_bytes())
}

/// The fingerprint of the step constants a pass ran with.
pub(crate) fn constants(constants: &Constants) -> u64 {
    hash(constants)
}

/// The fingerprint of what pass 2 computes some rows with (`Prepared::fingerprint`): `plan`
/// is the estimator's plan restricted to them; its `rows` field is left out.
pub(crate) fn plan(
    config: u64,
    steps: &[Option<i64>],
    constants: &[StepConstants],
    plan: &Plan,
) -> u64 {
    hash(&(config, steps, constants, PlanWithoutRows(plan)))
}

impl Encode for u64 {
    fn encode(&self, h: &mut Fnv1a) {
        h.write(&self.to_le_bytes());
    }
}

impl Encode for usize {
    fn encode(&self, h: &mut Fnv1a) {
        (*self as u64).encode(h);
    }
}

impl Encode for i64 {
    fn encode(&self, h: &mut Fnv1a) {
        h.write(&self.to_le_bytes());
    }
}

impl Encode for i128 {
    fn encode(&self, h: &mut Fnv1a) {
        h.write(&self.to_le_bytes());
    }
}

impl Encode for bool {
    fn encode(&self, h: &mut Fnv1a) {
        h.write(&[u8::from(*self)]);
    }
}

impl Encode for f64 {
    fn encode(&self, h: &mut Fnv1a) {
        let bits = if self.is_nan() {
            0x7ff8_0000_0000_0000
        } else {
            self.to_bits()
        };
        h.write(&bits.to_le_bytes());
    }
}

impl Encode for f32 {
    fn encode(&self, h: &mut Fnv1a) {
        let bits = if self.is_nan() {
            0x7fc0_0000
        } else {
            self.to_bits()
        };
        h.write(&bits.to_le_bytes());
    }
}

impl Encode for str {
    fn encode(&self, h: &mut Fnv1a) {
        self.len().encode(h);
        h.write(self.as_bytes());
    }
}

impl Encode for String {
    fn encode(&self, h: &mut Fnv1a) {
        self.as_str().encode(h);
    }
}

impl<T: Encode + ?Sized> Encode for &T {
    fn encode(&self, h: &mut Fnv1a) {
        (**self).encode(h);
    }
}

impl<T: Encode> Encode for Option<T> {
    fn encode(&self, h: &mut Fnv1a) {
        match self {
            None => h.write(&[0]),
            Some(v) => {
                h.write(&[1]);
                v.encode(h);
            }
        }
    }
}

impl<T: Encode> Encode for [T] {
    fn encode(&self, h: &mut Fnv1a) {
        self.len().encode(h);
        for item in self {
            item.encode(h);
        }
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, h: &mut Fnv1a) {
        self.as_slice().encode(h);
    }
}

impl<K: Encode, V: Encode> Encode for BTreeMap<K, V> {
    fn encode(&self, h: &mut Fnv1a) {
        self.len().encode(h);
        for (k, v) in self {
            k.encode(h);
            v.encode(h);
        }
    }
}

impl<A: Encode, B: Encode> Encode for (A, B) {
    fn encode(&self, h: &mut Fnv1a) {
        self.0.encode(h);
        self.1.encode(h);
    }
}

impl<A: Encode, B: Encode, C: Encode, D: Encode> Encode for (A, B, C, D) {
    fn encode(&self, h: &mut Fnv1a) {
        self.0.encode(h);
        self.1.encode(h);
        self.2.encode(h);
        self.3.encode(h);
    }
}

impl Encode for GroupKey {
    fn encode(&self, h: &mut Fnv1a) {
        match self {
            GroupKey::Int(i) => {
                h.write(&[0]);
                i.encode(h);
            }
            GroupKey::Str(s) => {
                h.write(&[1]);
                s.encode(h);
            }
        }
    }
}

/// `beta`, `is_norm`.
impl Encode for StepConstants {
    fn encode(&self, h: &mut Fnv1a) {
        let StepConstants { beta, is_norm } = self;
        beta.encode(h);
        is_norm.encode(h);
    }
}

/// `default`, `per_step`.
impl Encode for Constants {
    fn encode(&self, h: &mut Fnv1a) {
        let Constants { default, per_step } = self;
        default.encode(h);
        per_step.encode(h);
    }
}

/// `mean`, `inv_std`.
impl Encode for Whitening {
    fn encode(&self, h: &mut Fnv1a) {
        let Whitening { mean, inv_std } = self;
        mean.encode(h);
        inv_std.encode(h);
    }
}

/// `num`, `den`.
impl Encode for ColumnSums {
    fn encode(&self, h: &mut Fnv1a) {
        let ColumnSums { num, den } = self;
        num.encode(h);
        den.encode(h);
    }
}

/// A [`Plan`] without its `rows`.
struct PlanWithoutRows<'a>(&'a Plan);

/// `row_scalar`, `whitening`, `otb_singleton`, `otb_zero_tail`, `columns`, `nan_rows`,
/// `warnings` (the plan's fields in declaration order, `rows` left out).
impl Encode for PlanWithoutRows<'_> {
    fn encode(&self, h: &mut Fnv1a) {
        // every field named, so that a new one cannot be left out of the fingerprint unseen
        let Plan {
            rows: _,
            row_scalar,
            whitening,
            otb_singleton,
            otb_zero_tail,
            columns,
            nan_rows,
            warnings,
        } = self.0;
        row_scalar.encode(h);
        whitening.encode(h);
        otb_singleton.encode(h);
        otb_zero_tail.encode(h);
        columns.encode(h);
        nan_rows.encode(h);
        warnings.encode(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigSources;

    // The values below are committed (computed once, and checked against an independent
    // implementation of the encoding): outputs written by earlier runs record such values
    // (`advcalc.plan`), and `--resume` redoes every output whose value differs. They must
    // never change; a change to the encoding or to the hash fails these tests.

    #[test]
    fn fnv1a_is_the_published_function() {
        // the FNV reference test vectors
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    fn sample_plan() -> Plan {
        Plan {
            rows: Some(vec![4, 5, 6]),
            row_scalar: vec![0.5, -1.25, f32::NAN],
            whitening: BTreeMap::from([(
                Some(3),
                Whitening {
                    mean: 0.25,
                    inv_std: 2.0,
                },
            )]),
            otb_singleton: vec![false, true, false],
            otb_zero_tail: vec![None, Some(2), None],
            columns: BTreeMap::from([(
                (Some(3), GroupKey::Str("q".into())),
                ColumnSums {
                    num: vec![1.0, -0.0],
                    den: vec![2.0, 3.5],
                },
            )]),
            nan_rows: 1,
            warnings: vec!["w".to_string()],
        }
    }

    #[test]
    fn the_plan_fingerprint_of_a_fixed_input_never_changes() {
        let steps = [Some(3)];
        let constants = [StepConstants {
            beta: 0.001,
            is_norm: Some(1.5),
        }];
        let plan = sample_plan();
        assert_eq!(
            super::plan(0x0123_4567_89ab_cdef, &steps, &constants, &plan),
            0xa73b_697c_cdc9_e510
        );
        // the rows are left out; any other field counts
        let elsewhere = Plan {
            rows: Some(vec![7, 8, 9]),
            ..sample_plan()
        };
        assert_eq!(
            super::plan(0x0123_4567_89ab_cdef, &steps, &constants, &elsewhere),
            super::plan(0x0123_4567_89ab_cdef, &steps, &constants, &plan)
        );
        let other = Plan {
            nan_rows: 2,
            ..sample_plan()
        };
        assert_ne!(
            super::plan(0x0123_4567_89ab_cdef, &steps, &constants, &other),
            super::plan(0x0123_4567_89ab_cdef, &steps, &constants, &plan)
        );
    }

    #[test]
    fn the_constants_fingerprint_of_a_fixed_input_never_changes() {
        let mut c = Constants::uniform(StepConstants {
            beta: 0.001,
            is_norm: None,
        });
        c.per_step.insert(
            None,
            StepConstants {
                beta: 0.002,
                is_norm: Some(f64::NAN),
            },
        );
        c.per_step.insert(
            Some(-1),
            StepConstants {
                beta: 0.0,
                is_norm: Some(1.0),
            },
        );
        assert_eq!(constants(&c), 0xbd5c_4c04_6b1a_be10);
        // a NaN's payload does not count
        c.per_step.get_mut(&None).unwrap().is_norm = Some(-f64::NAN);
        assert_eq!(constants(&c), 0xbd5c_4c04_6b1a_be10);
    }

    #[test]
    fn the_config_fingerprint_is_that_of_its_yaml() {
        let c = Config::load(&ConfigSources {
            estimator: Some("grpo"),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(config(&c), fnv1a(c.to_yaml().as_bytes()));
        // a fixed YAML text
        assert_eq!(
            fnv1a(b"algorithm:\n  adv_estimator: grpo\n"),
            0x17d3_d18b_2c85_f2d2
        );
    }
}
