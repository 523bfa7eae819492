//! Fresh reads' window onto the write path (SPEC §3.5): the rows a team's writer has
//! acknowledged but maybe not yet committed, lent as immutable Arrow batches, and the
//! [`Buffers`] interface through which a reader asks for them. Implemented by `ingest`, used by
//! `download` and `sql`, so neither imports the writer.
//!
//! Exactly once: lent rows come in [`LentChunk`]s, each the rows one flush will commit (the
//! running flush's, or the buffer's, which the next flush takes whole), with the highest WAL
//! sequence number among them. A reader lends first, then takes the catalog snapshot together
//! with the WAL's watermark for the team in one transaction; a chunk whose last record is at or
//! below that watermark is already in the snapshot's files and is dropped
//! ([`LentRows::uncommitted`]). Because a flush always commits whole chunks, a chunk is either
//! entirely in the files or entirely not.

use std::collections::HashMap;

use arrow::record_batch::RecordBatch;
use futures::future::BoxFuture;

use super::TeamId;
use super::schema::TableSchema;

/// Rows of one flush's worth, lent by the writer.
#[derive(Debug, Clone)]
pub struct LentChunk {
    /// The rows in WAL order; older batches may have narrower schemas than newer ones.
    pub batches: Vec<RecordBatch>,
    /// Highest WAL sequence number among the chunk's records (the team's, not only this
    /// table's): the chunk is committed once the WAL's watermark for the team reaches it.
    pub through_seq: u64,
}

/// One table's lent rows, oldest chunk first.
#[derive(Debug, Clone, Default)]
pub struct LentRows {
    /// The chunks, in WAL order.
    pub chunks: Vec<LentChunk>,
}

impl LentRows {
    /// The batches not yet committed as of a snapshot whose watermark (for the WAL that lent
    /// them) is `watermark`.
    pub fn uncommitted(&self, watermark: u64) -> Vec<RecordBatch> {
        self.chunks
            .iter()
            .filter(|c| c.through_seq > watermark)
            .flat_map(|c| c.batches.iter().cloned())
            .collect()
    }

    /// The columns of the lent batches, merged (widened) in order.
    pub fn schema(&self) -> TableSchema {
        let mut schema = TableSchema::default();
        for batch in self.chunks.iter().flat_map(|c| &c.batches) {
            schema.merge(&TableSchema::from_arrow(&batch.schema()));
        }
        schema
    }
}

/// What a writer lent for one read: per table asked for (absent: nothing buffered).
#[derive(Debug, Clone, Default)]
pub struct Lent {
    /// Per table name.
    pub tables: HashMap<String, LentRows>,
}

impl Lent {
    /// The rows of `table` (none if nothing is buffered).
    pub fn table(&self, table: &str) -> LentRows {
        self.tables.get(table).cloned().unwrap_or_default()
    }
}

/// Why rows could not be lent.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FreshError {
    /// The writer is shutting down or its log is closed.
    #[error("the event writer is not running: {0}")]
    Unavailable(String),
    /// Another node holds rows the read needs and did not answer in time.
    #[error("{0}")]
    Timeout(String),
}

/// The writer's side of a fresh read.
pub trait Buffers: Send + Sync {
    /// Every row of `tables` of `team` acknowledged before this call, not yet known to be
    /// committed. Rows already committed may be included; [`LentRows::uncommitted`] drops them
    /// against the snapshot the read uses.
    fn lend<'a>(
        &'a self,
        team: &'a TeamId,
        tables: &'a [String],
    ) -> BoxFuture<'a, Result<Lent, FreshError>>;
}
