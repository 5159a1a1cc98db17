//! A dataset in object storage: a prefix (`s3://bucket/dumps/`) or a glob under one
//! (`s3://bucket/dumps/*.parquet`, `**` for any depth), found by ONE listing of the prefix up
//! to the glob's first component with a glob character (paged by the store), its keys then
//! filtered here with the rules of a local dataset (`io::dataset`): hidden names and names
//! starting with `_` skipped at any depth below the prefix, data extensions only (any with
//! `--input-format`), the glob matched component by component.

use std::path::Path;

use futures_core::stream::BoxStream;
use object_store::ObjectMeta;
use object_store::path::Path as ObjectPath;

use crate::dataset::{glob_matches, has_data_extension, is_glob};
use crate::error::{Error, Result};
use crate::object::runtime::block_on;
use crate::object::store::Store;
use crate::object::store_error;
use crate::object::url::{ObjectUrl, looks_like_url, parse};

/// IN naming a dataset in object storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetUrl {
    /// The URL as given, for messages.
    pub url: String,
    /// The store, and the prefix listed (the directory before the glob; empty for the bucket).
    pub base: ObjectUrl,
    /// The listed prefix as a URL ending in `/`: an object's URL is this and its relative key.
    pub base_url: String,
    /// The glob after the prefix (`None`: every data object under it).
    pub pattern: Option<String>,
}

/// One object of a dataset, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: ObjectPath,
    /// Its key relative to the prefix: where its output goes under OUT.
    pub rel: String,
    pub size: u64,
    pub e_tag: Option<String>,
    pub version: Option<String>,
}

/// `s` as a dataset in object storage: a URL whose path ends in `/` (a prefix) or holds a glob
/// character (`*`, `?`, `[`); `Ok(None)` for a local path or a URL naming one object. A bucket
/// alone is a usage error (a dataset is a prefix or a glob in it).
pub fn dataset_url(s: &str) -> Result<Option<DatasetUrl>> {
    if !looks_like_url(s) {
        return Ok(None);
    }
    let after_scheme = s.find("://").map_or(0, |i| i + 3);
    let Some(slash) = s[after_scheme..].find('/').map(|i| after_scheme + i) else {
        return Ok(None);
    };
    let (head, path) = (&s[..slash], &s[slash + 1..]);
    if !is_glob(path) && !s.ends_with('/') {
        return Ok(None);
    }
    // an https URL's `?` starts a query (a presigned URL), which `parse` refuses by name
    if head.to_ascii_lowercase().starts_with("https:")
        && path.contains('?')
        && !path.contains(['*', '['])
    {
        return Ok(None);
    }
    // split before the URL parser sees the glob: `?` would start a query
    let comps: Vec<&str> = path.split('/').collect();
    let first_glob = comps.iter().position(|c| is_glob(c));
    let (dir, pattern) = match first_glob {
        Some(i) => (&comps[..i], Some(comps[i..].join("/"))),
        None => (&comps[..], None),
    };
    let dir: Vec<&str> = dir.iter().copied().filter(|c| !c.is_empty()).collect();
    let base_url = if dir.is_empty() {
        format!("{head}/")
    } else {
        format!("{head}/{}/", dir.join("/"))
    };
    let Some(base) = parse(&base_url)? else {
        return Ok(None);
    };
    if pattern.is_none() && base.key.as_ref().is_empty() {
        return Err(
            Error::usage(format!("{s}: names a bucket, not a dataset or an object"))
                .with_hint(format!(
                    "give an object ({}/KEY), a prefix ({}/PREFIX/) or a quoted glob ({}/PREFIX/*.parquet)",
                    base.base, base.base, base.base
                )),
        );
    }
    Ok(Some(DatasetUrl {
        url: s.to_string(),
        base,
        base_url,
        pattern,
    }))
}

/// [`dataset_url`] of an IN or OUT argument.
pub fn dataset_url_of(path: &Path) -> Result<Option<DatasetUrl>> {
    match path.to_str() {
        Some(s) => dataset_url(s),
        None => Ok(None),
    }
}

/// Every object under `prefix` (the whole store when empty), by one listing (`name` in
/// messages).
pub fn list_prefix(store: &Store, prefix: &ObjectPath, name: &str) -> Result<Vec<ObjectMeta>> {
    let prefix = (!prefix.as_ref().is_empty()).then_some(prefix);
    block_on(collect(store.list(prefix))).map_err(|e| store_error(name, "cannot list", e))
}

async fn collect(
    mut stream: BoxStream<'static, object_store::Result<ObjectMeta>>,
) -> object_store::Result<Vec<ObjectMeta>> {
    let mut out = Vec::new();
    while let Some(meta) = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
        out.push(meta?);
    }
    Ok(out)
}

/// The objects of the dataset `url`: one listing, filtered as a local dataset's files are
/// (`any_extension`: `--input-format` was given), in key order.
pub fn list(store: &Store, url: &DatasetUrl, any_extension: bool) -> Result<Vec<Listed>> {
    let metas = list_prefix(store, &url.base.key, &url.url)?;
    let pattern: Option<Vec<&str>> = url
        .pattern
        .as_deref()
        .map(|p| p.split('/').filter(|c| !c.is_empty()).collect());
    let strip = match url.base.key.as_ref() {
        "" => String::new(),
        k => format!("{k}/"),
    };
    let mut out = Vec::new();
    for meta in metas {
        let Some(rel) = meta.location.as_ref().strip_prefix(strip.as_str()) else {
            continue;
        };
        if rel.is_empty()
            || rel
                .split('/')
                .any(|c| c.is_empty() || c.starts_with('.') || c.starts_with('_'))
        {
            continue;
        }
        if !any_extension && !has_data_extension(rel) {
            continue;
        }
        if let Some(p) = &pattern
            && !glob_matches(p, Path::new(rel))
        {
            continue;
        }
        out.push(Listed {
            rel: rel.to_string(),
            key: meta.location.clone(),
            size: meta.size,
            e_tag: meta.e_tag,
            version: meta.version,
        });
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::testing::{Counting, put};
    use std::sync::Arc;

    fn rels(store: &Arc<Counting>, url: &str) -> Vec<String> {
        let d = dataset_url(url).unwrap().unwrap();
        let s: Store = store.clone();
        list(&s, &d, false)
            .unwrap()
            .into_iter()
            .map(|l| l.rel)
            .collect()
    }

    /// A dataset opened from a store: one LIST for the whole dataset; each object then opened
    /// as one object IN is, none listed again.
    #[test]
    fn a_dataset_is_listed_once() {
        let store = Arc::new(Counting::default());
        crate::object::store::register("s3://list-once", store.clone());
        let demo = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/demo.parquet"
        ))
        .unwrap();
        for key in ["d/step=2.parquet", "d/step=1.parquet", "d/step=10.parquet"] {
            put(&store, key, &demo);
        }
        put(&store, "d/_SUCCESS", b"");
        let before = store.counts();
        let url = dataset_url("s3://list-once/d/").unwrap().unwrap();
        let d = crate::dataset::Dataset::open_objects(&url, None).unwrap();
        let names: Vec<&str> = d.parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "s3://list-once/d/step=1.parquet",
                "s3://list-once/d/step=2.parquet",
                "s3://list-once/d/step=10.parquet"
            ]
        );
        assert_eq!(d.rows(), 3 * 256);
        let after = store.counts();
        // (the GETs per object are the single-object opener's: not counted here)
        assert_eq!(after.lists - before.lists, 1);
    }

    #[test]
    fn dataset_urls() {
        let d = |s: &str| dataset_url(s).unwrap().unwrap();
        let u = d("s3://b/dumps/");
        assert_eq!(
            (
                u.base.base.as_str(),
                u.base.key.as_ref(),
                u.base_url.as_str()
            ),
            ("s3://b", "dumps", "s3://b/dumps/")
        );
        assert_eq!(u.pattern, None);
        let u = d("s3://b/dumps/run1/step=?.parquet");
        assert_eq!(
            (u.base.key.as_ref(), u.pattern.as_deref()),
            ("dumps/run1", Some("step=?.parquet"))
        );
        let u = d("s3://b/dumps/**/*.parquet");
        assert_eq!(
            (u.base.key.as_ref(), u.pattern.as_deref()),
            ("dumps", Some("**/*.parquet"))
        );
        let u = d("s3://b/*.parquet");
        assert_eq!((u.base.key.as_ref(), u.base_url.as_str()), ("", "s3://b/"));
        // one object, a local path: not a dataset
        assert_eq!(dataset_url("s3://b/dumps/x.parquet").unwrap(), None);
        assert_eq!(dataset_url("dumps/*.parquet").unwrap(), None);
        assert_eq!(dataset_url("s3://b").unwrap(), None);
        assert_eq!(
            dataset_url("https://host/b/k.parquet?X-Amz-Signature=0").unwrap(),
            None
        );
        assert_eq!(
            d("https://host/dumps/").base_url.as_str(),
            "https://host/dumps/"
        );
        // a bucket alone: a usage error
        let e = dataset_url("s3://b/").unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Usage);
    }

    #[test]
    fn one_listing_filtered_locally() {
        let store = Arc::new(Counting::default());
        for key in [
            "dumps/step=1.parquet",
            "dumps/step=2.parquet",
            "dumps/step=10.arrow",
            "dumps/notes.txt",
            "dumps/_SUCCESS",
            "dumps/.hidden.parquet",
            "dumps/_tmp/step=3.parquet",
            "dumps/sub/step=4.parquet",
            "dumps2/step=5.parquet",
            "other/step=6.parquet",
        ] {
            put(&store, key, b"x");
        }
        let before = store.counts();
        assert_eq!(
            rels(&store, "s3://b/dumps/"),
            [
                "step=1.parquet",
                "step=10.arrow",
                "step=2.parquet",
                "sub/step=4.parquet"
            ]
        );
        let after = store.counts();
        assert_eq!(after.lists - before.lists, 1);
        assert_eq!(
            (after.heads, after.gets),
            (before.heads, before.gets),
            "a listing makes no other request"
        );
        assert_eq!(
            rels(&store, "s3://b/dumps/*.parquet"),
            ["step=1.parquet", "step=2.parquet"]
        );
        assert_eq!(
            rels(&store, "s3://b/dumps/**/*.parquet"),
            ["step=1.parquet", "step=2.parquet", "sub/step=4.parquet"]
        );
        assert_eq!(
            rels(&store, "s3://b/dumps/step=[0-9].*"),
            ["step=1.parquet", "step=2.parquet"]
        );
        assert_eq!(
            rels(&store, "s3://b/*/step=?.parquet"),
            [
                "dumps/step=1.parquet",
                "dumps/step=2.parquet",
                "dumps2/step=5.parquet",
                "other/step=6.parquet"
            ]
        );
        assert!(rels(&store, "s3://b/nothing/").is_empty());
        assert_eq!(store.counts().lists - before.lists, 6);
    }
}
