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

/// Runs `pass` if this process gets the catalog lease `name` (held for at most `ttl`), so that
/// of several nodes sharing the catalog one at a time does this work; `None` if another holds it.
pub async fn under_lease<T, F, Fut>(
    catalog: &Arc<Catalog>,
    name: &str,
    ttl: Duration,
    pass: F,
) -> Option<T>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let (cat, lease) = (catalog.clone(), name.to_string());
    let ttl_ms = ttl.as_millis() as i64;
    let held = tokio::task::spawn_blocking(move || cat.try_lease(&lease, ttl_ms)).await;
    if !matches!(held, Ok(Ok(true))) {
        return None;
    }
    let out = pass().await;
    let (cat, lease) = (catalog.clone(), name.to_string());
    let _ = tokio::task::spawn_blocking(move || cat.release_lease(&lease)).await;
    Some(out)
}

/// Runs [`collect_orphans`] now and then every [`collect_every`]`(grace)`, under the catalog
/// lease `orphans` (one node at a time lists and deletes; the reservations already make a
/// deletion safe, the lease saves the others the listing and double deletes).
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
            let pass = || collect_orphans(&store, &catalog, &prefix, grace);
            if let Some(Err(e)) = under_lease(&catalog, "orphans", grace, pass).await {
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

#[cfg(test)]
mod lease_tests {
    use super::*;

    #[tokio::test]
    async fn a_leased_pass_runs_on_one_writer_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.sqlite");
        let a = Arc::new(Catalog::open(&path).unwrap());
        let b = Arc::new(Catalog::open(&path).unwrap());
        let ttl = Duration::from_secs(60);
        // While a's pass runs, b's is skipped; once a's is done, b's runs.
        let outer = under_lease(&a, "orphans", ttl, || async {
            under_lease(&b, "orphans", ttl, || async { "b" }).await
        })
        .await;
        assert_eq!(outer, Some(None), "a ran, b was skipped meanwhile");
        assert_eq!(
            under_lease(&b, "orphans", ttl, || async { "b" }).await,
            Some("b")
        );
    }
}
