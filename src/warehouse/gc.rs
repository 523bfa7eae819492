//! Orphan collection: objects under `<prefix>/teams/` that no data file in the catalog names —
//! left by a crash between a flush's put and its commit — are deleted once older than the grace
//! period (`flush.orphan_grace`). An object a writer has reserved ([`Catalog::reserve_objects`])
//! is never deleted while that writer is alive: this process's own reservations always count,
//! another process's only while its heartbeat ([`spawn_heartbeat`]) is younger than the grace.
//! A stale reservation is dropped in the catalog *before* its object is deleted, so the commit
//! that would have named it fails and writes the data again; no commit can name a deleted object.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tracing::{info, warn};

use crate::catalog::Catalog;

/// Deletes orphans older than `grace`; returns how many.
pub async fn collect_orphans(
    store: &Arc<dyn ObjectStore>,
    catalog: &Arc<Catalog>,
    prefix: &str,
    grace: Duration,
) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
    let cat = catalog.clone();
    let stale_before = crate::catalog::now_ms() - grace.as_millis() as i64;
    // Read the catalog first: an object reserved after this read was put after it too, so it is
    // younger than `grace` when listed below.
    let keep = tokio::task::spawn_blocking(move || cat.paths_to_keep(stale_before)).await??;
    let root: Path = prefix
        .split('/')
        .filter(|p| !p.is_empty())
        .chain(std::iter::once("teams"))
        .collect();
    let cutoff = chrono::Utc::now() - chrono::Duration::from_std(grace)?;
    let mut listing = store.list(Some(&root));
    let mut deleted = 0;
    while let Some(meta) = listing.next().await {
        let meta = meta?;
        if meta.last_modified >= cutoff || keep.contains(meta.location.as_ref()) {
            continue;
        }
        match store.delete(&meta.location).await {
            Ok(()) => {
                info!(path = %meta.location, "deleted orphan object");
                deleted += 1;
            }
            Err(e) => warn!(path = %meta.location, error = %e, "could not delete orphan object"),
        }
    }
    Ok(deleted)
}

/// How often collection runs for a grace: half the grace, between a second and ten minutes.
pub fn collect_every(grace: Duration) -> Duration {
    (grace / 2).clamp(Duration::from_secs(1), Duration::from_secs(600))
}

/// Runs [`collect_orphans`] now and then every [`collect_every`]`(grace)`.
pub fn spawn_collector(
    store: Arc<dyn ObjectStore>,
    catalog: Arc<Catalog>,
    prefix: String,
    grace: Duration,
) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(collect_every(grace));
        loop {
            every.tick().await;
            if let Err(e) = collect_orphans(&store, &catalog, &prefix, grace).await {
                warn!(error = %e, "orphan collection failed; will retry");
            }
        }
    });
}

/// Refreshes this process's reservations four times per `grace` (three beats may be missed
/// before another process's collector acts). Abort the handle when the process stops writing.
pub fn spawn_heartbeat(catalog: Arc<Catalog>, grace: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval((grace / 4).max(Duration::from_millis(100)));
        loop {
            every.tick().await;
            let cat = catalog.clone();
            match tokio::task::spawn_blocking(move || cat.heartbeat()).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => warn!(error = %e, "writer heartbeat failed; will retry"),
                Err(e) => warn!(error = %e, "writer heartbeat task failed"),
            }
        }
    })
}
