//! Pass-1 statistics and plan shards as bytes, so the passes can run in other processes or on
//! other machines (Ray): one Arrow IPC stream holding a record batch of the per-row values
//! and, in its schema metadata, the rest as JSON. Floats in the JSON are their IEEE-754 bit
//! patterns, so every value (NaN and −0.0 included) comes back exactly. The estimator's own
//! statistics and plan part write their own columns and values (`estimators::state`), under
//! the estimator's name.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, Float32Array, Float64Array, Int64Array,
    PrimitiveArray, RecordBatch, StringArray, UInt64Array,
};
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{Field, Schema};
use serde_json::{Value, json};

use crate::data::{GroupKey, PositiveLogProbs, TokenRole};
use crate::error::{Error, Result};
use crate::estimators::state::{
    Reading, StateColumn, StateValue, Written, key_from_text, key_text, malformed,
};
use crate::estimators::{Estimator, EstimatorPlan, RowStats, Stamp};
use crate::pipeline::{Constants, StepConstants};
use crate::shard::PlanShard;

const KEY: &str = "advcalc.exchange";
/// 2: the estimator's own state under its name (1: every estimator's fields in one layout).
const VERSION: u64 = 2;

/// A value the passes exchange as bytes (an Arrow IPC stream), for another process or
/// machine: pass 1's statistics ([`RowStats`]) and a plan's shard ([`PlanShard`]). The bytes
/// are checked when read back: another kind, another version or a damaged value is an error.
pub trait Exchange: Sized {
    /// The value as bytes.
    fn to_bytes(&self) -> Result<Vec<u8>>;
    /// The value from [`Exchange::to_bytes`]'s bytes.
    fn from_bytes(bytes: &[u8]) -> Result<Self>;
}

impl Exchange for RowStats {
    fn to_bytes(&self) -> Result<Vec<u8>> {
        let rows = self.rows();
        let mut columns: Vec<(&str, ArrayRef)> = vec![
            ("score", f64s(&self.score)),
            ("valid", f64s(&self.valid)),
            ("orig_valid", f64s(&self.orig_valid)),
            ("kl_sum", f64s(&self.kl_sum)),
            ("is_norm_sum", f64s(&column(&self.is_norm_parts, |p| p.0))),
            ("is_norm_count", f64s(&column(&self.is_norm_parts, |p| p.1))),
        ];
        if !self.uid.is_empty() {
            columns.push(("uid", keys(&self.uid)));
        }
        if let Some(step) = &self.step {
            columns.push(("step", Arc::new(Int64Array::from(step.clone()))));
        }
        if let Some((session, index)) = &self.session {
            columns.push(("session_id", keys(session)));
            columns.push(("output_index", Arc::new(Int64Array::from(index.clone()))));
        }
        let mut own = Written::default();
        if let Some(s) = &self.own {
            s.write(&mut own);
        }
        let names: Vec<String> = (0..self.components.len())
            .map(|k| format!("component_{k}"))
            .collect();
        for (name, c) in names.iter().zip(&self.components) {
            columns.push((name, f64s(c)));
        }
        let meta = json!({
            "kind": "row_stats",
            "version": VERSION,
            "rows": rows,
            "components": self.components.len(),
            "estimator": self.own.as_ref().map(|s| s.estimator().name()),
            "own": own_meta(&own),
            "dropped_scores": self.dropped_scores,
            "stamp": self.stamp.map(|s| json!({
                "config": s.config, "constants": s.constants,
                "with_estimator": s.with_estimator, "mixed": s.mixed,
            })),
            "positive_log_probs": self.positive_log_probs.as_ref().map(|p| json!({
                "count": p.count, "column": p.column, "row": p.row, "token": p.token
            })),
        });
        write(columns, own_columns(own), meta)
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (batch, meta) = read(bytes, "row_stats")?;
        let f = |name: &str| primitive::<Float64Type>(&batch, name);
        let pairs = |a: Vec<f64>, b: Vec<f64>| a.into_iter().zip(b).collect::<Vec<_>>();
        let components = (0..uint(&meta, "components")? as usize)
            .map(|k| f(&format!("component_{k}")))
            .collect::<Result<Vec<_>>>()?;
        let own = match &meta["estimator"] {
            Value::Null => None,
            name => Some(estimator(name)?.read_stats(&own_reading(&batch, &meta["own"]))?),
        };
        let session = match batch.column_by_name("session_id") {
            None => None,
            Some(_) => Some((
                key_column(&batch, "session_id")?,
                primitive::<Int64Type>(&batch, "output_index")?,
            )),
        };
        let positive_log_probs = match &meta["positive_log_probs"] {
            Value::Null => None,
            p => Some(PositiveLogProbs {
                count: uint(p, "count")? as usize,
                column: log_prob_column(p["column"].as_str().unwrap_or_default())?,
                row: uint(p, "row")? as usize,
                token: uint(p, "token")? as usize,
            }),
        };
        Ok(RowStats {
            uid: match batch.column_by_name("uid") {
                None => Vec::new(),
                Some(_) => key_column(&batch, "uid")?,
            },
            step: match batch.column_by_name("step") {
                None => None,
                Some(_) => Some(primitive::<Int64Type>(&batch, "step")?),
            },
            session,
            score: f("score")?,
            valid: f("valid")?,
            orig_valid: f("orig_valid")?,
            kl_sum: f("kl_sum")?,
            is_norm_parts: pairs(f("is_norm_sum")?, f("is_norm_count")?),
            components,
            own,
            dropped_scores: uint(&meta, "dropped_scores")? as usize,
            positive_log_probs,
            loss: None,
            stamp: match &meta["stamp"] {
                Value::Null => None,
                s => Some(Stamp {
                    config: uint(s, "config")?,
                    constants: uint(s, "constants")?,
                    with_estimator: s["with_estimator"]
                        .as_bool()
                        .ok_or_else(|| malformed("stamp"))?,
                    mixed: s["mixed"].as_bool().ok_or_else(|| malformed("stamp"))?,
                }),
            },
        })
    }
}

impl Exchange for PlanShard {
    fn to_bytes(&self) -> Result<Vec<u8>> {
        let shard = self;
        let plan = &shard.plan;
        let (indexed, scalars) = plan.scalars();
        let rows: Vec<u64> = match indexed {
            Some(rows) => rows.iter().map(|&r| r as u64).collect(),
            None => (0..scalars.len() as u64).collect(),
        };
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("row", Arc::new(UInt64Array::from(rows))),
            ("row_scalar", Arc::new(Float32Array::from(scalars.to_vec()))),
        ];
        let mut own = Written::default();
        plan.write(&mut own);
        let step_constants =
            |c: &StepConstants| json!([c.beta.to_bits(), c.is_norm.map(f64::to_bits)]);
        let meta = json!({
            "kind": "plan_shard",
            "version": VERSION,
            "indexed": indexed.is_some(),
            "config": shard.config,
            "steps": shard.steps,
            "constants": {
                "default": step_constants(&shard.constants.default),
                "per_step": shard.constants.per_step.iter()
                    .map(|(s, c)| json!([s, step_constants(c)])).collect::<Vec<_>>(),
            },
            "estimator": plan.estimator().name(),
            "own": own_meta(&own),
            "warnings": plan.warnings(),
        });
        write(columns, own_columns(own), meta)
    }

    fn from_bytes(bytes: &[u8]) -> Result<PlanShard> {
        let (batch, meta) = read(bytes, "plan_shard")?;
        let step_constants = |v: &Value| -> Result<StepConstants> {
            Ok(StepConstants {
                beta: f64::from_bits(v[0].as_u64().ok_or_else(|| malformed("beta"))?),
                is_norm: v[1].as_u64().map(f64::from_bits),
            })
        };
        let mut constants = Constants::uniform(step_constants(&meta["constants"]["default"])?);
        for entry in array(&meta["constants"]["per_step"])? {
            constants
                .per_step
                .insert(step_from_json(&entry[0])?, step_constants(&entry[1])?);
        }
        let rows: Vec<usize> = primitive::<UInt64Type>(&batch, "row")?
            .into_iter()
            .map(|r| r as usize)
            .collect();
        if !rows.windows(2).all(|w| w[0] < w[1]) {
            return Err(malformed("rows not ascending"));
        }
        let scalars = batch
            .column_by_name("row_scalar")
            .and_then(|c| c.as_any().downcast_ref::<Float32Array>())
            .ok_or_else(|| malformed("row_scalar"))?;
        let common = EstimatorPlan {
            rows: meta["indexed"].as_bool().unwrap_or(true).then_some(rows),
            row_scalar: scalars.values().to_vec(),
            own: (),
            warnings: array(&meta["warnings"])?
                .iter()
                .map(|w| w.as_str().unwrap_or_default().to_string())
                .collect(),
        };
        let own = own_reading(&batch, &meta["own"]);
        let plan = estimator(&meta["estimator"])?.read_plan(common, &own)?;
        Ok(PlanShard {
            config: uint(&meta, "config")?,
            steps: array(&meta["steps"])?
                .iter()
                .map(step_from_json)
                .collect::<Result<_>>()?,
            constants,
            plan,
        })
    }
}

/// The estimator named in the bytes.
fn estimator(name: &Value) -> Result<Estimator> {
    name.as_str()
        .and_then(|n| Estimator::from_name(n).ok())
        .ok_or_else(|| malformed("estimator"))
}

fn write(
    columns: Vec<(&str, ArrayRef)>,
    own: Vec<(String, ArrayRef)>,
    meta: Value,
) -> Result<Vec<u8>> {
    let columns: Vec<(String, ArrayRef)> = columns
        .into_iter()
        .map(|(name, a)| (name.to_string(), a))
        .chain(own)
        .collect();
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a)| Field::new(name, a.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        std::collections::HashMap::from([(KEY.to_string(), meta.to_string())]),
    ));
    let batch = RecordBatch::try_new(schema.clone(), columns.into_iter().map(|c| c.1).collect())
        .map_err(|e| Error::data("cannot encode the exchange batch").with_source(e))?;
    let mut out = Vec::new();
    let mut writer = StreamWriter::try_new(&mut out, &schema)
        .map_err(|e| Error::data("cannot encode the exchange batch").with_source(e))?;
    writer
        .write(&batch)
        .and_then(|_| writer.finish())
        .map_err(|e| Error::data("cannot encode the exchange batch").with_source(e))?;
    drop(writer);
    Ok(out)
}

fn read(bytes: &[u8], kind: &str) -> Result<(RecordBatch, Value)> {
    let bad = || Error::data(format!("not advcalc {kind} bytes"));
    let reader = StreamReader::try_new(bytes, None).map_err(|e| bad().with_source(e))?;
    let meta: Value = reader
        .schema()
        .metadata()
        .get(KEY)
        .and_then(|m| serde_json::from_str(m).ok())
        .ok_or_else(bad)?;
    if meta["kind"] != kind || meta["version"] != VERSION {
        return Err(bad());
    }
    let mut batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad().with_source(e))?;
    if batches.len() != 1 {
        return Err(bad());
    }
    Ok((batches.remove(0), meta))
}

fn column<T>(v: &[T], f: impl Fn(&T) -> f64) -> Vec<f64> {
    v.iter().map(f).collect()
}

fn f64s(v: &[f64]) -> ArrayRef {
    Arc::new(Float64Array::from(v.to_vec()))
}

/// Group labels as tagged strings: `i` + an integer, `s` + a string.
fn keys(v: &[GroupKey]) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v.iter().map(key_text)))
}

/// The values of a primitive column, or a malformed-bytes error naming it.
fn primitive<T: ArrowPrimitiveType>(batch: &RecordBatch, name: &str) -> Result<Vec<T::Native>> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<PrimitiveArray<T>>())
        .map(|a| a.values().to_vec())
        .ok_or_else(|| malformed(name))
}

fn key_column(batch: &RecordBatch, name: &str) -> Result<Vec<GroupKey>> {
    let a = batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| malformed(name))?;
    (0..a.len()).map(|i| key_from_text(a.value(i))).collect()
}

/// A JSON array, or a malformed-bytes error.
fn array(v: &Value) -> Result<&Vec<Value>> {
    v.as_array().ok_or_else(|| malformed("expected an array"))
}

/// A step as JSON (`null` for no step) back: read as an own state reads one.
fn step_from_json(v: &Value) -> Result<Option<i64>> {
    from_json(v).step()
}

/// An unsigned integer field, or a malformed-bytes error naming it.
fn uint(v: &Value, key: &str) -> Result<u64> {
    v[key].as_u64().ok_or_else(|| malformed(key))
}

fn log_prob_column(name: &str) -> Result<&'static str> {
    TokenRole::ALL
        .iter()
        .map(|r| r.column())
        .find(|c| *c == name)
        .ok_or_else(|| malformed("positive_log_probs.column"))
}

/// The own state's columns as Arrow columns, named `own.` + their name.
fn own_columns(own: Written) -> Vec<(String, ArrayRef)> {
    own.columns
        .into_iter()
        .map(|(name, column)| {
            let array: ArrayRef = match column {
                StateColumn::F64s(v) => Arc::new(Float64Array::from(v)),
                StateColumn::Bools(v) => Arc::new(BooleanArray::from(v)),
                StateColumn::OptU64s(v) => Arc::new(v.into_iter().collect::<UInt64Array>()),
            };
            (format!("own.{name}"), array)
        })
        .collect()
}

/// The own state's values as a JSON object (keys in order, as `serde_json`'s map keeps them).
fn own_meta(own: &Written) -> Value {
    Value::Object(
        own.meta
            .iter()
            .map(|(name, v)| (name.clone(), to_json(v)))
            .collect(),
    )
}

/// The own state's columns (those named `own.` + a name) and values, as written.
fn own_reading(batch: &RecordBatch, meta: &Value) -> Reading {
    let schema = batch.schema();
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .filter_map(|(field, array)| {
            let name = field.name().strip_prefix("own.")?;
            Some((name.to_string(), own_column(array)))
        })
        .collect();
    // anything but an object holds no values (each reads as not written)
    let meta = match meta {
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), from_json(v))).collect(),
        _ => BTreeMap::new(),
    };
    Reading { columns, meta }
}

/// An own column back (`None`: of a type no own state writes). Nulls read as `false` in a
/// boolean column; a float column's values are read as stored.
fn own_column(array: &ArrayRef) -> Option<StateColumn> {
    let any = array.as_any();
    if let Some(a) = any.downcast_ref::<Float64Array>() {
        Some(StateColumn::F64s(a.values().to_vec()))
    } else if let Some(a) = any.downcast_ref::<BooleanArray>() {
        Some(StateColumn::Bools(
            a.iter().map(|b| b.unwrap_or(false)).collect(),
        ))
    } else {
        let a = any.downcast_ref::<UInt64Array>()?;
        Some(StateColumn::OptU64s(a.iter().collect()))
    }
}

/// An own value as JSON: integers as integers, whichever variant wrote them.
fn to_json(v: &StateValue) -> Value {
    match v {
        StateValue::Null | StateValue::Other => Value::Null,
        StateValue::U64(u) => Value::from(*u),
        StateValue::I64(i) => Value::from(*i),
        StateValue::Str(s) => Value::from(s.as_str()),
        StateValue::List(items) => items.iter().map(to_json).collect(),
    }
}

/// JSON as an own value: what no own state writes (a boolean, a fraction, an object) as
/// [`StateValue::Other`].
fn from_json(v: &Value) -> StateValue {
    match v {
        Value::Null => StateValue::Null,
        Value::Number(n) => n
            .as_u64()
            .map(StateValue::U64)
            .or_else(|| n.as_i64().map(StateValue::I64))
            .unwrap_or(StateValue::Other),
        Value::String(s) => StateValue::Str(s.clone()),
        Value::Array(items) => StateValue::List(items.iter().map(from_json).collect()),
        Value::Bool(_) | Value::Object(_) => StateValue::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Own values come back as written; JSON that no own state writes reads as `Other`, so each
    // reader refuses it with its own malformed-bytes error.
    #[test]
    fn own_values_through_json() {
        let v = StateValue::List(vec![
            StateValue::Null,
            StateValue::I64(-3),
            StateValue::U64(u64::MAX),
            StateValue::from("s7".to_string()),
            StateValue::List(vec![]),
        ]);
        let json = to_json(&v);
        assert_eq!(
            json.to_string(),
            r#"[null,-3,18446744073709551615,"s7",[]]"#
        );
        assert_eq!(from_json(&json), v);
        let other: Value = serde_json::from_str(r#"[true, 0.5, {"a": 1}]"#).unwrap();
        assert_eq!(
            from_json(&other),
            StateValue::List(vec![StateValue::Other; 3])
        );
        assert_eq!(step_from_json(&json!(7)).unwrap(), Some(7));
        assert_eq!(step_from_json(&Value::Null).unwrap(), None);
        assert!(step_from_json(&json!(0.5)).is_err());
    }

    #[test]
    fn own_columns_and_values_round_trip() {
        let mut own = Written::default();
        own.f64s("x", &[1.0, -0.0, f64::NAN]);
        own.bools("b", &[true, false, true]);
        own.opt_u64s("u", [Some(1), None, Some(3)]);
        own.value("v", 5usize.into());
        let meta = own_meta(&own);
        assert_eq!(meta.to_string(), r#"{"v":5}"#);
        let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = own_columns(own)
            .into_iter()
            .map(|(name, a)| (Field::new(name, a.data_type().clone(), true), a))
            .unzip();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap();
        assert!(batch.column_by_name("own.x").is_some());
        let back = own_reading(&batch, &meta);
        let bits = |v: Vec<f64>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(back.f64s("x").unwrap()),
            bits(vec![1.0, -0.0, f64::NAN])
        );
        assert_eq!(back.bools("b").unwrap(), [true, false, true]);
        assert_eq!(back.opt_u64s("u").unwrap(), [Some(1), None, Some(3)]);
        assert_eq!(back.value("v").as_u64(), Some(5));
        assert_eq!(back.value("w"), &StateValue::Null);
        // a column read as another type is malformed, a missing one too
        assert!(back.has("b") && back.f64s("b").is_err());
        assert!(!back.has("y") && back.f64s("y").is_err());
    }
}
