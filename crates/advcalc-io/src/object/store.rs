//! One store per scheme and bucket (`s3://bucket`, `gs://bucket`, …), built once from the
//! environment and kept for the process: a store holds its HTTP client, so its connections
//! and credentials are shared by every read and write to that bucket.
//!
//! Each is built as `XBuilder::from_env().with_url(base)`: `object_store::parse_url_opts`
//! would ignore the environment (it starts from `XBuilder::new()`). For S3, what the
//! environment lacks of the static keys, region and endpoint comes from the AWS profile
//! (`aws_profile`), before object_store's own chain (web identity, ECS, EKS, instance
//! metadata). Retries and timeouts are set here, bounded (`retry_config`, `TIMEOUTS`).
//! Buckets' stores tell a missing bucket from a missing object (`missing_bucket`).
//! Requests go through [`SpawnedReqwestConnector`] on the IO runtime, TLS through rustls
//! with ring.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsCredential};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::client::SpawnedReqwestConnector;
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::{BackoffConfig, ClientConfigKey, CredentialProvider, ObjectStore, RetryConfig};

use crate::error::{Error, Result};
use crate::object::aws_profile;
use crate::object::missing_bucket::MissingBucket;
use crate::object::runtime::runtime;
use crate::object::url::{ObjectUrl, StoreKind};

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
/// `AZURE_*`; for S3 also an AWS profile, `aws_profile`). Building contacts no server:
/// credentials are fetched on the first request.
fn build(url: &ObjectUrl) -> Result<Store> {
    install_crypto_provider();
    let vars = Vars::from_process();
    let retry = retry_config(&vars).map_err(|e| e.context(&url.url))?;
    let connector = || SpawnedReqwestConnector::new(runtime().handle().clone());
    let base = url.base.clone();
    // each builder has its own key type; the client keys are the same
    macro_rules! with_timeouts {
        ($builder:expr, $key:path) => {{
            let mut b = $builder;
            for (key, value) in TIMEOUTS {
                if b.get_config_value(&$key(key)).is_none() {
                    b = b.with_config($key(key), value);
                }
            }
            b
        }};
    }
    let built: object_store::Result<Store> = match url.kind {
        StoreKind::S3 => with_timeouts!(
            s3_builder(&vars).map_err(|e| e.context(&url.url))?,
            AmazonS3ConfigKey::Client
        )
        .with_url(base)
        .with_retry(retry)
        .with_http_connector(connector())
        .build()
        .map(|s| Arc::new(MissingBucket::new(s)) as Store),
        StoreKind::Gcs => with_timeouts!(
            GoogleCloudStorageBuilder::from_env(),
            GoogleConfigKey::Client
        )
        .with_url(base)
        .with_retry(retry)
        .with_http_connector(connector())
        .build()
        .map(|s| Arc::new(MissingBucket::new(s)) as Store),
        StoreKind::Azure => {
            with_timeouts!(MicrosoftAzureBuilder::from_env(), AzureConfigKey::Client)
                .with_url(base)
                .with_retry(retry)
                .with_http_connector(connector())
                .build()
                .map(|s| Arc::new(MissingBucket::new(s)) as Store)
        }
        StoreKind::Http => TIMEOUTS
            .into_iter()
            .fold(HttpBuilder::new(), |b, (key, value)| {
                b.with_config(key, value)
            })
            .with_url(base)
            .with_retry(retry)
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

/// Request timeouts unless the environment sets them (`AWS_TIMEOUT`, `GOOGLE_CONNECT_TIMEOUT`,
/// …). object_store's own 30 s for a whole request (body included) would fail a large
/// single PUT or a whole-object GET on an ordinary link, so: 10 min per request (a 1 GiB PUT
/// at 2 MB/s, a 16 MiB part at 30 kB/s), while a dead endpoint still fails in 10 s.
const TIMEOUTS: [(ClientConfigKey, &str); 2] = [
    (ClientConfigKey::Timeout, "600s"),
    (ClientConfigKey::ConnectTimeout, "10s"),
];

/// Retries of a failed request (5xx, throttling, a dropped connection, a timeout of a safe
/// request), with exponential backoff and jitter from 100 ms to 15 s: object_store's values,
/// set here so the bound is ours: at most 10 retries and no new one after 180 s, so that a
/// server that keeps failing or throttling ends in an error, not a hang.
/// `ADVCALC_OBJECT_MAX_RETRIES` and `ADVCALC_OBJECT_RETRY_TIMEOUT` (seconds) change them.
fn retry_config(vars: &Vars) -> Result<RetryConfig> {
    let number = |name: &str, default: f64| -> Result<f64> {
        match vars.get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite() && *n >= 0.0)
                .ok_or_else(|| {
                    Error::usage(format!("{name}={v}: not a number of 0 or more"))
                        .with_hint(format!("unset {name}, or give a number such as {default}"))
                }),
        }
    };
    Ok(RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(15),
            base: 2.0,
        },
        max_retries: number("ADVCALC_OBJECT_MAX_RETRIES", 10.0)? as usize,
        retry_timeout: Duration::from_secs_f64(number("ADVCALC_OBJECT_RETRY_TIMEOUT", 180.0)?),
    })
}

/// The process environment, read once per store (a map, so that tests can give their own).
struct Vars(HashMap<String, String>);

impl Vars {
    fn from_process() -> Self {
        Self(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<String> {
        self.0.get(key).filter(|v| !v.is_empty()).cloned()
    }
}

/// `AmazonS3Builder::from_env()` over `vars`, then what the AWS profile adds (static keys,
/// region, endpoint), and where nothing can give credentials but the instance metadata
/// service and `AWS_EC2_METADATA_DISABLED=true` (as the AWS SDKs read it), a provider that
/// fails at once instead of asking it.
fn s3_builder(vars: &Vars) -> Result<AmazonS3Builder> {
    let mut b = AmazonS3Builder::new();
    for (key, value) in &vars.0 {
        if key.starts_with("AWS_")
            && let Ok(key) = key.to_ascii_lowercase().parse::<AmazonS3ConfigKey>()
        {
            b = b.with_config(key, value);
        }
    }
    let profile = aws_profile::from_profile(&|k| vars.get(k))?;
    if let (Some(id), Some(secret)) = (profile.access_key_id, profile.secret_access_key) {
        b = b.with_access_key_id(id).with_secret_access_key(secret);
        if let Some(token) = profile.session_token {
            b = b.with_token(token);
        }
    }
    if let Some(region) = profile.region {
        b = b.with_region(region);
    }
    if let Some(endpoint) = profile.endpoint_url {
        b = b.with_endpoint(endpoint);
    }
    let truthy = |k: &str| vars.get(k).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let other_source = [
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ]
    .iter()
    .any(|k| vars.get(k).is_some());
    if truthy("AWS_EC2_METADATA_DISABLED")
        && !truthy("AWS_SKIP_SIGNATURE")
        && !other_source
        && b.get_config_value(&AmazonS3ConfigKey::AccessKeyId)
            .is_none()
    {
        b = b.with_credentials(Arc::new(NoCredentials));
    }
    Ok(b)
}

/// No credentials anywhere advcalc looks (`store_error` says so, with the variables to set).
#[derive(Debug)]
pub struct NoCredentials;

impl std::fmt::Display for NoCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "no AWS credentials in the environment or the AWS profile, and \
             AWS_EC2_METADATA_DISABLED=true",
        )
    }
}

impl std::error::Error for NoCredentials {}

#[async_trait::async_trait]
impl CredentialProvider for NoCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        Err(object_store::Error::Generic {
            store: "S3",
            source: Box::new(NoCredentials),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::url::parse;

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

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        Vars(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn s3_takes_a_profile_s_static_keys_and_region_unless_the_environment_has_them() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join(".aws")).unwrap();
        std::fs::write(
            home.path().join(".aws/credentials"),
            "[default]\naws_access_key_id = AKIPROFILE\naws_secret_access_key = from-profile\n",
        )
        .unwrap();
        std::fs::write(
            home.path().join(".aws/config"),
            "[default]\nregion = eu-north-1\n",
        )
        .unwrap();
        let h = home.path().to_str().unwrap();
        let value = |b: &AmazonS3Builder, k: AmazonS3ConfigKey| b.get_config_value(&k);

        let b = s3_builder(&vars(&[("HOME", h)])).unwrap();
        assert_eq!(
            value(&b, AmazonS3ConfigKey::AccessKeyId).as_deref(),
            Some("AKIPROFILE")
        );
        assert_eq!(
            value(&b, AmazonS3ConfigKey::SecretAccessKey).as_deref(),
            Some("from-profile")
        );
        assert_eq!(
            value(&b, AmazonS3ConfigKey::Region).as_deref(),
            Some("eu-north-1")
        );

        let b = s3_builder(&vars(&[
            ("HOME", h),
            ("AWS_ACCESS_KEY_ID", "AKIENV"),
            ("AWS_SECRET_ACCESS_KEY", "from-env"),
            ("AWS_REGION", "us-east-2"),
        ]))
        .unwrap();
        assert_eq!(
            value(&b, AmazonS3ConfigKey::AccessKeyId).as_deref(),
            Some("AKIENV")
        );
        assert_eq!(
            value(&b, AmazonS3ConfigKey::SecretAccessKey).as_deref(),
            Some("from-env")
        );
        assert_eq!(
            value(&b, AmazonS3ConfigKey::Region).as_deref(),
            Some("us-east-2")
        );

        // an explicit profile advcalc cannot use is a usage error before any request
        std::fs::write(
            home.path().join(".aws/config"),
            "[profile corp]\nsso_session = corp\n",
        )
        .unwrap();
        let e = s3_builder(&vars(&[("HOME", h), ("AWS_PROFILE", "corp")])).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn retries_are_bounded_and_the_environment_can_change_the_bounds() {
        let r = retry_config(&vars(&[])).unwrap();
        assert_eq!(r.max_retries, 10);
        assert_eq!(r.retry_timeout, Duration::from_secs(180));
        assert_eq!(r.backoff.max_backoff, Duration::from_secs(15));
        let r = retry_config(&vars(&[
            ("ADVCALC_OBJECT_MAX_RETRIES", "2"),
            ("ADVCALC_OBJECT_RETRY_TIMEOUT", "0.5"),
        ]))
        .unwrap();
        assert_eq!(r.max_retries, 2);
        assert_eq!(r.retry_timeout, Duration::from_millis(500));
        let e = retry_config(&vars(&[("ADVCALC_OBJECT_MAX_RETRIES", "many")])).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("ADVCALC_OBJECT_MAX_RETRIES=many"),
            "{e}"
        );
    }
}
