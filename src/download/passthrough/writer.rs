//! The passthrough response file: a Parquet writer set up exactly as the Parquet encoder sets up
//! its own (same Arrow schema and `ARROW:schema` metadata, same Parquet schema, same
//! properties), whose row groups are either copied column chunk by column chunk from a stored
//! file of the same Parquet schema or encoded from rows. Everything it writes lands in a shared
//! buffer that the caller drains into the response as it goes; the footer comes last.

use std::io::Write;
use std::sync::{Arc, Mutex};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{ArrowColumnWriter, ArrowRowGroupWriterFactory, compute_leaves};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};

use crate::download::encode::{PARQUET_ROW_GROUP_ROWS, parquet_properties};
use crate::warehouse::chunks::Fetched;

/// What the sink first reserves after each drain: a range read of column chunks plus slack.
const SINK_BYTES: usize = super::FETCH_BYTES as usize + (64 << 10);

/// The output buffer: the writer appends, the response drains.
#[derive(Clone, Default)]
pub struct Sink(Arc<Mutex<Vec<u8>>>);

impl Sink {
    /// Everything written since the last call.
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().expect("sink lock"))
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut out = self.0.lock().expect("sink lock");
        if out.capacity() == 0 {
            // Room for what one range read adds, so filling it does not reallocate and copy.
            out.reserve(SINK_BYTES.max(buf.len()));
        }
        out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A row group being encoded from rows.
struct Pending {
    columns: Vec<ArrowColumnWriter>,
    rows: usize,
}

/// Row groups written, by how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Row groups copied from stored files.
    pub copied: u64,
    /// Row groups encoded from decoded rows.
    pub encoded: u64,
    /// Rows in all of them.
    pub rows: u64,
}

/// The response file being written.
pub struct CopyWriter {
    file: SerializedFileWriter<Sink>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    sink: Sink,
    pending: Option<Pending>,
    counts: Counts,
}

impl CopyWriter {
    /// A file of `schema`'s columns; its first bytes (the magic) are already in [`Self::sink`].
    pub fn new(schema: SchemaRef) -> Result<Self> {
        let props = parquet_properties().map_err(|e| ParquetError::General(e.0))?;
        let sink = Sink::default();
        let (file, factory) = ArrowWriter::try_new(sink.clone(), schema.clone(), Some(props))?
            .into_serialized_writer()?;
        Ok(Self {
            file,
            factory,
            schema,
            sink,
            pending: None,
            counts: Counts::default(),
        })
    }

    /// The buffer the writer writes to.
    pub fn sink(&self) -> Sink {
        self.sink.clone()
    }

    /// Whether the row groups of a file with footer `meta` can be copied as they are: its
    /// Parquet schema has exactly this file's columns (names, physical and logical types,
    /// nullability) in this order.
    pub fn can_copy(&self, meta: &ParquetMetaData) -> bool {
        let (theirs, ours) = (
            meta.file_metadata().schema_descr(),
            self.file.schema_descr(),
        );
        theirs.num_columns() == ours.num_columns()
            && theirs
                .columns()
                .iter()
                .zip(ours.columns())
                .all(|(a, b)| a == b)
    }

    /// Starts copying row group `index` of a file with footer `meta` (checked with
    /// [`Self::can_copy`]); rows encoded so far are written out first as their own row group.
    pub fn copy_row_group<'a>(
        &'a mut self,
        meta: &'a ParquetMetaData,
        index: usize,
    ) -> Result<RowGroupCopy<'a>> {
        self.flush_encoded()?;
        let rg = meta.row_group(index);
        self.counts.copied += 1;
        self.counts.rows += rg.num_rows() as u64;
        Ok(RowGroupCopy {
            out: self.file.next_row_group()?,
            meta,
            index,
            next: 0,
        })
    }

    /// Encodes `batch` (of this file's schema) into row groups of up to
    /// [`PARQUET_ROW_GROUP_ROWS`] rows; a row group fills across batches (and files) until it
    /// is full or a copied row group comes next.
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let pending = match &mut self.pending {
                Some(p) => p,
                None => self.pending.insert(Pending {
                    columns: self
                        .factory
                        .create_column_writers(self.file.flushed_row_groups().len())?,
                    rows: 0,
                }),
            };
            let take = (batch.num_rows() - offset).min(PARQUET_ROW_GROUP_ROWS - pending.rows);
            let part = batch.slice(offset, take);
            let mut writers = pending.columns.iter_mut();
            for (field, column) in self.schema.fields().iter().zip(part.columns()) {
                for leaf in compute_leaves(field, column)? {
                    writers
                        .next()
                        .ok_or_else(|| ParquetError::General("more leaves than writers".into()))?
                        .write(&leaf)?;
                }
            }
            pending.rows += take;
            offset += take;
            if pending.rows == PARQUET_ROW_GROUP_ROWS {
                self.flush_encoded()?;
            }
        }
        Ok(())
    }

    /// Writes the rows encoded so far as a row group.
    fn flush_encoded(&mut self) -> Result<()> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let mut out = self.file.next_row_group()?;
        for column in pending.columns {
            column.close()?.append_to_row_group(&mut out)?;
        }
        out.close()?;
        self.counts.encoded += 1;
        self.counts.rows += pending.rows as u64;
        Ok(())
    }

    /// Writes out what is pending and the footer; the last bytes are in the sink.
    pub fn finish(mut self) -> Result<Counts> {
        self.flush_encoded()?;
        self.file.finish()?;
        Ok(self.counts)
    }
}

/// A row group being copied, column chunk by column chunk, in order.
pub struct RowGroupCopy<'a> {
    out: SerializedRowGroupWriter<'a, Sink>,
    meta: &'a ParquetMetaData,
    index: usize,
    next: usize,
}

impl RowGroupCopy<'_> {
    /// Copies the next column chunk, whose bytes `from` holds, with its statistics and page
    /// index.
    pub fn append(&mut self, from: &Fetched) -> Result<()> {
        let rg = self.meta.row_group(self.index);
        let (g, c) = (self.index, self.next);
        let column = rg.column(c);
        let close = ColumnCloseResult {
            bytes_written: column.compressed_size() as u64,
            rows_written: rg.num_rows() as u64,
            metadata: column.clone(),
            bloom_filter: None,
            column_index: self
                .meta
                .column_index()
                .and_then(|i| i.get(g)?.get(c))
                .cloned(),
            offset_index: self
                .meta
                .offset_index()
                .and_then(|i| i.get(g)?.get(c))
                .cloned(),
        };
        self.out.append_column(from, close)?;
        self.next += 1;
        Ok(())
    }

    /// Ends the row group (every column must have been appended).
    pub fn close(self) -> Result<()> {
        self.out.close().map(|_| ())
    }
}
