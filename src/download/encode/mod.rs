//! Response encoders, one per format, behind one trait: a header, each batch, a footer, all
//! appended to a caller's buffer so the stream can send (and compress) chunk by chunk. The text
//! formats also offer a [`BatchEncoder`]: batches encoded independently, on several threads at
//! once, whose outputs the [`Encoder`] then accepts in order.

mod append;
mod arrow;
mod clean;
mod column;
mod csv;
mod expand;
mod float;
pub mod json;
mod sink;
mod timestamp;

use std::sync::Arc;

use ::arrow::record_batch::RecordBatch;

use super::format::Format;
use crate::model::schema::TableSchema;

pub use arrow::{PARQUET_ROW_GROUP_ROWS, parquet_properties};
pub use json::JsonEncoder;
pub use timestamp::write_rfc3339;

/// An encoding failure (Arrow IPC or Parquet writer errors).
#[derive(Debug, thiserror::Error)]
#[error("encoding the response failed: {0}")]
pub struct EncodeError(pub String);

/// Writes one response in one format.
pub trait Encoder: Send {
    /// Bytes before the first row.
    fn header(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError>;
    /// One batch of rows.
    fn batch(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), EncodeError>;
    /// Bytes after the last row.
    fn footer(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError>;
    /// The cursor of the next page, set before the footer (formats with a place for it).
    fn set_next_cursor(&mut self, _cursor: Option<String>) {}
    /// For formats whose batches do not depend on each other (the text formats): an encoder of
    /// single batches that can run on several threads at once. Its outputs must then be passed,
    /// in response order, through [`Encoder::accept`] instead of calling [`Encoder::batch`].
    fn parallel(&self) -> Option<Arc<dyn BatchEncoder>> {
        None
    }
    /// Takes the [`BatchEncoder`] output of a batch of `rows` rows, in response order: fixes
    /// what depends on the position (the first row's separator) and counts the rows.
    fn accept(&mut self, _rows: usize, _out: &mut Vec<u8>) {}
}

/// Encodes one batch as it appears anywhere but at the start of the response; stateless, so
/// several batches can be encoded at once.
pub trait BatchEncoder: Send + Sync {
    /// Appends `batch` to `out`.
    fn encode(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), EncodeError>;
}

/// Options that change how values are written.
#[derive(Debug, Clone, Copy, Default)]
pub struct EncodeOptions {
    /// JSON/NDJSON: int64 values as strings (JavaScript clients).
    pub int64_as_string: bool,
}

/// The encoder for `format` over `schema`.
pub fn encoder(
    format: Format,
    schema: &TableSchema,
    opts: EncodeOptions,
) -> Result<Box<dyn Encoder>, EncodeError> {
    Ok(match format {
        Format::Json => Box::new(JsonEncoder::json(schema, opts.int64_as_string)),
        Format::Ndjson => Box::new(JsonEncoder::ndjson(schema, opts.int64_as_string)),
        Format::Csv => Box::new(csv::CsvEncoder::new(schema)),
        Format::Arrow => Box::new(arrow::IpcEncoder::new(schema)),
        Format::Parquet => Box::new(arrow::ParquetEncoder::new(schema)?),
    })
}
