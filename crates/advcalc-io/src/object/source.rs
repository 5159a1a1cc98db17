//! An object opened for reading: its size and ETag from one HEAD, then ranged GETs, each
//! pinned to that ETag (`If-Match`), so an object rewritten while it is read fails with a
//! clear error instead of mixing bytes of two versions. A Parquet footer is one suffix GET;
//! a row group's column chunks are ranged GETs, run at once (`read_ranges`; which ranges:
//! io/positional/object.rs).

use std::ops::Range;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStoreExt};

use crate::error::{Error, Result};
use crate::object::runtime::block_on;
use crate::object::store::{Store, store_for};
use crate::object::store_error;
use crate::object::url::ObjectUrl;

/// How much the footer read takes from the end of the object: the footer of a rollout dump
/// (some dozens of columns, tens of row groups) fits; a larger one costs one more GET.
pub const FOOTER_PREFETCH: u64 = 64 * 1024;

/// An object open for reading (cloning shares the store).
#[derive(Debug, Clone)]
pub struct ObjectSource {
    name: String,
    store: Store,
    path: ObjectPath,
    size: u64,
    etag: Option<String>,
    version: Option<String>,
}

impl ObjectSource {
    /// Open the object `url` names (one HEAD request).
    pub fn open(url: &ObjectUrl) -> Result<Self> {
        Self::open_in(store_for(url)?, url.key.clone(), &url.url)
    }

    /// Open `path` in `store`, naming it `name` in messages.
    pub fn open_in(store: Store, path: ObjectPath, name: &str) -> Result<Self> {
        let meta = block_on(store.head(&path)).map_err(|e| store_error(name, "cannot open", e))?;
        Ok(Self {
            name: name.to_string(),
            store,
            path,
            size: meta.size,
            etag: meta.e_tag,
            version: meta.version,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The object's key in its store.
    pub fn key(&self) -> &ObjectPath {
        &self.path
    }

    /// The object's size when opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The object's ETag when opened (opaque: a multipart upload's is not an MD5); `None`
    /// where the store gives none, and then reads are not pinned.
    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// The object's version when opened, where the bucket is versioned.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    fn options(&self, range: GetRange) -> GetOptions {
        GetOptions {
            if_match: self.etag.clone(),
            range: Some(range),
            ..Default::default()
        }
    }

    /// The bytes in `range` (one GET). A range past the end of the object is refused before
    /// any request, as `PositionalFile` refuses it: the range may come from a damaged footer.
    pub fn read_at(&self, range: Range<u64>) -> Result<Bytes> {
        self.check_range(&range)?;
        block_on(self.get_range(range))
    }

    /// The bytes of each of `ranges`, one GET each, all in flight at once (a row group's
    /// column chunks: the requests' latencies overlap instead of adding up). Every range is
    /// checked before any request; the first failure is the error.
    pub fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        for range in ranges {
            self.check_range(range)?;
        }
        if let [range] = ranges {
            return Ok(vec![self.read_at(range.clone())?]);
        }
        block_on(async {
            let tasks: Vec<_> = ranges
                .iter()
                .map(|range| {
                    let source = self.clone();
                    let range = range.clone();
                    tokio::spawn(async move { source.get_range(range).await })
                })
                .collect();
            let mut got = Vec::with_capacity(tasks.len());
            for task in tasks {
                match task.await {
                    Ok(bytes) => got.push(bytes?),
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(e) => {
                        return Err(
                            Error::data(format!("{}: cannot read", self.name)).with_source(e)
                        );
                    }
                }
            }
            Ok(got)
        })
    }

    fn check_range(&self, range: &Range<u64>) -> Result<()> {
        if range.start > range.end || range.end > self.size {
            return Err(Error::data(format!(
                "{}: cannot read bytes {}..{}: the object holds {} bytes",
                self.name, range.start, range.end, self.size
            )));
        }
        Ok(())
    }

    /// One ranged GET pinned to the ETag (`range` already checked), its length checked.
    async fn get_range(&self, range: Range<u64>) -> Result<Bytes> {
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        let what = || format!("cannot read bytes {}..{}", range.start, range.end);
        let got = async {
            let got = self
                .store
                .get_opts(&self.path, self.options(GetRange::Bounded(range.clone())))
                .await?;
            got.bytes().await
        };
        let bytes = got.await.map_err(|e| store_error(&self.name, &what(), e))?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(Error::data(format!(
                "{}: {}: the store returned {} bytes",
                self.name,
                what(),
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// The whole object written to `out` by one GET pinned to the ETag it had when opened
    /// (`If-Match`), streamed in the pieces the store sends; the bytes written. An object
    /// rewritten since it was opened, or one whose length is not the one opened, fails.
    pub fn download_to(&self, out: &mut (impl std::io::Write + Send)) -> Result<u64> {
        let options = GetOptions {
            if_match: self.etag.clone(),
            ..Default::default()
        };
        let written = block_on(async {
            let got = self
                .store
                .get_opts(&self.path, options)
                .await
                .map_err(|e| store_error(&self.name, "cannot read", e))?;
            let mut stream = got.into_stream();
            let mut written = 0u64;
            while let Some(piece) = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                let piece = piece.map_err(|e| store_error(&self.name, "cannot read", e))?;
                out.write_all(&piece).map_err(|e| {
                    Error::data(format!("{}: cannot write the local copy", self.name))
                        .with_source(e)
                })?;
                written += piece.len() as u64;
                crate::interrupt::check()?;
            }
            Ok::<_, Error>(written)
        })?;
        if written != self.size {
            return Err(Error::data(format!(
                "{}: cannot read: the store returned {written} of the {} bytes the object held",
                self.name, self.size
            )));
        }
        Ok(written)
    }

    /// The last `min(FOOTER_PREFETCH, size)` bytes, by one suffix GET: a Parquet footer and
    /// the metadata before it, where they fit.
    pub fn tail(&self) -> Result<Bytes> {
        self.suffix(FOOTER_PREFETCH)
    }

    /// The last `min(n, size)` bytes (one GET). Asked as a bounded range from the size the
    /// HEAD gave, not a suffix range, which Azure refuses.
    pub fn suffix(&self, n: u64) -> Result<Bytes> {
        let n = n.min(self.size);
        if n == 0 {
            return Ok(Bytes::new());
        }
        let range = GetRange::Bounded(self.size - n..self.size);
        let bytes = block_on(async {
            let got = self.store.get_opts(&self.path, self.options(range)).await?;
            got.bytes().await
        })
        .map_err(|e| store_error(&self.name, "cannot read the footer", e))?;
        if bytes.len() as u64 != n {
            return Err(Error::data(format!(
                "{}: cannot read the footer: the store returned {} of the last {n} bytes",
                self.name,
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// The Parquet footer's metadata bytes: the suffix GET, and a second GET only when the
    /// metadata is longer than it. Checks the `PAR1` magic and the declared length against
    /// the object before reading anything more.
    pub fn parquet_metadata_bytes(&self) -> Result<Bytes> {
        let tail = self.tail()?;
        let bad = |why: String| Error::data(format!("{}: not a Parquet file: {why}", self.name));
        if tail.len() < 8 || self.size < 12 {
            return Err(bad(format!("{} bytes", self.size)));
        }
        let footer = &tail[tail.len() - 8..];
        if &footer[4..] != b"PAR1" {
            return Err(bad("no PAR1 magic at the end".into()));
        }
        let meta_len = u64::from(u32::from_le_bytes([
            footer[0], footer[1], footer[2], footer[3],
        ]));
        if meta_len + 12 > self.size {
            return Err(bad(format!(
                "the footer declares {meta_len} bytes of metadata in a {}-byte object",
                self.size
            )));
        }
        let in_tail = tail.len() as u64 - 8;
        if meta_len <= in_tail {
            let start = (in_tail - meta_len) as usize;
            return Ok(tail.slice(start..tail.len() - 8));
        }
        let end = self.size - 8;
        self.read_at(end - meta_len..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::testing::{Counting, put};
    use std::sync::Arc;

    fn source(store: &Arc<Counting>, key: &str) -> ObjectSource {
        ObjectSource::open_in(
            store.clone(),
            ObjectPath::from(key),
            &format!("mem://{key}"),
        )
        .unwrap()
    }

    #[test]
    fn ranged_reads_and_the_suffix_read() {
        let store = Arc::new(Counting::default());
        put(&store, "k", b"0123456789");
        let s = source(&store, "k");
        assert_eq!(s.size(), 10);
        assert!(s.etag().is_some());
        assert_eq!(&s.read_at(2..6).unwrap()[..], b"2345");
        assert_eq!(&s.read_at(9..10).unwrap()[..], b"9");
        assert_eq!(s.read_at(4..4).unwrap().len(), 0);
        assert_eq!(&s.suffix(3).unwrap()[..], b"789");
        // a suffix longer than the object is the object
        assert_eq!(&s.tail().unwrap()[..], b"0123456789");
        let c = store.counts();
        assert_eq!((c.heads, c.gets), (1, 4), "{c:?}");

        // past the end: refused without a request
        for r in [8..11, 11..12, 5..u64::MAX] {
            let e = s.read_at(r.clone()).unwrap_err();
            assert!(
                e.message().contains("the object holds 10 bytes"),
                "{r:?}: {e}"
            );
        }
        assert_eq!(store.counts().gets, 4);
    }

    #[test]
    fn several_ranges_at_once_one_get_each() {
        let store = Arc::new(Counting::default());
        put(&store, "k", b"0123456789");
        let s = source(&store, "k");
        let got = s.read_ranges(&[7..10, 0..2, 4..4, 2..5]).unwrap();
        let got: Vec<&[u8]> = got.iter().map(|b| &b[..]).collect();
        assert_eq!(got, [&b"789"[..], b"01", b"", b"234"]);
        // the empty range costs nothing
        assert_eq!(store.counts().gets, 3);
        // one range past the end: refused before any request
        let e = s.read_ranges(&[0..2, 9..11]).unwrap_err();
        assert!(e.message().contains("the object holds 10 bytes"), "{e}");
        assert_eq!(store.counts().gets, 3);
        // rewritten: the error of the GET that failed
        put(&store, "k", b"9876543210");
        let e = s.read_ranges(&[0..2, 5..6]).unwrap_err();
        assert!(e.message().contains("changed while it was read"), "{e}");
    }

    #[test]
    fn a_missing_object_is_a_data_error_naming_it() {
        let store = Arc::new(Counting::default());
        let e = ObjectSource::open_in(store, ObjectPath::from("nope"), "s3://b/nope").unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Data);
        assert_eq!(e.message(), "s3://b/nope: cannot open: no such object");
    }

    #[test]
    fn an_object_rewritten_while_read_fails_cleanly() {
        let store = Arc::new(Counting::default());
        put(&store, "k", b"first version");
        let s = source(&store, "k");
        assert_eq!(&s.read_at(0..5).unwrap()[..], b"first");
        put(&store, "k", b"second version!");
        for e in [s.read_at(0..5).unwrap_err(), s.tail().unwrap_err()] {
            assert_eq!(e.kind(), crate::error::ErrorKind::Data);
            assert!(e.message().starts_with("mem://k: "), "{e}");
            assert!(e.message().contains("changed while it was read"), "{e}");
        }
        // reopened, it reads the new version
        assert_eq!(&source(&store, "k").read_at(0..6).unwrap()[..], b"second");
    }

    #[test]
    fn the_whole_object_in_one_get_pinned_to_its_etag() {
        let store = Arc::new(Counting::default());
        put(&store, "k", b"first version");
        let s = source(&store, "k");
        let before = store.counts();
        let mut copy = Vec::new();
        assert_eq!(s.download_to(&mut copy).unwrap(), 13);
        assert_eq!(copy, b"first version");
        assert_eq!(store.counts().gets - before.gets, 1);
        put(&store, "k", b"second version!");
        let e = s.download_to(&mut Vec::new()).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Data);
        assert!(e.message().contains("changed while it was read"), "{e}");
    }

    /// A small Parquet file: its metadata by the one suffix GET, a long one by two.
    #[test]
    fn the_parquet_footer_in_one_request() {
        use arrow_array::{Int64Array, RecordBatch};
        use parquet::arrow::ArrowWriter;
        use parquet::file::metadata::ParquetMetaDataReader;

        let batch = RecordBatch::try_from_iter([(
            "x",
            Arc::new(Int64Array::from_iter_values(0..1000)) as _,
        )])
        .unwrap();
        let mut file = Vec::new();
        let mut w = ArrowWriter::try_new(&mut file, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();

        let store = Arc::new(Counting::default());
        put(&store, "small.parquet", &file);
        let s = source(&store, "small.parquet");
        let before = store.counts().gets;
        let meta = s.parquet_metadata_bytes().unwrap();
        assert_eq!(store.counts().gets - before, 1);
        let parsed = ParquetMetaDataReader::decode_metadata(&meta).unwrap();
        assert_eq!(parsed.file_metadata().num_rows(), 1000);
        // each column chunk then by one ranged GET
        let (start, len) = parsed.row_group(0).column(0).byte_range();
        let chunk = s.read_at(start..start + len).unwrap();
        assert_eq!(chunk.len() as u64, len);
        assert_eq!(store.counts().gets - before, 2);

        // metadata longer than the prefetch: a second GET, and the same bytes
        let meta_len = meta.len();
        let mut big = vec![0u8; FOOTER_PREFETCH as usize * 2];
        big[..4].copy_from_slice(b"PAR1");
        let pad = FOOTER_PREFETCH as usize * 2 - meta_len - 8;
        big.truncate(pad);
        big.extend_from_slice(&meta);
        big.extend_from_slice(&(meta_len as u32 + (pad as u32 - 4)).to_le_bytes());
        big.extend_from_slice(b"PAR1");
        put(&store, "big", &big);
        let s = source(&store, "big");
        let before = store.counts().gets;
        let got = s.parquet_metadata_bytes().unwrap();
        assert_eq!(store.counts().gets - before, 2);
        assert_eq!(got.len(), meta_len + pad - 4);
        assert_eq!(&got[got.len() - meta_len..], &meta[..]);

        put(&store, "junk", b"not parquet at all");
        let e = source(&store, "junk").parquet_metadata_bytes().unwrap_err();
        assert!(e.message().contains("no PAR1 magic"), "{e}");
    }
}
