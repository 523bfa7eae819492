//! One table's rows in a team actor: an open [`TableBuffer`] that appends, and the batches
//! frozen out of it — every [`CHUNK_ROWS`] rows, and when a fresh read asks for them (SPEC
//! §3.5). Freezing finishes the open builders into an immutable batch the reader shares (no
//! copy per read); appends go on into a new open buffer, and the flush takes the frozen batches
//! and the open rows together, so a table's rows still commit as one flush.
//!
//! A batch request's rows arrive already built, a batch per table ([`BufferedTable::push`]):
//! they are kept as they are until they make a chunk, then joined into one batch under their
//! merged schema ([`unify::join`]), so a flush does not write hundreds of small batches. Rows come out in
//! arrival order within each way in (pushed, appended), the pushed ones first where both wait:
//! nothing downstream depends on the order of rows within a flush.
//!
//! Chunks bound what a buffer holds beyond its rows: a builder grows by doubling, so one
//! growing over a whole flush's rows held up to twice their size and, at each doubling, copied
//! them and freed the old block to the allocator. With chunks, only the open chunk has slack
//! and the flush writes the chunks one after another, never joining them (BENCHMARKS.md, sixth
//! session of 2026-11-26: no peak-RSS change measurable at the same load; the first figures,
//! −30 to −100 MiB, compared against a system-allocator build and are discarded there).

use arrow::record_batch::RecordBatch;

use crate::model::value::Cell;
use crate::warehouse::buffer::TableBuffer;
use crate::warehouse::logged_rows::LoggedRows;
use crate::warehouse::unify;

/// Rows of the open buffer frozen into a batch of their own.
pub const CHUNK_ROWS: usize = 8192;

/// Buffered rows of one table.
#[derive(Default)]
pub struct BufferedTable {
    frozen: Vec<RecordBatch>,
    frozen_rows: usize,
    /// Bytes of the frozen batches' buffers.
    frozen_bytes: usize,
    /// Batches pushed whole, after `frozen` and before `open`, until they make a chunk.
    pushed: Vec<RecordBatch>,
    pushed_rows: usize,
    pushed_bytes: usize,
    open: TableBuffer,
}

impl BufferedTable {
    /// Rows buffered (frozen and open).
    pub fn rows(&self) -> usize {
        self.frozen_rows + self.pushed_rows + self.open.rows()
    }

    /// Bytes held in memory: the frozen batches' buffers and the open builders' capacity.
    pub fn allocated_bytes(&self) -> usize {
        self.frozen_bytes + self.pushed_bytes + self.open.allocated_bytes()
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

    /// Appends rows built elsewhere (a batch request's, on its own task). They join the pushed
    /// rows, which come before the open ones: rows appended one by one meanwhile are not frozen
    /// for it, so a team sending single events between batches still gets full chunks of both.
    pub fn push(&mut self, batch: RecordBatch) {
        self.pushed_rows += batch.num_rows();
        self.pushed_bytes += batch.get_array_memory_size();
        self.pushed.push(batch);
        if self.pushed_rows >= CHUNK_ROWS {
            self.join_pushed();
        }
    }

    /// Appends a request's logged rows to the open ones ([`TableBuffer::append_logged`]);
    /// rows the open columns cannot take (a time outside the calendar for a text column) are
    /// pushed as a batch of their own instead, for the flush to report.
    pub fn push_logged(&mut self, rows: &LoggedRows) {
        if self.open.append_logged(rows).is_err() {
            self.push(TableBuffer::batch_of(rows));
        } else if self.open.rows() >= CHUNK_ROWS {
            self.freeze();
        }
    }

    /// Moves the pushed batches to the frozen ones, joined into one batch.
    fn join_pushed(&mut self) {
        let pushed = std::mem::take(&mut self.pushed);
        self.pushed_rows = 0;
        self.pushed_bytes = 0;
        let joined = match pushed.len() {
            0 => return,
            1 => pushed,
            _ => match unify::join(&pushed) {
                Ok(one) => vec![one],
                // Kept apart: the flush aligns them again, and reports what fails.
                Err(_) => pushed,
            },
        };
        for batch in joined {
            self.frozen_rows += batch.num_rows();
            self.frozen_bytes += batch.get_array_memory_size();
            self.frozen.push(batch);
        }
    }

    /// Freezes the pushed batches and the open rows, in that order.
    fn freeze(&mut self) {
        self.join_pushed();
        if self.open.rows() == 0 {
            return;
        }
        let batch = self.open.take_batch();
        self.frozen_rows += batch.num_rows();
        self.frozen_bytes += batch.get_array_memory_size();
        self.frozen.push(batch);
    }

    /// Every row as immutable batches, oldest first; the open rows are frozen first, so the
    /// next call lends the same batches again (plus whatever was appended since).
    pub fn lend(&mut self) -> Vec<RecordBatch> {
        self.freeze();
        self.frozen.clone()
    }

    /// Takes every row for a flush, oldest batch first, leaving the table empty.
    pub fn take(&mut self) -> Vec<RecordBatch> {
        self.join_pushed();
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

    /// A batch of `n` rows numbered from `from` in column `i`, and a column `k` of `kind`.
    fn built(from: i64, n: usize, kind: Value) -> RecordBatch {
        let mut b = TableBuffer::default();
        for i in from..from + n as i64 {
            b.append(&[("i".into(), Value::Int(i)), ("k".into(), kind.clone())])
                .unwrap();
        }
        b.take_batch()
    }

    fn column_i(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| {
                let col = b.column_by_name("i").unwrap().as_primitive::<Int64Type>();
                col.values().to_vec()
            })
            .collect()
    }

    /// Pushed batches are joined into one once they make a chunk, widened where their types
    /// differ, and count while they wait; a row appended between pushes stays open (a push does
    /// not cut it into a chunk of its own) and comes after the pushed rows.
    #[test]
    fn pushed_batches_join_into_chunks_and_leave_appended_rows_open() {
        let mut t = BufferedTable::default();
        let half = CHUNK_ROWS / 2;
        let h = half as i64;
        t.push(built(0, half, Value::Int(1)));
        assert_eq!(
            (t.rows(), t.frozen.len()),
            (half, 0),
            "kept apart until a chunk"
        );
        assert!(t.allocated_bytes() >= half * 16, "pushed rows are counted");
        t.append(&[("i".into(), Value::Int(-1))]).unwrap();
        // Text where the first batch had integers: the joined chunk holds both as text.
        t.push(built(h, half, Value::Str("x".into())));
        assert_eq!(t.frozen.len(), 1, "a chunk of pushed rows, joined");
        assert_eq!(t.open.rows(), 1, "the appended row stays open");
        assert_eq!(t.frozen[0].num_rows(), CHUNK_ROWS);
        let k = t.frozen[0].column_by_name("k").unwrap();
        assert_eq!(k.data_type(), &arrow::datatypes::DataType::Utf8);
        let k = k.as_string::<i32>();
        assert_eq!((k.value(0), k.value(half)), ("1", "x"));
        t.push(built(2 * h, 3, Value::Int(3)));
        let total = CHUNK_ROWS + 4;
        assert_eq!(t.rows(), total);
        let mut order: Vec<i64> = (0..2 * h + 3).collect();
        order.push(-1);
        assert_eq!(column_i(&t.lend()), order, "pushed rows, then the open one");
        assert_eq!(column_i(&t.lend()), order, "a second lend sees the same");
        assert_eq!(column_i(&t.take()), order);
        assert_eq!((t.rows(), t.allocated_bytes()), (0, 0));
    }

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
