//! The S3 warehouse: `storage.url = "s3://bucket/prefix"` opens an S3 (or S3-compatible) bucket
//! through `object_store`'s S3 backend, with `storage.s3_endpoint`, `storage.s3_region` and
//! `storage.s3_allow_http`, and credentials from the standard `AWS_*` environment
//! (`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`, optionally `AWS_SESSION_TOKEN`; without
//! them, the instance or container role). The URL's path is a prefix inside the bucket.
//! Conditional create is always on (`If-None-Match: *`, answered 412 by S3 and compatible
//! servers: see [`super::create()`]); large creates use multipart upload ([`super::multipart`]).

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{BackoffConfig, ObjectStore, RetryConfig};

use super::multipart::LargePuts;
use crate::config::{ConfigError, StorageConfig};

/// Bucket and prefix of an `s3://bucket/prefix` URL.
#[derive(Debug, PartialEq, Eq)]
pub struct S3Url {
    /// The bucket.
    pub bucket: String,
    /// Path inside the bucket (empty for the bucket's root).
    pub prefix: String,
}

/// Parses `s3://bucket[/prefix]`; the error says what is wrong.
pub fn parse_url(url: &str) -> Result<S3Url, String> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| format!("{url:?} is not an s3:// URL"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(format!(
            "{url:?} names no bucket; use \"s3://bucket/prefix\""
        ));
    }
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if !(3..=63).contains(&bucket.len()) || !bucket.chars().all(valid) {
        return Err(format!(
            "{bucket:?} is not a valid bucket name (3 to 63 of a-z, 0-9, '-' and '.')"
        ));
    }
    if prefix.contains(['?', '#']) {
        return Err(format!(
            "{url:?}: query strings and fragments are not supported"
        ));
    }
    let prefix = prefix.trim_matches('/');
    Path::parse(prefix).map_err(|e| format!("{url:?}: bad prefix: {e}"))?;
    Ok(S3Url {
        bucket: bucket.to_string(),
        prefix: prefix.to_string(),
    })
}

/// Opens the bucket of `storage.url`, taking credentials from the `AWS_*` variables in `env`
/// (the process environment in the service; tests pass their own).
pub fn open(
    storage: &StorageConfig,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Arc<dyn ObjectStore>, ConfigError> {
    let bad = |key: &str, message: String| ConfigError::Value {
        key: key.into(),
        message,
    };
    let url = parse_url(storage.url.trim()).map_err(|m| bad("storage.url", m))?;
    let mut builder = AmazonS3Builder::new();
    for (name, value) in env {
        if name.starts_with("AWS_")
            && let Ok(key) = name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>()
        {
            builder = builder.with_config(key, value);
        }
    }
    builder = builder
        .with_bucket_name(&url.bucket)
        .with_allow_http(storage.s3_allow_http)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        // Transient errors are retried for a short while only: a flush retries by itself
        // (forever, with backoff), and a download should fail rather than hang in an outage.
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: 5,
            retry_timeout: Duration::from_secs(30),
        });
    let endpoint = storage.s3_endpoint.trim();
    if !endpoint.is_empty() {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(bad(
                "storage.s3_endpoint",
                format!("{endpoint:?} must start with http:// or https://"),
            ));
        }
        if endpoint.starts_with("http://") && !storage.s3_allow_http {
            return Err(bad(
                "storage.s3_endpoint",
                format!("{endpoint:?} is plain HTTP; set storage.s3_allow_http = true to allow it"),
            ));
        }
        builder = builder.with_endpoint(endpoint);
    }
    if !storage.s3_region.trim().is_empty() {
        builder = builder.with_region(storage.s3_region.trim());
    }
    let s3 = builder
        .build()
        .map_err(|e| bad("storage.url", format!("cannot open {:?}: {e}", storage.url)))?;
    let s3: Arc<dyn ObjectStore> = if url.prefix.is_empty() {
        Arc::new(s3)
    } else {
        Arc::new(PrefixStore::new(s3, url.prefix.as_str()))
    };
    Ok(Arc::new(LargePuts::new(
        s3,
        storage.s3_multipart_threshold.0 as usize,
        storage.s3_multipart_part_size.0 as usize,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_bucket_and_an_optional_prefix() {
        let ok = |bucket: &str, prefix: &str| {
            Ok(S3Url {
                bucket: bucket.into(),
                prefix: prefix.into(),
            })
        };
        assert_eq!(parse_url("s3://data"), ok("data", ""));
        assert_eq!(parse_url("s3://data/"), ok("data", ""));
        assert_eq!(parse_url("s3://my.data-1/a/b/"), ok("my.data-1", "a/b"));
        for url in ["s3://", "s3:///prefix"] {
            assert!(
                parse_url(url).unwrap_err().contains("names no bucket"),
                "{url}"
            );
        }
        for url in ["s3://Data", "s3://ab", "s3://a_b/c", "s3://user:pw@host/x"] {
            assert!(
                parse_url(url)
                    .unwrap_err()
                    .contains("not a valid bucket name"),
                "{url}"
            );
        }
        assert!(parse_url("s3://data/a?x=1").is_err());
        assert!(parse_url("s3://data/a/../b").is_err());
    }

    #[test]
    fn a_bad_s3_url_stops_start_up_naming_the_key() {
        let mut config = crate::config::Config::default();
        config.storage.url = "s3://".into();
        let err = crate::store::open(&config).err().unwrap().to_string();
        assert!(
            err.contains("storage.url") && err.contains("names no bucket"),
            "{err}"
        );
    }

    #[test]
    fn a_plain_http_endpoint_needs_allow_http() {
        let storage = StorageConfig {
            url: "s3://data/p".into(),
            s3_endpoint: "http://127.0.0.1:9".into(),
            ..Default::default()
        };
        let err = open(&storage, []).err().unwrap().to_string();
        assert!(
            err.contains("storage.s3_endpoint") && err.contains("s3_allow_http"),
            "{err}"
        );
        let storage = StorageConfig {
            s3_allow_http: true,
            ..storage
        };
        assert!(open(&storage, []).is_ok());
        let storage = StorageConfig {
            s3_endpoint: "127.0.0.1:9".into(),
            ..storage
        };
        assert!(open(&storage, []).is_err());
    }
}
