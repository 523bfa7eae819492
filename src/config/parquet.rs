//! `[parquet]`: how data files are encoded, ZSTD level and row-group size.

use serde::Deserialize;

/// `[parquet]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ParquetConfig {
    /// ZSTD level (1–22).
    pub zstd_level: i32,
    /// Most rows per row group.
    pub row_group_rows: usize,
}

impl Default for ParquetConfig {
    fn default() -> Self {
        Self {
            zstd_level: 3,
            row_group_rows: 100_000,
        }
    }
}
