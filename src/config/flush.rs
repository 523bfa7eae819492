//! `[flush]`: when team buffers are written out as Parquet, retried, and when unclaimed objects
//! are collected.

use std::time::Duration;

use serde::Deserialize;

use super::units::{ByteSize, HumanDuration};

/// `[flush]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlushConfig {
    /// Flush a team when its oldest buffered row is this old (fires with no new traffic too).
    pub interval: HumanDuration,
    /// Flush a team when one of its tables buffers this many rows.
    pub max_rows: usize,
    /// Flush a team when its buffers hold this many bytes.
    pub max_bytes: ByteSize,
    /// A team whose buffer is under `idle_bytes` when `interval` comes waits up to this long
    /// after its oldest row (fewer, larger files; `crate::ingest::cadence`). "0s": off.
    pub idle_interval: HumanDuration,
    /// See `idle_interval`: a buffer this big flushes at `interval`.
    pub idle_bytes: ByteSize,
    /// First delay before retrying a failed flush; doubles up to 30 s.
    pub retry_backoff: HumanDuration,
    /// Objects in the warehouse that no committed file names (a crash between put and commit)
    /// are deleted once older than this.
    pub orphan_grace: HumanDuration,
}

impl Default for FlushConfig {
    fn default() -> Self {
        Self {
            interval: HumanDuration(Duration::from_secs(10)),
            max_rows: 100_000,
            max_bytes: ByteSize(32 << 20),
            idle_interval: HumanDuration(Duration::ZERO),
            idle_bytes: ByteSize(256 << 10),
            retry_backoff: HumanDuration(Duration::from_millis(100)),
            orphan_grace: HumanDuration(Duration::from_secs(3600)),
        }
    }
}
