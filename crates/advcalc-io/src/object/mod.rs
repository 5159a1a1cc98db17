//! Object storage for IN and OUT (`s3://`, `gs://`, `az://`, `https://`), behind the `cloud`
//! feature (docs/object-storage.md). A Parquet object IN is read in place through
//! `io::positional` (other formats are fetched whole into a local spool, `io::input`); a
//! dataset is one listing (`list`); OUT is the finished local result put whole
//! (`commands::run`, `commands::dataset`); `io::location` says which arguments are URLs.
//!
//! - [`url`]: which arguments are object URLs, and the store and key each names;
//! - [`store`]: one store per scheme and bucket, configured from the environment (and, for
//!   S3, an AWS profile's static keys and region: `aws_profile`), with bounded retries;
//! - [`runtime`]: the one small IO runtime, and `block_on` for synchronous callers;
//! - [`source`]: an object opened for reading: ranged GETs pinned to the ETag it had;
//! - [`sink`]: a finished local file written to an object, visible only when complete and
//!   never over an existing one unless forced.

mod aws_profile;
pub mod list;
mod missing_bucket;
pub mod runtime;
pub mod sink;
pub mod source;
pub mod store;
pub mod url;

// the unit tests' and `advcalc`'s tests' instrumented store (feature `testing`)
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use crate::error::Error;

/// An object store error as advcalc's: `URL: what failed: cause`, one line, with the kind and
/// hint its cause calls for (a missing object, a denied request, a server that keeps failing
/// are data or IO errors, exit 1; a usage error is kept for what the user asked for, as an
/// existing OUT without `--force`). object_store's error, which names the request, is kept
/// as the `caused by:` lines.
pub fn store_error(url: &str, what: &str, e: object_store::Error) -> Error {
    use object_store::Error as E;
    let cause = Cause::of(&e);
    let retried = |words: String| match cause.retries {
        Some(1) => format!("{url}: {what}: {words} (after 1 retry)"),
        Some(n) => format!("{url}: {what}: {words} (after {n} retries)"),
        None => format!("{url}: {what}: {words}"),
    };
    let error = match (&e, &cause.what) {
        (_, What::NoCredentials) => Error::data(format!("{url}: {what}: no credentials found"))
            .with_hint(credentials_hint(url)),
        (_, What::Rejected(code)) => Error::data(format!(
            "{url}: {what}: not authenticated: the server rejected the credentials ({code})"
        ))
        .with_hint(credentials_hint(url)),
        (_, What::WrongRegion(region)) => {
            let (words, hint) = match region {
                Some(r) => (
                    format!("wrong region: the bucket is in {r}"),
                    format!("set AWS_REGION={r}"),
                ),
                None => (
                    "wrong region: the bucket is in another region than the one set".into(),
                    "set AWS_REGION to the bucket's region".into(),
                ),
            };
            Error::data(format!("{url}: {what}: {words}")).with_hint(hint)
        }
        (_, What::NoSuchBucket) => Error::data(format!("{url}: {what}: no such bucket")),
        (E::NotFound { .. }, _) => Error::data(format!("{url}: {what}: no such object")),
        (E::AlreadyExists { .. }, _) => {
            Error::usage(format!("{url}: already exists")).with_hint("pass --force to overwrite it")
        }
        (E::Precondition { .. }, _) => Error::data(format!(
            "{url}: {what}: the object changed while it was read (its ETag is not the one it \
             had when opened)"
        ))
        .with_hint("run again once the object is no longer being rewritten"),
        (E::PermissionDenied { .. }, _) | (_, What::Status(403)) => {
            Error::data(format!("{url}: {what}: access denied"))
                .with_hint("the credentials in use are not allowed this request on this bucket")
        }
        (E::Unauthenticated { .. }, _) | (_, What::Status(401)) => {
            Error::data(format!("{url}: {what}: not authenticated"))
                .with_hint(credentials_hint(url))
        }
        (E::NotSupported { .. } | E::NotImplemented { .. }, _) => {
            Error::usage(format!("{url}: {what}: not supported by this store"))
        }
        (_, What::Throttled(code)) => Error::data(retried(format!(
            "the server kept asking to slow down ({code})"
        )))
        .with_hint(RETRY_HINT),
        (_, What::Status(status)) if *status >= 500 => {
            Error::data(retried(format!("the server failed ({status})"))).with_hint(RETRY_HINT)
        }
        (_, What::Dropped) => {
            Error::data(retried("the connection was dropped".into())).with_hint(RETRY_HINT)
        }
        (_, What::TimedOut) => Error::data(retried("timed out".into())).with_hint(TIMEOUT_HINT),
        (_, What::CannotConnect) => Error::data(retried("cannot connect to the server".into()))
            .with_hint(
                "check the endpoint (AWS_ENDPOINT_URL for a server other than AWS) and the network",
            ),
        _ => Error::data(format!("{url}: {what}")),
    };
    error
        .with_source(e)
        .with_reason(crate::error::Reason::Storage)
}

const RETRY_HINT: &str = "run again later; ADVCALC_OBJECT_MAX_RETRIES and \
    ADVCALC_OBJECT_RETRY_TIMEOUT bound the retries (default 10 and 180 s)";
const TIMEOUT_HINT: &str = "check the network; AWS_TIMEOUT (GOOGLE_TIMEOUT, AZURE_TIMEOUT) and \
    AWS_CONNECT_TIMEOUT set the limits (default 600s and 10s)";

/// Where credentials come from, for the store `url` names.
fn credentials_hint(url: &str) -> &'static str {
    if url.starts_with("s3://") || url.starts_with("s3a://") || url.contains("amazonaws.com") {
        "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), or AWS_PROFILE \
         naming a profile with static keys in ~/.aws/credentials or ~/.aws/config (the \
         `default` one is read without it); on AWS a web identity, ECS or instance role is \
         used without them"
    } else if url.starts_with("gs://") {
        "set GOOGLE_APPLICATION_CREDENTIALS (or GOOGLE_SERVICE_ACCOUNT), or run on a machine \
         with a service account"
    } else if url.starts_with("https://") && !url.contains(".core.windows.net") {
        "advcalc sends no credentials with a plain https:// URL; use the store's own scheme \
         (s3://, gs://, az://) with its credentials"
    } else {
        "set AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_KEY (with \
         AZURE_STORAGE_ACCOUNT_NAME), or run with a managed identity"
    }
}

/// What an object_store error says happened, read from its chain of causes: object_store
/// keeps the HTTP status, the server's error code and the transport failure only in them.
struct Cause {
    what: What,
    /// How often the request was retried before it failed, where the error says.
    retries: Option<usize>,
}

#[derive(Debug, PartialEq, Eq)]
enum What {
    /// Neither the environment, a profile nor the instance metadata had credentials.
    NoCredentials,
    /// The server does not know the key or the signature does not match (S3's code).
    Rejected(String),
    /// The bucket is in another region (the one the server names, if it does).
    WrongRegion(Option<String>),
    NoSuchBucket,
    /// Throttled past the retries (the server's code or status).
    Throttled(String),
    Status(u16),
    Dropped,
    TimedOut,
    CannotConnect,
    Other,
}

impl Cause {
    fn of(e: &object_store::Error) -> Self {
        use object_store::client::HttpErrorKind as K;
        let mut text = String::new();
        let mut transport = None;
        let mut no_credentials = false;
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = next {
            text.push_str(&err.to_string());
            text.push('\n');
            if let Some(h) = err.downcast_ref::<object_store::client::HttpError>() {
                transport.get_or_insert(h.kind());
            }
            no_credentials |= err.is::<store::NoCredentials>();
            next = err.source();
        }
        let code = between(&text, "<Code>", "</Code>");
        let status = text
            .split_once("status code: ")
            .and_then(|(_, rest)| rest.get(..3))
            .and_then(|s| s.parse::<u16>().ok());
        let retries = text
            .split_once(", after ")
            .and_then(|(_, rest)| rest.split_once(" retries"))
            .and_then(|(n, _)| n.parse().ok());
        // IMDS, the last link of the AWS chain, answering nothing (not on EC2)
        let imds = text.contains("/latest/api/token")
            || text.contains("/latest/meta-data/iam/security-credentials");
        let what = match code.as_deref() {
            _ if no_credentials || imds => What::NoCredentials,
            _ if missing_bucket::says_no_bucket(&text) => What::NoSuchBucket,
            Some(
                c @ ("InvalidAccessKeyId"
                | "SignatureDoesNotMatch"
                | "ExpiredToken"
                | "InvalidToken"
                | "TokenRefreshRequired"),
            ) => What::Rejected(c.into()),
            Some(
                "PermanentRedirect"
                | "AuthorizationHeaderMalformed"
                | "IllegalLocationConstraintException",
            ) => What::WrongRegion(
                between(&text, "<Region>", "</Region>")
                    .or_else(|| between(&text, "expecting '", "'")),
            ),
            Some(
                c @ ("SlowDown"
                | "Throttling"
                | "ThrottlingException"
                | "RequestLimitExceeded"
                | "TooManyRequests"
                | "RequestThrottled"),
            ) => What::Throttled(c.into()),
            _ if text.contains("redirect without LOCATION") || status == Some(301) => {
                What::WrongRegion(None)
            }
            _ if matches!(status, Some(429 | 503)) => {
                What::Throttled(format!("{}", status.unwrap_or_default()))
            }
            _ => match (status, transport) {
                (Some(s), _) => What::Status(s),
                (None, Some(K::Timeout)) => What::TimedOut,
                (None, Some(K::Connect)) => What::CannotConnect,
                (None, Some(K::Request | K::Interrupted)) => What::Dropped,
                _ => What::Other,
            },
        };
        Self { what, retries }
    }
}

/// The text between the first `open` and the `close` after it.
fn between(text: &str, open: &str, close: &str) -> Option<String> {
    let (_, rest) = text.split_once(open)?;
    let (inside, _) = rest.split_once(close)?;
    Some(inside.trim().to_string()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::client::{HttpError, HttpErrorKind};

    /// An error as object_store reports a failed request: its text, as the store wraps it.
    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: text.to_string().into(),
        }
    }

    fn message(e: object_store::Error) -> (String, Option<String>, i32) {
        let e = store_error("s3://b/k", "cannot read", e);
        (e.to_string(), e.hint().map(str::to_string), e.exit_code())
    }

    #[test]
    fn each_cause_is_one_line_naming_the_url() {
        let cases = [
            (
                generic(
                    "Error performing GET http://h/b/k in 2s, after 3 retries, max_retries: 3, \
                     retry_timeout: 180s  - Server returned non-2xx status code: 503 Service \
                     Unavailable: <Error><Code>SlowDown</Code></Error>",
                ),
                "s3://b/k: cannot read: the server kept asking to slow down (SlowDown) (after 3 \
                 retries)",
            ),
            (
                generic("Server returned non-2xx status code: 500 Internal Server Error: "),
                "s3://b/k: cannot read: the server failed (500)",
            ),
            (
                generic(
                    "Server returned non-2xx status code: 400 Bad Request: <Error><Code>\
                     AuthorizationHeaderMalformed</Code><Message>the region 'us-east-1' is \
                     wrong; expecting 'eu-west-1'</Message></Error>",
                ),
                "s3://b/k: cannot read: wrong region: the bucket is in eu-west-1",
            ),
            (
                generic("Received redirect without LOCATION, this normally indicates ..."),
                "s3://b/k: cannot read: wrong region: the bucket is in another region than the \
                 one set",
            ),
            (
                generic(
                    "Server returned non-2xx status code: 403 Forbidden: <Error><Code>\
                     InvalidAccessKeyId</Code></Error>",
                ),
                "s3://b/k: cannot read: not authenticated: the server rejected the credentials \
                 (InvalidAccessKeyId)",
            ),
            (
                generic("Error performing PUT http://169.254.169.254/latest/api/token - timeout"),
                "s3://b/k: cannot read: no credentials found",
            ),
            (
                object_store::Error::Unauthenticated {
                    path: String::new(),
                    source: Box::new(store::NoCredentials),
                },
                "s3://b/k: cannot read: no credentials found",
            ),
            (
                object_store::Error::Generic {
                    store: "S3",
                    source: Box::new(HttpError::new(
                        HttpErrorKind::Timeout,
                        std::io::Error::from(std::io::ErrorKind::TimedOut),
                    )),
                },
                "s3://b/k: cannot read: timed out",
            ),
            (
                object_store::Error::Generic {
                    store: "S3",
                    source: Box::new(HttpError::new(
                        HttpErrorKind::Interrupted,
                        std::io::Error::from(std::io::ErrorKind::ConnectionReset),
                    )),
                },
                "s3://b/k: cannot read: the connection was dropped",
            ),
            (
                object_store::Error::NotFound {
                    path: "k".into(),
                    source: "404: <Error><Code>NoSuchBucket</Code></Error>".into(),
                },
                "s3://b/k: cannot read: no such bucket",
            ),
            (
                object_store::Error::NotFound {
                    path: "k".into(),
                    source: "404 Not Found: ".into(),
                },
                "s3://b/k: cannot read: no such object",
            ),
        ];
        for (error, want) in cases {
            let (got, hint, code) = message(error);
            assert_eq!(got, want);
            assert_eq!(code, 1, "{got}");
            assert!(!got.contains('\n'), "{got}");
            if got.contains("credentials") {
                assert!(hint.unwrap().contains("AWS_ACCESS_KEY_ID"), "{got}");
            }
        }
        let (_, hint, _) = message(generic(
            "status code: 400 Bad Request: <Code>AuthorizationHeaderMalformed</Code>\
             <Region>ap-south-1</Region>",
        ));
        assert_eq!(hint.as_deref(), Some("set AWS_REGION=ap-south-1"));
    }
}
