//! Orphan collection: objects under `<prefix>/teams/` that no data file in the catalog names —
//! left by a crash between a flush's put and its commit — are deleted once older than the grace
//! period (`flush.orphan_grace`), which is far longer than any flush takes to commit.

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
    // Read the catalog first: a file committed after this read is newer than `grace` anyway.
    let known = tokio::task::spawn_blocking(move || cat.known_paths()).await??;
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
        if meta.last_modified >= cutoff || known.contains(meta.location.as_ref()) {
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

/// Runs [`collect_orphans`] now and then every `grace / 2` (at least a minute apart).
pub fn spawn_collector(
    store: Arc<dyn ObjectStore>,
    catalog: Arc<Catalog>,
    prefix: String,
    grace: Duration,
) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval((grace / 2).max(Duration::from_secs(60)));
        loop {
            every.tick().await;
            if let Err(e) = collect_orphans(&store, &catalog, &prefix, grace).await {
                warn!(error = %e, "orphan collection failed; will retry");
            }
        }
    });
}
