//! A finished local file written to an object so that OUT appears whole or not at all, and
//! never over an existing object unless forced. The local writers keep writing a temporary
//! file (io/atomic.rs); where OUT is an object, that file is then put here.
//!
//! - Up to [`PutPolicy::put_max`] bytes: one PUT, conditional: `PutMode::Create` (S3 sends
//!   `If-None-Match: *`, so of two writers exactly one wins, and an existing object is
//!   refused by the store itself, not only by a check before), `PutMode::Overwrite` with
//!   `force`.
//! - Above it: a multipart upload, which the store shows only once completed, aborted on any
//!   error (a failed part, a read error, Ctrl-C) so that no upload is left open. object_store
//!   0.14.2 has no condition for multipart uploads (arrow-rs-object-store #289), so without
//!   `force` an existing object is refused by a HEAD before: that path is not race-free.

use std::io::Read;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, WriteMultipart,
};

use crate::error::{Error, Result};
use crate::object::runtime::block_on;
use crate::object::store::{Store, store_for};
use crate::object::store_error;
use crate::object::url::ObjectUrl;

/// S3's limit on one PUT.
pub const PUT_MAX_CAP: u64 = 5 << 30;

/// How OUT is put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutPolicy {
    /// Replace an existing object (`--force`).
    pub force: bool,
    /// Replace only the object that has this ETag (a `--resume` redo of an output found
    /// stale): a PUT with `If-Match`, so one another writer changed meanwhile is left as it
    /// is, not clobbered. Ignored with `force`.
    pub replacing: Option<String>,
    /// The largest file put in one request (capped at [`PUT_MAX_CAP`]); larger ones go by
    /// a multipart upload.
    pub put_max: u64,
    /// A multipart upload's part size (S3: at least 5 MiB but for the last).
    pub part_size: usize,
    /// Parts in flight at once.
    pub parts_in_flight: usize,
}

impl Default for PutPolicy {
    fn default() -> Self {
        Self {
            force: false,
            replacing: None,
            put_max: std::env::var("ADVCALC_OBJECT_PUT_MAX")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1 << 30),
            part_size: 16 << 20,
            parts_in_flight: 8,
        }
    }
}

impl PutPolicy {
    /// The condition of a single PUT: create-only, replace the object with the ETag
    /// [`PutPolicy::replacing`] names, or (`force`) overwrite whatever is there.
    pub fn mode(&self) -> PutMode {
        match (&self.replacing, self.force) {
            (_, true) => PutMode::Overwrite,
            (Some(e_tag), false) => PutMode::Update(object_store::UpdateVersion {
                e_tag: Some(e_tag.clone()),
                version: None,
            }),
            (None, false) => PutMode::Create,
        }
    }
}

/// What the store says of the object written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub size: u64,
    pub e_tag: Option<String>,
    pub version: Option<String>,
    /// Whether it went by a multipart upload.
    pub multipart: bool,
}

/// Put the finished file `local` at `url`.
pub fn upload(local: &std::path::Path, url: &ObjectUrl, policy: &PutPolicy) -> Result<Uploaded> {
    upload_to(&store_for(url)?, &url.key, &url.url, local, policy)
}

/// Put the finished file `local` at `key` in `store`, naming it `name` in messages.
pub fn upload_to(
    store: &Store,
    key: &ObjectPath,
    name: &str,
    local: &std::path::Path,
    policy: &PutPolicy,
) -> Result<Uploaded> {
    let read_error = |e: std::io::Error| {
        Error::data(format!(
            "{name}: cannot read the finished output {}",
            local.display()
        ))
        .with_source(e)
    };
    let mut file = std::fs::File::open(local).map_err(read_error)?;
    let size = file.metadata().map_err(read_error)?.len();
    if size <= policy.put_max.min(PUT_MAX_CAP) {
        let mut buf = Vec::with_capacity(size as usize);
        file.read_to_end(&mut buf).map_err(read_error)?;
        return put_bytes(store, key, name, Bytes::from(buf), policy.mode());
    }
    // a multipart upload takes no condition (object_store 0.14): checked before instead
    match (&policy.replacing, policy.force) {
        (_, true) => {}
        (Some(e_tag), false) => refuse_changed(store, key, name, e_tag)?,
        (None, false) => refuse_existing(store, key, name)?,
    }
    crate::interrupt::check()?;
    let written = block_on(async {
        let upload = store
            .put_multipart_opts(key, PutMultipartOptions::default())
            .await
            .map_err(|e| store_error(name, "cannot start the upload", e))?;
        let mut parts = WriteMultipart::new_with_chunk_size(upload, policy.part_size);
        let sent = send_parts(&mut parts, &mut file, name, policy).await;
        match sent {
            Ok(()) => parts
                .finish()
                .await
                .map_err(|e| store_error(name, "cannot complete the upload", e)),
            Err(e) => {
                // the error that stopped it is the one reported; an abort that fails leaves
                // the upload to the bucket's lifecycle rule
                let _ = parts.abort().await;
                Err(e)
            }
        }
    })?;
    Ok(Uploaded {
        size,
        e_tag: written.e_tag,
        version: written.version,
        multipart: true,
    })
}

/// The file's parts into `parts`, at most `parts_in_flight` at once, stopping at Ctrl-C.
async fn send_parts(
    parts: &mut WriteMultipart,
    file: &mut std::fs::File,
    name: &str,
    policy: &PutPolicy,
) -> Result<()> {
    loop {
        crate::interrupt::check()?;
        let mut part = Vec::with_capacity(policy.part_size);
        let n = file
            .by_ref()
            .take(policy.part_size as u64)
            .read_to_end(&mut part)
            .map_err(|e| {
                Error::data(format!("{name}: cannot read the finished output")).with_source(e)
            })?;
        if n == 0 {
            return Ok(());
        }
        parts
            .wait_for_capacity(policy.parts_in_flight)
            .await
            .map_err(|e| store_error(name, "cannot upload a part", e))?;
        parts.put(Bytes::from(part));
    }
}

/// One PUT of `bytes` at `key` under the condition `mode` ([`PutPolicy::mode`]).
pub fn put_bytes(
    store: &Store,
    key: &ObjectPath,
    name: &str,
    bytes: Bytes,
    mode: PutMode,
) -> Result<Uploaded> {
    crate::interrupt::check()?;
    let size = bytes.len() as u64;
    let opts = PutOptions {
        mode,
        ..Default::default()
    };
    let written =
        block_on(store.put_opts(key, PutPayload::from(bytes), opts)).map_err(|e| match e {
            object_store::Error::Precondition { .. } => changed_meanwhile(name).with_source(e),
            e => store_error(name, "cannot write", e),
        })?;
    Ok(Uploaded {
        size,
        e_tag: written.e_tag,
        version: written.version,
        multipart: false,
    })
}

/// The object to be replaced is no longer the one this run found stale.
fn changed_meanwhile(name: &str) -> Error {
    Error::usage(format!(
        "{name}: changed by another writer since this run found it stale; left as it is"
    ))
    .with_hint("run again: --resume decides again from what is there now")
}

/// Refuse an object whose ETag is no longer `e_tag` (a HEAD: the check before a multipart
/// upload replaces it).
fn refuse_changed(store: &Store, key: &ObjectPath, name: &str, e_tag: &str) -> Result<()> {
    match block_on(store.head(key)) {
        Ok(meta) if meta.e_tag.as_deref() == Some(e_tag) => Ok(()),
        Ok(_) | Err(object_store::Error::NotFound { .. }) => Err(changed_meanwhile(name)),
        Err(e) => Err(store_error(name, "cannot check whether it changed", e)),
    }
}

/// Refuse an object that exists (a HEAD: the check before a multipart upload, and before
/// any work starts, as `atomic::check_destination` does for a local OUT).
pub fn refuse_existing(store: &Store, key: &ObjectPath, name: &str) -> Result<()> {
    match block_on(store.head(key)) {
        Ok(_) => Err(Error::usage(format!("{name}: already exists"))
            .with_hint("pass --force to overwrite it")),
        Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(store_error(name, "cannot check whether it exists", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::testing::{Counting, put};
    use std::sync::Arc;

    fn file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn read(store: &Counting, key: &str) -> Option<Vec<u8>> {
        match block_on(async { store.get(&ObjectPath::from(key)).await?.bytes().await }) {
            Ok(b) => Some(b.to_vec()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("{e}"),
        }
    }

    fn setup() -> (tempfile::TempDir, Arc<Counting>, Store) {
        let counting = Arc::new(Counting::default());
        let store: Store = counting.clone();
        (tempfile::tempdir().unwrap(), counting, store)
    }

    #[test]
    fn one_create_only_put_and_an_existing_object_refused() {
        let (dir, counting, store) = setup();
        let local = file(&dir, "out.parquet", b"new output");
        let key = ObjectPath::from("adv/out.parquet");
        let policy = PutPolicy::default();
        let w = upload_to(&store, &key, "s3://b/adv/out.parquet", &local, &policy).unwrap();
        assert!(!w.multipart && w.e_tag.is_some() && w.size == 10, "{w:?}");
        assert_eq!(read(&counting, "adv/out.parquet").unwrap(), b"new output");
        assert_eq!(counting.counts().puts, 1);

        // again, without force: the store refuses it; the object is unchanged
        let other = file(&dir, "other.parquet", b"other bytes");
        let e = upload_to(&store, &key, "s3://b/adv/out.parquet", &other, &policy).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Usage);
        assert_eq!(e.message(), "s3://b/adv/out.parquet: already exists");
        assert_eq!(e.hint(), Some("pass --force to overwrite it"));
        assert_eq!(read(&counting, "adv/out.parquet").unwrap(), b"new output");
        // by the conditional PUT itself, with no HEAD before
        let c = counting.counts();
        assert_eq!((c.puts, c.heads), (2, 0), "{c:?}");

        // with force it is replaced
        let forced = PutPolicy {
            force: true,
            ..policy.clone()
        };
        upload_to(&store, &key, "s3://b/adv/out.parquet", &other, &forced).unwrap();
        assert_eq!(read(&counting, "adv/out.parquet").unwrap(), b"other bytes");
    }

    #[test]
    fn a_redo_replaces_only_the_object_it_judged() {
        let (dir, counting, store) = setup();
        let key = ObjectPath::from("adv/out.parquet");
        let name = "s3://b/adv/out.parquet";
        let first = file(&dir, "first", b"first output");
        let judged = upload_to(&store, &key, name, &first, &PutPolicy::default()).unwrap();
        let redo = file(&dir, "redo", b"redone output");
        // another writer replaced it after this run judged it stale: refused, left as it is
        let theirs = file(&dir, "theirs", b"another writer's");
        let forced = PutPolicy {
            force: true,
            ..PutPolicy::default()
        };
        upload_to(&store, &key, name, &theirs, &forced).unwrap();
        let replacing = PutPolicy {
            replacing: judged.e_tag.clone(),
            ..PutPolicy::default()
        };
        let e = upload_to(&store, &key, name, &redo, &replacing).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Usage);
        assert!(e.message().contains("changed by another writer"), "{e:#}");
        assert_eq!(
            read(&counting, "adv/out.parquet").unwrap(),
            b"another writer's"
        );
        // the multipart path checks the same before it starts
        let tiny = PutPolicy {
            put_max: 4,
            part_size: 5,
            ..replacing.clone()
        };
        let e = upload_to(&store, &key, name, &redo, &tiny).unwrap_err();
        assert!(e.message().contains("changed by another writer"), "{e:#}");
        assert_eq!(counting.counts().multipart_starts, 0);
        assert_eq!(
            read(&counting, "adv/out.parquet").unwrap(),
            b"another writer's"
        );

        // replacing the object as it is now: done, by one conditional PUT
        let now = block_on(store.head(&key)).unwrap().e_tag;
        let replacing = PutPolicy {
            replacing: now,
            ..PutPolicy::default()
        };
        upload_to(&store, &key, name, &redo, &replacing).unwrap();
        assert_eq!(
            read(&counting, "adv/out.parquet").unwrap(),
            b"redone output"
        );
    }

    #[test]
    fn of_concurrent_create_only_writers_exactly_one_wins() {
        use rayon::prelude::*;
        let (_dir, counting, store) = setup();
        let key = ObjectPath::from("race");
        let wins = (0..16u8)
            .into_par_iter()
            .filter(|i| {
                put_bytes(
                    &store,
                    &key,
                    "race",
                    Bytes::from(vec![*i; 4]),
                    PutMode::Create,
                )
                .is_ok()
            })
            .count();
        assert_eq!(wins, 1);
        assert_eq!(read(&counting, "race").unwrap().len(), 4);
    }

    fn tiny() -> PutPolicy {
        PutPolicy {
            force: false,
            replacing: None,
            put_max: 8,
            part_size: 5,
            parts_in_flight: 2,
        }
    }

    #[test]
    fn above_the_threshold_a_multipart_upload() {
        let (dir, counting, store) = setup();
        let bytes: Vec<u8> = (0..23u8).collect();
        let local = file(&dir, "big", &bytes);
        let w = upload_to(
            &store,
            &ObjectPath::from("big"),
            "s3://b/big",
            &local,
            &tiny(),
        )
        .unwrap();
        assert!(w.multipart && w.size == 23, "{w:?}");
        assert_eq!(read(&counting, "big").unwrap(), bytes);
        let c = counting.counts();
        // a HEAD first (no condition on multipart uploads), 5 parts of 5 bytes or fewer
        assert_eq!(
            (
                c.heads,
                c.puts,
                c.multipart_starts,
                c.parts,
                c.completes,
                c.aborts
            ),
            (1, 0, 1, 5, 1, 0),
            "{c:?}"
        );

        // now it exists: refused before any upload starts
        let e = upload_to(
            &store,
            &ObjectPath::from("big"),
            "s3://b/big",
            &local,
            &tiny(),
        )
        .unwrap_err();
        assert_eq!(e.message(), "s3://b/big: already exists");
        assert_eq!(counting.counts().multipart_starts, 1);

        // forced, replaced by a new upload
        let other: Vec<u8> = (100..130u8).collect();
        let local = file(&dir, "big2", &other);
        let forced = PutPolicy {
            force: true,
            ..tiny()
        };
        upload_to(
            &store,
            &ObjectPath::from("big"),
            "s3://b/big",
            &local,
            &forced,
        )
        .unwrap();
        assert_eq!(read(&counting, "big").unwrap(), other);
    }

    #[test]
    fn a_failed_part_aborts_the_upload_and_leaves_nothing() {
        let (dir, counting, store) = setup();
        let local = file(&dir, "big", &[7u8; 40]);
        counting.fail_part(3);
        let e = upload_to(&store, &ObjectPath::from("k"), "s3://b/k", &local, &tiny()).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Data);
        assert!(e.message().starts_with("s3://b/k: "), "{e}");
        let cause = std::error::Error::source(&e).unwrap().to_string();
        assert!(cause.contains("connection reset"), "{cause}");
        let c = counting.counts();
        assert_eq!((c.completes, c.aborts), (0, 1), "{c:?}");
        assert_eq!(read(&counting, "k"), None);

        // and an existing object is left as it was by a failed forced upload
        put(&counting, "k2", b"old");
        counting.fail_part(5);
        let forced = PutPolicy {
            force: true,
            ..tiny()
        };
        assert!(
            upload_to(
                &store,
                &ObjectPath::from("k2"),
                "s3://b/k2",
                &local,
                &forced
            )
            .is_err()
        );
        assert_eq!(read(&counting, "k2").unwrap(), b"old");
        assert_eq!(counting.counts().aborts, 2);
    }

    #[test]
    fn a_missing_local_file_names_both() {
        let (dir, _counting, store) = setup();
        let e = upload_to(
            &store,
            &ObjectPath::from("k"),
            "s3://b/k",
            &dir.path().join("gone"),
            &PutPolicy::default(),
        )
        .unwrap_err();
        assert!(
            e.message()
                .starts_with("s3://b/k: cannot read the finished output"),
            "{e}"
        );
    }
}
