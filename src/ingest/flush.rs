//! One flush of a team's buffers, off the actor's loop: encode each table's batches as Parquet,
//! a file per `received_at` day ([`super::flush_encode`]), put every object, then commit them all
//! in one catalog transaction. Order is fixed: reservation, durable file, catalog commit, buffer
//! bytes released last, so every row is always in exactly one visible place. Failed puts and commits retry with
//! backoff; the data stays buffered (and counted against the budgets) until they succeed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStore;
use tracing::{info, warn};

use super::admission::EncodingGauge;
use super::flush_encode::{EncodeTarget, TableRows, encode_tables};
use crate::catalog::{Catalog, CatalogError, NewDataFile};
use crate::config::ParquetConfig;
use crate::model::TeamId;
use crate::model::schema::TableSchema;
use crate::warehouse::layout::DataFilePath;

const MAX_BACKOFF: Duration = Duration::from_secs(30);

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
    pub tables: Vec<TableRows>,
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
    let FlushJob {
        team,
        tables,
        watermark,
        encoding: gauge,
    } = job;
    // Whatever happens (an error, a panic in the encoder, the task dropped), the gauge is
    // zero once this flush is over; until then it counts the encoded files still held.
    let _zero = ZeroOnDrop(gauge.clone());
    let target = EncodeTarget {
        parquet: &ctx.parquet,
        prefix: &ctx.prefix,
        team: &team,
    };
    let files = encode_tables(target, tables, &gauge).await?;
    gauge.set(files.iter().map(|f| f.data.len() as u64).sum());
    let (mut metas, data): (Vec<NewDataFile>, Vec<Bytes>) =
        files.into_iter().map(|f| (f.meta, f.data)).unzip();
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
