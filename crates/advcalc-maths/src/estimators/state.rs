//! What an estimator keeps of its own between the passes: its pass-1 statistics
//! ([`OwnStats`], beside the common per-row scalars of [`RowStats`]) and its part of the plan
//! ([`OwnPlan`], beside the row scalars of [`EstimatorPlan`]). Each type says once how it merges, how
//! it is cut to some rows and steps, how it crosses a process boundary (the exchange bytes of
//! `engine::exchange`, which turns [`Written`] into Arrow columns and JSON and back into
//! [`Reading`]) and, for a plan, how it counts in the plan's fingerprint; the engine
//! carries them without knowing what they hold (`AnyEstimatorStats`, `AnyEstimatorPlan`, generated
//! by the registry). An estimator without state of its own uses `()` for both.
//!
//! [`RowStats`]: super::RowStats
//! [`fingerprint`]: super::fingerprint
//! [`EstimatorPlan`]: super::EstimatorPlan

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hasher;

use crate::data::GroupKey;
use crate::error::{Error, Result};
use crate::estimators::fingerprint::V1;

/// An estimator's own pass-1 statistics: per row (appended in row order) or per group
/// (merged), built per row group and appended in row-group order.
pub trait OwnStats: Debug + Clone + Default + PartialEq + Send + Sync {
    /// Append the next row group's statistics (row-group order keeps results independent of
    /// the thread count).
    fn append(&mut self, next: Self);
    /// Its values into the exchange bytes, exactly.
    fn write(&self, out: &mut Written);
    /// The values [`OwnStats::write`] wrote.
    fn read(input: &Reading) -> Result<Self>;
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
    fn read(input: &Reading) -> Result<Self>;
    /// Its bytes in the plan's fingerprint ([`fingerprint`](super::fingerprint)'s encoding), for a plan of
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
    fn read(_: &Reading) -> Result<()> {
        Ok(())
    }
}

impl OwnPlan for () {
    fn new(_: usize) {}
    fn restrict(&self, _: &[usize], _: &[Option<i64>]) {}
    fn write(&self, _: &mut Written) {}
    fn read(_: &Reading) -> Result<()> {
        Ok(())
    }
    fn fingerprint<H: Hasher>(&self, rows: usize, h: &mut H) {
        V1::default().encode(rows, h);
    }
}

/// What an own state writes into the exchange bytes: per-row columns (as long as the
/// statistics' or the plan's rows) and values (floats as their IEEE bit patterns: [`bits`]).
/// Its names are its own: the exchange keeps them apart from the engine's.
#[derive(Debug, Default)]
pub struct Written {
    /// In the order written.
    pub columns: Vec<(String, StateColumn)>,
    /// A name written twice keeps its last value.
    pub meta: BTreeMap<String, StateValue>,
}

impl Written {
    pub fn f64s(&mut self, name: &str, values: &[f64]) {
        self.column(name, StateColumn::F64s(values.to_vec()));
    }

    pub fn bools(&mut self, name: &str, values: &[bool]) {
        self.column(name, StateColumn::Bools(values.to_vec()));
    }

    /// Optional unsigned integers (`None` as null).
    pub fn opt_u64s(&mut self, name: &str, values: impl IntoIterator<Item = Option<u64>>) {
        self.column(name, StateColumn::OptU64s(values.into_iter().collect()));
    }

    fn column(&mut self, name: &str, column: StateColumn) {
        self.columns.push((name.to_string(), column));
    }

    /// A value beside the columns.
    pub fn value(&mut self, name: &str, value: StateValue) {
        self.meta.insert(name.to_string(), value);
    }
}

/// What an own state reads back from the exchange bytes ([`Written`]'s columns and values).
#[derive(Debug, Default)]
pub struct Reading {
    /// In the bytes' order; the first of a name counts. `None`: a column of a type no own
    /// state writes (present, but not readable as any).
    pub columns: Vec<(String, Option<StateColumn>)>,
    pub meta: BTreeMap<String, StateValue>,
}

impl Reading {
    /// Whether the column was written.
    pub fn has(&self, name: &str) -> bool {
        self.column(name).is_some()
    }

    /// `None`: not written; `Some(None)`: of a type no own state writes.
    fn column(&self, name: &str) -> Option<Option<&StateColumn>> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|c| c.1.as_ref())
    }

    pub fn f64s(&self, name: &str) -> Result<Vec<f64>> {
        match self.column(name) {
            Some(Some(StateColumn::F64s(v))) => Ok(v.clone()),
            _ => Err(malformed(name)),
        }
    }

    pub fn bools(&self, name: &str) -> Result<Vec<bool>> {
        match self.column(name) {
            Some(Some(StateColumn::Bools(v))) => Ok(v.clone()),
            _ => Err(malformed(name)),
        }
    }

    pub fn opt_u64s(&self, name: &str) -> Result<Vec<Option<u64>>> {
        match self.column(name) {
            Some(Some(StateColumn::OptU64s(v))) => Ok(v.clone()),
            _ => Err(malformed(name)),
        }
    }

    /// A value ([`StateValue::Null`] when not written).
    pub fn value(&self, name: &str) -> &StateValue {
        self.meta.get(name).unwrap_or(&NULL)
    }
}

/// A per-row column of an own state.
#[derive(Debug, Clone, PartialEq)]
pub enum StateColumn {
    /// Floats, exactly (NaN's payload and −0.0 included).
    F64s(Vec<f64>),
    /// Read back with a missing value as `false`.
    Bools(Vec<bool>),
    /// Optional unsigned integers (`None` as null).
    OptU64s(Vec<Option<u64>>),
}

/// A value an own state writes beside its columns: what the exchange bytes hold as JSON
/// (where an integer is an integer whichever variant wrote it).
#[derive(Debug, Clone, PartialEq)]
pub enum StateValue {
    /// Nothing (also what a name not written reads as).
    Null,
    U64(u64),
    /// An integer that may be negative (read back as [`StateValue::U64`] when it is not).
    I64(i64),
    Str(String),
    List(Vec<StateValue>),
    /// A value of another kind in the bytes (a boolean, a fraction, a map): no own state
    /// reads one (nor writes one: written, it is a null).
    Other,
}

/// What [`Reading::value`] and [`StateValue::at`] give for nothing.
static NULL: StateValue = StateValue::Null;

impl StateValue {
    /// A non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            StateValue::U64(u) => Some(u),
            StateValue::I64(i) => u64::try_from(i).ok(),
            _ => None,
        }
    }

    /// An integer in `i64`'s range.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            StateValue::U64(u) => i64::try_from(u).ok(),
            StateValue::I64(i) => Some(i),
            _ => None,
        }
    }

    /// A string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            StateValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A list's items.
    pub fn as_list(&self) -> Option<&[StateValue]> {
        match self {
            StateValue::List(v) => Some(v),
            _ => None,
        }
    }

    /// A list's item ([`StateValue::Null`] past its end or when not a list).
    pub fn at(&self, i: usize) -> &StateValue {
        self.as_list().and_then(|v| v.get(i)).unwrap_or(&NULL)
    }

    /// A step ([`StateValue::from`] an `Option<i64>`: null for no step) back.
    pub fn step(&self) -> Result<Option<i64>> {
        match self {
            StateValue::Null => Ok(None),
            v => v.as_i64().map(Some).ok_or_else(|| malformed("step")),
        }
    }
}

impl From<u64> for StateValue {
    fn from(u: u64) -> Self {
        StateValue::U64(u)
    }
}

impl From<usize> for StateValue {
    fn from(u: usize) -> Self {
        StateValue::U64(u as u64)
    }
}

impl From<Option<i64>> for StateValue {
    fn from(step: Option<i64>) -> Self {
        step.map_or(StateValue::Null, StateValue::I64)
    }
}

impl From<String> for StateValue {
    fn from(s: String) -> Self {
        StateValue::Str(s)
    }
}

impl From<Vec<StateValue>> for StateValue {
    fn from(v: Vec<StateValue>) -> Self {
        StateValue::List(v)
    }
}

impl FromIterator<StateValue> for StateValue {
    fn from_iter<I: IntoIterator<Item = StateValue>>(iter: I) -> Self {
        StateValue::List(iter.into_iter().collect())
    }
}

/// Floats as values: their IEEE bit patterns, so that every value (NaN and −0.0 included)
/// comes back exactly ([`from_bits`]).
pub fn bits(values: &[f64]) -> StateValue {
    values
        .iter()
        .map(|x| StateValue::U64(x.to_bits()))
        .collect()
}

/// [`bits`]' floats back.
pub fn from_bits(v: &StateValue) -> Result<Vec<f64>> {
    v.as_list()
        .ok_or_else(|| malformed("floats"))?
        .iter()
        .map(|x| {
            x.as_u64()
                .map(f64::from_bits)
                .ok_or_else(|| malformed("floats"))
        })
        .collect()
}

/// A group label as text: `i` + an integer, `s` + a string.
pub fn key_text(k: &GroupKey) -> String {
    match k {
        GroupKey::Int(i) => format!("i{i}"),
        GroupKey::Str(s) => format!("s{s}"),
    }
}

/// [`key_text`]'s label back.
pub fn key_from_text(t: &str) -> Result<GroupKey> {
    match t.split_at_checked(1) {
        Some(("i", i)) => i
            .parse()
            .map(GroupKey::Int)
            .map_err(|_| malformed("group label")),
        Some(("s", s)) => Ok(GroupKey::Str(s.into())),
        _ => Err(malformed("group label")),
    }
}

/// The error for exchange bytes that do not hold what their kind says.
pub fn malformed(what: &str) -> Error {
    Error::data(format!("malformed advcalc exchange bytes: {what}"))
}
