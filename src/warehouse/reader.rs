//! Reads a snapshot of a table's committed Parquet files, in row order, as Arrow batches aligned
//! to the table's current schema: only the needed columns (output plus filter columns), older
//! files cast to the widened types, columns a file lacks filled with nulls. Filters prune row
//! groups by statistics and then rows; the limit applies after filtering. The reader can start
//! at a position (file id, row within the file) and reports the position after the last row it
//! returned, which is what download cursors carry.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, new_null_array};
use arrow::compute::{cast, filter_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use futures::StreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use parquet::arrow::async_reader::ParquetRecordBatchStream;
use parquet::errors::ParquetError;

use super::object_reader::StoreFileReader;
use crate::catalog::DataFile;
use crate::download::filter::{Filter, Op, mask_all};

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
    /// Casting, filtering or projecting a batch.
    #[error("processing {path}: {source}")]
    Arrow {
        /// The file.
        path: String,
        /// The cause.
        source: ArrowError,
    },
}

/// Where a read is: a file (by catalog id) and a row index within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Position {
    /// Catalog id of the file.
    pub file: i64,
    /// Row within the file (before filtering).
    pub row: u64,
}

/// What to read.
pub struct ReadSpec {
    /// Output columns (every batch has exactly these).
    pub output: SchemaRef,
    /// Output plus filter-only columns, typed as the table.
    pub read: SchemaRef,
    /// Row filters, ANDed.
    pub filters: Vec<Filter>,
    /// Most rows to return.
    pub limit: Option<usize>,
    /// Rows per batch read.
    pub batch_rows: usize,
    /// Start here instead of at the first row.
    pub start: Option<Position>,
}

struct Open {
    file: DataFile,
    stream: ParquetRecordBatchStream<StoreFileReader>,
    /// Raw row ranges `(start, len)` the stream yields, in order.
    ranges: Vec<(u64, u64)>,
    /// Index into `ranges` and offset within it of the next yielded row.
    at: (usize, u64),
}

/// Pulls batches from a list of files one after the other.
pub struct TableReader {
    store: Arc<dyn ObjectStore>,
    files: std::vec::IntoIter<DataFile>,
    spec: ReadSpec,
    remaining: Option<usize>,
    /// Output column indices within `spec.read`.
    project: Vec<usize>,
    current: Option<Open>,
    last: Option<Position>,
}

impl TableReader {
    /// A reader of `files` (in row order).
    pub fn new(store: Arc<dyn ObjectStore>, files: Vec<DataFile>, spec: ReadSpec) -> Self {
        let project = spec
            .output
            .fields()
            .iter()
            .map(|f| {
                spec.read
                    .index_of(f.name())
                    .expect("output columns are read")
            })
            .collect();
        let files = match spec.start {
            Some(p) => files
                .into_iter()
                .skip_while(|f| f.id != p.file)
                .collect::<Vec<_>>(),
            None => files,
        };
        Self {
            store,
            files: files.into_iter(),
            remaining: spec.limit,
            spec,
            project,
            current: None,
            last: None,
        }
    }

    /// Position after the last row returned so far.
    pub fn position(&self) -> Option<Position> {
        self.last
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
                let start_row = match self.spec.start {
                    Some(p) if p.file == file.id => p.row,
                    _ => 0,
                };
                let path = file.path.clone();
                let opened = open(&self.store, file, &self.spec, start_row)
                    .await
                    .map_err(|source| ReadError::Parquet { path, source })?;
                self.current = opened;
                continue;
            }
            let cur = self.current.as_mut().expect("opened above");
            let Some(next) = cur.stream.next().await else {
                self.current = None;
                continue;
            };
            let path = cur.file.path.clone();
            let arrow_err = |source| ReadError::Arrow {
                path: path.clone(),
                source,
            };
            let raw = next.map_err(|source| ReadError::Parquet {
                path: path.clone(),
                source,
            })?;
            let rows = raw_rows(cur, raw.num_rows());
            let batch = align(&raw, &self.spec.read).map_err(arrow_err)?;
            let (batch, rows) = match mask_all(&self.spec.filters, &batch).map_err(arrow_err)? {
                None => (batch, rows),
                Some(mask) => {
                    let kept: Vec<u64> = rows
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !mask.is_null(*i) && mask.value(*i))
                        .map(|(_, r)| *r)
                        .collect();
                    (filter_record_batch(&batch, &mask).map_err(arrow_err)?, kept)
                }
            };
            if batch.num_rows() == 0 {
                continue;
            }
            let mut batch = batch.project(&self.project).map_err(arrow_err)?;
            if let Some(rem) = &mut self.remaining {
                if batch.num_rows() > *rem {
                    batch = batch.slice(0, *rem);
                }
                *rem -= batch.num_rows();
            }
            let last_row = rows[batch.num_rows() - 1];
            self.last = Some(Position {
                file: cur.file.id,
                row: last_row + 1,
            });
            return Ok(Some(batch));
        }
    }
}

/// The raw row numbers of the next `n` rows the stream yields.
fn raw_rows(cur: &mut Open, n: usize) -> Vec<u64> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n && cur.at.0 < cur.ranges.len() {
        let (start, len) = cur.ranges[cur.at.0];
        let take = (len - cur.at.1).min((n - out.len()) as u64);
        out.extend((0..take).map(|i| start + cur.at.1 + i));
        cur.at.1 += take;
        if cur.at.1 == len {
            cur.at = (cur.at.0 + 1, 0);
        }
    }
    out
}

/// Opens one file: projection, row groups that may match, rows from `start_row`. `None` when
/// nothing in the file can match.
async fn open(
    store: &Arc<dyn ObjectStore>,
    file: DataFile,
    spec: &ReadSpec,
    start_row: u64,
) -> Result<Option<Open>, ParquetError> {
    let reader = StoreFileReader::new(store.clone(), Path::from(file.path.as_str()), file.bytes);
    let builder = parquet::arrow::ParquetRecordBatchStreamBuilder::new(reader).await?;
    let file_schema = builder.schema().clone();
    // A filter (other than is_null) on a column this file lacks matches nothing in it.
    if spec
        .filters
        .iter()
        .any(|f| f.op != Op::IsNull && file_schema.index_of(&f.column).is_err())
    {
        return Ok(None);
    }
    let meta = builder.metadata().clone();
    let groups = meta.row_groups();
    let counts: Vec<u64> = groups.iter().map(|g| g.num_rows() as u64).collect();
    let mut keep = vec![true; groups.len()];
    for f in &spec.filters {
        let Ok(conv) =
            StatisticsConverter::try_new(&f.column, &file_schema, builder.parquet_schema())
        else {
            continue;
        };
        let (Ok(mins), Ok(maxes), Ok(nulls)) = (
            conv.row_group_mins(groups.iter()),
            conv.row_group_maxes(groups.iter()),
            conv.row_group_null_counts(groups.iter()),
        ) else {
            continue;
        };
        for (k, m) in keep
            .iter_mut()
            .zip(f.may_match(&mins, &maxes, &nulls, &counts))
        {
            *k &= m;
        }
    }
    // Selected row groups, the raw ranges they contribute, and the selection within them.
    let (mut selected, mut ranges, mut selectors) = (Vec::new(), Vec::new(), Vec::new());
    let mut first = 0u64;
    for (i, n) in counts.iter().enumerate() {
        let (lo, hi) = (first.max(start_row), first + n);
        if keep[i] && lo < hi {
            selected.push(i);
            if lo > first {
                selectors.push(RowSelector::skip((lo - first) as usize));
            }
            selectors.push(RowSelector::select((hi - lo) as usize));
            ranges.push((lo, hi - lo));
        }
        first += n;
    }
    if selected.is_empty() {
        return Ok(None);
    }
    let roots: Vec<usize> = spec
        .read
        .fields()
        .iter()
        .filter_map(|f| file_schema.index_of(f.name()).ok())
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let mut builder = builder
        .with_projection(mask)
        .with_batch_size(spec.batch_rows)
        .with_row_groups(selected)
        .with_row_selection(RowSelection::from(selectors));
    if spec.filters.is_empty()
        && let Some(limit) = spec.limit
    {
        builder = builder.with_limit(limit);
    }
    Ok(Some(Open {
        file,
        stream: builder.build()?,
        ranges,
        at: (0, 0),
    }))
}

/// Reorders, casts and null-fills `batch`'s columns to match `schema`.
pub(crate) fn align(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let rows = batch.num_rows();
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(col) if col.data_type() == f.data_type() => Ok(col.clone()),
            // Widened to string: each value's text exactly as a buffer would have written it.
            Some(col) if f.data_type() == &arrow::datatypes::DataType::Utf8 => {
                super::text::to_text(col)
            }
            Some(col) => cast(col, f.data_type()),
            None => Ok(new_null_array(f.data_type(), rows)),
        })
        .collect::<Result<_, _>>()?;
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}
