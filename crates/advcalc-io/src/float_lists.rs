//! The computed `list<float32>` columns (advantages, returns, rewards, IS weights) encoded
//! into Parquet column chunks page by page, with the encodings `io::write` chooses for them
//! (byte-stream-split values, zstd level 1, no dictionary, no statistics).
//!
//! Why not parquet's Arrow writer: it derives both level streams from the list offsets one
//! level at a time and feeds every value through its generic page machinery; that was most of
//! the cost of writing a run's output after the compression itself (docs/benchmarks.md). Here
//! the levels of a row are two runs (a 0 then `len − 1` ones; one definition level for all
//! its values), written as RLE runs straight from the offsets.
//!
//! Only lists without nulls are written here (`encode` declines the rest); the pages are
//! version 1 data pages, as the Arrow writer's `PARQUET_1_0` setting writes them, and each
//! chunk carries its offset index (where its pages start, and their first rows), as the
//! Arrow writer's chunks did. The tests read the chunks back with parquet's reader.

use std::cell::RefCell;

use bytes::Bytes;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ColumnChunkMetaData, OffsetIndexBuilder};
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnDescPtr, SchemaDescriptor};

use crate::list_chunk::ListLevels;

/// Values per data page: 1 MiB of float32, parquet's default page size. A row is never
/// split between pages, so a page holds more when one row is longer.
const PAGE_VALUES: usize = 256 * 1024;

/// zstd's level 1, what `ZstdLevel::default()` gives parquet's writer.
const ZSTD_LEVEL: i32 = 1;

thread_local! {
    /// One compression context per thread, reused across pages and row groups.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

/// An encoded column chunk, ready for `SerializedRowGroupWriter::append_column`.
pub struct EncodedChunk {
    pub data: Bytes,
    pub close: ColumnCloseResult,
}

/// Encode one row group's list column (`offsets`: rows + 1 entries into `values`) as leaf
/// `leaf` of `schema`; `None` where the leaf is not a three-level list of float32.
pub fn encode(
    schema: &SchemaDescriptor,
    leaf: usize,
    offsets: &[i32],
    values: &[f32],
) -> Result<Option<EncodedChunk>> {
    let descr = schema.column(leaf);
    let Some(def_levels) = ListLevels::of(schema, leaf) else {
        return Ok(None);
    };
    if descr.physical_type() != parquet::basic::Type::FLOAT {
        return Ok(None);
    }
    let rows = offsets.len().saturating_sub(1);
    let start = offsets.first().map_or(0, |&o| o as usize);
    // room for the pages uncompressed, so the buffer never moves while it fills
    let mut sink = TrackedWrite::new(Vec::with_capacity(
        4 * values.len() + 4 * offsets.len() + 4096,
    ));
    let mut uncompressed_total = 0usize;
    let mut levels_total = 0usize;
    // where each page starts and its first row, for readers that select rows by page
    let mut index = OffsetIndexBuilder::new();
    {
        let mut pages = SerializedPageWriter::new(&mut sink);
        let mut body = Vec::new();
        let mut compressed = Vec::new();
        let mut row = 0;
        while row < rows {
            // the rows of this page: at least one, then while under the page size
            let first = row;
            while row < rows
                && (row == first || (offsets[row] as usize - offsets[first] as usize) < PAGE_VALUES)
            {
                row += 1;
            }
            let page_offsets = &offsets[first..=row];
            let from = page_offsets[0] as usize - start;
            let to = page_offsets[page_offsets.len() - 1] as usize - start;
            let levels = page_body(&mut body, page_offsets, &values[from..to], def_levels);
            compress(&body, &mut compressed)?;
            let page = Page::DataPage {
                buf: Bytes::from(std::mem::take(&mut compressed)),
                num_values: u32::try_from(levels)
                    .map_err(|_| ParquetError::General("too many values for one page".into()))?,
                encoding: Encoding::BYTE_STREAM_SPLIT,
                def_level_encoding: Encoding::RLE,
                rep_level_encoding: Encoding::RLE,
                statistics: None,
            };
            let spec = pages.write_page(CompressedPage::new(page, body.len()))?;
            index.append_offset_and_size(spec.offset as i64, spec.compressed_size as i32);
            index.append_row_count((row - first) as i64);
            uncompressed_total += spec.uncompressed_size;
            levels_total += levels;
        }
        pages.close()?;
    }
    let data = Bytes::from(sink.into_inner()?);
    let metadata = ColumnChunkMetaData::builder(ColumnDescPtr::clone(&descr))
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL)?))
        .set_encodings(vec![Encoding::RLE, Encoding::BYTE_STREAM_SPLIT])
        .set_total_compressed_size(data.len() as i64)
        .set_total_uncompressed_size(uncompressed_total as i64)
        .set_num_values(levels_total as i64)
        .set_data_page_offset(0)
        .build()?;
    Ok(Some(EncodedChunk {
        close: ColumnCloseResult {
            bytes_written: data.len() as u64,
            rows_written: rows as u64,
            metadata,
            bloom_filter: None,
            column_index: None,
            offset_index: Some(index.build()),
        },
        data,
    }))
}

/// One version-1 page body, uncompressed, into `body`: the repetition levels, the definition
/// levels (each prefixed by its length) and the values split into byte streams. Returns the
/// number of levels (a row without values still has one).
fn page_body(body: &mut Vec<u8>, offsets: &[i32], values: &[f32], def_levels: ListLevels) -> usize {
    body.clear();
    let mut levels = 0;
    // repetition levels: per row a 0, then a 1 for each further value
    let mut rep = Runs::new(body, 1);
    for w in offsets.windows(2) {
        let len = (w[1] - w[0]) as usize;
        rep.push(0, 1);
        if len > 1 {
            rep.push(1, len - 1);
        }
        levels += len.max(1);
    }
    rep.finish();
    // definition levels: every value present; a row without values is an empty list
    let mut def = Runs::new(body, def_levels.def_width());
    for w in offsets.windows(2) {
        match (w[1] - w[0]) as usize {
            0 => def.push(def_levels.empty as u8, 1),
            len => def.push(def_levels.value as u8, len),
        }
    }
    def.finish();
    // values, byte stream split: byte j of every value, for j = 0..4
    let n = values.len();
    let at = body.len();
    body.resize(at + 4 * n, 0);
    let (b0, rest) = body[at..].split_at_mut(n);
    let (b1, rest) = rest.split_at_mut(n);
    let (b2, b3) = rest.split_at_mut(n);
    for (i, v) in values.iter().enumerate() {
        let [x0, x1, x2, x3] = v.to_le_bytes();
        b0[i] = x0;
        b1[i] = x1;
        b2[i] = x2;
        b3[i] = x3;
    }
    levels
}

/// A level stream in Parquet's RLE / bit-packing hybrid, written as RLE runs only (equal
/// neighbours merged), after a 4-byte length the stream fills in when finished.
struct Runs<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    width: u8,
    /// The run being extended: (value, count).
    open: Option<(u8, usize)>,
}

impl<'a> Runs<'a> {
    fn new(out: &'a mut Vec<u8>, width: u8) -> Self {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        Runs {
            out,
            start,
            width,
            open: None,
        }
    }

    fn push(&mut self, value: u8, count: usize) {
        match &mut self.open {
            Some((v, c)) if *v == value => *c += count,
            _ => {
                self.flush();
                self.open = Some((value, count));
            }
        }
    }

    fn flush(&mut self) {
        if let Some((value, count)) = self.open.take() {
            let mut header = (count as u64) << 1;
            loop {
                let byte = (header & 0x7f) as u8;
                header >>= 7;
                if header == 0 {
                    self.out.push(byte);
                    break;
                }
                self.out.push(byte | 0x80);
            }
            // the value in ceil(width / 8) bytes: levels here fit in one
            if self.width > 0 {
                self.out.push(value);
            }
        }
    }

    fn finish(mut self) {
        self.flush();
        let len = (self.out.len() - self.start - 4) as u32;
        self.out[self.start..self.start + 4].copy_from_slice(&len.to_le_bytes());
    }
}

fn compress(body: &[u8], out: &mut Vec<u8>) -> Result<()> {
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            *c = Some(zstd::bulk::Compressor::new(ZSTD_LEVEL)?);
        }
        let compressor = c.as_mut().expect("set above");
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(body.len()));
        compressor.compress_to_buffer(body, out)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_runs_by_hand() {
        // rows of 3, 0 and 1 values, an optional list of optional items (empty = 1, value = 3)
        let def_levels = ListLevels { empty: 1, value: 3 };
        let mut body = Vec::new();
        let levels = page_body(&mut body, &[0, 3, 3, 4], &[1.0, 2.0, 3.0, 4.0], def_levels);
        assert_eq!(levels, 5);
        // repetition: 0, 1, 1, 0, 0 → runs (0×1)(1×2)(0×2): headers 2, 4, 4
        assert_eq!(&body[..4], &6u32.to_le_bytes());
        assert_eq!(&body[4..10], &[2, 0, 4, 1, 4, 0]);
        // definition (width 2): 3, 3, 3, 1, 3 → runs (3×3)(1×1)(3×1): headers 6, 2, 2
        assert_eq!(&body[10..14], &6u32.to_le_bytes());
        assert_eq!(&body[14..20], &[6, 3, 2, 1, 2, 3]);
        // values split into byte streams: 1.0 = 00 00 80 3f, 2.0 = 00 00 00 40, ...
        let values = &body[20..];
        assert_eq!(values.len(), 16);
        assert_eq!(&values[12..16], &[0x3f, 0x40, 0x40, 0x40]);
    }

    #[test]
    fn long_runs_take_a_multi_byte_header() {
        let mut out = Vec::new();
        let mut runs = Runs::new(&mut out, 1);
        runs.push(1, 100);
        runs.push(1, 100);
        runs.finish();
        // 200 << 1 = 400 = 0b11_0010000 → 0x90 0x03, then the value
        assert_eq!(out, [3, 0, 0, 0, 0x90, 0x03, 1]);
    }

    /// Chunks written here, in a file of their own, read back by parquet's reader.
    mod read_back {
        use std::sync::Arc;

        use arrow_array::builder::{Float32Builder, ListBuilder};
        use arrow_array::cast::AsArray;
        use arrow_array::{Array, ArrayRef};
        use arrow_schema::{DataType, Field, Schema};
        use parquet::arrow::ArrowSchemaConverter;
        use parquet::arrow::arrow_reader::{
            ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
        };
        use parquet::file::metadata::PageIndexPolicy;
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;

        use super::super::encode;

        /// `rows` lists: empty ones, a row longer than a page, NaN, −0.0 and infinities.
        fn lists(rows: usize, item: Field) -> ArrayRef {
            let mut b = ListBuilder::new(Float32Builder::new()).with_field(Arc::new(item));
            for i in 0..rows {
                let len = match i % 5 {
                    0 => 0,
                    1 => 300_000,
                    _ => i % 17,
                };
                for t in 0..len {
                    let v = match t % 7 {
                        0 => f32::NAN,
                        1 => -0.0,
                        2 => f32::NEG_INFINITY,
                        _ => (i * t) as f32 * 0.001 - 3.0,
                    };
                    b.values().append_value(v);
                }
                b.append(true);
            }
            Arc::new(b.finish())
        }

        /// Every batch the reader gives, as one.
        fn read_all(
            builder: ParquetRecordBatchReaderBuilder<bytes::Bytes>,
        ) -> arrow_array::RecordBatch {
            let batches: Vec<_> = builder.build().unwrap().collect::<Result<_, _>>().unwrap();
            arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap()
        }

        fn round_trip(list_nullable: bool, item_nullable: bool) {
            let item = Field::new("element", DataType::Float32, item_nullable);
            let array = lists(12, item.clone());
            let schema = Arc::new(Schema::new(vec![Field::new(
                "advantages",
                array.data_type().clone(),
                list_nullable,
            )]));
            let descr = ArrowSchemaConverter::new().convert(&schema).unwrap();
            let list = array.as_list::<i32>();
            let values = list
                .values()
                .as_primitive::<arrow_array::types::Float32Type>();
            let chunk = encode(&descr, 0, list.value_offsets(), values.values())
                .unwrap()
                .expect("a list of float32");
            let mut file = Vec::new();
            let props = Arc::new(WriterProperties::builder().build());
            let mut writer =
                SerializedFileWriter::new(&mut file, descr.root_schema_ptr(), props).unwrap();
            let mut rg = writer.next_row_group().unwrap();
            rg.append_column(&chunk.data, chunk.close).unwrap();
            rg.close().unwrap();
            writer.close().unwrap();
            let read = read_all(
                ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(file.clone())).unwrap(),
            );
            let back = read.column(0).as_list::<i32>();
            assert_eq!(back.value_offsets(), list.value_offsets());
            let got = back
                .values()
                .as_primitive::<arrow_array::types::Float32Type>();
            assert_eq!(got.null_count(), 0);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(got.values()), bits(values.values()));
            assert!(back.null_count() == 0);

            // the offset index: readers that select rows read only the pages holding them
            let options =
                ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Required);
            let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(
                bytes::Bytes::from(file),
                options,
            )
            .unwrap();
            let index = builder.metadata().page_index_for_row_group(0);
            let pages = index.offset_index(0).expect("an offset index");
            assert!(
                pages.page_locations().len() > 2,
                "{:?}",
                pages.page_locations()
            );
            let selection = RowSelection::from(vec![
                RowSelector::skip(6),
                RowSelector::select(3),
                RowSelector::skip(3),
            ]);
            let picked = read_all(builder.with_row_selection(selection));
            let picked = picked.column(0).as_list::<i32>();
            assert_eq!(picked.len(), 3);
            for r in 0..3 {
                let want = list.value(6 + r);
                let got = picked.value(r);
                let (want, got) = (
                    want.as_primitive::<arrow_array::types::Float32Type>(),
                    got.as_primitive::<arrow_array::types::Float32Type>(),
                );
                assert_eq!(bits(got.values()), bits(want.values()), "row {}", 6 + r);
            }
        }

        #[test]
        fn every_list_convention_reads_back_bit_for_bit() {
            for list_nullable in [true, false] {
                for item_nullable in [true, false] {
                    round_trip(list_nullable, item_nullable);
                }
            }
        }
    }
}
