//! A store that tells a missing bucket from a missing object. A HEAD answers 404 without a
//! body either way, so where one finds nothing, a listing of that key asks the server, which
//! names a missing bucket (`NoSuchBucket`); that answer becomes the cause `store_error`
//! reads. A HEAD that finds nothing is also how a new OUT is checked, so the listing is made
//! at most until the bucket is known to exist: one request per bucket and process.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures_core::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// `inner`, with a HEAD that finds nothing telling whether the bucket is there.
#[derive(Debug)]
pub struct MissingBucket<T> {
    inner: T,
    /// A request succeeded, or a listing did: no more listings.
    exists: AtomicBool,
}

impl<T> MissingBucket<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            exists: AtomicBool::new(false),
        }
    }
}

impl<T: std::fmt::Display> std::fmt::Display for MissingBucket<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

/// Whether an error's causes say the bucket (container) does not exist.
pub fn says_no_bucket(text: &str) -> bool {
    text.contains("<Code>NoSuchBucket</Code>")
        || text.contains("ContainerNotFound")
        || text.contains("bucket does not exist")
}

fn chain_text(e: &object_store::Error) -> String {
    let mut text = String::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        text.push_str(&err.to_string());
        next = err.source();
    }
    text
}

#[async_trait]
impl<T: ObjectStore> ObjectStore for MissingBucket<T> {
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        match self.inner.get_opts(location, options).await {
            Err(e @ object_store::Error::NotFound { .. })
                if head && !self.exists.load(Ordering::Relaxed) =>
            {
                match self.inner.list_with_delimiter(Some(location)).await {
                    Ok(_) => {
                        self.exists.store(true, Ordering::Relaxed);
                        Err(e)
                    }
                    Err(probe) if says_no_bucket(&chain_text(&probe)) => {
                        Err(object_store::Error::NotFound {
                            path: location.to_string(),
                            source: Box::new(probe),
                        })
                    }
                    Err(_) => Err(e),
                }
            }
            Ok(got) => {
                self.exists.store(true, Ordering::Relaxed);
                Ok(got)
            }
            other => other,
        }
    }

    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    /// A store whose every request finds nothing, its listing naming a missing bucket.
    #[derive(Debug)]
    struct NoBucket(InMemory);

    impl std::fmt::Display for NoBucket {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("NoBucket")
        }
    }

    fn no_such_bucket(path: &Path) -> object_store::Error {
        object_store::Error::NotFound {
            path: path.to_string(),
            source: "404: <Error><Code>NoSuchBucket</Code></Error>".into(),
        }
    }

    #[async_trait]
    impl ObjectStore for NoBucket {
        async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
            self.0.get_opts(location, options).await
        }
        async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> Result<PutResult> {
            self.0.put_opts(l, p, o).await
        }
        async fn put_multipart_opts(
            &self,
            l: &Path,
            o: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.0.put_multipart_opts(l, o).await
        }
        fn delete_stream(
            &self,
            locations: BoxStream<'static, Result<Path>>,
        ) -> BoxStream<'static, Result<Path>> {
            self.0.delete_stream(locations)
        }
        fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
            self.0.list(prefix)
        }
        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
            Err(no_such_bucket(prefix.unwrap()))
        }
        async fn copy_opts(&self, from: &Path, to: &Path, o: CopyOptions) -> Result<()> {
            self.0.copy_opts(from, to, o).await
        }
    }

    #[test]
    fn a_head_that_finds_nothing_says_whether_the_bucket_is_missing() {
        use crate::object::runtime::block_on;
        let key = Path::from("k.parquet");
        // the bucket is there: the error is the HEAD's own
        let here = MissingBucket::new(crate::object::testing::Counting::default());
        let e = block_on(here.head(&key)).unwrap_err();
        assert!(!says_no_bucket(&chain_text(&e)), "{e}");
        // ... and then known: the next HEAD that finds nothing lists nothing
        assert_eq!(here.inner.counts().lists, 1);
        block_on(here.head(&Path::from("other"))).unwrap_err();
        assert_eq!(here.inner.counts().lists, 1);
        assert_eq!(here.inner.counts().heads, 2);
        // it is not: the listing's answer is the cause, still a NotFound
        let e = block_on(MissingBucket::new(NoBucket(InMemory::new())).head(&key)).unwrap_err();
        assert!(matches!(e, object_store::Error::NotFound { .. }), "{e}");
        assert!(says_no_bucket(&chain_text(&e)), "{e}");
        let msg = crate::object::store_error("s3://b/k.parquet", "cannot open", e);
        assert_eq!(
            msg.to_string(),
            "s3://b/k.parquet: cannot open: no such bucket"
        );
        assert_eq!(msg.exit_code(), 1);
    }
}
