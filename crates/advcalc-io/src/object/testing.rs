//! For the unit tests: an in-memory store that counts its requests by kind, and can fail a
//! multipart upload's part (as a server dropping the connection mid-write would).

use std::ops::Range;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures_core::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result, UploadPart,
};

/// Requests made so far, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub heads: usize,
    pub gets: usize,
    pub puts: usize,
    pub multipart_starts: usize,
    pub parts: usize,
    pub completes: usize,
    pub aborts: usize,
    pub lists: usize,
}

#[derive(Debug, Default)]
struct State {
    counts: Mutex<Counts>,
    /// Fail the multipart part with this index (0-based, over the store's life).
    fail_part: Mutex<Option<usize>>,
    parts_seen: AtomicUsize,
    /// Bytes the GETs asked for (a ranged GET its range, a whole GET the object).
    bytes_got: AtomicUsize,
}

impl State {
    fn count(&self, f: impl FnOnce(&mut Counts)) {
        f(&mut self.counts.lock().unwrap());
    }
}

#[derive(Debug, Default)]
pub struct Counting {
    inner: InMemory,
    state: Arc<State>,
}

impl Counting {
    pub fn counts(&self) -> Counts {
        *self.state.counts.lock().unwrap()
    }

    /// Bytes the GETs so far returned.
    pub fn bytes_got(&self) -> usize {
        self.state.bytes_got.load(Ordering::SeqCst)
    }

    /// Fail the multipart part `n` parts from now (0: the next one).
    pub fn fail_part(&self, n: usize) {
        let next = self.state.parts_seen.load(Ordering::SeqCst);
        *self.state.fail_part.lock().unwrap() = Some(next + n);
    }

    fn count(&self, f: impl FnOnce(&mut Counts)) {
        self.state.count(f);
    }
}

impl std::fmt::Display for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

/// Write `bytes` at `key` (a plain overwriting PUT, counted).
pub fn put(store: &Counting, key: &str, bytes: &[u8]) {
    crate::object::runtime::block_on(store.put(
        &Path::from(key),
        PutPayload::from(Bytes::copy_from_slice(bytes)),
    ))
    .unwrap();
}

#[derive(Debug)]
struct CountingUpload {
    inner: Box<dyn MultipartUpload>,
    state: Arc<State>,
}

#[async_trait]
impl MultipartUpload for CountingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.state.count(|c| c.parts += 1);
        let index = self.state.parts_seen.fetch_add(1, Ordering::SeqCst);
        if *self.state.fail_part.lock().unwrap() == Some(index) {
            return Box::pin(async move {
                Err(object_store::Error::Generic {
                    store: "Counting",
                    source: format!("part {index}: connection reset by peer").into(),
                })
            });
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.state.count(|c| c.completes += 1);
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.state.count(|c| c.aborts += 1);
        self.inner.abort().await
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.count(|c| c.puts += 1);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.count(|c| c.multipart_starts += 1);
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(CountingUpload {
            inner,
            state: self.state.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.head {
            self.count(|c| c.heads += 1);
        } else {
            self.count(|c| c.gets += 1);
        }
        let head = options.head;
        let got = self.inner.get_opts(location, options).await?;
        if !head {
            let n = got.range.end - got.range.start;
            self.state.bytes_got.fetch_add(n as usize, Ordering::SeqCst);
        }
        Ok(got)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        // what the default does (coalesced ranged GETs), through `get_opts`, so counted
        object_store::coalesce_ranges(
            ranges,
            |range| self.get_range(location, range),
            object_store::OBJECT_STORE_COALESCE_DEFAULT,
        )
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.count(|c| c.lists += 1);
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.count(|c| c.lists += 1);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
