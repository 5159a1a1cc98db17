//! Object storage for IN and OUT (`s3://`, `gs://`, `az://`, `https://`), behind the `cloud`
//! feature (docs/object-storage-wip.md). Wired so far: one object as IN of `run`, `inspect`,
//! `compare` and `report` (fetched whole into a local spool, `io::input`), and `run`'s OUT
//! (put from the finished local result, `commands::run`); `io::location` says which
//! arguments are URLs.
//!
//! - [`url`]: which arguments are object URLs, and the store and key each names;
//! - [`store`]: one store per scheme and bucket, configured from the environment;
//! - [`runtime`]: the one small IO runtime, and `block_on` for synchronous callers;
//! - [`source`]: an object opened for reading: ranged GETs pinned to the ETag it had;
//! - [`sink`]: a finished local file written to an object, visible only when complete and
//!   never over an existing one unless forced.

pub mod list;
pub mod runtime;
pub mod sink;
pub mod source;
pub mod store;
pub mod url;

#[cfg(test)]
pub(crate) mod testing;

use crate::error::Error;

/// An object store error as advcalc's: `URL: what failed: cause`, with the kind and hint its
/// cause calls for (a missing object or a denied request is data, exit 1; a usage error is
/// kept for what the user asked for, as an existing OUT without `--force`).
pub(crate) fn store_error(url: &str, what: &str, e: object_store::Error) -> Error {
    use object_store::Error as E;
    match &e {
        E::NotFound { .. } => Error::data(format!("{url}: {what}: no such object")).with_source(e),
        E::AlreadyExists { .. } => Error::usage(format!("{url}: already exists"))
            .with_source(e)
            .with_hint("pass --force to overwrite it"),
        E::Precondition { .. } => Error::data(format!(
            "{url}: {what}: the object changed while it was read (its ETag is not the one it \
             had when opened)"
        ))
        .with_source(e)
        .with_hint("run again once the object is no longer being rewritten"),
        E::PermissionDenied { .. } => {
            Error::data(format!("{url}: {what}: access denied")).with_source(e)
        }
        E::Unauthenticated { .. } => Error::data(format!("{url}: {what}: not authenticated"))
            .with_source(e)
            .with_hint("check the credentials in the environment (AWS_*, GOOGLE_*, AZURE_*)"),
        E::NotSupported { .. } | E::NotImplemented { .. } => {
            Error::usage(format!("{url}: {what}: not supported by this store")).with_source(e)
        }
        _ => Error::data(format!("{url}: {what}")).with_source(e),
    }
}
