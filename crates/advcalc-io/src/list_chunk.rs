//! A list column chunk read straight from its Parquet pages into the flat values and row
//! offsets an Arrow list array holds, for the layout token columns have: a list of floats or
//! integers, with no null lists and no null elements.
//!
//! Why: parquet's generic reader materialises both level streams, pads the values for null
//! slots and rebuilds the offsets from the levels, several passes over every token; that was
//! most of the time `inspect` and `report` spend (docs/benchmarks.md). Here a page whose
//! definition levels are one run (no empty lists) is read by walking only the repetition
//! levels' runs, and dictionary indices are gathered straight into the output buffer.
//!
//! Anything else (null lists or elements, nested or legacy two-level lists, other leaf types
//! or encodings) is declined (`Ok(None)`) and read by parquet's reader instead, so the caller
//! always gets the array parquet's reader gives; the tests check that on files of every
//! layout and encoding this reads.

use std::sync::Arc;

use arrow_array::types::{
    ArrowPrimitiveType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
};
use arrow_array::{ArrayRef, LargeListArray, ListArray, PrimitiveArray};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field};
use bytes::{Buf, Bytes};
use parquet::basic::{Encoding, Repetition, Type as PhysicalType};
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::RowGroupMetaData;
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::schema::types::SchemaDescriptor;

use crate::positional::PositionalFile;

type DecodeError = Box<dyn std::error::Error + Send + Sync>;
type Decoded<T> = std::result::Result<Option<T>, DecodeError>;

fn malformed(what: impl Into<String>) -> DecodeError {
    what.into().into()
}

/// A column chunk read into memory with one read, its pages served from there. Reading
/// through the file instead costs a buffered read per page header (the reader does not know
/// the header's size) and a copy per page.
struct ChunkInMemory {
    /// The chunk's offset in the file (page offsets in the footer are the file's).
    start: u64,
    bytes: Bytes,
}

impl ChunkInMemory {
    fn at(&self, start: u64, length: usize) -> parquet::errors::Result<std::ops::Range<usize>> {
        let from = start.checked_sub(self.start).map(|o| o as usize);
        match from.and_then(|from| Some(from..from.checked_add(length)?)) {
            Some(range) if range.end <= self.bytes.len() => Ok(range),
            _ => Err(parquet::errors::ParquetError::EOF(format!(
                "cannot read {length} bytes at offset {start}: outside the column chunk"
            ))),
        }
    }
}

impl Length for ChunkInMemory {
    fn len(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

impl ChunkReader for ChunkInMemory {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let range = self.at(start, 0)?;
        Ok(self.bytes.slice(range.start..).reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        Ok(self.bytes.slice(self.at(start, length)?))
    }
}

/// Read list column `leaf` of row group `rg` as the array parquet's reader would give for
/// `field` (its Arrow field); `Ok(None)` where this reader does not handle the layout.
pub fn read(
    file: &PositionalFile,
    rg: &RowGroupMetaData,
    leaf: usize,
    field: &Field,
) -> Decoded<ArrayRef> {
    let (child, large) = match field.data_type() {
        DataType::List(child) => (child, false),
        DataType::LargeList(child) => (child, true),
        _ => return Ok(None),
    };
    let Some(def_levels) = ListLevels::of(rg.schema_descr(), leaf) else {
        return Ok(None);
    };
    let physical = rg.column(leaf).column_descr().physical_type();
    match (child.data_type(), physical) {
        (DataType::Float32, PhysicalType::FLOAT) => Chunk::<f32>::read(file, rg, leaf, def_levels)?
            .map_or(Ok(None), |c| c.into_list::<Float32Type>(child, large, Some)),
        (DataType::Float64, PhysicalType::DOUBLE) => {
            Chunk::<f64>::read(file, rg, leaf, def_levels)?
                .map_or(Ok(None), |c| c.into_list::<Float64Type>(child, large, Some))
        }
        (DataType::Int64, PhysicalType::INT64) => Chunk::<i64>::read(file, rg, leaf, def_levels)?
            .map_or(Ok(None), |c| c.into_list::<Int64Type>(child, large, Some)),
        (DataType::Int32 | DataType::Int16 | DataType::Int8, PhysicalType::INT32) => {
            let Some(c) = Chunk::<i32>::read(file, rg, leaf, def_levels)? else {
                return Ok(None);
            };
            // A value out of the narrower type's range: parquet's reader has its own rule
            // for that; leave it to it.
            match child.data_type() {
                DataType::Int8 => c.into_list::<Int8Type>(child, large, |v| i8::try_from(v).ok()),
                DataType::Int16 => {
                    c.into_list::<Int16Type>(child, large, |v| i16::try_from(v).ok())
                }
                _ => c.into_list::<Int32Type>(child, large, Some),
            }
        }
        _ => Ok(None),
    }
}

/// The definition levels of a three-level list (`<list> (LIST) { repeated group { <leaf> } }`,
/// the list and the leaf each optional or required); `io::float_lists` writes them too.
#[derive(Debug, Clone, Copy)]
pub struct ListLevels {
    /// A present but empty list.
    pub empty: i16,
    /// A present value.
    pub value: i16,
}

impl ListLevels {
    pub fn of(schema: &SchemaDescriptor, leaf: usize) -> Option<ListLevels> {
        let descr = schema.column(leaf);
        let root = schema.get_column_root(leaf);
        let [repeated] = root.get_fields() else {
            return None;
        };
        let repeated_is_group = repeated.is_group()
            && repeated.get_basic_info().repetition() == Repetition::REPEATED
            && matches!(repeated.get_fields(), [item] if item.is_primitive());
        if !root.is_group() || !repeated_is_group || descr.max_rep_level() != 1 {
            return None;
        }
        let optional = |r: Repetition| match r {
            Repetition::OPTIONAL => Some(1),
            Repetition::REQUIRED => Some(0),
            Repetition::REPEATED => None,
        };
        let list = optional(root.get_basic_info().repetition())?;
        let item = optional(descr.self_type().get_basic_info().repetition())?;
        let def_levels = ListLevels {
            empty: list,
            value: list + 1 + item,
        };
        (descr.max_def_level() == def_levels.value).then_some(def_levels)
    }

    /// The bit width of the definition levels.
    pub fn def_width(self) -> u8 {
        bit_width(self.value as u32)
    }
}

fn bit_width(max: u32) -> u8 {
    (32 - max.leading_zeros()) as u8
}

/// A physical value type: its width and how it is read from little-endian bytes. Only plain
/// numbers implement it (every bit pattern is a value): `extend_plain` copies bytes into them.
trait Physical: Copy + Default + Send + 'static {
    const SIZE: usize;
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! physical {
    ($t:ty) => {
        impl Physical for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn from_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
        }
    };
}
physical!(f32);
physical!(f64);
physical!(i32);
physical!(i64);

/// One column chunk decoded: every value, and where each row starts.
struct Chunk<T> {
    values: Vec<T>,
    /// Row starts, then the end (rows + 1 entries).
    offsets: Vec<i64>,
}

/// Reused between pages: levels decoded one per byte, for pages that need them.
#[derive(Default)]
struct Scratch {
    rep: Vec<u8>,
    def: Vec<u8>,
}

impl<T: Physical> Chunk<T> {
    fn read(
        file: &PositionalFile,
        rg: &RowGroupMetaData,
        leaf: usize,
        def_levels: ListLevels,
    ) -> Decoded<Chunk<T>> {
        let meta = rg.column(leaf);
        let rows = usize::try_from(rg.num_rows()).map_err(|_| malformed("negative row count"))?;
        let (start, length) = meta.byte_range();
        let length = usize::try_from(length).map_err(|_| malformed("column chunk too large"))?;
        let bytes = ChunkInMemory {
            start,
            bytes: file.get_bytes(start, length)?,
        };
        let mut pages = SerializedPageReader::new(Arc::new(bytes), meta, rows, None)?;
        // What the footer declares, bounded: the buffers grow past it if the pages hold more.
        let declared = usize::try_from(meta.num_values()).unwrap_or(0);
        let mut chunk = Chunk {
            values: Vec::with_capacity(declared.min(1 << 26)),
            offsets: Vec::with_capacity(rows.min(1 << 26) + 1),
        };
        let mut dictionary: Option<Vec<T>> = None;
        let mut scratch = Scratch::default();
        while let Some(page) = pages.get_next_page()? {
            let (rep, def, data, count, encoding) = match page {
                Page::DictionaryPage {
                    buf,
                    num_values,
                    encoding,
                    ..
                } => {
                    if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) {
                        return Ok(None);
                    }
                    dictionary = Some(plain(&buf, num_values as usize)?);
                    continue;
                }
                Page::DataPage {
                    buf,
                    num_values,
                    encoding,
                    def_level_encoding,
                    rep_level_encoding,
                    ..
                } => {
                    if def_level_encoding != Encoding::RLE || rep_level_encoding != Encoding::RLE {
                        return Ok(None);
                    }
                    // v1: each level stream is prefixed by its length
                    let rep_len = length_prefix(&buf, 0)?;
                    let def_len = length_prefix(&buf, 4 + rep_len)?;
                    let rep = buf.slice(4..4 + rep_len);
                    let def = buf.slice(8 + rep_len..8 + rep_len + def_len);
                    let data = buf.slice(8 + rep_len + def_len..);
                    (rep, def, data, num_values as usize, encoding)
                }
                Page::DataPageV2 {
                    buf,
                    num_values,
                    encoding,
                    def_levels_byte_len,
                    rep_levels_byte_len,
                    ..
                } => {
                    let rep_len = rep_levels_byte_len as usize;
                    let def_len = def_levels_byte_len as usize;
                    if rep_len + def_len > buf.len() {
                        return Err(malformed("page levels longer than the page"));
                    }
                    let rep = buf.slice(..rep_len);
                    let def = buf.slice(rep_len..rep_len + def_len);
                    let data = buf.slice(rep_len + def_len..);
                    (rep, def, data, num_values as usize, encoding)
                }
            };
            let before = chunk.values.len();
            let Some(present) = chunk.levels(&rep, &def, count, def_levels, &mut scratch)? else {
                return Ok(None);
            };
            match encoding {
                Encoding::PLAIN => extend_plain(&mut chunk.values, &data, present)?,
                Encoding::BYTE_STREAM_SPLIT => extend_split(&mut chunk.values, &data, present)?,
                Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY => {
                    let dictionary = dictionary
                        .as_deref()
                        .ok_or_else(|| malformed("dictionary-encoded page without a dictionary"))?;
                    extend_dictionary(&mut chunk.values, dictionary, &data, present)?;
                }
                _ => return Ok(None),
            }
            debug_assert_eq!(chunk.values.len(), before + present);
        }
        if chunk.offsets.len() != rows {
            return Err(malformed(format!(
                "the column chunk holds {} rows, the row group {rows}",
                chunk.offsets.len()
            )));
        }
        chunk.offsets.push(chunk.values.len() as i64);
        Ok(Some(chunk))
    }

    /// Walk one page's levels: record the rows that start in it, and return how many values
    /// it holds (`None`: a null list or element, declined).
    fn levels(
        &mut self,
        rep: &[u8],
        def: &[u8],
        count: usize,
        def_levels: ListLevels,
        scratch: &mut Scratch,
    ) -> Decoded<usize> {
        let base = self.values.len() as i64;
        let defs = Hybrid::new(def, def_levels.def_width());
        let all_present = matches!(
            defs.clone().next()?,
            Some(Run::Repeat { value, count: c }) if value == def_levels.value as u64 && c >= count
        );
        if self.offsets.is_empty() && self.values.is_empty() && count > 0 {
            // The chunk's first level must start a row.
            let first = Hybrid::new(rep, 1).next()?;
            let starts_row = match first {
                Some(Run::Repeat { value, .. }) => value == 0,
                Some(Run::Packed { bytes, .. }) => bytes.first().is_some_and(|b| b & 1 == 0),
                None => false,
            };
            if !starts_row {
                return Err(malformed("the first repetition level is not 0"));
            }
        }
        if all_present {
            // Every level is a value: a row starts at each repetition level 0.
            let mut at = 0usize;
            let mut reps = Hybrid::new(rep, 1);
            while at < count {
                let run = reps
                    .next()?
                    .ok_or_else(|| malformed("fewer repetition levels than values"))?;
                match run {
                    Run::Repeat { value, count: c } => {
                        let c = c.min(count - at);
                        if value == 0 {
                            self.offsets.extend((0..c).map(|j| base + (at + j) as i64));
                        } else if value != 1 {
                            return Err(malformed("repetition level above 1"));
                        }
                        at += c;
                    }
                    Run::Packed { bytes, count: c } => {
                        let c = c.min(count - at);
                        for (k, &byte) in bytes.iter().enumerate() {
                            let start = at + 8 * k;
                            if start >= at + c {
                                break;
                            }
                            let valid = (at + c - start).min(8);
                            let mut zeros = !byte & (((1u16 << valid) - 1) as u8);
                            while zeros != 0 {
                                let bit = zeros.trailing_zeros() as usize;
                                self.offsets.push(base + (start + bit) as i64);
                                zeros &= zeros - 1;
                            }
                        }
                        at += c;
                    }
                }
            }
            return Ok(Some(count));
        }
        // The general case: both level streams one per byte, then one walk.
        unpack_levels(rep, 1, count, &mut scratch.rep)?;
        unpack_levels(def, def_levels.def_width(), count, &mut scratch.def)?;
        let mut present = 0usize;
        for (&r, &d) in scratch.rep.iter().zip(&scratch.def) {
            let d = d as i16;
            if r == 0 {
                self.offsets.push(base + present as i64);
            } else if r != 1 {
                return Err(malformed("repetition level above 1"));
            }
            if d == def_levels.value {
                present += 1;
            } else if !(d == def_levels.empty && r == 0) {
                // a null list, a null element, or a level the layout cannot have
                return Ok(None);
            }
        }
        Ok(Some(present))
    }

    /// The Arrow list array of the chunk, its values converted by `narrow` (`None` for a
    /// value it cannot hold: declined).
    fn into_list<A: ArrowPrimitiveType>(
        self,
        child: &Arc<Field>,
        large: bool,
        narrow: impl Fn(T) -> Option<A::Native>,
    ) -> Decoded<ArrayRef> {
        let values: Option<Vec<A::Native>> = self.values.into_iter().map(narrow).collect();
        let Some(values) = values else {
            return Ok(None);
        };
        let values = PrimitiveArray::<A>::new(ScalarBuffer::from(values), None)
            .with_data_type(child.data_type().clone());
        let values = Arc::new(values);
        let array: ArrayRef = if large {
            let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets));
            Arc::new(LargeListArray::try_new(
                child.clone(),
                offsets,
                values,
                None,
            )?)
        } else {
            let offsets = self
                .offsets
                .into_iter()
                .map(i32::try_from)
                .collect::<std::result::Result<Vec<i32>, _>>()
                .map_err(|_| malformed("more than 2^31 values in a list column's row group"))?;
            let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
            Arc::new(ListArray::try_new(child.clone(), offsets, values, None)?)
        };
        Ok(Some(array))
    }
}

fn length_prefix(buf: &[u8], at: usize) -> std::result::Result<usize, DecodeError> {
    let bytes = buf
        .get(at..at + 4)
        .ok_or_else(|| malformed("page shorter than its level lengths"))?;
    let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    if at + 4 + len > buf.len() {
        return Err(malformed("page levels longer than the page"));
    }
    Ok(len)
}

fn plain<T: Physical>(data: &[u8], count: usize) -> std::result::Result<Vec<T>, DecodeError> {
    let mut out = Vec::new();
    extend_plain(&mut out, data, count)?;
    Ok(out)
}

fn extend_plain<T: Physical>(
    out: &mut Vec<T>,
    data: &[u8],
    count: usize,
) -> std::result::Result<(), DecodeError> {
    let bytes = data
        .get(..count * T::SIZE)
        .ok_or_else(|| malformed("page shorter than its values"))?;
    #[cfg(target_endian = "little")]
    {
        // PLAIN is the values' little-endian bytes: one copy (the per-value loop did not
        // become one)
        out.reserve(count);
        let spare = out.spare_capacity_mut();
        // SAFETY: `spare` holds at least `count` values, `bytes` is `count` values' bytes,
        // and every bit pattern is a valid `T` (f32, f64, i32 or i64); the two do not
        // overlap (`out` owns its buffer). The values are set before the length covers them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                spare.as_mut_ptr().cast::<u8>(),
                bytes.len(),
            );
            out.set_len(out.len() + count);
        }
    }
    #[cfg(not(target_endian = "little"))]
    out.extend(bytes.chunks_exact(T::SIZE).map(T::from_le));
    Ok(())
}

/// BYTE_STREAM_SPLIT: byte `j` of value `i` at `data[j * count + i]`.
fn extend_split<T: Physical>(
    out: &mut Vec<T>,
    data: &[u8],
    count: usize,
) -> std::result::Result<(), DecodeError> {
    if data.len() < count * T::SIZE {
        return Err(malformed("page shorter than its values"));
    }
    let mut bytes = [0u8; 8];
    out.extend((0..count).map(|i| {
        for (j, b) in bytes[..T::SIZE].iter_mut().enumerate() {
            *b = data[j * count + i];
        }
        T::from_le(&bytes[..T::SIZE])
    }));
    Ok(())
}

fn extend_dictionary<T: Physical>(
    out: &mut Vec<T>,
    dictionary: &[T],
    data: &[u8],
    count: usize,
) -> std::result::Result<(), DecodeError> {
    let (&width, runs) = data
        .split_first()
        .ok_or_else(|| malformed("dictionary-encoded page without its bit width"))?;
    if width > 32 {
        return Err(malformed("dictionary index wider than 32 bits"));
    }
    let out_of_range = || malformed("dictionary index out of range");
    let mut runs = Hybrid::new(runs, width);
    let mut left = count;
    while left > 0 {
        let run = runs
            .next()?
            .ok_or_else(|| malformed("fewer dictionary indices than values"))?;
        match run {
            Run::Repeat { value, count: c } => {
                let c = c.min(left);
                let v = *dictionary.get(value as usize).ok_or_else(out_of_range)?;
                out.extend(std::iter::repeat_n(v, c));
                left -= c;
            }
            Run::Packed { bytes, count: c } => {
                let c = c.min(left);
                let mut bad = false;
                let len = dictionary.len();
                out.extend((0..c).map(|i| {
                    let index = unpack_one(bytes, width, i) as usize;
                    if index < len {
                        dictionary[index]
                    } else {
                        bad = true;
                        T::default()
                    }
                }));
                if bad {
                    return Err(out_of_range());
                }
                left -= c;
            }
        }
    }
    Ok(())
}

/// Levels one per byte into `out` (cleared first).
fn unpack_levels(
    data: &[u8],
    width: u8,
    count: usize,
    out: &mut Vec<u8>,
) -> std::result::Result<(), DecodeError> {
    out.clear();
    let mut runs = Hybrid::new(data, width);
    while out.len() < count {
        let left = count - out.len();
        match runs
            .next()?
            .ok_or_else(|| malformed("fewer levels than values"))?
        {
            Run::Repeat { value, count: c } => {
                out.extend(std::iter::repeat_n(value as u8, c.min(left)));
            }
            Run::Packed { bytes, count: c } => {
                out.extend((0..c.min(left)).map(|i| unpack_one(bytes, width, i) as u8));
            }
        }
    }
    Ok(())
}

/// Value `i` of a bit-packed run (little-endian bit order, `width` ≤ 32 bits).
#[inline]
fn unpack_one(bytes: &[u8], width: u8, i: usize) -> u32 {
    if width == 0 {
        return 0;
    }
    let bit = i * width as usize;
    let at = bit / 8;
    let word = match bytes.get(at..at + 8) {
        Some(b) => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        None => {
            let mut b = [0u8; 8];
            let tail = &bytes[at.min(bytes.len())..];
            b[..tail.len()].copy_from_slice(tail);
            u64::from_le_bytes(b)
        }
    };
    ((word >> (bit % 8)) & ((1u64 << width) - 1)) as u32
}

/// One run of Parquet's RLE / bit-packing hybrid encoding.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Run<'a> {
    Repeat {
        value: u64,
        count: usize,
    },
    /// `count` values (a multiple of 8, fewer if the data ends early) packed in `bytes`.
    Packed {
        bytes: &'a [u8],
        count: usize,
    },
}

/// The runs of a hybrid-encoded stream (levels without their length prefix, or dictionary
/// indices after their bit-width byte).
#[derive(Clone)]
struct Hybrid<'a> {
    data: &'a [u8],
    at: usize,
    width: u8,
}

impl<'a> Hybrid<'a> {
    fn new(data: &'a [u8], width: u8) -> Self {
        Hybrid { data, at: 0, width }
    }

    fn next(&mut self) -> std::result::Result<Option<Run<'a>>, DecodeError> {
        if self.at >= self.data.len() {
            return Ok(None);
        }
        let mut header: u64 = 0;
        let mut shift = 0;
        loop {
            let byte = *self
                .data
                .get(self.at)
                .ok_or_else(|| malformed("truncated run header"))?;
            self.at += 1;
            header |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 35 {
                return Err(malformed("run header longer than 5 bytes"));
            }
        }
        let width = self.width as usize;
        if header & 1 == 1 {
            let groups = (header >> 1) as usize;
            let wanted = groups.saturating_mul(width);
            let end = self.at.saturating_add(wanted).min(self.data.len());
            let bytes = &self.data[self.at..end];
            self.at = end;
            let count = match width {
                0 => groups.saturating_mul(8),
                w => (bytes.len() * 8 / w).min(groups.saturating_mul(8)),
            };
            Ok(Some(Run::Packed { bytes, count }))
        } else {
            let count = (header >> 1) as usize;
            let size = width.div_ceil(8);
            let bytes = self
                .data
                .get(self.at..self.at + size)
                .ok_or_else(|| malformed("truncated run value"))?;
            self.at += size;
            let value = bytes
                .iter()
                .rev()
                .fold(0u64, |v, &b| (v << 8) | u64::from(b));
            Ok(Some(Run::Repeat { value, count }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_runs_by_hand() {
        // RLE run: header 5 << 1 = 10, value 3 (one byte for width 2); then a bit-packed
        // run of one group (header 1 << 1 | 1 = 3) of width 2: values 0,1,2,3,0,1,2,3 →
        // bytes 0b11_10_01_00 twice.
        let data = [10, 3, 3, 0b1110_0100, 0b1110_0100];
        let mut runs = Hybrid::new(&data, 2);
        assert_eq!(
            runs.next().unwrap(),
            Some(Run::Repeat { value: 3, count: 5 })
        );
        let Some(Run::Packed { bytes, count }) = runs.next().unwrap() else {
            panic!("expected a packed run");
        };
        assert_eq!(count, 8);
        let unpacked: Vec<u32> = (0..8).map(|i| unpack_one(bytes, 2, i)).collect();
        assert_eq!(unpacked, [0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(runs.next().unwrap(), None);
    }

    #[test]
    fn unpacks_widths_across_byte_boundaries() {
        // width 5: values 31, 1, 17 → bits 11111 10000 10001 (LSB first)
        // = 0b0_10001_00001_11111 little-endian → bytes 0x3f, 0x44
        let bytes = [0x3f, 0x44];
        assert_eq!(unpack_one(&bytes, 5, 0), 31);
        assert_eq!(unpack_one(&bytes, 5, 1), 1);
        assert_eq!(unpack_one(&bytes, 5, 2), 17);
    }

    #[test]
    fn malformed_streams_are_errors_not_panics() {
        // a header that never ends, a repeat run without its value
        assert!(Hybrid::new(&[0x80, 0x80], 1).next().is_err());
        assert!(Hybrid::new(&[2], 8).next().is_err());
        let mut out = Vec::new();
        // a packed run shorter than asked for, then nothing: fewer levels than values
        assert!(unpack_levels(&[3, 0xff], 1, 20, &mut out).is_err());
        // an index past the dictionary
        assert!(extend_dictionary::<f32>(&mut Vec::new(), &[1.0], &[1, 2, 1], 1).is_err());
    }

    #[test]
    fn byte_stream_split_by_hand() {
        // 1.0f32 = 00 00 80 3f, 2.0f32 = 00 00 00 40: streams [00 00][00 00][80 00][3f 40]
        let data = [0, 0, 0, 0, 0x80, 0, 0x3f, 0x40];
        let mut out = Vec::<f32>::new();
        extend_split(&mut out, &data, 2).unwrap();
        assert_eq!(out, [1.0, 2.0]);
    }
}
