//! `[download]`: rows per batch read and encoded as one response chunk.

use serde::Deserialize;

/// `[download]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DownloadConfig {
    /// Rows per Arrow batch read from Parquet and encoded as one response chunk.
    pub batch_rows: usize,
}

impl Default for DownloadConfig {
    fn default() -> Self {
        Self { batch_rows: 8192 }
    }
}
