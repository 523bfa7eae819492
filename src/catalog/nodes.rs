//! The nodes of a cluster (SPEC §7), by the id of their WAL: each registers when it starts and
//! marks itself stopped when it shuts down cleanly. A fresh read (SPEC §3.5) waits for every
//! other running node to commit the team's events, so a node that died without stopping stays
//! "running" — fresh reads fail with a clear error rather than miss its acknowledged events —
//! until it starts again on its WAL or an operator forgets it (`stowage admin node forget`).

use super::db::{Conn, params};

use super::{Catalog, Result, now_ms};

/// A node as the catalog knows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeRow {
    /// The id of its WAL.
    pub wal_id: String,
    /// When it last started, ms since the epoch.
    pub started_at: i64,
    /// When it last stopped cleanly (`None`: running, or died).
    pub stopped_at: Option<i64>,
}

impl Catalog {
    /// Records this node (its WAL, [`Catalog::set_wal`]) as running.
    pub fn register_node(&self) -> Result<()> {
        let wal = self.wal_key().to_string();
        let started = *self.node_started.get_or_init(now_ms);
        self.with(|c| {
            c.execute(
                "INSERT INTO nodes (wal_id, started_at, stopped_at) VALUES (?1, ?2, NULL)
                 ON CONFLICT (wal_id) DO UPDATE SET started_at = excluded.started_at, stopped_at = NULL",
                params![wal, started],
            )?;
            Ok(())
        })
    }

    /// Records this node as stopped cleanly; the caller makes sure everything it acknowledged
    /// is committed. A later start on the same WAL (another process) is left running.
    pub fn node_stopped(&self) -> Result<()> {
        let wal = self.wal_key().to_string();
        let Some(started) = self.node_started.get().copied() else {
            return Ok(());
        };
        self.with(|c| {
            c.execute(
                "UPDATE nodes SET stopped_at = ?2 WHERE wal_id = ?1 AND started_at = ?3",
                params![wal, now_ms(), started],
            )?;
            Ok(())
        })
    }

    /// Every node that registered, newest first.
    pub fn nodes(&self) -> Result<Vec<NodeRow>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT wal_id, started_at, stopped_at FROM nodes ORDER BY started_at DESC, wal_id",
            )?;
            let rows = st.query_map(params![], |r| {
                Ok(NodeRow {
                    wal_id: r.get(0)?,
                    started_at: r.get(1)?,
                    stopped_at: r.get(2)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
        })
    }

    /// The WAL ids of the nodes not known to have stopped, this one excluded.
    pub fn other_running_nodes(&self) -> Result<Vec<String>> {
        Ok(self
            .nodes()?
            .into_iter()
            .filter(|n| n.stopped_at.is_none() && n.wal_id != self.wal_key())
            .map(|n| n.wal_id)
            .collect())
    }

    /// Forgets a node that will not come back (its WAL is gone); `false` if unknown.
    pub fn forget_node(&self, wal_id: &str) -> Result<bool> {
        self.with(|c| Ok(c.execute("DELETE FROM nodes WHERE wal_id = ?1", params![wal_id])? == 1))
    }

    /// This node's WAL id ("" before [`Catalog::set_wal`]).
    pub fn wal_id(&self) -> &str {
        self.wal_key()
    }

    /// Sends `payload` on the notification `channel` to every node listening (PostgreSQL
    /// `pg_notify`; nothing with SQLite, which serves one node).
    pub fn notify(&self, channel: &str, payload: &str) -> Result<()> {
        self.with(|c| {
            if matches!(c, Conn::Pg(_)) {
                c.query_row(
                    "SELECT CAST(1 AS BIGINT) FROM (SELECT pg_notify(?1, ?2)) n",
                    params![channel, payload],
                    |r| r.get::<i64>(0),
                )?;
            }
            Ok(())
        })
    }
}
