//! What an append to the log is made of ([`Append`] of [`Entry`]s) and why one can fail
//! ([`WalError`]): the types the request side ([`super::group`]) and the writer
//! ([`super::writer`]) share.

use bytes::Bytes;

use super::record::FLAG_MARKER;
use crate::model::TeamId;

/// Why an append was not made durable.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WalError {
    /// Writing or syncing the segment failed.
    #[error("write-ahead log I/O failed: {0}")]
    Io(String),
    /// The writer has stopped (shutdown).
    #[error("write-ahead log is closed")]
    Closed,
}

/// One record to append (part of an [`Append`]).
pub struct Entry<T> {
    /// Owning team.
    pub team: TeamId,
    /// Record flags.
    pub flags: u8,
    /// µs since the epoch.
    pub received_at: i64,
    /// Event id.
    pub id: String,
    /// Request body.
    pub body: Bytes,
    /// Passed through to the consumer with the sequence number.
    pub payload: T,
}

/// One append request: its entries are numbered consecutively, written in the same write and
/// fsync, and succeed or fail together (a batch of events is one append and one acknowledgement).
pub struct Append<T> {
    /// The records, in order (a marker is an append of one entry flagged [`FLAG_MARKER`]).
    pub entries: Vec<Entry<T>>,
    /// Whether a client waits for the outcome. One that does not (a buffered acknowledgement,
    /// a marker) was acknowledged already: after a failed write it is carried, never dropped.
    pub waited: bool,
}

impl<T> Append<T> {
    /// An append of one entry.
    pub fn one(entry: Entry<T>, waited: bool) -> Self {
        Append {
            entries: vec![entry],
            waited,
        }
    }

    pub(super) fn body_bytes(&self) -> usize {
        self.entries.iter().map(|e| e.body.len()).sum()
    }

    /// Entries that take a sequence number (all but markers).
    pub(super) fn logged(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.flags & FLAG_MARKER == 0)
            .count()
    }
}
