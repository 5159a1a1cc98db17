//! The encoding of the values the plan's fingerprint counts (the engine hashes it: FNV-1a,
//! `engine::fingerprint`), and the estimators' part of it: [`OwnPlan::fingerprint`] writes an
//! estimator's own plan part in it, and the estimators of the plan's first layout write that
//! layout's slots ([`V1`]). A value here must never change unless what it fingerprints does:
//! outputs record fingerprints, and `--resume` compares them.
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

use std::collections::BTreeMap;
use std::hash::Hasher;

use crate::data::GroupKey;
use crate::estimators::EstimatorPlan;
use crate::estimators::moments::Whitening;
use crate::estimators::optimal_token_baseline::ColumnSums;
use crate::estimators::state::OwnPlan;

/// A value's bytes in the encoding of the module's documentation, fed to the hash (only
/// through `write`: the encoding, not `Hasher`'s native-endian helpers).
pub trait Encode {
    fn encode<H: Hasher>(&self, h: &mut H);
}

impl Encode for u64 {
    fn encode<H: Hasher>(&self, h: &mut H) {
        h.write(&self.to_le_bytes());
    }
}

impl Encode for usize {
    fn encode<H: Hasher>(&self, h: &mut H) {
        (*self as u64).encode(h);
    }
}

impl Encode for i64 {
    fn encode<H: Hasher>(&self, h: &mut H) {
        h.write(&self.to_le_bytes());
    }
}

impl Encode for i128 {
    fn encode<H: Hasher>(&self, h: &mut H) {
        h.write(&self.to_le_bytes());
    }
}

impl Encode for bool {
    fn encode<H: Hasher>(&self, h: &mut H) {
        h.write(&[u8::from(*self)]);
    }
}

impl Encode for f64 {
    fn encode<H: Hasher>(&self, h: &mut H) {
        let bits = if self.is_nan() {
            0x7ff8_0000_0000_0000
        } else {
            self.to_bits()
        };
        h.write(&bits.to_le_bytes());
    }
}

impl Encode for f32 {
    fn encode<H: Hasher>(&self, h: &mut H) {
        let bits = if self.is_nan() {
            0x7fc0_0000
        } else {
            self.to_bits()
        };
        h.write(&bits.to_le_bytes());
    }
}

impl Encode for str {
    fn encode<H: Hasher>(&self, h: &mut H) {
        self.len().encode(h);
        h.write(self.as_bytes());
    }
}

impl Encode for String {
    fn encode<H: Hasher>(&self, h: &mut H) {
        self.as_str().encode(h);
    }
}

impl<T: Encode + ?Sized> Encode for &T {
    fn encode<H: Hasher>(&self, h: &mut H) {
        (**self).encode(h);
    }
}

impl<T: Encode> Encode for Option<T> {
    fn encode<H: Hasher>(&self, h: &mut H) {
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
    fn encode<H: Hasher>(&self, h: &mut H) {
        self.len().encode(h);
        for item in self {
            item.encode(h);
        }
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn encode<H: Hasher>(&self, h: &mut H) {
        self.as_slice().encode(h);
    }
}

impl<K: Encode, V: Encode> Encode for BTreeMap<K, V> {
    fn encode<H: Hasher>(&self, h: &mut H) {
        self.len().encode(h);
        for (k, v) in self {
            k.encode(h);
            v.encode(h);
        }
    }
}

impl<A: Encode, B: Encode> Encode for (A, B) {
    fn encode<H: Hasher>(&self, h: &mut H) {
        self.0.encode(h);
        self.1.encode(h);
    }
}

impl<A: Encode, B: Encode, C: Encode> Encode for (A, B, C) {
    fn encode<H: Hasher>(&self, h: &mut H) {
        self.0.encode(h);
        self.1.encode(h);
        self.2.encode(h);
    }
}

impl<A: Encode, B: Encode, C: Encode, D: Encode> Encode for (A, B, C, D) {
    fn encode<H: Hasher>(&self, h: &mut H) {
        self.0.encode(h);
        self.1.encode(h);
        self.2.encode(h);
        self.3.encode(h);
    }
}

impl Encode for GroupKey {
    fn encode<H: Hasher>(&self, h: &mut H) {
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

/// `mean`, `inv_std`.
impl Encode for Whitening {
    fn encode<H: Hasher>(&self, h: &mut H) {
        let Whitening { mean, inv_std } = self;
        mean.encode(h);
        inv_std.encode(h);
    }
}

/// `num`, `den`.
impl Encode for ColumnSums {
    fn encode<H: Hasher>(&self, h: &mut H) {
        let ColumnSums { num, den } = self;
        num.encode(h);
        den.encode(h);
    }
}

/// `row_scalar`, the estimator's own part, `warnings` (a [`EstimatorPlan`]'s fields, `rows` left out).
impl<P: OwnPlan> EstimatorPlan<P> {
    pub fn fingerprint<H: Hasher>(&self, h: &mut H) {
        // every field named, so that a new one cannot be left out of the fingerprint unseen
        let EstimatorPlan {
            rows: _,
            row_scalar,
            own,
            warnings,
        } = self;
        row_scalar.encode(h);
        own.fingerprint(row_scalar.len(), h);
        warnings.encode(h);
    }
}

/// The estimator's part of a plan in the plan's first layout, where one struct held every
/// estimator's fields after `row_scalar`: `whitening` (a map), `otb_singleton` (a sequence
/// of `bool`), `otb_zero_tail` (a sequence of `Option<usize>`), `columns` (a map) and
/// `nan_rows` (`usize`). A slot not given is encoded as that layout's empty value: an empty
/// map, `rows` times `false`, `rows` times `None`, an empty map, 0.
#[derive(Debug, Default)]
pub struct V1<'a> {
    pub whitening: Option<&'a BTreeMap<Option<i64>, Whitening>>,
    /// `otb_singleton`, `otb_zero_tail`, `columns`.
    pub otb: Option<OtbSlots<'a>>,
    pub nan_rows: usize,
}

/// The OTB estimators' slots of [`V1`].
pub type OtbSlots<'a> = (
    &'a [bool],
    &'a [Option<usize>],
    &'a BTreeMap<(Option<i64>, GroupKey), ColumnSums>,
);

impl V1<'_> {
    pub fn encode<H: Hasher>(&self, rows: usize, h: &mut H) {
        let empty = BTreeMap::<u64, u64>::new();
        match self.whitening {
            Some(w) => w.encode(h),
            None => empty.encode(h),
        }
        match self.otb {
            Some((singleton, zero_tail, columns)) => {
                singleton.encode(h);
                zero_tail.encode(h);
                columns.encode(h);
            }
            None => {
                rows.encode(h);
                (0..rows).for_each(|_| false.encode(h));
                rows.encode(h);
                (0..rows).for_each(|_| None::<usize>.encode(h));
                empty.encode(h);
            }
        }
        self.nan_rows.encode(h);
    }
}
