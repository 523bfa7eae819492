//! Compaction: merges runs of consecutive small files of one partition (consecutive in the
//! table's row order, so row order is kept) into files of up to `compaction.target_size`, and
//! swaps each run for its merged file in one catalog transaction. Replaced objects are deleted
//! only after `compaction.grace`, longer than any download, so a download (or a cursor) that
//! started on the old snapshot still finds every file it needs. Nodes sharing a catalog all run
//! it; a lease per partition ([`Catalog::try_lease`]) lets one of them at a time merge it, and
//! the swap's check that its inputs are still live keeps data right even without the lease.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::AsArray;
use arrow::datatypes::{DataType, SchemaRef, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tracing::{info, warn};

use super::layout::DataFilePath;
use super::reader::align;
use super::writer;
use crate::catalog::{Catalog, CatalogError, LiveFile, NewDataFile};
use crate::config::{CompactionConfig, ParquetConfig};
use crate::model::TeamId;
use crate::model::schema::TableSchema;
use crate::model::text;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Files replaced.
    pub merged: usize,
    /// Files written.
    pub written: usize,
    /// Merged files written in vain: the swap found its inputs already replaced (work another
    /// node did at the same time; the lease makes this rare).
    pub lost: usize,
}

/// What became of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Swapped for its merged file.
    Merged,
    /// Not merged: another node holds its lease, or has merged it already.
    Skipped,
    /// Merged, but the swap found its inputs replaced meanwhile.
    Lost,
}

/// Everything compaction needs.
#[derive(Clone)]
pub struct Compactor {
    /// The catalog.
    pub catalog: Arc<Catalog>,
    /// The warehouse.
    pub store: Arc<dyn ObjectStore>,
    /// Object path prefix.
    pub prefix: String,
    /// Encoding of merged files.
    pub parquet: ParquetConfig,
    /// Triggers and sizes.
    pub cfg: CompactionConfig,
}

/// How long a partition's compaction lease lasts: longer than any merge (up to
/// `compaction.target_size`), short enough that a node that died holding it blocks the partition
/// only briefly.
const LEASE: Duration = Duration::from_secs(600);

impl Compactor {
    /// One pass over every table with enough small files.
    pub async fn compact_once(&self) -> Result<Stats, BoxError> {
        let (cat, min, small) = (
            self.catalog.clone(),
            self.cfg.min_files,
            self.cfg.small_file.0,
        );
        let tables =
            tokio::task::spawn_blocking(move || cat.tables_with_small_files(min, small)).await??;
        let mut stats = Stats::default();
        for (team, table) in tables {
            let (cat, t, tb) = (self.catalog.clone(), team.clone(), table.clone());
            let files = tokio::task::spawn_blocking(move || cat.live_files(&t, &tb)).await??;
            for run in self.runs(&files) {
                match self.merge(&team, &table, run).await? {
                    Outcome::Merged => {
                        stats.merged += run.len();
                        stats.written += 1;
                    }
                    Outcome::Lost => stats.lost += 1,
                    Outcome::Skipped => {}
                }
            }
        }
        if stats.merged > 0 {
            info!(
                merged = stats.merged,
                written = stats.written,
                "compaction pass"
            );
        }
        Ok(stats)
    }

    /// Maximal runs of consecutive small files of one partition, cut at the target size.
    fn runs<'a>(&self, files: &'a [LiveFile]) -> Vec<&'a [LiveFile]> {
        let small = |f: &LiveFile| f.bytes < self.cfg.small_file.0;
        let mut out = Vec::new();
        let mut start = 0;
        let mut bytes = 0u64;
        for i in 0..=files.len() {
            let breaks = i == files.len()
                || !small(&files[i])
                || files[i].partition != files[start].partition
                || bytes + files[i].bytes > self.cfg.target_size.0;
            if breaks {
                if i - start >= 2 {
                    out.push(&files[start..i]);
                }
                start = if i < files.len() && !small(&files[i]) {
                    i + 1
                } else {
                    i
                };
                bytes = if i < files.len() && small(&files[i]) {
                    files[i].bytes
                } else {
                    0
                };
            } else {
                bytes += files[i].bytes;
            }
        }
        out
    }

    /// Merges one run under the lease of its partition, so that of several nodes sharing the
    /// catalog one merges it. Counted in `stowage_compaction_runs_total{result}`.
    async fn merge(
        &self,
        team: &TeamId,
        table: &str,
        run: &[LiveFile],
    ) -> Result<Outcome, BoxError> {
        let name = format!("compact:{team}:{table}:{}", run[0].partition);
        let (cat, lease) = (self.catalog.clone(), name.clone());
        let held =
            tokio::task::spawn_blocking(move || cat.try_lease(&lease, LEASE.as_millis() as i64))
                .await??;
        if !held {
            metrics::counter!("stowage_compaction_runs_total", "result" => "leased_elsewhere")
                .increment(1);
            return Ok(Outcome::Skipped);
        }
        // The run was listed before the lease was taken: another node may have merged it
        // meanwhile and released the lease.
        let (cat, files) = (self.catalog.clone(), run.to_vec());
        let merged = match tokio::task::spawn_blocking(move || cat.all_live(&files)).await? {
            Ok(true) => match self.merge_leased(team, table, run).await {
                Ok(true) => Ok(Outcome::Merged),
                Ok(false) => Ok(Outcome::Lost),
                Err(e) => Err(e),
            },
            Ok(false) => Ok(Outcome::Skipped),
            Err(e) => Err(e.into()),
        };
        let cat = self.catalog.clone();
        let _ = tokio::task::spawn_blocking(move || cat.release_lease(&name)).await;
        let result = match &merged {
            Ok(Outcome::Merged) => "merged",
            Ok(Outcome::Skipped) => "already_merged",
            Ok(Outcome::Lost) => "lost",
            Err(_) => "failed",
        };
        metrics::counter!("stowage_compaction_runs_total", "result" => result).increment(1);
        merged
    }

    /// [`Compactor::merge`] once the lease is held.
    async fn merge_leased(
        &self,
        team: &TeamId,
        table: &str,
        run: &[LiveFile],
    ) -> Result<bool, BoxError> {
        let mut inputs = Vec::with_capacity(run.len());
        for f in run {
            inputs.push(
                self.store
                    .get(&Path::from(f.path.as_str()))
                    .await?
                    .bytes()
                    .await?,
            );
        }
        let parquet = self.parquet.clone();
        let (data, schema, rows, min_ts, max_ts) = tokio::task::spawn_blocking(move || {
            crate::allocator::placement::unplaced(|| merge_bytes(&inputs, &parquet))
        })
        .await??;
        let date = run[0].partition.trim_start_matches("date=");
        let date = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d")?;
        let file_id = super::layout::new_file_id();
        let path = DataFilePath::new(&self.prefix, team.as_str(), table, date, &file_id);
        let new = NewDataFile {
            table: table.to_string(),
            path: path.as_str().to_string(),
            partition: run[0].partition.clone(),
            rows,
            bytes: data.len() as u64,
            min_ts,
            max_ts,
            schema,
        };
        // Reserved before it exists, so no orphan collector deletes it before the swap.
        let (cat, reserved) = (self.catalog.clone(), vec![new.path.clone()]);
        tokio::task::spawn_blocking(move || cat.reserve_objects(&reserved)).await??;
        crate::store::create(self.store.as_ref(), &path.0, data).await?;
        let (cat, t, old, n) = (
            self.catalog.clone(),
            team.clone(),
            run.to_vec(),
            new.clone(),
        );
        let swapped =
            match tokio::task::spawn_blocking(move || cat.replace_files(&t, &old, &n)).await? {
                Ok(swapped) => swapped,
                Err(CatalogError::Reclaimed(_)) => false,
                Err(e) => return Err(e.into()),
            };
        if !swapped {
            // Never committed: remove the object now rather than leave an orphan.
            let _ = self.store.delete(&path.0).await;
            let (cat, reserved) = (self.catalog.clone(), vec![new.path.clone()]);
            let _ = tokio::task::spawn_blocking(move || cat.release_objects(&reserved)).await;
        }
        Ok(swapped)
    }

    /// Deletes objects of files retired longer ago than the grace period.
    pub async fn delete_retired(&self, grace: Duration) -> Result<usize, BoxError> {
        let cutoff = crate::catalog::now_ms() - grace.as_millis() as i64;
        let cat = self.catalog.clone();
        let retired = tokio::task::spawn_blocking(move || cat.retired_before(cutoff)).await??;
        let mut deleted = 0;
        for (id, path) in retired {
            match self.store.delete(&Path::from(path.as_str())).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                    let cat = self.catalog.clone();
                    tokio::task::spawn_blocking(move || cat.mark_deleted(id)).await??;
                    deleted += 1;
                }
                Err(e) => warn!(%path, error = %e, "could not delete a retired object; will retry"),
            }
        }
        Ok(deleted)
    }

    /// Runs passes every `compaction.interval` until the process ends.
    pub fn spawn(self) {
        tokio::spawn(async move {
            let mut every = tokio::time::interval(self.cfg.interval.0);
            loop {
                every.tick().await;
                if let Err(e) = self.compact_once().await {
                    warn!(error = %e, "compaction pass failed; will retry");
                }
                // One node at a time deletes retired objects (lease `retired`).
                let pass = || self.delete_retired(self.cfg.grace.0);
                if let Some(Err(e)) =
                    super::gc::under_lease(&self.catalog, "retired", LEASE, pass).await
                {
                    warn!(error = %e, "deleting retired objects failed; will retry");
                }
            }
        });
    }
}

type Merged = (Bytes, TableSchema, u64, Option<i64>, Option<i64>);

/// Columns of one input that must stay text if their table column is float64: those stored as
/// text already, and integer columns with values float64 cannot represent exactly (judged from
/// the row groups' statistics; no statistics counts as inexact).
fn ints_or_text<T>(builder: &parquet::arrow::arrow_reader::ArrowReaderBuilder<T>) -> Vec<String> {
    use parquet::file::statistics::Statistics;
    let meta = builder.metadata();
    let mut out = Vec::new();
    for field in builder.schema().fields() {
        match field.data_type() {
            DataType::Utf8 => out.push(field.name().clone()),
            DataType::Int64 => {
                let idx = builder
                    .parquet_schema()
                    .columns()
                    .iter()
                    .position(|c| c.name() == field.name().as_str());
                let exact = idx.is_some_and(|i| {
                    meta.row_groups()
                        .iter()
                        .all(|rg| match rg.column(i).statistics() {
                            Some(Statistics::Int64(s)) => [s.min_opt(), s.max_opt()]
                                .iter()
                                // Within ±2^53 so is every integer between min and max.
                                .all(|v| v.is_none_or(|v| text::int_is_safe_in_float(*v))),
                            _ => false,
                        })
                });
                if !exact {
                    out.push(field.name().clone());
                }
            }
            _ => {}
        }
    }
    out
}

/// Decodes the inputs in order and writes them as one Parquet file with their merged schema.
fn merge_bytes(inputs: &[Bytes], parquet: &ParquetConfig) -> Result<Merged, BoxError> {
    let mut schema = TableSchema::default();
    let mut as_text: HashSet<String> = HashSet::new();
    for b in inputs {
        let builder = ParquetRecordBatchReaderBuilder::try_new(b.clone())?;
        schema.merge(&TableSchema::from_arrow(builder.schema()));
        as_text.extend(ints_or_text(&builder));
    }
    // A float64 column keeps integers float64 cannot hold exactly as text, like a flush does.
    let arrow_schema: SchemaRef = schema.to_arrow_keeping_text(&as_text);
    // Made for the first batch, whose values choose each column's encoding.
    let mut w: Option<ArrowWriter<Vec<u8>>> = None;
    let new_writer = |first: &RecordBatch| {
        ArrowWriter::try_new(
            Vec::new(),
            arrow_schema.clone(),
            Some(writer::properties(parquet, first)?),
        )
    };
    let (mut rows, mut min_ts, mut max_ts) = (0u64, None::<i64>, None::<i64>);
    for b in inputs {
        for batch in ParquetRecordBatchReaderBuilder::try_new(b.clone())?.build()? {
            let batch = align(&batch?, &arrow_schema)?;
            rows += batch.num_rows() as u64;
            if let Some(ts) = batch.column_by_name("timestamp") {
                let ts = ts.as_primitive::<TimestampMicrosecondType>();
                if let Some(m) = arrow::compute::min(ts) {
                    min_ts = Some(min_ts.map_or(m, |x| x.min(m)));
                }
                if let Some(m) = arrow::compute::max(ts) {
                    max_ts = Some(max_ts.map_or(m, |x| x.max(m)));
                }
            }
            let w = match &mut w {
                Some(w) => w,
                None => w.insert(new_writer(&batch)?),
            };
            w.write(&batch)?;
        }
    }
    let w = match w {
        Some(w) => w,
        None => new_writer(&RecordBatch::new_empty(arrow_schema.clone()))?,
    };
    let out = w.into_inner()?;
    Ok((Bytes::from(out), schema, rows, min_ts, max_ts))
}
