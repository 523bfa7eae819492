//! `[wal]`: the write-ahead log's directory, group-commit interval and batch size, segment size,
//! and what recovery does with a corrupt record.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::units::{ByteSize, HumanDuration};

/// `[wal]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WalConfig {
    /// Segment directory; empty means `<data_dir>/wal`. Keep it on local disk.
    pub dir: PathBuf,
    /// At most one fsync per this interval; requests arriving meanwhile share it.
    pub sync_interval: HumanDuration,
    /// Write a batch as soon as it holds this many bytes.
    pub batch_bytes: ByteSize,
    /// While the log is busy (the previous commit group held at least
    /// [`BUSY_GROUP`](crate::wal::writer::BUSY_GROUP) appends), the writer waits up to this long
    /// after a sync for more appends to share the next one: fewer, larger syncs under load, no
    /// added latency for a lone client. 0 turns it off; `sync_interval`, when set, takes over.
    pub group_wait: HumanDuration,
    /// Start a new segment when the current one reaches this size.
    pub segment_size: ByteSize,
    /// `strict` stops start-up on a corrupt record mid-log; `truncate` cuts it off and goes on.
    pub recovery: RecoveryPolicy,
}

impl Default for WalConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::new(),
            sync_interval: HumanDuration(Duration::ZERO),
            batch_bytes: ByteSize(1 << 20),
            group_wait: HumanDuration(Duration::from_micros(250)),
            segment_size: ByteSize(16 << 20),
            recovery: RecoveryPolicy::Strict,
        }
    }
}

/// What to do with a corrupt record in the middle of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecoveryPolicy {
    /// Stop start-up with the file and offset (default).
    Strict,
    /// Cut that segment at the bad record, report what was dropped, and go on.
    Truncate,
}
