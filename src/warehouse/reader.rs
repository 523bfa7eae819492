//! Reads a snapshot of a table's committed Parquet files, in commit order, as Arrow batches
//! aligned to the table's current schema: projected columns only, older files cast to the
//! widened types, columns a file lacks filled with nulls, stopping at the row limit.

use std::sync::Arc;

use arrow::array::{ArrayRef, new_null_array};
use arrow::compute::cast;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use futures::StreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use parquet::arrow::ProjectionMask;
use parquet::arrow::async_reader::ParquetRecordBatchStream;
use parquet::errors::ParquetError;

use super::object_reader::StoreFileReader;
use crate::catalog::DataFile;

/// Why a read failed part-way.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Parquet decoding or object store access.
    #[error("reading {path}: {source}")]
    Parquet {
        /// The file.
        path: String,
        /// The cause.
        source: ParquetError,
    },
    /// Casting an older file's column to the current type.
    #[error("casting {path}: {source}")]
    Cast {
        /// The file.
        path: String,
        /// The cause.
        source: ArrowError,
    },
}

/// Pulls batches from a list of files one after the other.
pub struct TableReader {
    store: Arc<dyn ObjectStore>,
    files: std::vec::IntoIter<DataFile>,
    output: SchemaRef,
    remaining: Option<usize>,
    batch_rows: usize,
    current: Option<(String, ParquetRecordBatchStream<StoreFileReader>)>,
}

impl TableReader {
    /// A reader of `files` (in commit order) producing batches of schema `output`.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        files: Vec<DataFile>,
        output: SchemaRef,
        limit: Option<usize>,
        batch_rows: usize,
    ) -> Self {
        Self {
            store,
            files: files.into_iter(),
            output,
            remaining: limit,
            batch_rows,
            current: None,
        }
    }

    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.output.clone()
    }

    /// The next non-empty batch, or `None` at the end of the table or the limit.
    pub async fn next_batch(&mut self) -> Result<Option<RecordBatch>, ReadError> {
        loop {
            if self.remaining == Some(0) {
                return Ok(None);
            }
            if self.current.is_none() {
                let Some(file) = self.files.next() else {
                    return Ok(None);
                };
                let stream = open(
                    self.store.clone(),
                    &file,
                    self.output.clone(),
                    self.remaining,
                    self.batch_rows,
                )
                .await
                .map_err(|source| ReadError::Parquet {
                    path: file.path.clone(),
                    source,
                })?;
                self.current = Some((file.path, stream));
            }
            let (path, stream) = self.current.as_mut().expect("opened above");
            match stream.next().await {
                None => self.current = None,
                Some(Err(source)) => {
                    return Err(ReadError::Parquet {
                        path: path.clone(),
                        source,
                    });
                }
                Some(Ok(batch)) if batch.num_rows() == 0 => {}
                Some(Ok(batch)) => {
                    let mut batch =
                        align(&batch, &self.output).map_err(|source| ReadError::Cast {
                            path: path.clone(),
                            source,
                        })?;
                    if let Some(rem) = &mut self.remaining {
                        if batch.num_rows() > *rem {
                            batch = batch.slice(0, *rem);
                        }
                        *rem -= batch.num_rows();
                    }
                    return Ok(Some(batch));
                }
            }
        }
    }
}

/// Opens one file with the projection of `output`'s columns that it has.
async fn open(
    store: Arc<dyn ObjectStore>,
    file: &DataFile,
    output: SchemaRef,
    remaining: Option<usize>,
    batch_rows: usize,
) -> Result<ParquetRecordBatchStream<StoreFileReader>, ParquetError> {
    let reader = StoreFileReader::new(store, Path::from(file.path.as_str()), file.bytes);
    let builder = parquet::arrow::ParquetRecordBatchStreamBuilder::new(reader).await?;
    let file_schema = builder.schema().clone();
    let roots: Vec<usize> = output
        .fields()
        .iter()
        .filter_map(|f| file_schema.index_of(f.name()).ok())
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let mut builder = builder.with_projection(mask).with_batch_size(batch_rows);
    if let Some(rem) = remaining {
        builder = builder.with_limit(rem);
    }
    builder.build()
}

/// Reorders, casts and null-fills `batch`'s columns to match `output`.
fn align(batch: &RecordBatch, output: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let rows = batch.num_rows();
    let columns: Vec<ArrayRef> = output
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(col) if col.data_type() == f.data_type() => Ok(col.clone()),
            Some(col) => cast(col, f.data_type()),
            None => Ok(new_null_array(f.data_type(), rows)),
        })
        .collect::<Result<_, _>>()?;
    RecordBatch::try_new_with_options(
        output.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}
