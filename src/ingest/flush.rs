//! One flush of a team's buffers, off the actor's loop: split each table's batch by
//! `received_at` day, encode Parquet on a blocking thread, put every object, then commit them all
//! in one catalog transaction. Order is fixed: reservation, durable file, catalog commit, buffer
//! bytes released last, so every row is always in exactly one visible place. Failed puts and commits retry with
//! backoff; the data stays buffered (and counted against the budgets) until they succeed.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, AsArray, BooleanArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::TimestampMicrosecondType;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use object_store::ObjectStore;
use tracing::{info, warn};

use super::admission::EncodingGauge;
use crate::catalog::{Catalog, CatalogError, NewDataFile};
use crate::config::ParquetConfig;
use crate::model::TeamId;
use crate::model::schema::TableSchema;
use crate::warehouse::layout::{self, DataFilePath};
use crate::warehouse::unify::align_widened;
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
    /// Where the encoder's bytes are reported while it runs (counted against the budgets).
    pub encoding: EncodingGauge,
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
    // Whatever happens (an error, a panic in the encoder, the task dropped), the gauge is
    // zero once this flush is over; until then it counts the encoded files still held.
    let gauge = job.encoding.clone();
    let _zero = ZeroOnDrop(gauge.clone());
    let files = tokio::task::spawn_blocking(move || encode_all(&enc_ctx, &job))
        .await
        .map_err(|e| format!("parquet encoding panicked: {e}"))??;
    gauge.set(files.iter().map(|(_, data)| data.len() as u64).sum());
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

/// Sets its gauge back to zero when dropped.
struct ZeroOnDrop(EncodingGauge);

impl Drop for ZeroOnDrop {
    fn drop(&mut self) {
        self.0.set(0);
    }
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

/// Encodes every table's batches, one file per `received_at` day. A table's batches (the
/// buffer's chunks) are aligned to their merged schema and written one after another, never
/// joined into one batch: a flush holds its rows once, not twice.
fn encode_all(ctx: &FlushCtx, job: &FlushJob) -> Result<Vec<(NewDataFile, Bytes)>, String> {
    let mut out = Vec::new();
    for (table, batches) in &job.tables {
        let aligned = align_widened(batches)
            .map_err(|e| format!("aligning the buffered batches of {table} failed: {e}"))?;
        let mut days: Vec<(i64, Vec<RecordBatch>)> = Vec::new();
        for batch in &aligned {
            for (day, part) in split_by_day(batch) {
                match days.iter_mut().find(|(d, _)| *d == day) {
                    Some((_, parts)) => parts.push(part),
                    None => days.push((day, vec![part])),
                }
            }
        }
        drop(aligned);
        for (day, parts) in days {
            let rows: usize = parts.iter().map(RecordBatch::num_rows).sum();
            let date = chrono::DateTime::from_timestamp_micros(day * MICROS_PER_DAY)
                .expect("day is in range")
                .date_naive();
            let file_id = layout::new_file_id();
            let path = DataFilePath::new(&ctx.prefix, job.team.as_str(), table, date, &file_id);
            // Files already encoded stay in memory until the puts.
            let done: u64 = out
                .iter()
                .map(|(m, _): &(NewDataFile, Bytes)| m.bytes)
                .sum();
            let mut held = |bytes: usize| job.encoding.set(done + bytes as u64);
            let data = writer::encode_batches(&parts, &ctx.parquet, &mut held)
                .map_err(|e| format!("parquet encoding of {table} ({rows} rows) failed: {e}"))?;
            let (min_ts, max_ts) = ts_range(&parts);
            out.push((
                NewDataFile {
                    table: table.clone(),
                    path: path.as_str().to_string(),
                    partition: format!("date={}", date.format("%Y-%m-%d")),
                    rows: rows as u64,
                    bytes: data.len() as u64,
                    min_ts,
                    max_ts,
                    schema: TableSchema::from_arrow(&parts[0].schema()),
                },
                data,
            ));
        }
    }
    Ok(out)
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

/// The least and greatest `timestamp` over `batches`.
fn ts_range(batches: &[RecordBatch]) -> (Option<i64>, Option<i64>) {
    let (mut lo, mut hi) = (None::<i64>, None::<i64>);
    for batch in batches {
        if let Some(col) = batch.column_by_name("timestamp")
            && col.null_count() < col.len()
        {
            let ts = col.as_primitive::<TimestampMicrosecondType>();
            lo = lo.into_iter().chain(arrow::compute::min(ts)).min();
            hi = hi.into_iter().chain(arrow::compute::max(ts)).max();
        }
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::value::{Cell, Value};
    use crate::warehouse::buffer::TableBuffer;

    fn rows() -> Vec<Vec<Cell>> {
        let c = |n: &str, v: Value| (crate::model::value::Name::from(n.to_string()), v);
        vec![
            vec![c("n", Value::Int(1)), c("k", Value::Int(7))],
            vec![c("n", Value::Int(9_007_199_254_740_993))],
            vec![c("n", Value::Float(1.5)), c("s", Value::Str("x".into()))],
            vec![c("n", Value::Str("n/a".into())), c("k", Value::Int(8))],
        ]
    }

    /// Chunks frozen at different widths and types are written one after another under their
    /// merged schema, and read back as the buffer holding all the rows at once would write them.
    #[test]
    fn chunks_of_different_schemas_encode_as_one_buffer_would() {
        let cfg = ParquetConfig::default();
        let chunks: Vec<RecordBatch> = rows()
            .iter()
            .map(|r| {
                let mut b = TableBuffer::default();
                b.append(r).unwrap();
                b.take_batch()
            })
            .collect();
        let mut whole = TableBuffer::default();
        for r in rows() {
            whole.append(&r).unwrap();
        }
        let whole = whole.take_batch();

        let aligned = align_widened(&chunks).unwrap();
        assert!(aligned.iter().all(|b| b.schema() == aligned[0].schema()));
        let mut most = 0;
        let file = writer::encode_batches(&aligned, &cfg, &mut |b| most = most.max(b)).unwrap();
        assert!(
            most >= file.len(),
            "the encoder's bytes are reported: {most} < the file's {}",
            file.len()
        );
        let back = writer::read_back(file);
        assert_eq!(back.num_rows(), 4);
        for field in whole.schema().fields() {
            let name = field.name();
            let got = back.column_by_name(name).unwrap();
            let want = whole.column_by_name(name).unwrap();
            assert_eq!(got.data_type(), want.data_type(), "{name}");
            assert_eq!(got.as_ref(), want.as_ref(), "{name}");
        }
        assert!(writer::encode_batches(&[], &cfg, &mut |_| {}).is_err());
    }

    #[test]
    fn time_range_spans_every_chunk() {
        use arrow::array::TimestampMicrosecondArray;
        let batch = |v: Vec<Option<i64>>| {
            RecordBatch::try_from_iter([(
                "timestamp",
                Arc::new(TimestampMicrosecondArray::from(v)) as arrow::array::ArrayRef,
            )])
            .unwrap()
        };
        let parts = [
            batch(vec![Some(5), None]),
            batch(vec![None]),
            batch(vec![Some(2), Some(9)]),
        ];
        assert_eq!(ts_range(&parts), (Some(2), Some(9)));
        assert_eq!(ts_range(&parts[1..2]), (None, None));
    }
}
