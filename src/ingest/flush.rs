//! One flush of a team's buffers, off the actor's loop: split each table's batch by
//! `received_at` day, encode Parquet on a blocking thread, put every object, then commit them all
//! in one catalog transaction. Order is fixed: reservation, durable file, catalog commit, buffer
//! bytes released last, so every row is always in exactly one visible place. Failed puts and commits retry with
//! backoff; the data stays buffered (and counted against the budgets) until they succeed.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, AsArray, BooleanArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, Int64Type, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use object_store::ObjectStore;
use tracing::{info, warn};

use crate::catalog::{Catalog, CatalogError, NewDataFile};
use crate::config::ParquetConfig;
use crate::model::TeamId;
use crate::model::schema::TableSchema;
use crate::model::text;
use crate::warehouse::layout::{self, DataFilePath};
use crate::warehouse::reader::align;
use crate::warehouse::writer;

const MAX_BACKOFF: Duration = Duration::from_secs(30);
const MICROS_PER_DAY: i64 = 86_400_000_000;

/// What every flush needs, shared by all teams.
#[derive(Debug, Clone)]
pub struct FlushCtx {
    /// Where files are committed.
    pub catalog: Arc<Catalog>,
    /// Where files are written.
    pub store: Arc<dyn ObjectStore>,
    /// Encoding settings.
    pub parquet: ParquetConfig,
    /// Object path prefix.
    pub prefix: String,
    /// First retry delay.
    pub retry_backoff: Duration,
}

/// Buffers taken from a team actor.
pub struct FlushJob {
    /// Whose.
    pub team: TeamId,
    /// Batches per table, rows in ingestion order (more than one when fresh reads froze the
    /// buffer between appends; their schemas may differ, older ones narrower).
    pub tables: Vec<(String, Vec<RecordBatch>)>,
    /// Highest WAL sequence number in these buffers: committed with the files.
    pub watermark: u64,
}

/// What a finished flush reports back.
#[derive(Debug, Default)]
pub struct FlushOutcome {
    /// Schemas of the committed files, per table.
    pub schemas: Vec<(String, TableSchema)>,
    /// Rows committed.
    pub rows: u64,
    /// Object bytes written.
    pub bytes: u64,
}

/// Runs a flush to completion (retrying storage and catalog failures). An encoding failure is
/// not retried (it would fail again): it is returned, nothing is committed and the watermark
/// does not move, so the rows stay in the WAL.
///
/// Each object is reserved in the catalog before it is put, so the orphan collector leaves it
/// alone however long the commit takes; if the reservation was reclaimed anyway (this process
/// looked dead to another collector), the commit fails as a whole and the objects are written
/// again under new names.
pub async fn run(ctx: &FlushCtx, job: FlushJob) -> Result<FlushOutcome, String> {
    let started = std::time::Instant::now();
    let team = job.team.clone();
    let watermark = job.watermark;
    let enc_ctx = ctx.clone();
    let files = tokio::task::spawn_blocking(move || encode_all(&enc_ctx, &job))
        .await
        .map_err(|e| format!("parquet encoding panicked: {e}"))??;
    let (mut metas, data): (Vec<NewDataFile>, Vec<Bytes>) = files.into_iter().unzip();
    loop {
        put_reserved(ctx, &metas, &data).await;
        let shared = Arc::new(metas.clone());
        let committed = retry(ctx.retry_backoff, "commit", team.as_str(), || {
            let (catalog, team, metas) = (ctx.catalog.clone(), team.clone(), shared.clone());
            async move {
                let r = tokio::task::spawn_blocking(move || {
                    catalog.commit_files(&team, &metas, watermark)
                })
                .await
                .map_err(|e| e.to_string())?;
                match r {
                    Ok(()) => Ok(true),
                    Err(CatalogError::Reclaimed(path)) => {
                        warn!(%path, "flush objects were reclaimed before the commit; writing them again");
                        Ok(false)
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await;
        if committed {
            break;
        }
        // The old objects become orphans (collected after the grace) once released.
        let old: Vec<String> = metas.iter().map(|m| m.path.clone()).collect();
        let catalog = ctx.catalog.clone();
        let _ = tokio::task::spawn_blocking(move || catalog.release_objects(&old)).await;
        for m in &mut metas {
            m.path = DataFilePath::renamed(&m.path);
        }
    }
    let outcome = FlushOutcome {
        rows: metas.iter().map(|m| m.rows).sum(),
        bytes: metas.iter().map(|m| m.bytes).sum(),
        schemas: metas
            .iter()
            .map(|m| (m.table.clone(), m.schema.clone()))
            .collect(),
    };
    let took = started.elapsed();
    metrics::histogram!("stowage_flush_seconds").record(took.as_secs_f64());
    metrics::counter!("stowage_flush_rows_total").increment(outcome.rows);
    metrics::counter!("stowage_flush_bytes_total").increment(outcome.bytes);
    metrics::counter!("stowage_flushes_total").increment(1);
    info!(team = %team, files = metas.len(), rows = outcome.rows, bytes = outcome.bytes, watermark,
          ms = took.as_millis() as u64, "flushed");
    Ok(outcome)
}

/// Reserves every object in the catalog, then puts it (durably), retrying until both succeed.
async fn put_reserved(ctx: &FlushCtx, metas: &[NewDataFile], data: &[Bytes]) {
    let paths: Arc<Vec<String>> = Arc::new(metas.iter().map(|m| m.path.clone()).collect());
    retry(ctx.retry_backoff, "reserve", "objects", || {
        let (catalog, paths) = (ctx.catalog.clone(), paths.clone());
        async move {
            tokio::task::spawn_blocking(move || catalog.reserve_objects(&paths))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
        }
    })
    .await;
    for (meta, bytes) in metas.iter().zip(data) {
        let path = object_store::path::Path::from(meta.path.as_str());
        retry(ctx.retry_backoff, "put", &meta.path, || {
            crate::store::create(ctx.store.as_ref(), &path, bytes.clone())
        })
        .await;
    }
}

/// Retries `op` with doubling backoff until it succeeds.
async fn retry<T, E, F, Fut>(first: Duration, what: &str, subject: &str, mut op: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut delay = first;
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) => {
                warn!(%subject, error = %e, retry_in_ms = delay.as_millis() as u64, "flush {what} failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Encodes every table's batch, one file per `received_at` day.
fn encode_all(ctx: &FlushCtx, job: &FlushJob) -> Result<Vec<(NewDataFile, Bytes)>, String> {
    let mut out = Vec::new();
    for (table, batches) in &job.tables {
        let batch = concat_widened(batches)
            .map_err(|e| format!("joining the buffered batches of {table} failed: {e}"))?;
        for (day, part) in split_by_day(&batch) {
            let date = chrono::DateTime::from_timestamp_micros(day * MICROS_PER_DAY)
                .expect("day is in range")
                .date_naive();
            let file_id = layout::new_file_id();
            let path = DataFilePath::new(&ctx.prefix, job.team.as_str(), table, date, &file_id);
            let data = writer::encode(&part, &ctx.parquet).map_err(|e| {
                format!(
                    "parquet encoding of {table} ({} rows) failed: {e}",
                    part.num_rows()
                )
            })?;
            let (min_ts, max_ts) = ts_range(&part);
            out.push((
                NewDataFile {
                    table: table.clone(),
                    path: path.as_str().to_string(),
                    partition: format!("date={}", date.format("%Y-%m-%d")),
                    rows: part.num_rows() as u64,
                    bytes: data.len() as u64,
                    min_ts,
                    max_ts,
                    schema: TableSchema::from_arrow(&part.schema()),
                },
                data,
            ));
        }
    }
    Ok(out)
}

/// One batch of `batches` under their merged (widened) schema. A float64 column stays text
/// where any batch stores it as text or holds integers float64 cannot hold exactly, as the
/// buffer itself and compaction keep it.
fn concat_widened(batches: &[RecordBatch]) -> Result<RecordBatch, arrow::error::ArrowError> {
    if let [one] = batches {
        return Ok(one.clone());
    }
    let mut schema = TableSchema::default();
    let mut as_text = std::collections::HashSet::new();
    for b in batches {
        schema.merge(&TableSchema::from_arrow(&b.schema()));
        for (field, col) in b.schema().fields().iter().zip(b.columns()) {
            let inexact = match field.data_type() {
                DataType::Utf8 => true,
                DataType::Int64 => col
                    .as_primitive::<Int64Type>()
                    .iter()
                    .any(|v| v.is_some_and(|v| !text::int_is_safe_in_float(v))),
                _ => false,
            };
            if inexact {
                as_text.insert(field.name().clone());
            }
        }
    }
    let target = schema.to_arrow_keeping_text(&as_text);
    let aligned = batches
        .iter()
        .map(|b| align(b, &target))
        .collect::<Result<Vec<_>, _>>()?;
    arrow::compute::concat_batches(&target, &aligned)
}

/// Splits rows by the UTC day of `received_at`, keeping row order within each day.
fn split_by_day(batch: &RecordBatch) -> Vec<(i64, RecordBatch)> {
    let Some(col) = batch.column_by_name("received_at") else {
        return vec![(0, batch.clone())];
    };
    let ts = col.as_primitive::<TimestampMicrosecondType>();
    let days: Vec<i64> = ts
        .iter()
        .map(|v| v.unwrap_or(0).div_euclid(MICROS_PER_DAY))
        .collect();
    let first = days.first().copied().unwrap_or(0);
    if days.iter().all(|d| *d == first) {
        return vec![(first, batch.clone())];
    }
    let mut distinct: Vec<i64> = Vec::new();
    for d in &days {
        if !distinct.contains(d) {
            distinct.push(*d);
        }
    }
    distinct
        .into_iter()
        .map(|day| {
            let mask = BooleanArray::from(days.iter().map(|d| *d == day).collect::<Vec<_>>());
            (
                day,
                filter_record_batch(batch, &mask).expect("mask matches batch length"),
            )
        })
        .collect()
}

fn ts_range(batch: &RecordBatch) -> (Option<i64>, Option<i64>) {
    match batch.column_by_name("timestamp") {
        Some(col) if col.null_count() < col.len() => {
            let ts = col.as_primitive::<TimestampMicrosecondType>();
            (arrow::compute::min(ts), arrow::compute::max(ts))
        }
        _ => (None, None),
    }
}
