//! Arrow arrays to plain Rust values: token lists to flat `f32` slices with row offsets, group
//! labels to [`GroupKey`]s. Every error names the file, the column and the row.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

use crate::convert;
use crate::data::{GroupKey, TokenColumn, token_position};
use crate::error::{Error, Result};

/// Which column of which file, and the global index of the array's first row, for messages.
#[derive(Debug, Clone, Copy)]
pub struct ColumnRef<'a> {
    pub file: &'a str,
    pub column: &'a str,
    pub first_row: usize,
}

impl ColumnRef<'_> {
    pub fn error(&self, row: usize, what: impl std::fmt::Display) -> Error {
        Error::data(format!(
            "{}: column `{}` row {}: {what}",
            self.file,
            self.column,
            self.first_row + row
        ))
        .with_cell(self.column, self.first_row + row)
    }

    pub fn type_error(&self, found: &DataType, expected: &str) -> Error {
        Error::data(format!(
            "{}: column `{}` has type {found}, expected {expected}",
            self.file, self.column
        ))
    }
}

/// What a token column may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Floats (float16/32/64), read as f32 like verl's tensors.
    Values,
    /// 0/1 as integers, booleans or floats.
    Mask,
}

impl TokenKind {
    fn expected(self) -> &'static str {
        match self {
            TokenKind::Values => "a list of float32 or float64",
            TokenKind::Mask => "a list of 0/1 integers, booleans or floats",
        }
    }

    fn accepts(self, item: &DataType) -> bool {
        match self {
            TokenKind::Values => item.is_floating(),
            TokenKind::Mask => {
                item.is_integer() || item.is_floating() || *item == DataType::Boolean
            }
        }
    }
}

/// Check that a column's Arrow type fits a token column of this kind.
pub fn check_token_type(data_type: &DataType, kind: TokenKind, col: &ColumnRef<'_>) -> Result<()> {
    let item = match data_type {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => f.data_type(),
        other => return Err(col.type_error(other, kind.expected())),
    };
    if kind.accepts(item) {
        Ok(())
    } else {
        Err(col.type_error(data_type, kind.expected()))
    }
}

/// Decode a list column into flat f32 values with per-row offsets.
pub fn token_column(array: &ArrayRef, kind: TokenKind, col: &ColumnRef<'_>) -> Result<TokenColumn> {
    check_token_type(array.data_type(), kind, col)?;
    if let Some(row) = first_null(array.as_ref()) {
        return Err(col.error(row, "null list (every row needs a list, even an empty one)"));
    }
    let (offsets, child) = list_parts(array);
    let start = offsets[0];
    let child = child.slice(start, offsets[array.len()] - start);
    let offsets: Vec<usize> = offsets.iter().map(|&o| o - start).collect();
    if child.null_count() > 0 {
        let token = first_null(child.as_ref()).unwrap_or(0);
        let (row, at) = token_position(&offsets, token);
        return Err(col.error(row, format!("null value at token {at}")));
    }
    let values = convert::f32_values(child.as_ref())
        .ok_or_else(|| col.type_error(array.data_type(), kind.expected()))?;
    if kind == TokenKind::Mask
        && let Some(token) = first_where(&values, |v| (v != 0.0) & (v != 1.0))
    {
        let (row, at) = token_position(&offsets, token);
        return Err(col.error(
            row,
            format!(
                "mask value {} at token {at} (masks hold 0 or 1)",
                values[token]
            ),
        ));
    }
    Ok(TokenColumn {
        offsets,
        values: convert::to_shared(values),
    })
}

/// A list column's row offsets into its child array (absolute: a sliced list's first offset
/// need not be 0) and the child. `array` is a list, large list or fixed-size list.
fn list_parts(array: &ArrayRef) -> (Vec<usize>, ArrayRef) {
    let n = array.len();
    match array.data_type() {
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            (
                list.value_offsets().iter().map(|&o| o as usize).collect(),
                list.values().clone(),
            )
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            (
                list.value_offsets().iter().map(|&o| o as usize).collect(),
                list.values().clone(),
            )
        }
        DataType::FixedSizeList(_, size) => {
            let list = array.as_fixed_size_list();
            let size = *size as usize;
            let start = list.offset() * size;
            (
                (0..=n).map(|i| start + i * size).collect(),
                list.values().clone(),
            )
        }
        _ => unreachable!("a list type, checked by the callers"),
    }
}

/// The first index where `bad` holds. Blocks are scanned without a branch per value (a
/// per-value branch mispredicts on a mask's random 0s and 1s, and keeps the loop from
/// vectorising); only a block with a hit is searched value by value.
fn first_where(values: &[f32], bad: impl Fn(f32) -> bool + Copy) -> Option<usize> {
    const BLOCK: usize = 256;
    values.chunks(BLOCK).enumerate().find_map(|(b, block)| {
        if block.iter().fold(false, |any, &v| any | bad(v)) {
            block.iter().position(|&v| bad(v)).map(|i| b * BLOCK + i)
        } else {
            None
        }
    })
}

/// Refuse NaN and ±inf, naming the row and token (verl would carry them into every sum).
pub fn check_finite_tokens(values: &[f32], offsets: &[usize], col: &ColumnRef<'_>) -> Result<()> {
    if let Some(token) = first_where(values, |v| !v.is_finite()) {
        let (row, at) = token_position(offsets, token);
        return Err(col.error(
            row,
            format!(
                "{} at token {at} (pass --allow-nonfinite to let non-finite values through, as verl would)",
                values[token]
            ),
        ));
    }
    Ok(())
}

/// Refuse NaN and ±inf in a scalar column.
pub fn check_finite_scalars(values: &[f32], col: &ColumnRef<'_>) -> Result<()> {
    if let Some(row) = first_where(values, |v| !v.is_finite()) {
        return Err(col.error(
            row,
            format!(
                "{} (pass --allow-nonfinite to let non-finite values through, as verl would)",
                values[row]
            ),
        ));
    }
    Ok(())
}

/// Group labels: strings (utf8, large_utf8, utf8_view, dictionary of strings) or integers
/// (or a dictionary of integers).
pub fn group_keys(array: &ArrayRef, col: &ColumnRef<'_>) -> Result<Vec<GroupKey>> {
    const EXPECTED: &str = "strings or integers";
    if let Some(row) = first_null(array.as_ref()) {
        return Err(col.error(row, "null label"));
    }
    let dt = array.data_type();
    if let Some(ints) = convert::integer_values(array.as_ref()) {
        return Ok(ints.into_iter().map(GroupKey::Int).collect());
    }
    let strings =
        convert::string_values(array.as_ref()).ok_or_else(|| col.type_error(dt, EXPECTED))?;
    Ok(strings
        .into_iter()
        .map(|s| GroupKey::Str(s.unwrap_or_default().into()))
        .collect())
}

/// Group labels from a list-of-integers column (`prompt_ids`): rows are in one group when
/// their lists are identical, as NeMo-RL's `torch.unique(prompts, dim=0)` groups them. Each
/// list becomes a string key (`"[1, 2, 3]"`), so equality is exact list equality.
pub fn id_list_keys(array: &ArrayRef, col: &ColumnRef<'_>) -> Result<Vec<GroupKey>> {
    const EXPECTED: &str = "a list of integers (token ids)";
    let inner = match array.data_type() {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)
            if f.data_type().is_integer() =>
        {
            f.data_type().clone()
        }
        other => return Err(col.type_error(other, EXPECTED)),
    };
    if let Some(row) = first_null(array.as_ref()) {
        return Err(col.error(row, "null list (every row needs its prompt token ids)"));
    }
    let (offsets, child) = list_parts(array);
    let ids =
        convert::integer_values(child.as_ref()).ok_or_else(|| col.type_error(&inner, EXPECTED))?;
    let mut keys = Vec::with_capacity(array.len());
    for row in 0..array.len() {
        let span = offsets[row]..offsets[row + 1];
        if span.clone().any(|i| child.is_null(i)) {
            return Err(col.error(row, "null token id"));
        }
        // written out rather than `{:?}`, whose format is not specified: the key can reach a
        // dataset output's plan fingerprint (`advcalc.plan`)
        let list: Vec<String> = ids[span].iter().map(i128::to_string).collect();
        keys.push(GroupKey::Str(format!("[{}]", list.join(", ")).into()));
    }
    Ok(keys)
}

/// A scalar integer column (`step`, `output_index`).
pub fn int_scalars(array: &ArrayRef, col: &ColumnRef<'_>) -> Result<Vec<i64>> {
    if !array.data_type().is_integer() {
        return Err(col.type_error(array.data_type(), "integers"));
    }
    if let Some(row) = first_null(array.as_ref()) {
        return Err(col.error(row, "null value"));
    }
    let ints = convert::integer_values(array.as_ref())
        .ok_or_else(|| col.type_error(array.data_type(), "integers"))?;
    ints.into_iter()
        .enumerate()
        .map(|(row, i)| {
            i64::try_from(i).map_err(|_| col.error(row, format!("{i} is out of the int64 range")))
        })
        .collect()
}

/// A scalar float column (`score`), read as f32 like verl's reward tensor.
pub fn float_scalars(array: &ArrayRef, col: &ColumnRef<'_>) -> Result<Vec<f32>> {
    let dt = array.data_type();
    if !(dt.is_floating() || dt.is_integer()) {
        return Err(col.type_error(dt, "numbers (float32 or float64)"));
    }
    if let Some(row) = first_null(array.as_ref()) {
        return Err(col.error(row, "null value"));
    }
    let values =
        convert::f64_values(array.as_ref()).ok_or_else(|| col.type_error(dt, "numbers"))?;
    Ok(values.into_iter().map(|v| v as f32).collect())
}

/// The first null row, logically: a dictionary's row is null where its key is, or the value
/// its key points to.
fn first_null(array: &dyn Array) -> Option<usize> {
    let nulls = array.logical_nulls().filter(|n| n.null_count() > 0)?;
    (0..array.len()).find(|&i| nulls.is_null(i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{BooleanBuilder, Float32Builder, ListBuilder};
    use std::sync::Arc;

    const COL: ColumnRef<'static> = ColumnRef {
        file: "in.parquet",
        column: "c",
        first_row: 10,
    };

    #[test]
    fn list_of_bool_mask() {
        let mut b = ListBuilder::new(BooleanBuilder::new());
        b.append_value([Some(true), Some(false)]);
        b.append_value([]);
        b.append_value([Some(true)]);
        let array: ArrayRef = Arc::new(b.finish());
        let t = token_column(&array, TokenKind::Mask, &COL).unwrap();
        assert_eq!(t.offsets, vec![0, 2, 2, 3]);
        assert_eq!(&t.values[..], &[1.0, 0.0, 1.0]);
    }

    #[test]
    fn sliced_list_is_rebased() {
        let mut b = ListBuilder::new(Float32Builder::new());
        b.append_value([Some(1.0), Some(2.0)]);
        b.append_value([Some(3.0)]);
        b.append_value([Some(4.0), Some(5.0)]);
        let array: ArrayRef = Arc::new(b.finish().slice(1, 2));
        let t = token_column(&array, TokenKind::Values, &COL).unwrap();
        assert_eq!(t.offsets, vec![0, 1, 3]);
        assert_eq!(t.row(1), &[4.0, 5.0]);
    }

    #[test]
    fn bad_mask_value_names_row_and_token() {
        let mut b = ListBuilder::new(Float32Builder::new());
        b.append_value([Some(1.0)]);
        b.append_value([Some(1.0), Some(0.5)]);
        let array: ArrayRef = Arc::new(b.finish());
        let e = token_column(&array, TokenKind::Mask, &COL).unwrap_err();
        assert_eq!(
            e.message(),
            "in.parquet: column `c` row 11: mask value 0.5 at token 1 (masks hold 0 or 1)"
        );
    }

    #[test]
    fn null_list_is_an_error() {
        let mut b = ListBuilder::new(Float32Builder::new());
        b.append_value([Some(1.0)]);
        b.append_null();
        let array: ArrayRef = Arc::new(b.finish());
        let e = token_column(&array, TokenKind::Values, &COL).unwrap_err();
        assert!(e.message().contains("row 11: null list"), "{}", e.message());
    }

    #[test]
    fn wrong_type_is_an_error() {
        let array: ArrayRef = Arc::new(arrow_array::Float32Array::from(vec![1.0]));
        let e = token_column(&array, TokenKind::Values, &COL).unwrap_err();
        assert_eq!(
            e.message(),
            "in.parquet: column `c` has type Float32, expected a list of float32 or float64"
        );
    }

    #[test]
    fn labels_of_every_kind_group_alike() {
        use arrow_array::types::Int16Type;
        use arrow_array::{DictionaryArray, StringViewArray, UInt64Array};
        let dict: DictionaryArray<Int16Type> = vec!["a", "b", "a"].into_iter().collect();
        let view = StringViewArray::from(vec!["a", "b", "a"]);
        let str = |s: &str| GroupKey::Str(s.into());
        for array in [Arc::new(dict) as ArrayRef, Arc::new(view)] {
            assert_eq!(
                group_keys(&array, &COL).unwrap(),
                [str("a"), str("b"), str("a")]
            );
        }
        // u64 labels above i64::MAX stay distinct
        let big: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX, u64::MAX - 1]));
        assert_eq!(
            group_keys(&big, &COL).unwrap(),
            [
                GroupKey::Int(u64::MAX as i128),
                GroupKey::Int(u64::MAX as i128 - 1)
            ]
        );
        // a dictionary whose value is null, under a non-null key
        let values = arrow_array::StringArray::from(vec![Some("a"), None]);
        let keys = arrow_array::Int8Array::from(vec![0, 1]);
        let dict: ArrayRef = Arc::new(DictionaryArray::new(keys, Arc::new(values)));
        let e = group_keys(&dict, &COL).unwrap_err();
        assert_eq!(e.message(), "in.parquet: column `c` row 11: null label");
        // a dictionary of integers groups as its integers, and its null values are refused
        let ints = arrow_array::Int64Array::from(vec![Some(5), None]);
        let keys = arrow_array::Int8Array::from(vec![0, 0, 1]);
        let dict: ArrayRef = Arc::new(DictionaryArray::new(keys, Arc::new(ints)));
        let e = group_keys(&dict, &COL).unwrap_err();
        assert_eq!(e.message(), "in.parquet: column `c` row 12: null label");
        let dict = dict.slice(0, 2);
        assert_eq!(
            group_keys(&dict, &COL).unwrap(),
            [GroupKey::Int(5), GroupKey::Int(5)]
        );
    }

    #[test]
    fn integers_that_do_not_fit_are_named() {
        let steps: ArrayRef = Arc::new(arrow_array::UInt64Array::from(vec![3, u64::MAX]));
        let e = int_scalars(&steps, &COL).unwrap_err();
        assert_eq!(
            e.message(),
            "in.parquet: column `c` row 11: 18446744073709551615 is out of the int64 range"
        );
    }

    #[test]
    fn prompt_id_lists_are_keys_by_their_values() {
        use arrow_array::builder::UInt64Builder;
        let mut b = ListBuilder::new(UInt64Builder::new());
        b.append_value([Some(1), Some(u64::MAX)]);
        b.append_value([Some(1), Some(u64::MAX)]);
        b.append_value([Some(2)]);
        let array: ArrayRef = Arc::new(b.finish().slice(1, 2));
        let keys = id_list_keys(&array, &COL).unwrap();
        assert_eq!(
            keys,
            [
                GroupKey::Str("[1, 18446744073709551615]".into()),
                GroupKey::Str("[2]".into())
            ]
        );
    }
}
