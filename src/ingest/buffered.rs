//! One table's rows in a team actor: an open [`TableBuffer`] that appends, and the batches
//! frozen out of it when a fresh read asked for them (SPEC §3.5). Freezing finishes the open
//! builders into an immutable batch the reader shares (no copy per read); appends go on into a
//! new open buffer, and the flush takes the frozen batches and the open rows together, so a
//! table's rows still commit as one flush.

use arrow::record_batch::RecordBatch;

use crate::model::value::Cell;
use crate::warehouse::buffer::TableBuffer;

/// Buffered rows of one table.
#[derive(Default)]
pub struct BufferedTable {
    frozen: Vec<RecordBatch>,
    frozen_rows: usize,
    open: TableBuffer,
}

impl BufferedTable {
    /// Rows buffered (frozen and open).
    pub fn rows(&self) -> usize {
        self.frozen_rows + self.open.rows()
    }

    /// Appends one row (see [`TableBuffer::append`]).
    pub fn append<'a>(
        &mut self,
        cells: impl IntoIterator<Item = &'a Cell> + Clone,
    ) -> Result<(), arrow::error::ArrowError> {
        self.open.append(cells)
    }

    /// Every row as immutable batches, oldest first; the open rows are frozen first, so the
    /// next call lends the same batches again (plus whatever was appended since).
    pub fn lend(&mut self) -> Vec<RecordBatch> {
        if self.open.rows() > 0 {
            let batch = self.open.take_batch();
            self.frozen_rows += batch.num_rows();
            self.frozen.push(batch);
        }
        self.frozen.clone()
    }

    /// Takes every row for a flush, oldest batch first, leaving the table empty.
    pub fn take(&mut self) -> Vec<RecordBatch> {
        let mut out = std::mem::take(&mut self.frozen);
        self.frozen_rows = 0;
        if self.open.rows() > 0 {
            out.push(self.open.take_batch());
        }
        out
    }
}
