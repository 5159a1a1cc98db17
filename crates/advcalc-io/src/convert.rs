//! Arrow values to the plain numbers advcalc computes with, and computed values back to a
//! column's Arrow type. These few conversions are all advcalc needs of arrow's cast kernels,
//! which are not compiled in: with the kernels they pull in (ord, arith, string, regex) they
//! were over a quarter of the clean release build.
//!
//! Conversions are Rust's `as` (what arrow's cast does for these types: float64 → float32
//! rounds to nearest, integers → floats round), except where a value does not fit, which is
//! an error here instead of a null.

use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowPrimitiveType, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, LargeListArray, ListArray, PrimitiveArray,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType};

use crate::data::FloatBuffer;

/// Calls `$body` with `$t` bound to the arrow primitive type of `$dt` for every integer and
/// float type; evaluates `$other` for any other type.
macro_rules! numeric_type {
    ($dt:expr, $t:ident => $body:expr, _ => $other:expr) => {
        match $dt {
            DataType::Int8 => {
                type $t = Int8Type;
                $body
            }
            DataType::Int16 => {
                type $t = Int16Type;
                $body
            }
            DataType::Int32 => {
                type $t = Int32Type;
                $body
            }
            DataType::Int64 => {
                type $t = Int64Type;
                $body
            }
            DataType::UInt8 => {
                type $t = UInt8Type;
                $body
            }
            DataType::UInt16 => {
                type $t = UInt16Type;
                $body
            }
            DataType::UInt32 => {
                type $t = UInt32Type;
                $body
            }
            DataType::UInt64 => {
                type $t = UInt64Type;
                $body
            }
            DataType::Float16 => {
                type $t = Float16Type;
                $body
            }
            DataType::Float32 => {
                type $t = Float32Type;
                $body
            }
            DataType::Float64 => {
                type $t = Float64Type;
                $body
            }
            _ => $other,
        }
    };
}

/// A native value that converts to and from f32 and f64 as `as` does (float16 through f32,
/// which is exact).
pub trait Number: Copy {
    fn to_f32(self) -> f32;
    fn to_f64(self) -> f64;
    fn from_f32(v: f32) -> Self;
}

macro_rules! number_as {
    ($($n:ty),*) => {$(
        impl Number for $n {
            fn to_f32(self) -> f32 {
                self as f32
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f32(v: f32) -> Self {
                v as $n
            }
        }
    )*};
}
number_as!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

impl Number for half::f16 {
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    fn to_f64(self) -> f64 {
        half::f16::to_f64(self)
    }
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
}

/// The values of a numeric or boolean array as f32 (true = 1), nulls as 0; `None` for
/// another type. A float32 array's buffer is shared, not copied.
pub fn f32_values(array: &dyn Array) -> Option<ScalarBuffer<f32>> {
    if let DataType::Boolean = array.data_type() {
        let bools = array.as_boolean();
        return Some(
            (0..bools.len())
                .map(|i| f32::from(u8::from(bools.value(i))))
                .collect(),
        );
    }
    numeric_type!(array.data_type(), T => Some(to_f32::<T>(array)), _ => None)
}

fn to_f32<T: ArrowPrimitiveType>(array: &dyn Array) -> ScalarBuffer<f32>
where
    T::Native: Number,
{
    let values = array.as_primitive::<T>().values();
    if let Some(same) = (values as &dyn std::any::Any).downcast_ref::<ScalarBuffer<f32>>() {
        return same.clone();
    }
    values.iter().map(|&v| v.to_f32()).collect()
}

/// Decoded values handed to the plain layer: the Arrow buffer becomes the owner (no copy).
pub fn to_shared(values: ScalarBuffer<f32>) -> FloatBuffer {
    FloatBuffer::new(values)
}

/// Plain-layer values as an Arrow buffer without copying them: the buffer holds a clone of
/// `values`, which keeps their owner (a decoded Arrow buffer or a computed `Vec`) alive.
pub fn from_shared(values: &FloatBuffer) -> ScalarBuffer<f32> {
    let slice = values.as_slice();
    let ptr = NonNull::from(slice).cast::<u8>();
    // SAFETY: `ptr` and the length are the bytes of `slice`, which `values`' owner holds.
    // The owner sits behind an `Arc` that only hands out shared references, so the bytes do
    // not change, and the clone given as the allocation keeps them alive as long as the
    // buffer. An `f32` slice is aligned for `ScalarBuffer<f32>`.
    let buffer = unsafe {
        Buffer::from_custom_allocation(ptr, std::mem::size_of_val(slice), Arc::new(values.clone()))
    };
    ScalarBuffer::new(buffer, 0, slice.len())
}

/// The values of a numeric array as f64, nulls as 0; `None` for another type.
pub fn f64_values(array: &dyn Array) -> Option<Vec<f64>> {
    numeric_type!(array.data_type(), T => Some(
        array.as_primitive::<T>().values().iter().map(|&v| v.to_f64()).collect()
    ), _ => None)
}

/// The values of an integer array (or a dictionary of integers) as i128 (every integer type
/// fits), nulls as 0; `None` for another type.
pub fn integer_values(array: &dyn Array) -> Option<Vec<i128>> {
    macro_rules! ints {
        ($t:ty) => {
            array
                .as_primitive::<$t>()
                .values()
                .iter()
                .map(|&v| i128::from(v))
                .collect()
        };
    }
    Some(match array.data_type() {
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt64 => ints!(UInt64Type),
        DataType::Dictionary(_, _) => {
            // a null key's row is 0, as a null's is above (the callers refuse nulls first)
            let dict = array.as_any_dictionary();
            let values = integer_values(dict.values().as_ref())?;
            dict.normalized_keys()
                .into_iter()
                .map(|k| values.get(k).copied().unwrap_or(0))
                .collect()
        }
        _ => return None,
    })
}

/// Per row, its string (a null row is `None`), for utf8, large utf8, utf8 view and
/// dictionaries of those; `None` for another type.
pub fn string_values(array: &dyn Array) -> Option<Vec<Option<&str>>> {
    Some(match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().iter().collect(),
        DataType::LargeUtf8 => array.as_string::<i64>().iter().collect(),
        DataType::Utf8View => array.as_string_view().iter().collect(),
        DataType::Dictionary(_, _) => {
            let dict = array.as_any_dictionary();
            let values = string_values(dict.values().as_ref())?;
            let keys = dict.keys();
            dict.normalized_keys()
                .into_iter()
                .enumerate()
                .map(|(i, k)| if keys.is_null(i) { None } else { values[k] })
                .collect()
        }
        _ => return None,
    })
}

/// A list column of `data_type` (list, large list or fixed-size list of numbers or booleans)
/// holding `values` (converted with `as`; booleans: value ≠ 0) with these row offsets and
/// no nulls.
pub fn list_of(
    data_type: &DataType,
    offsets: &[usize],
    values: ScalarBuffer<f32>,
) -> Result<ArrayRef, ArrowError> {
    let (field, size) = match data_type {
        DataType::List(f) | DataType::LargeList(f) => (f, None),
        DataType::FixedSizeList(f, size) => (f, Some(*size)),
        other => {
            return Err(ArrowError::CastError(format!("{other} is not a list type")));
        }
    };
    let items = items_of(field.data_type(), values)?;
    let int_offsets = |what: &str| {
        offsets
            .iter()
            .map(|&o| i32::try_from(o))
            .collect::<Result<Vec<i32>, _>>()
            .map_err(|_| ArrowError::CastError(format!("{what} offsets over 2^31")))
    };
    Ok(match (data_type, size) {
        (DataType::List(_), _) => Arc::new(ListArray::try_new(
            field.clone(),
            OffsetBuffer::new(int_offsets("list")?.into()),
            items,
            None,
        )?),
        (DataType::LargeList(_), _) => Arc::new(LargeListArray::try_new(
            field.clone(),
            OffsetBuffer::new(offsets.iter().map(|&o| o as i64).collect()),
            items,
            None,
        )?),
        (_, Some(size)) => {
            let uniform = offsets.windows(2).all(|w| w[1] - w[0] == size as usize)
                && offsets.first() == Some(&0);
            if !uniform {
                return Err(ArrowError::CastError(format!(
                    "rows are not all {size} long"
                )));
            }
            Arc::new(FixedSizeListArray::try_new(
                field.clone(),
                size,
                items,
                None,
            )?)
        }
        _ => unreachable!("matched above"),
    })
}

fn items_of(item: &DataType, values: ScalarBuffer<f32>) -> Result<ArrayRef, ArrowError> {
    if let DataType::Boolean = item {
        return Ok(Arc::new(BooleanArray::from_iter(
            values.iter().map(|&v| Some(v != 0.0)),
        )));
    }
    numeric_type!(item, T => Ok(Arc::new(from_f32::<T>(values)) as ArrayRef), _ => Err(
        ArrowError::CastError(format!("cannot write numbers as {item}"))
    ))
}

fn from_f32<T: ArrowPrimitiveType>(values: ScalarBuffer<f32>) -> PrimitiveArray<T>
where
    T::Native: Number,
{
    if let Some(same) = (&values as &dyn std::any::Any).downcast_ref::<ScalarBuffer<T::Native>>() {
        return PrimitiveArray::new(same.clone(), None);
    }
    PrimitiveArray::new(
        values.iter().map(|&v| T::Native::from_f32(v)).collect(),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{
        DictionaryArray, Float16Array, Float64Array, Int8Array, StringArray, UInt64Array,
    };
    use arrow_schema::Field;

    #[test]
    fn numbers_convert_as_rust_does() {
        let ints = Int8Array::from(vec![0, 1, -3]);
        assert_eq!(&*f32_values(&ints).unwrap(), &[0.0, 1.0, -3.0]);
        // 0.1 (f64) rounds to the nearest f32, 0x3dcccccd
        let f64s = Float64Array::from(vec![0.1, 1e300]);
        let got = f32_values(&f64s).unwrap();
        assert_eq!(got[0].to_bits(), 0x3dcc_cccd);
        assert_eq!(got[1], f32::INFINITY);
        let halves = Float16Array::from(vec![half::f16::from_f32(0.5)]);
        assert_eq!(&*f32_values(&halves).unwrap(), &[0.5]);
        let bools = BooleanArray::from(vec![true, false]);
        assert_eq!(&*f32_values(&bools).unwrap(), &[1.0, 0.0]);
        assert!(f32_values(&StringArray::from(vec!["a"])).is_none());
        // u64::MAX does not fit i64; as i128 it is itself
        let big = UInt64Array::from(vec![u64::MAX]);
        assert_eq!(integer_values(&big).unwrap(), vec![u64::MAX as i128]);
        // a dictionary of integers reads through its keys
        let keys = Int8Array::from(vec![1, 0, 1]);
        let dict = DictionaryArray::new(keys, Arc::new(UInt64Array::from(vec![7, u64::MAX])));
        assert_eq!(
            integer_values(&dict).unwrap(),
            vec![u64::MAX as i128, 7, u64::MAX as i128]
        );
        assert!(
            integer_values(&DictionaryArray::new(
                Int8Array::from(vec![0]),
                Arc::new(StringArray::from(vec!["a"]))
            ))
            .is_none()
        );
    }

    #[test]
    fn dictionary_strings_read_through_their_keys() {
        let dict: DictionaryArray<Int8Type> = vec![Some("b"), None, Some("a"), Some("b")]
            .into_iter()
            .collect();
        assert_eq!(
            string_values(&dict).unwrap(),
            vec![Some("b"), None, Some("a"), Some("b")]
        );
    }

    #[test]
    fn lists_are_built_in_the_type_asked_for() {
        let values: ScalarBuffer<f32> = vec![1.0, 0.0, 1.0, 1.0].into();
        let item = Arc::new(Field::new("element", DataType::Int8, false));
        let list = list_of(
            &DataType::LargeList(item.clone()),
            &[0, 1, 4],
            values.clone(),
        )
        .unwrap();
        assert_eq!(list.data_type(), &DataType::LargeList(item.clone()));
        let list = list.as_list::<i64>();
        assert_eq!(list.value_offsets(), &[0, 1, 4]);
        assert_eq!(
            list.values().as_primitive::<Int8Type>().values(),
            &[1, 0, 1, 1]
        );

        let fixed = DataType::FixedSizeList(Arc::new(Field::new("x", DataType::Boolean, true)), 2);
        let list = list_of(&fixed, &[0, 2, 4], values.clone()).unwrap();
        assert_eq!(list.len(), 2);
        let bools = list.as_fixed_size_list().values().as_boolean().clone();
        assert_eq!(
            bools.iter().flatten().collect::<Vec<_>>(),
            [true, false, true, true]
        );
        assert!(list_of(&fixed, &[0, 1, 4], values.clone()).is_err());

        // float32 items share the buffer
        let f32_item = Arc::new(Field::new("item", DataType::Float32, true));
        let list = list_of(&DataType::List(f32_item), &[0, 4], values.clone()).unwrap();
        let got = list
            .as_list::<i32>()
            .values()
            .as_primitive::<Float32Type>()
            .values()
            .clone();
        assert_eq!(got.inner().as_ptr(), values.inner().as_ptr());
    }

    // The hand-over between Arrow and the plain layer is the hot path: neither way copies.
    #[test]
    fn shared_values_cross_without_a_copy() {
        let decoded: ScalarBuffer<f32> = vec![1.0, -2.0, 3.5].into();
        let shared = to_shared(decoded.clone());
        assert_eq!(shared.as_ptr(), decoded.as_ptr());
        let back = from_shared(&shared);
        assert_eq!(back.as_ptr(), decoded.as_ptr());
        assert_eq!(&back[..], &[1.0, -2.0, 3.5]);

        let computed = vec![0.5f32; 5];
        let at = computed.as_ptr();
        let shared = FloatBuffer::from(computed);
        let back = from_shared(&shared);
        drop(shared); // the Arrow buffer keeps the values alive
        assert_eq!(back.as_ptr(), at);
        assert_eq!(&back[..], &[0.5; 5]);
        let f32_item = Arc::new(Field::new("item", DataType::Float32, true));
        let list = list_of(&DataType::List(f32_item), &[0, 2, 5], back).unwrap();
        let values = list.as_list::<i32>().values().as_primitive::<Float32Type>();
        assert_eq!(values.values().as_ptr(), at);

        assert!(from_shared(&FloatBuffer::default()).is_empty());
    }
}
