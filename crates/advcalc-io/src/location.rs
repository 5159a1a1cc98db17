//! Whether an IN or OUT argument is a local path or an object URL (`s3://`, `gs://`, `az://`,
//! `abfs[s]://`, `https://`). With the `cloud` feature an object URL is read and written
//! through `io::object`; without it, it is a usage error naming the feature, never a local
//! path that fails later and more obscurely.

use std::path::Path;

use crate::error::{Error, Result};

/// The schemes that name object storage (`io::object::url` takes these).
const OBJECT_SCHEMES: &[&str] = &["s3", "s3a", "gs", "az", "abfs", "abfss", "https"];

/// The object storage scheme `s` starts with (`scheme://`), lowercased, if any.
pub fn object_scheme(s: &str) -> Option<&'static str> {
    let (scheme, _) = s.split_once("://")?;
    OBJECT_SCHEMES
        .iter()
        .find(|k| k.eq_ignore_ascii_case(scheme))
        .copied()
}

/// `path` as an object URL naming one object; `Ok(None)` for a local path. A URL of an
/// unsupported scheme, a bucket or a prefix is a usage error (`io::object::url`).
#[cfg(feature = "cloud")]
pub fn object_url(path: &Path) -> Result<Option<crate::object::url::ObjectUrl>> {
    let Some(s) = path.to_str() else {
        return Ok(None);
    };
    let Some(url) = crate::object::url::parse_object(s)? else {
        return Ok(None);
    };
    if crate::dataset::is_glob(url.key.as_ref()) {
        return Err(
            Error::usage(format!("{s}: a glob names a dataset, not one object"))
                .with_hint("give one object's URL"),
        );
    }
    Ok(Some(url))
}

/// Whether `a` and `b` name one file, or one object (an OUT that would overwrite IN).
pub fn same_location(a: &Path, b: &Path) -> bool {
    #[cfg(feature = "cloud")]
    {
        let url = |p: &Path| {
            p.to_str()
                .and_then(|s| crate::object::url::parse(s).ok().flatten())
        };
        match (url(a), url(b)) {
            (Some(x), Some(y)) => return x.same_object(&y),
            (None, None) => {}
            _ => return false,
        }
    }
    crate::atomic::same_file(a, b)
}

/// Whether `path` lies inside the dataset `input` names: under its directory, or under the
/// directory (prefix) before a glob's first wildcard. A file IN contains nothing.
pub fn within(path: &Path, input: &Path) -> bool {
    let text = input.to_string_lossy();
    let glob = crate::dataset::is_glob(&text) && !input.exists();
    #[cfg(feature = "cloud")]
    {
        let url = |s: &str| crate::object::url::parse(s).ok().flatten();
        match (path.to_str().and_then(url), url(&text)) {
            (Some(p), Some(i)) => {
                // a glob's fixed part, or the prefix (an object IN contains nothing, and no
                // key lies below an object's own key plus `/` in a dataset of one object)
                let prefix = if glob {
                    crate::dataset::split_glob(i.key.as_ref()).0
                } else {
                    std::path::PathBuf::from(i.key.as_ref())
                };
                let prefix = prefix.to_string_lossy().trim_end_matches('/').to_string();
                let key = p.key.as_ref();
                return p.same_bucket(&i)
                    && (prefix.is_empty()
                        || prefix == "."
                        || key.starts_with(&format!("{prefix}/")));
            }
            (None, None) => {}
            _ => return false,
        }
    }
    let dir = if glob {
        crate::dataset::split_glob(&text).0
    } else if input.is_dir() {
        input.to_path_buf()
    } else {
        return false;
    };
    match (crate::atomic::canonical(path), dir.canonicalize()) {
        (Some(p), Ok(d)) => p.starts_with(d),
        _ => false,
    }
}

/// Without the `cloud` feature: refuse an object URL given as IN or OUT (a usage error that
/// names the feature); a local path passes.
#[cfg(not(feature = "cloud"))]
pub fn refuse_object_url(path: &Path) -> Result<()> {
    let Some(s) = path.to_str() else {
        return Ok(());
    };
    match object_scheme(s) {
        None => Ok(()),
        Some(scheme) => Err(Error::usage(format!(
            "{s}: {scheme}:// URLs need advcalc built with the `cloud` feature"
        ))
        .with_hint("install it with `cargo install --path . --features cloud`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_schemes_are_recognised() {
        for s in [
            "s3://b/k.parquet",
            "S3A://b/k",
            "gs://b/k",
            "az://c/k",
            "abfs://c@a.dfs.core.windows.net/k",
            "abfss://c@a.dfs.core.windows.net/k",
            "https://host/k.parquet",
        ] {
            assert!(object_scheme(s).is_some(), "{s}");
        }
        for s in ["rollouts.parquet", "dir/a.parquet", "-", "s3:/b/k", "x/s3"] {
            assert_eq!(object_scheme(s), None, "{s}");
        }
    }

    #[cfg(not(feature = "cloud"))]
    #[test]
    fn without_the_feature_a_url_is_a_usage_error_naming_it() {
        let e = refuse_object_url(Path::new("s3://b/demo.parquet")).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Usage);
        let text = format!("{e:#}");
        assert!(text.contains("s3://b/demo.parquet"), "{text}");
        assert!(text.contains("`cloud` feature"), "{text}");
        assert!(refuse_object_url(Path::new("fixtures/demo.parquet")).is_ok());
    }

    #[cfg(feature = "cloud")]
    #[test]
    fn with_the_feature_a_url_names_an_object() {
        let u = object_url(Path::new("s3://b/dir/demo.parquet"))
            .unwrap()
            .unwrap();
        assert_eq!(u.key.as_ref(), "dir/demo.parquet");
        assert!(
            object_url(Path::new("fixtures/demo.parquet"))
                .unwrap()
                .is_none()
        );
        assert!(object_url(Path::new("s3://b/dir/")).is_err());
        assert!(object_url(Path::new("s3://b/dir/*.parquet")).is_err());
    }
}
