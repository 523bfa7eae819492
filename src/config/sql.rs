//! `[sql]`: what one SQL element query may use (SPEC §3.4): memory, time, and how many of a
//! team's queries run at once.

use std::time::Duration;

use serde::Deserialize;

use super::units::{ByteSize, HumanDuration};

/// `[sql]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SqlConfig {
    /// Memory pool of one query (joins, aggregates, sorts); beyond it the query fails with 422
    /// `query_too_large` (no spilling to disk).
    pub memory_limit: ByteSize,
    /// Longest a query may run, planning and streaming included; a query still running then
    /// fails (before the body starts: 422 `query_timeout`; after: the connection is aborted).
    pub timeout: HumanDuration,
    /// Queries of one team running at once on this node; more are answered 429 `rate_limited`.
    pub max_concurrent: usize,
}

impl Default for SqlConfig {
    fn default() -> Self {
        Self {
            memory_limit: ByteSize(512 << 20),
            timeout: HumanDuration(Duration::from_secs(60)),
            max_concurrent: 4,
        }
    }
}
