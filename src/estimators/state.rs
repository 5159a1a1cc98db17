//! What an estimator keeps of its own between the passes: its pass-1 statistics
//! ([`OwnStats`], beside the common per-row scalars of [`RowStats`]) and its part of the plan
//! ([`OwnPlan`], beside the row scalars of [`EstimatorPlan`]). Each type says once how it merges, how
//! it is cut to some rows and steps, how it crosses a process boundary (the exchange bytes of
//! `engine::exchange`) and, for a plan, how it counts in the plan's fingerprint; the engine
//! carries them without knowing what they hold (`AnyEstimatorStats`, `AnyEstimatorPlan`, generated
//! by the registry). An estimator without state of its own uses `()` for both.
//!
//! [`RowStats`]: super::RowStats
//! [`EstimatorPlan`]: super::EstimatorPlan

use std::fmt::Debug;
use std::hash::Hasher;
use std::sync::Arc;

use arrow_array::types::{Float64Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, Float64Array, PrimitiveArray, RecordBatch,
    UInt64Array,
};
use serde_json::{Map, Value};

use crate::engine::fingerprint::V1;
use crate::error::Result;

/// What an own state's (de)serialisation uses: the malformed-bytes error and a step back from
/// JSON. (Its fingerprint encodes values with `engine::fingerprint::Encode`.)
pub(crate) use crate::engine::exchange::{malformed, step_from_json};

/// An estimator's own pass-1 statistics: per row (appended in row order) or per group
/// (merged), built per row group and appended in row-group order.
pub trait OwnStats: Debug + Clone + Default + PartialEq + Send + Sync {
    /// Append the next row group's statistics (row-group order keeps results independent of
    /// the thread count).
    fn append(&mut self, next: Self);
    /// Its values into the exchange bytes, exactly.
    fn write(&self, out: &mut Written);
    /// The values [`OwnStats::write`] wrote.
    fn read(input: &Reading<'_>) -> Result<Self>;
}

/// An estimator's own part of the plan: what its batch work leaves for pass 2 beyond each
/// row's scalar.
pub trait OwnPlan: Debug + Clone + PartialEq + Send + Sync {
    /// The empty part for `rows` rows (before the batch work).
    fn new(rows: usize) -> Self;
    /// The part for some rows of some steps: `positions` are the rows' indices in the per-row
    /// vectors (ascending), `steps` their steps.
    fn restrict(&self, positions: &[usize], steps: &[Option<i64>]) -> Self;
    /// Its values into the exchange bytes, exactly.
    fn write(&self, out: &mut Written);
    /// The values [`OwnPlan::write`] wrote.
    fn read(input: &Reading<'_>) -> Result<Self>;
    /// Its bytes in the plan's fingerprint (`engine::fingerprint`'s encoding), for a plan of
    /// `rows` rows: every value pass 2 reads must count. The estimators of the plan's first
    /// layout write that layout's slots (`V1`), so that their fingerprints never change.
    fn fingerprint<H: Hasher>(&self, rows: usize, h: &mut H);
    /// Rows set to 0 where verl writes NaN (a warning, and `advcalc/nan_rows_zeroed`).
    fn nan_rows(&self) -> usize {
        0
    }
}

impl OwnStats for () {
    fn append(&mut self, _: ()) {}
    fn write(&self, _: &mut Written) {}
    fn read(_: &Reading<'_>) -> Result<()> {
        Ok(())
    }
}

impl OwnPlan for () {
    fn new(_: usize) {}
    fn restrict(&self, _: &[usize], _: &[Option<i64>]) {}
    fn write(&self, _: &mut Written) {}
    fn read(_: &Reading<'_>) -> Result<()> {
        Ok(())
    }
    fn fingerprint<H: Hasher>(&self, rows: usize, h: &mut H) {
        V1::default().encode(rows, h);
    }
}

/// What an own state writes into the exchange bytes: per-row columns (as long as the
/// statistics' or the plan's rows) and JSON values (floats as their IEEE bit patterns:
/// [`bits`]). Its names are its own: they cannot clash with the engine's.
#[derive(Debug, Default)]
pub struct Written {
    pub(crate) columns: Vec<(String, ArrayRef)>,
    pub(crate) meta: Map<String, Value>,
}

impl Written {
    pub fn f64s(&mut self, name: &str, values: &[f64]) {
        self.column(name, Arc::new(Float64Array::from(values.to_vec())));
    }

    pub fn bools(&mut self, name: &str, values: &[bool]) {
        self.column(name, Arc::new(BooleanArray::from(values.to_vec())));
    }

    /// Optional unsigned integers (`None` as null).
    pub fn opt_u64s(&mut self, name: &str, values: impl IntoIterator<Item = Option<u64>>) {
        let array: UInt64Array = values.into_iter().collect();
        self.column(name, Arc::new(array));
    }

    pub fn column(&mut self, name: &str, array: ArrayRef) {
        self.columns.push((format!("own.{name}"), array));
    }

    pub fn json(&mut self, name: &str, value: Value) {
        self.meta.insert(name.to_string(), value);
    }
}

/// What an own state reads back from the exchange bytes ([`Written`]'s columns and values).
pub struct Reading<'a> {
    pub(crate) batch: &'a RecordBatch,
    pub(crate) meta: &'a Value,
}

impl Reading<'_> {
    /// Whether the column was written.
    pub fn has(&self, name: &str) -> bool {
        self.batch.column_by_name(&format!("own.{name}")).is_some()
    }

    fn array(&self, name: &str) -> Result<&ArrayRef> {
        self.batch
            .column_by_name(&format!("own.{name}"))
            .ok_or_else(|| malformed(name))
    }

    fn primitive<T: ArrowPrimitiveType>(&self, name: &str) -> Result<&PrimitiveArray<T>> {
        self.array(name)?
            .as_any()
            .downcast_ref::<PrimitiveArray<T>>()
            .ok_or_else(|| malformed(name))
    }

    pub fn f64s(&self, name: &str) -> Result<Vec<f64>> {
        Ok(self.primitive::<Float64Type>(name)?.values().to_vec())
    }

    pub fn bools(&self, name: &str) -> Result<Vec<bool>> {
        let a = self
            .array(name)?
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| malformed(name))?;
        Ok(a.iter().map(|b| b.unwrap_or(false)).collect())
    }

    pub fn opt_u64s(&self, name: &str) -> Result<Vec<Option<u64>>> {
        Ok(self.primitive::<UInt64Type>(name)?.iter().collect())
    }

    /// A JSON value ([`Value::Null`] when not written).
    pub fn json(&self, name: &str) -> &Value {
        &self.meta[name]
    }
}

/// Floats as JSON: their IEEE bit patterns, so that every value (NaN and −0.0 included)
/// comes back exactly ([`from_bits`]).
pub fn bits(values: &[f64]) -> Value {
    Value::from(values.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
}

/// [`bits`]' floats back.
pub fn from_bits(v: &Value) -> Result<Vec<f64>> {
    v.as_array()
        .ok_or_else(|| malformed("floats"))?
        .iter()
        .map(|x| {
            x.as_u64()
                .map(f64::from_bits)
                .ok_or_else(|| malformed("floats"))
        })
        .collect()
}
