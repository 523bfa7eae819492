//! What the import's decoders share: the error that refuses an import ([`ImportError`]), the
//! chunk size, and the channel chunks go out on ([`Sink`], [`emit`]: encoded to Parquet on the
//! decoding thread, put by the importer).

use arrow::record_batch::RecordBatch;

use crate::config::ParquetConfig;
use crate::warehouse::writer;

/// Why an import was refused; nothing was committed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The input is malformed or has a value that cannot be stored.
    #[error("{0}")]
    Input(String),
    /// Storage or catalog failure.
    #[error("import failed: {0}")]
    Internal(String),
}

/// Rows per written file.
pub const CHUNK_ROWS: usize = 100_000;

/// Where decoded chunks go, each with its Parquet encoding.
pub type Sink = tokio::sync::mpsc::Sender<(RecordBatch, bytes::Bytes)>;

/// Encodes `batch` and sends it to the importer.
pub fn emit(batch: RecordBatch, cfg: &ParquetConfig, tx: &Sink) -> Result<(), ImportError> {
    let data = writer::encode(&batch, cfg).map_err(|e| ImportError::Internal(e.to_string()))?;
    tx.blocking_send((batch, data))
        .map_err(|_| ImportError::Internal("upload stopped".into()))
}
