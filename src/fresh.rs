//! Fresh reads across nodes (SPEC §3.5 with §7): a team's buffers live on the node its events
//! token hashes to, while a download may reach any node. [`ClusterBuffers`] is the
//! [`Buffers`] a node's downloads use when it shares a PostgreSQL catalog: it asks every other
//! running node (the catalog's node registry) to commit the team's acknowledged events, over
//! the catalog's `LISTEN`/`NOTIFY` channel, waits for each to answer (at most
//! `read.fresh_timeout`, else 503 `fresh_timeout` — never a read that silently misses a node's
//! events), then lends its own node's buffer like a single node does. [`answer_asks`] is the
//! other side: it commits the asked team's events on this node and answers.
//!
//! Chosen over asking the owning node for its buffer (nodes do not know each other's
//! addresses, and the owner is nginx's choice): the cost is one flush per other node holding
//! the team's events per fresh read (files and catalog commits; measured in BENCHMARKS.md),
//! nothing on nodes without them beyond an answer.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::catalog::Catalog;
use crate::catalog::db::bus::{ASK_CHANNEL, Bus, CommitAsk, DONE_CHANNEL};
use crate::ingest::Ingest;
use crate::model::TeamId;
use crate::model::fresh::{Buffers, FreshError, Lent};

/// Fresh reads on a node of a cluster.
pub struct ClusterBuffers {
    ingest: Arc<Ingest>,
    catalog: Arc<Catalog>,
    bus: Bus,
    timeout: Duration,
}

impl ClusterBuffers {
    /// Fresh reads through `bus`, waiting at most `timeout` for the other nodes.
    pub fn new(ingest: Arc<Ingest>, catalog: Arc<Catalog>, bus: Bus, timeout: Duration) -> Self {
        Self {
            ingest,
            catalog,
            bus,
            timeout,
        }
    }

    /// Has every other running node commit `team`'s acknowledged events.
    async fn commit_elsewhere(&self, team: &TeamId) -> Result<(), FreshError> {
        let catalog = self.catalog.clone();
        let others = tokio::task::spawn_blocking(move || catalog.other_running_nodes())
            .await
            .map_err(|e| FreshError::Unavailable(e.to_string()))?
            .map_err(|e| FreshError::Unavailable(format!("the catalog did not answer: {e}")))?;
        if others.is_empty() {
            return Ok(());
        }
        if !self.bus.is_up() {
            return Err(FreshError::Unavailable(
                "the catalog's notification channel is down, so other nodes cannot be asked for their events".into(),
            ));
        }
        let id = uuid::Uuid::now_v7().simple().to_string();
        let mut answers = self.bus.expect(&id);
        let outcome = async {
            let (catalog, payload) = (
                self.catalog.clone(),
                CommitAsk::payload(&id, team, self.catalog.wal_id()),
            );
            tokio::task::spawn_blocking(move || catalog.notify(ASK_CHANNEL, &payload))
                .await
                .map_err(|e| FreshError::Unavailable(e.to_string()))?
                .map_err(|e| FreshError::Unavailable(format!("the catalog did not answer: {e}")))?;
            let mut missing: HashSet<String> = others.into_iter().collect();
            let deadline = tokio::time::Instant::now() + self.timeout;
            while !missing.is_empty() {
                match tokio::time::timeout_at(deadline, answers.recv()).await {
                    Ok(Some(wal)) => {
                        missing.remove(&wal);
                    }
                    _ => {
                        let mut missing: Vec<_> = missing.into_iter().collect();
                        missing.sort();
                        return Err(FreshError::Timeout(format!(
                            "node(s) {} did not commit the team's events within read.fresh_timeout ({:?}); \
                             a node that is down keeps its events in its WAL until it restarts",
                            missing.join(", "),
                            self.timeout
                        )));
                    }
                }
            }
            Ok(())
        }
        .await;
        self.bus.forget(&id);
        outcome
    }
}

impl Buffers for ClusterBuffers {
    fn lend<'a>(
        &'a self,
        team: &'a TeamId,
        tables: &'a [String],
    ) -> BoxFuture<'a, Result<Lent, FreshError>> {
        Box::pin(async move {
            // Other nodes commit first, so the read's snapshot (taken after this returns) holds
            // their events; this node's own are lent and checked against the snapshot.
            self.commit_elsewhere(team).await?;
            self.ingest.lend(team, tables).await
        })
    }
}

/// Answers other nodes' requests (from `asks`) until the channel closes: commits the team's
/// acknowledged events on this node, then says so. A commit that fails is not answered, so
/// the asking read times out instead of missing rows.
pub async fn answer_asks(
    ingest: Arc<Ingest>,
    catalog: Arc<Catalog>,
    mut asks: mpsc::UnboundedReceiver<CommitAsk>,
) {
    while let Some(ask) = asks.recv().await {
        if ask.from == catalog.wal_id() {
            continue;
        }
        let (ingest, catalog) = (ingest.clone(), catalog.clone());
        tokio::spawn(async move {
            if let Err(e) = ingest.flush_team(&ask.team).await {
                warn!(team = %ask.team, error = %e, "could not commit a team's events for another node's fresh read");
                return;
            }
            let payload = format!("{} {}", ask.id, catalog.wal_id());
            let sent =
                tokio::task::spawn_blocking(move || catalog.notify(DONE_CHANNEL, &payload)).await;
            if !matches!(sent, Ok(Ok(()))) {
                warn!(team = %ask.team, "could not answer another node's fresh read");
            } else {
                debug!(team = %ask.team, "committed a team's events for another node's fresh read");
            }
        });
    }
}
