//! Binary formats: the Arrow IPC stream format (schema message, one record batch message per
//! batch, end-of-stream marker) and Parquet (ZSTD, row groups of up to 64k rows; each finished
//! row group is sent as soon as it is written, so memory stays bounded).

use arrow::datatypes::SchemaRef;
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::{EncodeError, Encoder};
use crate::model::schema::TableSchema;

fn err(e: impl std::fmt::Display) -> EncodeError {
    EncodeError(e.to_string())
}

/// Arrow IPC stream encoder.
pub struct IpcEncoder {
    schema: SchemaRef,
    writer: Option<StreamWriter<Vec<u8>>>,
}

impl IpcEncoder {
    /// An encoder for `schema`'s columns.
    pub fn new(schema: &TableSchema) -> Self {
        Self {
            schema: schema.to_arrow(),
            writer: None,
        }
    }

    fn drain(&mut self, out: &mut Vec<u8>) {
        if let Some(w) = &mut self.writer {
            out.append(w.get_mut());
        }
    }
}

impl Encoder for IpcEncoder {
    fn header(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.writer = Some(StreamWriter::try_new(Vec::new(), &self.schema).map_err(err)?);
        self.drain(out);
        Ok(())
    }

    fn batch(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.writer
            .as_mut()
            .ok_or_else(|| err("header not written"))?
            .write(batch)
            .map_err(err)?;
        self.drain(out);
        Ok(())
    }

    fn footer(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.writer
            .as_mut()
            .ok_or_else(|| err("header not written"))?
            .finish()
            .map_err(err)?;
        self.drain(out);
        Ok(())
    }
}

/// Rows per row group of a streamed Parquet download.
pub const PARQUET_ROW_GROUP_ROWS: usize = 65_536;

/// Writer settings of a Parquet download (ZSTD 1, chunk statistics, row groups of up to
/// [`PARQUET_ROW_GROUP_ROWS`] rows); the passthrough writer encodes the rows it cannot copy with
/// them too.
pub fn parquet_properties() -> Result<WriterProperties, EncodeError> {
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).map_err(err)?))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_max_row_group_row_count(Some(PARQUET_ROW_GROUP_ROWS))
        .build())
}

/// Parquet encoder.
pub struct ParquetEncoder {
    writer: Option<ArrowWriter<Vec<u8>>>,
}

impl ParquetEncoder {
    /// An encoder for `schema`'s columns.
    pub fn new(schema: &TableSchema) -> Result<Self, EncodeError> {
        let writer =
            ArrowWriter::try_new(Vec::new(), schema.to_arrow(), Some(parquet_properties()?))
                .map_err(err)?;
        Ok(Self {
            writer: Some(writer),
        })
    }
}

impl Encoder for ParquetEncoder {
    fn header(&mut self, _out: &mut Vec<u8>) -> Result<(), EncodeError> {
        Ok(())
    }

    fn batch(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let w = self
            .writer
            .as_mut()
            .ok_or_else(|| err("already finished"))?;
        w.write(batch).map_err(err)?;
        out.append(w.inner_mut());
        Ok(())
    }

    fn footer(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let w = self.writer.take().ok_or_else(|| err("already finished"))?;
        let rest = w.into_inner().map_err(err)?;
        out.extend_from_slice(&rest);
        Ok(())
    }
}
