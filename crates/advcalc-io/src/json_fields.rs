//! A JSONL dump's top-level fields as typed Arrow columns: each field's kind over every line
//! (a scalar type, or the JSON text of arrays, objects and mixed values), and the builders
//! that append one line's values. verl's JSONL reader (`io::jsonl`) and the other trainers'
//! JSONL readers (`io::trainers`) keep a dump's own fields with them.

use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_schema::DataType;

use crate::json_line::{self, JsonValue};

/// What a field's values are, over every row of every file (a missing field is null).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Only nulls so far (written as a string column of nulls).
    Null,
    Bool,
    Int,
    /// Numbers, some or all of them not integers.
    Float,
    Str,
    /// Arrays, objects or a mix of kinds: each value's JSON text, as written.
    Json,
}

impl FieldKind {
    pub fn of(value: &JsonValue) -> Self {
        match value {
            JsonValue::Null => FieldKind::Null,
            JsonValue::Bool(_) => FieldKind::Bool,
            JsonValue::Int(_) => FieldKind::Int,
            JsonValue::Float(_) => FieldKind::Float,
            JsonValue::Str(_) => FieldKind::Str,
            JsonValue::Json => FieldKind::Json,
        }
    }

    pub fn merge(self, other: FieldKind) -> FieldKind {
        use FieldKind::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Null, x) | (x, Null) => x,
            (Int, Float) | (Float, Int) => Float,
            _ => Json,
        }
    }

    /// The Arrow type of the column.
    pub fn data_type(self) -> DataType {
        match self {
            FieldKind::Bool => DataType::Boolean,
            FieldKind::Int => DataType::Int64,
            FieldKind::Float => DataType::Float64,
            FieldKind::Null | FieldKind::Str | FieldKind::Json => DataType::Utf8,
        }
    }
}

/// One column of the dump's fields being built.
pub enum FieldBuilder {
    Bool(BooleanBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    /// `Str` values, or (`Json`, `Null`) each value's JSON text.
    Text(StringBuilder, FieldKind),
}

impl FieldBuilder {
    pub fn new(kind: FieldKind) -> Self {
        match kind {
            FieldKind::Bool => FieldBuilder::Bool(BooleanBuilder::new()),
            FieldKind::Int => FieldBuilder::Int(Int64Builder::new()),
            FieldKind::Float => FieldBuilder::Float(Float64Builder::new()),
            kind => FieldBuilder::Text(StringBuilder::new(), kind),
        }
    }

    /// Append one row's value (`None`: the row lacks the key). `false` when the value does
    /// not fit the kind found by the first read (the file changed since).
    pub fn append(&mut self, field: Option<&json_line::Field<'_>>) -> bool {
        let value = field.map(|f| &f.value);
        match (self, value) {
            (FieldBuilder::Bool(b), None | Some(JsonValue::Null)) => b.append_null(),
            (FieldBuilder::Int(b), None | Some(JsonValue::Null)) => b.append_null(),
            (FieldBuilder::Float(b), None | Some(JsonValue::Null)) => b.append_null(),
            (FieldBuilder::Text(b, _), None | Some(JsonValue::Null)) => b.append_null(),
            (FieldBuilder::Bool(b), Some(&JsonValue::Bool(v))) => b.append_value(v),
            (FieldBuilder::Int(b), Some(&JsonValue::Int(v))) => b.append_value(v),
            (FieldBuilder::Float(b), Some(v @ (JsonValue::Int(_) | JsonValue::Float(_)))) => {
                b.append_option(v.as_f64())
            }
            (FieldBuilder::Text(b, FieldKind::Str), Some(JsonValue::Str(s))) => b.append_value(s),
            (FieldBuilder::Text(b, FieldKind::Json), Some(_)) => {
                b.append_value(field.map_or("", |f| f.raw))
            }
            _ => return false,
        }
        true
    }

    pub fn finish(&mut self) -> ArrayRef {
        match self {
            FieldBuilder::Bool(b) => Arc::new(b.finish()),
            FieldBuilder::Int(b) => Arc::new(b.finish()),
            FieldBuilder::Float(b) => Arc::new(b.finish()),
            FieldBuilder::Text(b, _) => Arc::new(b.finish()),
        }
    }
}
