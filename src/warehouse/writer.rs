//! Encodes a record batch as one Parquet file in memory: ZSTD, page statistics (so readers can
//! prune row groups by `timestamp`), dictionary-encoded strings, rows in the order given.

use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::config::ParquetConfig;

/// Writer settings from the config.
pub fn properties(cfg: &ParquetConfig) -> Result<WriterProperties, ParquetError> {
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(cfg.zstd_level)?))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_dictionary_enabled(true)
        .set_max_row_group_row_count(Some(cfg.row_group_rows))
        .build())
}

/// Encodes `batch` as a complete Parquet file. CPU-bound: call it off the async loop.
pub fn encode(batch: &RecordBatch, cfg: &ParquetConfig) -> Result<Bytes, ParquetError> {
    let mut buf = Vec::with_capacity(batch.get_array_memory_size() / 4 + 1024);
    let mut writer = ArrowWriter::try_new(&mut buf, batch.schema(), Some(properties(cfg)?))?;
    writer.write(batch)?;
    writer.close()?;
    Ok(Bytes::from(buf))
}
