//! Which arguments are object URLs, and which store and key each names.
//!
//! `s3://` (and `s3a://`), `gs://`, `az://`, `abfs://`/`abfss://` and `https://` are URLs;
//! anything without a `scheme://` start is a local path, as today. A `scheme://` start with
//! any other scheme is a usage error, not a local path: `ftp://host/x` read as the local
//! directory `ftp:` would only fail later, and more obscurely.

use object_store::ObjectStoreScheme;
use object_store::path::Path as ObjectPath;
use url::Url;

use crate::error::{Error, Result};

/// The schemes advcalc takes, as the usage messages list them.
pub const SCHEMES: &str = "s3://, s3a://, gs://, az://, abfs://, abfss://, https://";

/// Which kind of store a URL addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    S3,
    Gcs,
    Azure,
    /// Any other `https://` server: GET with Range; listing and PUT only where the server
    /// speaks WebDAV.
    Http,
}

/// An object URL taken apart: the store it lives in (`base`, the key of the store registry)
/// and the object's key in that store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectUrl {
    /// The URL as given, for messages.
    pub url: String,
    pub kind: StoreKind,
    /// The store's own URL: `s3://bucket`, `gs://bucket`, `az://container`,
    /// `abfss://container@account.dfs.core.windows.net`, `https://host[:port]`, or for an
    /// https URL of S3 or Azure in path style, `https://host/bucket`.
    pub base: String,
    /// The key in the store (empty for the bucket itself).
    pub key: ObjectPath,
}

impl ObjectUrl {
    /// Whether `other` names a bucket of the same store as this one, however its scheme is
    /// spelled (`s3://b` and `S3A://b` are one bucket).
    pub fn same_bucket(&self, other: &ObjectUrl) -> bool {
        let place = |u: &ObjectUrl| {
            let base = u.base.split_once("://").map_or(u.base.as_str(), |(_, b)| b);
            base.to_ascii_lowercase()
        };
        self.kind == other.kind && place(self) == place(other)
    }

    /// Whether `other` names the same object.
    pub fn same_object(&self, other: &ObjectUrl) -> bool {
        self.same_bucket(other) && self.key == other.key
    }
}

impl std::fmt::Display for ObjectUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// The scheme of `s` when it starts as a URL does (`scheme://`, the scheme a letter then
/// letters, digits, `+`, `-` or `.`), lowercased.
fn scheme_of(s: &str) -> Option<String> {
    let (scheme, _) = s.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then(|| scheme.to_ascii_lowercase())
}

/// Whether `s` is meant as a URL (starts with `scheme://`), supported or not.
pub fn looks_like_url(s: &str) -> bool {
    scheme_of(s).is_some()
}

/// `s` as an object URL; `Ok(None)` when it is not a URL at all (a local path); a usage error
/// for an unsupported scheme or a URL that names no bucket.
pub fn parse(s: &str) -> Result<Option<ObjectUrl>> {
    let Some(scheme) = scheme_of(s) else {
        return Ok(None);
    };
    let kind = match scheme.as_str() {
        "s3" | "s3a" => StoreKind::S3,
        "gs" => StoreKind::Gcs,
        "az" | "abfs" | "abfss" => StoreKind::Azure,
        "https" => StoreKind::Http,
        "http" => {
            return Err(
                Error::usage(format!("{s}: plain http:// URLs are not taken")).with_hint(
                    "use https://; for a local S3-compatible server give s3://bucket/key \
                     with AWS_ENDPOINT_URL=http://… and AWS_ALLOW_HTTP=true",
                ),
            );
        }
        "file" => {
            return Err(Error::usage(format!("{s}: file:// URLs are not taken"))
                .with_hint("give the local path itself"));
        }
        other => {
            return Err(
                Error::usage(format!("{s}: unsupported URL scheme `{other}://`")).with_hint(
                    format!(
                        "advcalc reads and writes {SCHEMES}; a local path whose first \
                         directory ends in `:` can be given as ./{s}"
                    ),
                ),
            );
        }
    };
    let bad = |why: &str| Error::usage(format!("{s}: {why}"));
    let url = Url::parse(s).map_err(|e| bad("not a valid URL").with_source(e))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(
            bad("names no bucket or host").with_hint(format!("write it as {scheme}://BUCKET/KEY"))
        );
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad(
            "a query (?…) or fragment (#…) is not taken in an object URL",
        ));
    }
    let (found, key) =
        ObjectStoreScheme::parse(&url).map_err(|e| bad("not a valid object URL").with_source(e))?;
    // An https URL of S3 or Azure in path style has the bucket as its first path segment.
    let kind = match (kind, found) {
        (StoreKind::Http, ObjectStoreScheme::AmazonS3) => StoreKind::S3,
        (StoreKind::Http, ObjectStoreScheme::MicrosoftAzure) => StoreKind::Azure,
        (kind, _) => kind,
    };
    let authority = &url[url::Position::BeforeScheme..url::Position::AfterPort];
    let base = match (scheme.as_str(), url.host_str()) {
        // S3 and Azure in path style: the bucket is the first path segment (as
        // `ObjectStoreScheme::parse` reads them)
        ("https", Some(host)) if path_style(host) => {
            let bucket = url.path().trim_start_matches('/').split('/').next();
            match bucket {
                Some(b) if !b.is_empty() => format!("{authority}/{b}"),
                _ => {
                    return Err(
                        bad("names no bucket").with_hint("write it as https://HOST/BUCKET/KEY")
                    );
                }
            }
        }
        _ => authority.to_string(),
    };
    Ok(Some(ObjectUrl {
        url: s.to_string(),
        kind,
        base,
        key,
    }))
}

/// Whether an https host takes the bucket (S3, R2) or container (Azure) as the first path
/// segment: the hosts `ObjectStoreScheme::parse` strips it for.
fn path_style(host: &str) -> bool {
    [
        "dfs.core.windows.net",
        "blob.core.windows.net",
        "dfs.fabric.microsoft.com",
        "blob.fabric.microsoft.com",
        "r2.cloudflarestorage.com",
    ]
    .iter()
    .any(|h| host.ends_with(h))
        || (host.ends_with("amazonaws.com") && host.starts_with("s3"))
}

/// `s` as an object URL that names an object (not a bucket or a prefix ending in `/`).
pub fn parse_object(s: &str) -> Result<Option<ObjectUrl>> {
    let Some(u) = parse(s)? else { return Ok(None) };
    if u.key.as_ref().is_empty() || s.ends_with('/') {
        return Err(
            Error::usage(format!("{s}: names a bucket or a prefix, not an object"))
                .with_hint(format!("write it as {}/KEY", u.base)),
        );
    }
    Ok(Some(u))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> ObjectUrl {
        parse(s).unwrap().unwrap_or_else(|| panic!("{s} is a URL"))
    }

    #[test]
    fn one_object_however_its_scheme_is_spelled() {
        let p = |s: &str| parse(s).unwrap().unwrap();
        assert!(p("s3://b/k.parquet").same_object(&p("S3A://b/k.parquet")));
        assert!(!p("s3://b/k.parquet").same_object(&p("s3://b/j.parquet")));
        assert!(!p("s3://b/k.parquet").same_object(&p("s3://c/k.parquet")));
        assert!(!p("s3://b/k.parquet").same_object(&p("gs://b/k.parquet")));
        assert!(p("s3://b/x/").same_bucket(&p("s3a://b/y/")));
    }

    #[test]
    fn object_urls_name_their_store_and_key() {
        let cases = [
            (
                "s3://bucket/dumps/a.parquet",
                StoreKind::S3,
                "s3://bucket",
                "dumps/a.parquet",
            ),
            (
                "S3://bucket/a.parquet",
                StoreKind::S3,
                "s3://bucket",
                "a.parquet",
            ),
            (
                "s3a://bucket/a.parquet",
                StoreKind::S3,
                "s3a://bucket",
                "a.parquet",
            ),
            ("s3://bucket", StoreKind::S3, "s3://bucket", ""),
            ("s3://bucket/", StoreKind::S3, "s3://bucket", ""),
            (
                "gs://b/x/y.parquet",
                StoreKind::Gcs,
                "gs://b",
                "x/y.parquet",
            ),
            (
                "az://container/x.parquet",
                StoreKind::Azure,
                "az://container",
                "x.parquet",
            ),
            (
                "abfss://c@acct.dfs.core.windows.net/d/x.parquet",
                StoreKind::Azure,
                "abfss://c@acct.dfs.core.windows.net",
                "d/x.parquet",
            ),
            (
                "abfs://c/x.parquet",
                StoreKind::Azure,
                "abfs://c",
                "x.parquet",
            ),
            (
                "https://example.com:8443/data/x.parquet",
                StoreKind::Http,
                "https://example.com:8443",
                "data/x.parquet",
            ),
            (
                "https://s3.eu-west-1.amazonaws.com/bucket/k/x.parquet",
                StoreKind::S3,
                "https://s3.eu-west-1.amazonaws.com/bucket",
                "k/x.parquet",
            ),
            (
                "https://acct.blob.core.windows.net/container/x.parquet",
                StoreKind::Azure,
                "https://acct.blob.core.windows.net/container",
                "x.parquet",
            ),
            // percent-escapes are decoded into the key
            (
                "s3://bucket/a%20b.parquet",
                StoreKind::S3,
                "s3://bucket",
                "a b.parquet",
            ),
        ];
        for (s, kind, base, key) in cases {
            let u = ok(s);
            assert_eq!(
                (u.kind, u.base.as_str(), u.key.as_ref()),
                (kind, base, key),
                "{s}"
            );
            assert_eq!(u.url, s);
        }
    }

    #[test]
    fn local_paths_are_not_urls() {
        for s in [
            "a.parquet",
            "./s3://x",
            "/tmp/s3:/x",
            "dir/file.parquet",
            "-",
            "s3:bucket/x",
            "C:\\data\\x.parquet",
            "://x",
            "1s3://x",
        ] {
            assert_eq!(parse(s).unwrap(), None, "{s}");
            assert!(!looks_like_url(s), "{s}");
        }
    }

    #[test]
    fn unsupported_or_malformed_urls_are_usage_errors() {
        for (s, says) in [
            ("ftp://host/x.parquet", "unsupported URL scheme `ftp://`"),
            ("hdfs://nn/x", "unsupported URL scheme `hdfs://`"),
            ("http://host/x.parquet", "plain http:// URLs are not taken"),
            ("file:///tmp/x.parquet", "file:// URLs are not taken"),
            ("s3:///x.parquet", "names no bucket"),
            ("s3://bucket/x.parquet?versionId=1", "query"),
        ] {
            let e = parse(s).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::Usage, "{s}");
            assert!(e.message().starts_with(s), "{s}: {}", e.message());
            assert!(e.message().contains(says), "{s}: {}", e.message());
        }
        let e = parse("ftp://host/x").unwrap_err();
        assert!(e.hint().unwrap().contains("s3://"), "{:?}", e.hint());
    }

    #[test]
    fn an_object_url_names_an_object() {
        assert_eq!(parse_object("x.parquet").unwrap(), None);
        assert!(parse_object("s3://b/k.parquet").unwrap().is_some());
        for s in ["s3://b", "s3://b/", "s3://b/dumps/"] {
            let e = parse_object(s).unwrap_err();
            assert!(e.message().contains("not an object"), "{s}");
        }
    }
}
