//! `[storage]`: where state lives — the data dir and the warehouse's object store (local, S3 or
//! memory), with S3's endpoint, region and multipart sizes.

use std::path::PathBuf;

use serde::Deserialize;

use super::units::ByteSize;

/// `[storage]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// Directory for runtime state: the SQLite catalog, `demo.json`, the local warehouse.
    pub data_dir: PathBuf,
    /// Object store for the warehouse: empty for `<data_dir>/warehouse` on the local filesystem,
    /// `file:///abs/path`, `s3://bucket/prefix` (S3 or an S3-compatible server; credentials from
    /// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`), or `memory://` (tests; lost on exit).
    pub url: String,
    /// Path prefix inside the object store under which `teams/…` is laid out.
    pub prefix: String,
    /// S3 endpoint URL for S3-compatible servers (`http://127.0.0.1:9000`); empty for AWS.
    pub s3_endpoint: String,
    /// S3 region; empty for `AWS_REGION` / `AWS_DEFAULT_REGION`, else `us-east-1`.
    pub s3_region: String,
    /// Allow a plain `http://` endpoint (S3-compatible servers on a trusted network).
    pub s3_allow_http: bool,
    /// Objects at least this large are uploaded to S3 in parts (multipart upload).
    pub s3_multipart_threshold: ByteSize,
    /// Size of each part of a multipart upload but the last (S3 requires at least 5 MiB).
    pub s3_multipart_part_size: ByteSize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("var"),
            url: String::new(),
            prefix: String::new(),
            s3_endpoint: String::new(),
            s3_region: String::new(),
            s3_allow_http: false,
            s3_multipart_threshold: ByteSize(16 << 20),
            s3_multipart_part_size: ByteSize(8 << 20),
        }
    }
}
