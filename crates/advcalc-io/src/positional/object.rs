//! An object read by position: every read a ranged GET pinned to the ETag the object had when
//! opened (`ObjectSource`), except reads inside the ranges fetched ahead, which are slices of
//! those bytes. parquet's page reader reads each page header through `get_read` and each
//! page through `get_bytes`; with the column chunk fetched ahead in one GET, a chunk costs
//! one request however many pages it holds.

use std::io::Read;
use std::ops::Range;
use std::sync::Arc;

use bytes::{Buf, Bytes};

use crate::object::source::ObjectSource;

/// How much a read outside the prefetched ranges takes per GET: such reads are not expected
/// (every decoded or copied chunk is prefetched), so this only bounds the waste of one.
const WINDOW: u64 = 256 * 1024;

/// Ranges this close are fetched by one request (the bytes between read and dropped): a
/// request costs more than a MiB of transfer on every store (object_store's `get_ranges`
/// uses the same gap).
const GAP: u64 = 1 << 20;

/// The most one request fetches when it joins ranges (pyarrow's default for its reads),
/// so that a large row group is still fetched by several requests at once.
const SPAN: u64 = 32 << 20;

/// `ranges` sorted and joined where they overlap or lie within [`GAP`] of each other, as
/// long as the joined range stays within [`SPAN`] (a single range longer than that stays
/// whole); empty ranges dropped.
fn coalesce(ranges: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.iter().filter(|r| !r.is_empty()).cloned().collect();
    sorted.sort_unstable_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match merged.last_mut() {
            Some(last)
                if r.start <= last.end.saturating_add(GAP)
                    && r.end.max(last.end) - last.start <= SPAN
                    || r.end <= last.end =>
            {
                last.end = last.end.max(r.end);
            }
            _ => merged.push(r),
        }
    }
    merged
}

#[derive(Debug, Clone)]
pub(super) struct ObjectBacking {
    source: Arc<ObjectSource>,
    /// Ranges fetched ahead, by offset in the object, sorted by start.
    chunks: Arc<[(u64, Bytes)]>,
}

impl ObjectBacking {
    pub(super) fn new(source: ObjectSource) -> Self {
        Self {
            source: Arc::new(source),
            chunks: Arc::new([]),
        }
    }

    pub(super) fn source(&self) -> &ObjectSource {
        &self.source
    }

    /// The same object with `ranges` in memory (and nothing else: the ranges fetched for an
    /// earlier row group are not kept). Ranges closer than [`GAP`] are fetched together (a
    /// row group's column chunks lie side by side), up to [`SPAN`] a request, never splitting
    /// a range; the requests run at once.
    pub(super) fn prefetched(&self, ranges: &[Range<u64>]) -> crate::error::Result<Self> {
        let merged = coalesce(ranges);
        let fetched = self.source.read_ranges(&merged)?;
        let chunks: Vec<(u64, Bytes)> = merged.iter().map(|r| r.start).zip(fetched).collect();
        Ok(Self {
            source: self.source.clone(),
            chunks: chunks.into(),
        })
    }

    /// The fetched chunk holding `start`, if any, and `start`'s offset in it.
    fn chunk_at(&self, start: u64) -> Option<(&Bytes, usize)> {
        let i = self
            .chunks
            .partition_point(|(s, _)| *s <= start)
            .checked_sub(1)?;
        let (s, bytes) = &self.chunks[i];
        let offset = usize::try_from(start - s).ok()?;
        (offset < bytes.len()).then_some((bytes, offset))
    }

    /// `length` bytes at `start` (already checked against the object's size).
    pub(super) fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        if let Some((bytes, offset)) = self.chunk_at(start)
            && offset + length <= bytes.len()
        {
            return Ok(bytes.slice(offset..offset + length));
        }
        self.source
            .read_at(start..start + length as u64)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
    }

    /// A reader from `start` (at most the object's size, `len`): the rest of the fetched chunk
    /// holding it, else windows fetched as read.
    pub(super) fn reader(&self, start: u64, len: u64) -> ObjectReader {
        match self.chunk_at(start) {
            Some((bytes, offset)) => ObjectReader::Memory(bytes.slice(offset..).reader()),
            None => ObjectReader::Windows {
                source: self.source.clone(),
                pos: start,
                end: len,
                window: Bytes::new(),
            },
        }
    }
}

pub enum ObjectReader {
    Memory(bytes::buf::Reader<Bytes>),
    Windows {
        source: Arc<ObjectSource>,
        /// The object's offset just after `window`.
        pos: u64,
        end: u64,
        /// Fetched and not yet read.
        window: Bytes,
    },
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            ObjectReader::Memory(r) => r.read(buf),
            ObjectReader::Windows {
                source,
                pos,
                end,
                window,
            } => {
                if window.is_empty() && *pos < *end {
                    let to = (*pos + WINDOW).min(*end);
                    *window = source.read_at(*pos..to).map_err(std::io::Error::other)?;
                    *pos = to;
                }
                let n = buf.len().min(window.len());
                window.copy_to_slice(&mut buf[..n]);
                Ok(n)
            }
        }
    }
}

#[cfg(test)]
// lists of byte ranges, some of one range
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{Float32Builder, ListBuilder};
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, RecordBatchOptions, StringArray};
    use object_store::path::Path as ObjectPath;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{ChunkReader, FileReader, SerializedFileReader};

    use crate::object::source::ObjectSource;
    use crate::object::testing::{Counting, put};
    use crate::positional::PositionalFile;
    use crate::read::ParquetInput;
    use crate::write::{ColumnSource, ParquetOutput};

    const ROWS: usize = 1000;
    /// Rows per row group (the last holds the rest).
    const GROUP: usize = 300;

    /// A Parquet file of 4 row groups whose column chunks hold many pages (64 rows a page):
    /// token lists (read by `io::list_chunk`), lists with nulls and plain columns (read by
    /// parquet's reader).
    fn parquet_file() -> Vec<u8> {
        let mut scores = ListBuilder::new(Float32Builder::new());
        let mut holes = ListBuilder::new(Float32Builder::new());
        for i in 0..ROWS {
            let len = (i * 37) % 50;
            scores.append_value((0..len).map(|t| Some(((i * 31 + t * 7) % 200) as f32 * -0.25)));
            if i % 5 == 4 {
                holes.append_null();
            } else {
                holes.append_value((0..i % 9).map(|t| (t != 3).then_some(t as f32)));
            }
        }
        let batch = RecordBatch::try_from_iter(vec![
            (
                "uid",
                Arc::new(StringArray::from_iter_values(
                    (0..ROWS).map(|i| format!("u{}", i / 8)),
                )) as ArrayRef,
            ),
            ("rm_scores", Arc::new(scores.finish()) as ArrayRef),
            ("holes", Arc::new(holes.finish()) as ArrayRef),
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..ROWS as i64)) as ArrayRef,
            ),
        ])
        .unwrap();
        let props = WriterProperties::builder()
            .set_data_page_row_count_limit(64)
            .set_write_batch_size(32)
            .build();
        let mut file = Vec::new();
        let mut w = ArrowWriter::try_new(&mut file, batch.schema(), Some(props)).unwrap();
        for first in (0..ROWS).step_by(GROUP) {
            w.write(&batch.slice(first, GROUP.min(ROWS - first)))
                .unwrap();
            w.flush().unwrap();
        }
        w.close().unwrap();
        file
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        local: ParquetInput,
        local_path: std::path::PathBuf,
        store: Arc<Counting>,
    }

    /// The file, on disk and in an in-memory store as `k.parquet`.
    fn fixture() -> Fixture {
        let bytes = parquet_file();
        let dir = tempfile::tempdir().unwrap();
        let local_path = dir.path().join("in.parquet");
        std::fs::write(&local_path, &bytes).unwrap();
        let store = Arc::new(Counting::default());
        put(&store, "k.parquet", &bytes);
        Fixture {
            local: ParquetInput::open(&local_path).unwrap(),
            local_path,
            _dir: dir,
            store,
        }
    }

    fn open(store: &Arc<Counting>) -> crate::error::Result<ParquetInput> {
        let source = ObjectSource::open_in(
            store.clone(),
            ObjectPath::from("k.parquet"),
            "mem://k.parquet",
        )?;
        ParquetInput::open_object(source)
    }

    #[test]
    fn the_file_has_many_pages_per_chunk() {
        let f = fixture();
        let reader =
            SerializedFileReader::new(std::fs::File::open(&f.local_path).unwrap()).unwrap();
        assert_eq!(reader.num_row_groups(), 4);
        let rg = reader.get_row_group(0).unwrap();
        for c in 0..rg.num_columns() {
            let pages = rg.get_column_page_reader(c).unwrap().count();
            assert!(pages >= 5, "column {c}: {pages} pages");
        }
    }

    /// Every row group decodes to the local file's batch, its column chunks (side by side in
    /// the file) fetched by one GET.
    #[test]
    fn an_object_decodes_as_the_local_file_in_one_get_per_row_group() {
        let f = fixture();
        let before = f.store.counts();
        let object = open(&f.store).unwrap();
        let c = f.store.counts();
        // the HEAD, and the footer by one suffix GET
        assert_eq!((c.heads - before.heads, c.gets - before.gets), (1, 1));
        assert_eq!(object.schema(), f.local.schema());
        assert_eq!(object.row_group_starts(), f.local.row_group_starts());
        assert_eq!(object.name(), "mem://k.parquet");
        for rg in 0..object.num_row_groups() {
            let gets = f.store.counts().gets;
            let ours = object.read_row_group(rg, None).unwrap();
            assert_eq!(f.store.counts().gets - gets, 1, "row group {rg}");
            assert_eq!(ours, f.local.read_row_group(rg, None).unwrap());
            // a projection (the token lists and the ids, a small chunk between them)
            let gets = f.store.counts().gets;
            let some = object.read_row_group(rg, Some(&[3, 1])).unwrap();
            assert_eq!(f.store.counts().gets - gets, 1, "row group {rg}");
            assert_eq!(some, f.local.read_row_group(rg, Some(&[3, 1])).unwrap());
        }
        assert_eq!(f.store.counts().heads - before.heads, 1);
    }

    #[test]
    fn an_object_rewritten_after_opening_fails_cleanly() {
        let f = fixture();
        let object = open(&f.store).unwrap();
        object.read_row_group(0, None).unwrap();
        // the same bytes again: a new ETag all the same
        put(&f.store, "k.parquet", &parquet_file());
        let e = object.read_row_group(1, None).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Data);
        assert!(
            e.message()
                .starts_with("mem://k.parquet: cannot read bytes "),
            "{e}"
        );
        assert!(e.message().contains("changed while it was read"), "{e}");
        // reopened, it reads the new version
        open(&f.store).unwrap().read_row_group(1, None).unwrap();
    }

    #[test]
    fn a_broken_object_is_refused_at_opening() {
        let store = Arc::new(Counting::default());
        let mut bytes = parquet_file();
        // a footer declaring more metadata than the object holds
        let n = bytes.len();
        bytes[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
        put(&store, "k.parquet", &bytes);
        let e = open(&store).err().unwrap();
        assert_eq!(e.kind(), crate::error::ErrorKind::Data);
        assert!(
            e.message()
                .starts_with("mem://k.parquet: not a Parquet file"),
            "{e}"
        );
        put(&store, "k.parquet", b"PAR1 not really PAR1");
        assert!(open(&store).is_err());
    }

    /// OUT spliced from an object is byte for byte the one spliced from the local file, each
    /// row group's copied chunks by one GET.
    #[test]
    fn chunks_spliced_from_an_object_are_the_local_ones() {
        let f = fixture();
        let object = open(&f.store).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let write = |input: &ParquetInput, name: &str| {
            let path = dir.path().join(name);
            let schema = input.schema();
            // every column copied; the id column twice, under another name
            let mut fields = schema.fields().to_vec();
            fields.push(Arc::new(schema.field(1).clone().with_name("copy")));
            let schema = Arc::new(arrow_schema::Schema::new(fields));
            use ColumnSource::*;
            let sources = vec![Copy(0), Copy(1), Copy(2), Copy(3), Alias(1)];
            let mut out =
                ParquetOutput::create(&path, schema, sources, input.copy_source(), false).unwrap();
            let (encoder, sink) = out.split();
            let starts = input.row_group_starts();
            for rg in 0..input.num_row_groups() {
                let none = RecordBatch::try_new_with_options(
                    encoder.computed_schema().clone(),
                    vec![],
                    &RecordBatchOptions::new().with_row_count(Some(starts[rg + 1] - starts[rg])),
                )
                .unwrap();
                let encoded = encoder.encode(rg, &none).unwrap();
                sink.append(rg, encoded).unwrap();
            }
            out.finish().unwrap();
            std::fs::read(path).unwrap()
        };
        let local = write(&f.local, "local.parquet");
        let gets = f.store.counts().gets;
        let spliced = write(&object, "object.parquet");
        // 4 row groups (the alias's chunk fetched once, with the others)
        assert_eq!(f.store.counts().gets - gets, 4);
        assert_eq!(spliced, local);
    }

    #[test]
    fn ranges_are_joined_within_the_gap_and_the_span() {
        use super::{GAP, SPAN, coalesce};
        const MIB: u64 = 1 << 20;
        // side by side, overlapping, repeated, contained, empty: one range
        assert_eq!(
            coalesce(&[10..20, 0..10, 15..30, 0..10, 12..14, 40..40]),
            vec![0..30]
        );
        // a gap of GAP joins, one byte more does not
        assert_eq!(coalesce(&[0..10, 10 + GAP..GAP + 20]), vec![0..GAP + 20]);
        assert_eq!(
            coalesce(&[0..10, 11 + GAP..GAP + 20]),
            vec![0..10, 11 + GAP..GAP + 20]
        );
        // chunks of 10 MiB side by side: three to a request (30 MiB), the fourth alone
        let chunks: Vec<_> = (0..4).map(|i| i * 10 * MIB..(i + 1) * 10 * MIB).collect();
        assert_eq!(coalesce(&chunks), vec![0..30 * MIB, 30 * MIB..40 * MIB]);
        // a range longer than the span stays whole
        assert_eq!(coalesce(&[0..SPAN + 5]), vec![0..SPAN + 5]);
    }

    /// Chunks of 12 MiB, the third 6 MiB after the second: 2 GETs (the gap and the span
    /// part them), run at once; every chunk read back is the object's, with no more requests.
    #[test]
    fn far_apart_or_large_chunks_are_fetched_apart() {
        const MIB: u64 = 1 << 20;
        let store = Arc::new(Counting::default());
        let bytes: Vec<u8> = (0..60 * MIB).map(|i| (i % 249) as u8).collect();
        put(&store, "big", &bytes);
        let source =
            ObjectSource::open_in(store.clone(), ObjectPath::from("big"), "mem://big").unwrap();
        let file = PositionalFile::object(source);
        let chunks = [
            0..12 * MIB,
            12 * MIB..24 * MIB,
            30 * MIB..42 * MIB,
            42 * MIB..54 * MIB,
        ];
        let ahead = file.prefetched(|| chunks.to_vec()).unwrap();
        assert_eq!(store.counts().gets, 2);
        for c in &chunks {
            let got = ahead
                .get_bytes(c.start, (c.end - c.start) as usize)
                .unwrap();
            assert!(got[..] == bytes[c.start as usize..c.end as usize]);
        }
        assert_eq!(store.counts().gets, 2);
    }

    /// Reads outside what was prefetched still give the object's bytes (by GETs).
    #[test]
    fn reads_outside_the_prefetched_ranges() {
        let store = Arc::new(Counting::default());
        let bytes: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        put(&store, "b", &bytes);
        let source =
            ObjectSource::open_in(store.clone(), ObjectPath::from("b"), "mem://b").unwrap();
        let file = PositionalFile::object(source);
        assert!(file.file().is_none());
        let ahead = file
            .prefetched(|| vec![1000..5000, 100..200, 100..200])
            .unwrap();
        // ranges close together: one GET
        assert_eq!(store.counts().gets, 1);
        assert_eq!(&ahead.get_bytes(150, 50).unwrap()[..], &bytes[150..200]);
        assert_eq!(
            &ahead.get_bytes(1000, 4000).unwrap()[..],
            &bytes[1000..5000]
        );
        let mut head = Vec::new();
        std::io::Read::read_to_end(&mut ahead.get_read(4990).unwrap(), &mut head).unwrap();
        assert_eq!(head, &bytes[4990..5000]);
        assert_eq!(store.counts().gets, 1);
        // past a prefetched range: a GET of its own
        assert_eq!(&ahead.get_bytes(4990, 20).unwrap()[..], &bytes[4990..5010]);
        assert_eq!(store.counts().gets, 2);
        // a reader from before it: windows of 256 KiB, to the end
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut ahead.get_read(10).unwrap(), &mut rest).unwrap();
        assert_eq!(rest, &bytes[10..]);
        assert_eq!(store.counts().gets, 5);
        // past the end: refused without a request
        assert!(ahead.get_bytes(599_990, 11).is_err());
        assert!(ahead.prefetched(|| vec![599_000..600_001]).is_err());
        assert_eq!(store.counts().gets, 5);
    }
}
