//! One table's rows in a team actor: an open [`TableBuffer`] that appends, and the batches
//! frozen out of it — every [`CHUNK_ROWS`] rows, and when a fresh read asks for them (SPEC
//! §3.5). Freezing finishes the open builders into an immutable batch the reader shares (no
//! copy per read); appends go on into a new open buffer, and the flush takes the frozen batches
//! and the open rows together, so a table's rows still commit as one flush.
//!
//! Chunks bound what a buffer holds beyond its rows: a builder grows by doubling, so one
//! growing over a whole flush's rows held up to twice their size and, at each doubling, copied
//! them and freed the old block to the allocator. With chunks, only the open chunk has slack
//! and the flush writes the chunks one after another, never joining them (BENCHMARKS.md, sixth
//! session of 2026-11-26: peak RSS under batch load −30 to −100 MiB on every mix).

use arrow::record_batch::RecordBatch;

use crate::model::value::Cell;
use crate::warehouse::buffer::TableBuffer;

/// Rows of the open buffer frozen into a batch of their own.
pub const CHUNK_ROWS: usize = 8192;

/// Buffered rows of one table.
#[derive(Default)]
pub struct BufferedTable {
    frozen: Vec<RecordBatch>,
    frozen_rows: usize,
    /// Bytes of the frozen batches' buffers.
    frozen_bytes: usize,
    open: TableBuffer,
}

impl BufferedTable {
    /// Rows buffered (frozen and open).
    pub fn rows(&self) -> usize {
        self.frozen_rows + self.open.rows()
    }

    /// Bytes held in memory: the frozen batches' buffers and the open builders' capacity.
    pub fn allocated_bytes(&self) -> usize {
        self.frozen_bytes + self.open.allocated_bytes()
    }

    /// Appends one row (see [`TableBuffer::append`]); the open rows are frozen once they are
    /// [`CHUNK_ROWS`].
    pub fn append<'a>(
        &mut self,
        cells: impl IntoIterator<Item = &'a Cell> + Clone,
    ) -> Result<(), arrow::error::ArrowError> {
        self.open.append(cells)?;
        if self.open.rows() >= CHUNK_ROWS {
            self.freeze();
        }
        Ok(())
    }

    fn freeze(&mut self) {
        let batch = self.open.take_batch();
        self.frozen_rows += batch.num_rows();
        self.frozen_bytes += batch.get_array_memory_size();
        self.frozen.push(batch);
    }

    /// Every row as immutable batches, oldest first; the open rows are frozen first, so the
    /// next call lends the same batches again (plus whatever was appended since).
    pub fn lend(&mut self) -> Vec<RecordBatch> {
        if self.open.rows() > 0 {
            self.freeze();
        }
        self.frozen.clone()
    }

    /// Takes every row for a flush, oldest batch first, leaving the table empty.
    pub fn take(&mut self) -> Vec<RecordBatch> {
        let mut out = std::mem::take(&mut self.frozen);
        self.frozen_rows = 0;
        self.frozen_bytes = 0;
        if self.open.rows() > 0 {
            out.push(self.open.take_batch());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;

    use super::*;
    use crate::model::value::Value;

    #[test]
    fn rows_are_frozen_in_chunks_and_taken_in_order() {
        let mut t = BufferedTable::default();
        let total = 2 * CHUNK_ROWS + 5;
        for i in 0..total {
            let mut cells: Vec<Cell> = vec![("i".into(), Value::Int(i as i64))];
            // A column that first appears in the second chunk.
            if i >= CHUNK_ROWS + 3 {
                cells.push(("late".into(), Value::Str(format!("v{i}"))));
            }
            t.append(&cells).unwrap();
        }
        assert_eq!(t.rows(), total);
        assert_eq!(t.frozen.len(), 2, "two full chunks frozen, the rest open");
        let open_bytes = t.open.allocated_bytes();
        assert!(open_bytes > 0 && t.allocated_bytes() > open_bytes);

        let batches = t.take();
        assert_eq!(t.rows(), 0);
        assert_eq!(t.allocated_bytes(), 0);
        let sizes: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes, [CHUNK_ROWS, CHUNK_ROWS, 5]);
        let ids: Vec<i64> = batches
            .iter()
            .flat_map(|b| {
                let col = b.column_by_name("i").unwrap().as_primitive::<Int64Type>();
                col.values().to_vec()
            })
            .collect();
        assert_eq!(ids, (0..total as i64).collect::<Vec<_>>(), "rows in order");
        assert!(batches[0].column_by_name("late").is_none());
        let late = batches[1].column_by_name("late").unwrap();
        assert_eq!(late.null_count(), 3, "null until the column appeared");
        assert_eq!(
            late.as_string::<i32>().value(3),
            format!("v{}", CHUNK_ROWS + 3)
        );
    }
}
