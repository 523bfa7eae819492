//! `[ingest]`: when an event is acknowledged, body and batch limits, buffer budgets and idle
//! team actors.

use std::time::Duration;

use serde::Deserialize;

use super::units::{ByteSize, HumanDuration};

/// When `200` is sent for an event.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AckMode {
    /// After the event is in the WAL and fsync'd.
    Durable,
    /// As soon as the event is queued in memory (faster; a crash may lose the last moments).
    Buffered,
}

/// `[ingest]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestConfig {
    /// `durable` or `buffered`.
    pub ack: AckMode,
    /// Largest accepted event body (after gzip decompression).
    pub max_body: ByteSize,
    /// Largest accepted `POST /v1/batch` body (after gzip decompression).
    pub max_batch_body: ByteSize,
    /// Most messages in one `POST /v1/batch`.
    pub max_batch_events: usize,
    /// Largest accepted `POST /v1/import` body (after gzip decompression).
    pub max_import_body: ByteSize,
    /// Bytes a single team may hold in buffers not yet committed; beyond it → 429. Counted as
    /// admitted events' estimates plus what buffers and the running flush measure beyond them.
    pub team_budget: ByteSize,
    /// Bytes all teams together may hold; beyond it → 503.
    pub global_budget: ByteSize,
    /// Resident memory left to the process itself (runtime, catalog, dedup window, the
    /// allocator's slack). Whatever the process holds beyond it that the budgets do not count
    /// is charged to the teams buffering, so the resident size, read every 10 ms, stays within
    /// `team_budget` + this for one team at full speed, and `global_budget` + this for all.
    /// The default, 72 MiB, leaves 56 MiB of the 128 MiB SPEC §6 allows for what is allocated
    /// between two readings (with 96, string-heavy batches at full speed peaked 41 MiB above
    /// the read limit). 0: the budgets count buffered bytes only.
    pub resident_allowance: ByteSize,
    /// A request whose team (or the process) has no room waits up to this long, before its
    /// body is read, for a flush to make room; then 429/503. 0: refused at once.
    pub admission_wait: HumanDuration,
    /// `Retry-After` sent with 429/503.
    pub retry_after: HumanDuration,
    /// A team actor with nothing buffered stops after this long without events.
    pub idle_timeout: HumanDuration,
    /// Whether a batch's rows are built straight from its text into a batch per table
    /// (`crate::ingest::direct`); `false`: value by value into cells first, as before.
    pub direct_build: bool,
    /// Whether single events of one team that arrive while others wait are logged together,
    /// one submission for all of them (`crate::ingest::gather`); `false`: each on its own.
    pub gather_single: bool,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            ack: AckMode::Durable,
            max_body: ByteSize(32 * 1024),
            max_batch_body: ByteSize(512 * 1024),
            max_batch_events: 2500,
            max_import_body: ByteSize(1 << 30),
            team_budget: ByteSize(256 << 20),
            global_budget: ByteSize(1 << 30),
            resident_allowance: ByteSize(72 << 20),
            admission_wait: HumanDuration(Duration::from_secs(1)),
            retry_after: HumanDuration(Duration::from_secs(1)),
            idle_timeout: HumanDuration(Duration::from_secs(300)),
            direct_build: true,
            gather_single: true,
        }
    }
}
