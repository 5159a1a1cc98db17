//! One store per scheme and bucket (`s3://bucket`, `gs://bucket`, …), built once from the
//! environment and kept for the process: a store holds its HTTP client, so its connections
//! and credentials are shared by every read and write to that bucket.
//!
//! Each is built as `XBuilder::from_env().with_url(base)`: `object_store::parse_url_opts`
//! would ignore the environment (it starts from `XBuilder::new()`). Requests go through
//! [`SpawnedReqwestConnector`] on the IO runtime, TLS through rustls with ring.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Once};

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::client::SpawnedReqwestConnector;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;

use crate::error::{Error, Result};
use crate::io::object::runtime::runtime;
use crate::io::object::url::{ObjectUrl, StoreKind};

/// A store, shared.
pub type Store = Arc<dyn ObjectStore>;

/// Install rustls' ring provider as the process default, once (reqwest is built without a
/// provider of its own: `rustls-no-provider`). Another one installed first is kept.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn registry() -> &'static Mutex<HashMap<String, Store>> {
    static STORES: std::sync::OnceLock<Mutex<HashMap<String, Store>>> = std::sync::OnceLock::new();
    STORES.get_or_init(Default::default)
}

/// The store `url` lives in, built on first use and kept for the process.
pub fn store_for(url: &ObjectUrl) -> Result<Store> {
    let mut stores = registry().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(store) = stores.get(&url.base) {
        return Ok(store.clone());
    }
    let store = build(url)?;
    stores.insert(url.base.clone(), store.clone());
    Ok(store)
}

/// Use `store` for every URL under `base` (`s3://bucket`) from now on, in place of one built
/// from the environment: the tests' in-memory stores, or a caller's own configured one.
pub fn register(base: &str, store: Store) {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(base.to_string(), store);
}

/// A store for `url`'s base, configured from the environment (`AWS_*`, `GOOGLE_*`,
/// `AZURE_*`). Building contacts no server: credentials are fetched on the first request.
fn build(url: &ObjectUrl) -> Result<Store> {
    install_crypto_provider();
    let connector = || SpawnedReqwestConnector::new(runtime().handle().clone());
    let base = url.base.clone();
    let built: object_store::Result<Store> = match url.kind {
        StoreKind::S3 => AmazonS3Builder::from_env()
            .with_url(base)
            .with_http_connector(connector())
            .build()
            .map(|s| Arc::new(s) as Store),
        StoreKind::Gcs => GoogleCloudStorageBuilder::from_env()
            .with_url(base)
            .with_http_connector(connector())
            .build()
            .map(|s| Arc::new(s) as Store),
        StoreKind::Azure => MicrosoftAzureBuilder::from_env()
            .with_url(base)
            .with_http_connector(connector())
            .build()
            .map(|s| Arc::new(s) as Store),
        StoreKind::Http => HttpBuilder::new()
            .with_url(base)
            .with_http_connector(connector())
            .build()
            .map(|s| Arc::new(s) as Store),
    };
    built.map_err(|e| {
        let hint = match url.kind {
            StoreKind::S3 => {
                "set AWS_REGION, and AWS_ENDPOINT_URL (with AWS_ALLOW_HTTP=true for http://) \
                 for a server other than AWS"
            }
            StoreKind::Gcs => "set GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT",
            StoreKind::Azure => {
                "set AZURE_STORAGE_ACCOUNT_NAME, or give the account in the URL \
                 (abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/KEY)"
            }
            StoreKind::Http => "check the URL",
        };
        Error::usage(format!("{}: cannot set up the object store", url.url))
            .with_source(e)
            .with_hint(hint)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::object::url::parse;

    #[test]
    fn stores_are_built_once_per_bucket_and_registered_ones_win() {
        // no request is made: building reads only the environment
        let a = parse("s3://advcalc-test-bucket-a/x.parquet")
            .unwrap()
            .unwrap();
        let b = parse("s3://advcalc-test-bucket-a/y/z.parquet")
            .unwrap()
            .unwrap();
        let c = parse("s3://advcalc-test-bucket-c/x.parquet")
            .unwrap()
            .unwrap();
        let (sa, sb, sc) = (
            store_for(&a).unwrap(),
            store_for(&b).unwrap(),
            store_for(&c).unwrap(),
        );
        assert!(Arc::ptr_eq(&sa, &sb));
        assert!(!Arc::ptr_eq(&sa, &sc));
        let https = parse("https://example.com/a/b.parquet").unwrap().unwrap();
        assert!(store_for(&https).is_ok());

        let mem: Store = Arc::new(object_store::memory::InMemory::new());
        register("gs://advcalc-registered", mem.clone());
        let g = parse("gs://advcalc-registered/k").unwrap().unwrap();
        assert!(Arc::ptr_eq(&store_for(&g).unwrap(), &mem));
    }
}
