//! Reads a snapshot of a table's committed Parquet files, in row order, as Arrow batches aligned
//! to the table's current schema: only the needed columns (output plus filter columns), older
//! files cast to the widened types, columns a file lacks filled with nulls. Filters prune row
//! groups by statistics and then rows; the limit applies after filtering. The reader can start
//! at a position (file id, row within the file) and reports the position after the last row it
//! returned, which is what download cursors carry. A fresh read's rows not yet committed
//! ([`TableReader::with_buffered`]) follow the files, aligned, filtered and limited the same way.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, new_null_array};
use arrow::compute::{cast, filter_record_batch};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use object_store::ObjectStore;
use object_store::path::Path;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, RowSelection, RowSelector,
};
use parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;

use super::object_reader::StoreFileReader;
use super::split::{self, FileStream};
use crate::catalog::DataFile;
use crate::model::filter::{Filter, Op, mask_all};

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
    /// Decode string columns as Utf8View (values point into the decoded pages instead of
    /// being copied into one buffer), for readers that take either (the text encoders).
    pub string_views: bool,
}

struct Open {
    file: DataFile,
    stream: FileStream,
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
    /// In-memory rows read after the files (a fresh read's).
    buffered: std::vec::IntoIter<RecordBatch>,
}

impl TableReader {
    /// A reader of `files` (in row order).
    pub fn new(store: Arc<dyn ObjectStore>, files: Vec<DataFile>, spec: ReadSpec) -> Self {
        let project = projection(&spec);
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
            buffered: Vec::new().into_iter(),
        }
    }

    /// Reads `batches` (any subset of the table's columns, narrower types) after the files,
    /// in slices of `batch_rows` (zero-copy), so a large lent buffer moves through the
    /// download in the same steps as a file does.
    pub fn with_buffered(mut self, batches: Vec<RecordBatch>) -> Self {
        let step = self.spec.batch_rows.max(1);
        let sliced: Vec<RecordBatch> = batches
            .iter()
            .flat_map(|b| {
                (0..b.num_rows())
                    .step_by(step)
                    .map(move |at| b.slice(at, step.min(b.num_rows() - at)))
            })
            .collect();
        self.buffered = sliced.into_iter();
        self
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
                    return self.next_buffered();
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
            let Some((mut batch, rows)) =
                shape(&raw, &self.spec, &self.project, rows).map_err(arrow_err)?
            else {
                continue;
            };
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

impl TableReader {
    /// The next non-empty batch of the in-memory rows (after every file), or `None`.
    fn next_buffered(&mut self) -> Result<Option<RecordBatch>, ReadError> {
        for raw in self.buffered.by_ref() {
            let rows = vec![0; raw.num_rows()];
            let shaped = shape(&raw, &self.spec, &self.project, rows).map_err(|source| {
                ReadError::Arrow {
                    path: "(buffered rows)".into(),
                    source,
                }
            })?;
            let Some((mut batch, _)) = shaped else {
                continue;
            };
            if let Some(rem) = &mut self.remaining {
                if batch.num_rows() > *rem {
                    batch = batch.slice(0, *rem);
                }
                *rem -= batch.num_rows();
            }
            // No position: cursors page over committed files only.
            self.last = None;
            return Ok(Some(batch));
        }
        Ok(None)
    }
}

/// Aligns a decoded batch to the read schema, keeps the rows the filters match (and their raw
/// row numbers) and projects the output columns; `None` if no row is left.
fn shape(
    raw: &RecordBatch,
    spec: &ReadSpec,
    project: &[usize],
    rows: Vec<u64>,
) -> Result<Option<(RecordBatch, Vec<u64>)>, ArrowError> {
    let batch = align(raw, &spec.read)?;
    let (batch, rows) = match mask_all(&spec.filters, &batch)? {
        None => (batch, rows),
        Some(mask) => {
            let kept: Vec<u64> = rows
                .iter()
                .enumerate()
                .filter(|(i, _)| !mask.is_null(*i) && mask.value(*i))
                .map(|(_, r)| *r)
                .collect();
            (filter_record_batch(&batch, &mask)?, kept)
        }
    };
    if batch.num_rows() == 0 {
        return Ok(None);
    }
    Ok(Some((batch.project(project)?, rows)))
}

/// Output column indices within `spec.read`.
fn projection(spec: &ReadSpec) -> Vec<usize> {
    spec.output
        .fields()
        .iter()
        .map(|f| {
            spec.read
                .index_of(f.name())
                .expect("output columns are read")
        })
        .collect()
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
    let mut reader =
        StoreFileReader::new(store.clone(), Path::from(file.path.as_str()), file.bytes);
    let mut arrow_meta =
        ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new()).await?;
    if spec.string_views {
        arrow_meta = with_string_views(arrow_meta)?;
    }
    let meta = arrow_meta.metadata().clone();
    let Some(keep) = keep_groups(&meta, arrow_meta.schema(), &spec.filters) else {
        return Ok(None);
    };
    let groups = meta.row_groups();
    let counts: Vec<u64> = groups.iter().map(|g| g.num_rows() as u64).collect();
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
    let roots = read_roots(spec, arrow_meta.schema());
    let limit = spec.limit.filter(|_| spec.filters.is_empty());
    let selection = RowSelection::from(selectors);
    let descr = arrow_meta.parquet_schema().clone();
    let build = |roots: Vec<usize>| {
        let mut builder =
            ParquetRecordBatchStreamBuilder::new_with_metadata(reader.clone(), arrow_meta.clone())
                .with_projection(ProjectionMask::roots(&descr, roots))
                .with_batch_size(spec.batch_rows)
                .with_row_groups(selected.clone())
                .with_row_selection(selection.clone());
        if let Some(limit) = limit {
            builder = builder.with_limit(limit);
        }
        builder.build()
    };
    let stream = match split::plan(&meta, &roots, &selected, cores()) {
        Some(groups) => split::spawn(groups.into_iter().map(build).collect::<Result<_, _>>()?),
        None => FileStream::One(build(roots)?),
    };
    Ok(Some(Open {
        file,
        stream,
        ranges,
        at: (0, 0),
    }))
}

/// Which row groups of a file may hold rows the filters match, by their statistics; `None` when
/// no row can match because a filter (other than is_null) names a column the file lacks.
fn keep_groups(
    meta: &ParquetMetaData,
    file_schema: &Schema,
    filters: &[Filter],
) -> Option<Vec<bool>> {
    if filters
        .iter()
        .any(|f| f.op != Op::IsNull && file_schema.index_of(&f.column).is_err())
    {
        return None;
    }
    let groups = meta.row_groups();
    let counts: Vec<u64> = groups.iter().map(|g| g.num_rows() as u64).collect();
    let mut keep = vec![true; groups.len()];
    for f in filters {
        let Ok(conv) = StatisticsConverter::try_new(
            &f.column,
            file_schema,
            meta.file_metadata().schema_descr(),
        ) else {
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
    Some(keep)
}

/// The same metadata, reading every Utf8 column as Utf8View.
fn with_string_views(meta: ArrowReaderMetadata) -> Result<ArrowReaderMetadata, ParquetError> {
    let fields: Vec<_> = meta
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8View)),
            _ => f.clone(),
        })
        .collect();
    let hint = Arc::new(Schema::new_with_metadata(
        fields,
        meta.schema().metadata().clone(),
    ));
    ArrowReaderMetadata::try_new(
        meta.metadata().clone(),
        ArrowReaderOptions::new().with_schema(hint),
    )
}

/// How many threads may decode one file.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The file's columns (indices in its Arrow schema) that the read needs; the others are filled
/// with nulls by [`align`].
fn read_roots(spec: &ReadSpec, file_schema: &Schema) -> Vec<usize> {
    spec.read
        .fields()
        .iter()
        .filter_map(|f| file_schema.index_of(f.name()).ok())
        .collect()
}

/// Reorders, casts and null-fills `batch`'s columns to match `schema`. A string column decoded
/// as Utf8View (see [`ReadSpec::string_views`]) is kept so, and the batch's schema says so.
pub(crate) fn align(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let rows = batch.num_rows();
    let by_name = column_numbers(batch);
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| match by_name.get(f.name().as_str()) {
            Some(&i) => conform(batch.column(i), f.data_type()),
            None => Ok(new_null_array(f.data_type(), rows)),
        })
        .collect::<Result<_, _>>()?;
    let schema = if columns
        .iter()
        .zip(schema.fields())
        .all(|(c, f)| c.data_type() == f.data_type())
    {
        schema.clone()
    } else {
        let fields: Vec<_> = columns
            .iter()
            .zip(schema.fields())
            .map(|(c, f)| Arc::new(f.as_ref().clone().with_data_type(c.data_type().clone())))
            .collect();
        Arc::new(Schema::new(fields))
    };
    RecordBatch::try_new_with_options(
        schema,
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

/// Each of `batch`'s columns by name (looked up once a column, not by a scan of the schema).
fn column_numbers(batch: &RecordBatch) -> foldhash::HashMap<&str, usize> {
    let fields = batch.schema_ref().fields();
    let mut by_name = foldhash::HashMap::with_capacity_and_hasher(fields.len(), Default::default());
    for (i, f) in fields.iter().enumerate() {
        by_name.entry(f.name().as_str()).or_insert(i);
    }
    by_name
}

/// `col` as a column of type `to`: as it is where it has that type (or is a string view where
/// strings are asked), each value's text exactly as a buffer would have written it where it
/// is widened to string, else cast.
pub(crate) fn conform(col: &ArrayRef, to: &DataType) -> Result<ArrayRef, ArrowError> {
    match col.data_type() {
        from if from == to => Ok(col.clone()),
        DataType::Utf8View if to == &DataType::Utf8 => Ok(col.clone()),
        _ if to == &DataType::Utf8 => crate::model::text::to_text(col),
        _ => cast(col, to),
    }
}
