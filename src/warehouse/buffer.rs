//! A table's buffered rows in Arrow builders, one per column. New columns start with nulls for
//! the rows before them; a value that disagrees with its column's type widens the column in place.
//! Widening never goes through a lossy step: a float64 column that received integers keeps them
//! as integers until it is written (as float64 when every one converts exactly, else as their
//! text — see [`crate::model::schema::TYPE_KEY`]), and a column widened to string takes each
//! value's text by [`crate::model::text`], the same conversion readers apply to older files.
//! Team actors buffer events in it; imports buffer their rows in it the same way.

use foldhash::HashMap;

use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use super::column::{ColumnBuilder, finished_batch};
use super::logged_rows::{Logged, LoggedRows};
use crate::model::schema::ColumnType;
use crate::model::value::RowCell;

/// Rows a new column has room for (beyond the nulls it starts with) before its first doubling.
/// Arrow's own default is 1,024, ~8 KiB a column, which a quiet team's buffer holding a few
/// events keeps in every column until its flush; a busy one doubles its way to a chunk's
/// 8,192 rows, copying about as many bytes again as it holds.
const FIRST_ROWS: usize = 16;

/// The buffered rows of one table.
#[derive(Default)]
pub struct TableBuffer {
    names: Vec<String>,
    pub(super) columns: Vec<ColumnBuilder>,
    /// Row index each column was last written at, to null-fill the rest.
    last_row: Vec<usize>,
    index: HashMap<String, usize>,
    rows: usize,
    /// Scratch of [`TableBuffer::append`]: each cell's column, `None` for a cell it skips.
    targets: Vec<Option<usize>>,
    /// The last row's `targets`: rows of a table mostly repeat its cells' order, so the column
    /// at a cell's position last time is tried first (taken when its name matches), before
    /// the name is hashed and looked up.
    hints: Vec<Option<usize>>,
    /// Rows the buffer is expected to hold ([`TableBuffer::for_rows`]); 0 when unknown.
    expected_rows: usize,
}

impl TableBuffer {
    /// A buffer for `rows` rows, known before they are appended (a request's, counted first):
    /// each column is made with room for all of them, so no builder grows on the way.
    pub fn for_rows(rows: usize) -> Self {
        TableBuffer {
            expected_rows: rows,
            ..TableBuffer::default()
        }
    }

    /// Finds (or creates) and widens the column of each cell of row `row`, into `targets`: a
    /// duplicate name in one row is skipped (the first wins), as is a null cell of an unknown
    /// column.
    /// Widened builders are put in `widened`, to replace their columns once every cell passed.
    fn prepare<'a, C: RowCell + 'a>(
        &mut self,
        cells: impl IntoIterator<Item = &'a C>,
        row: usize,
        hints: &[Option<usize>],
        targets: &mut Vec<Option<usize>>,
        widened: &mut Vec<(usize, ColumnBuilder)>,
    ) -> Result<(), ArrowError> {
        for (position, cell) in cells.into_iter().enumerate() {
            let (name, value) = (cell.name(), cell.value());
            let hint = hints
                .get(position)
                .copied()
                .flatten()
                .filter(|&i| self.names.get(i).map(String::as_str) == Some(name));
            let idx = match hint.or_else(|| self.index.get(name).copied()) {
                Some(i) => i,
                None => {
                    let Some(ty) = value.column_type() else {
                        targets.push(None);
                        continue;
                    };
                    self.names.push(name.to_string());
                    let room = self.expected_rows.saturating_sub(row).max(FIRST_ROWS);
                    self.columns.push(ColumnBuilder::new(ty, row, room));
                    self.last_row.push(row);
                    self.index.insert(name.to_string(), self.columns.len() - 1);
                    self.columns.len() - 1
                }
            };
            if self.last_row[idx] > row {
                targets.push(None);
                continue;
            }
            let col = &self.columns[idx];
            if let Some(ty) = value.column_type() {
                let wide = col.ty().widen(ty);
                if wide != col.ty() {
                    widened.push((idx, col.widened(wide)?));
                }
            }
            // Claimed for this row (a later cell of the same name is skipped).
            self.last_row[idx] = row + 1;
            targets.push(Some(idx));
        }
        Ok(())
    }

    /// Rows buffered.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes the column builders hold (their capacity), what the rows really cost in memory
    /// until they are taken.
    pub fn allocated_bytes(&self) -> usize {
        self.columns
            .iter()
            .map(|c| c.allocated_bytes(self.rows))
            .sum()
    }

    /// Whether `name` is a buffered column.
    pub fn has_column(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// Column names, in order.
    pub fn column_names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// Appends one row made of the given cell lists. Null cells of unknown columns add nothing.
    /// All or nothing: the columns are found, created and widened for every cell first (the
    /// only step that can fail, and one that leaves every column as many rows long as before),
    /// then the values are appended.
    pub fn append<'a, C: RowCell + 'a>(
        &mut self,
        cells: impl IntoIterator<Item = &'a C> + Clone,
    ) -> Result<(), ArrowError> {
        let row = self.rows;
        let mut targets = std::mem::take(&mut self.targets);
        let hints = std::mem::take(&mut self.hints);
        targets.clear();
        let known = self.columns.len();
        let mut widened = Vec::new();
        let prepared = self.prepare(cells.clone(), row, &hints, &mut targets, &mut widened);
        if let Err(e) = prepared {
            // Nothing of the row stays: not its new columns, not its widenings, not its marks.
            for name in self.names.drain(known..) {
                self.index.remove(&name);
            }
            self.columns.truncate(known);
            self.last_row.truncate(known);
            for idx in targets.iter().flatten().filter(|i| **i < known) {
                self.last_row[*idx] = row;
            }
            self.targets = targets;
            self.hints = hints;
            return Err(e);
        }
        for (idx, builder) in widened {
            self.columns[idx] = builder;
        }
        for (cell, target) in cells.into_iter().zip(&targets) {
            if let Some(idx) = *target {
                self.columns[idx].append(cell.value());
            }
        }
        // This row's columns are the next row's hints; the old hints' room is the next scratch.
        self.hints = targets;
        self.targets = hints;
        self.end_row(row);
        Ok(())
    }

    /// Appends logged rows ([`LoggedRows`]) by their columns, found by name once for all of
    /// them: what appending them row by row gives, without a cell a value. All or nothing:
    /// every column is found, made or widened first (the only step that can fail, for a column
    /// of this buffer that cannot take the rows' values), then the values are appended.
    pub fn append_logged(&mut self, logged: &LoggedRows) -> Result<(), ArrowError> {
        let first = self.rows;
        let rows = logged.rows as usize;
        let mut widened: Vec<(usize, ColumnBuilder)> = Vec::new();
        let mut made: Vec<(String, ColumnType)> = Vec::new();
        let mut target: Vec<usize> = Vec::with_capacity(logged.names.len());
        for (name, &ty) in logged.names.iter().zip(&logged.types) {
            match self.index.get(name.as_str()) {
                Some(&idx) => {
                    let col = &self.columns[idx];
                    let wide = col.ty().widen(ty);
                    if wide != col.ty() {
                        widened.push((idx, col.widened(wide)?));
                    }
                    target.push(idx);
                }
                None => {
                    target.push(self.columns.len() + made.len());
                    made.push((name.clone(), ty));
                }
            }
        }
        // A time outside the calendar placed in a text column has no text: refused, as a
        // widening refuses it (the new columns' types were checked when the rows were taken).
        let text_at = |idx: usize| {
            widened
                .iter()
                .find(|(i, _)| *i == idx)
                .map_or(self.columns.get(idx).map(ColumnBuilder::ty), |(_, b)| {
                    Some(b.ty())
                })
                == Some(ColumnType::String)
        };
        for e in &logged.entries {
            if let Logged::Ts(us) = e.value
                && text_at(target[e.column as usize])
                && chrono::DateTime::from_timestamp_micros(us).is_none()
            {
                return Err(ArrowError::CastError(format!(
                    "{}: {us} is not a time that can be written as text",
                    logged.names[e.column as usize]
                )));
            }
        }
        for (idx, builder) in widened {
            self.columns[idx] = builder;
        }
        let room = self.expected_rows.saturating_sub(first).max(rows);
        for (name, ty) in made {
            self.index.insert(name.clone(), self.columns.len());
            self.names.push(name);
            self.columns.push(ColumnBuilder::new(ty, first, room));
            self.last_row.push(first);
        }
        for e in &logged.entries {
            let idx = target[e.column as usize];
            let row = first + e.row as usize;
            let (col, last) = (&mut self.columns[idx], &mut self.last_row[idx]);
            if row > *last {
                col.append_nulls(row - *last);
            }
            col.append(logged.value(e.value));
            *last = row + 1;
        }
        let end = first + rows;
        for (col, last) in self.columns.iter_mut().zip(&mut self.last_row) {
            if *last < end {
                col.append_nulls(end - *last);
                *last = end;
            }
        }
        self.rows = end;
        Ok(())
    }

    /// Logged rows as one batch of their own: what building them gives
    /// ([`ColumnLog::finish`](super::column_log::ColumnLog::finish)).
    pub fn batch_of(logged: &LoggedRows) -> RecordBatch {
        let mut buffer = TableBuffer::for_rows(logged.rows());
        buffer
            .append_logged(logged)
            .expect("logged rows were checked as they were taken");
        buffer.take_batch()
    }

    /// Ends row `row`: a null in every column it did not write.
    fn end_row(&mut self, row: usize) {
        for (idx, col) in self.columns.iter_mut().enumerate() {
            if self.last_row[idx] <= row {
                col.append_nulls(1);
                self.last_row[idx] = row + 1;
            }
        }
        self.rows += 1;
    }

    /// Takes everything buffered as one batch and leaves the buffer empty.
    pub fn take_batch(&mut self) -> RecordBatch {
        let named = self.names.iter().map(String::as_str).zip(&mut self.columns);
        let batch = finished_batch(named, self.rows);
        *self = TableBuffer::default();
        batch
    }
}

#[cfg(test)]
#[path = "buffer_logged_tests.rs"]
mod logged_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::schema::{ColumnType, TableSchema};
    use crate::model::value::{Cell, Value};
    use arrow::array::{AsArray, Float64Array};

    fn cell(n: &str, v: Value) -> Cell {
        (n.to_string().into(), v)
    }

    /// A buffer of one row holds a few hundred bytes a column, not room for a thousand rows:
    /// quiet teams keep their buffers until a flush, and the budgets count what they hold.
    #[test]
    fn a_new_buffer_holds_little_room() {
        let mut b = TableBuffer::default();
        let row: Vec<Cell> = (0..10)
            .flat_map(|i| {
                [
                    cell(&format!("n{i}"), Value::Int(i)),
                    cell(&format!("s{i}"), Value::Str(format!("value {i}"))),
                ]
            })
            .collect();
        b.append(&row).unwrap();
        let held = b.allocated_bytes();
        assert!(held > 0 && held < 20 * 512, "one row holds {held} bytes");
        // Rows beyond the first room still land (the builders grow).
        for _ in 0..100 {
            b.append(&row).unwrap();
        }
        assert_eq!(b.take_batch().num_rows(), 101);
    }

    #[test]
    fn new_columns_backfill_nulls_and_types_widen() {
        let mut b = TableBuffer::default();
        b.append(&[cell("a", Value::Int(1))]).unwrap();
        b.append(&[cell("a", Value::Float(2.5)), cell("b", Value::Bool(true))])
            .unwrap();
        b.append(&[cell("b", Value::Int(3)), cell("c", Value::Null)])
            .unwrap();
        let batch = b.take_batch();
        assert_eq!(batch.num_rows(), 3);
        assert_eq!(batch.num_columns(), 2, "a null-only column is not created");
        let a = batch
            .column(0)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            vec![Some(1.0), Some(2.5), None]
        );
        let bcol = batch.column(1).as_string::<i32>();
        assert_eq!(
            bcol.iter().collect::<Vec<_>>(),
            vec![None, Some("true"), Some("3")]
        );
        assert_eq!(b.rows(), 0);
    }

    /// A timestamp beyond what text can show (i64::MAX µs) cannot widen to string: the row that
    /// asks for it fails whole — the cells before it in the row are not appended, its new
    /// columns and other widenings do not stay, the column keeps its values — and the buffer
    /// stays whole.
    #[test]
    fn a_row_that_cannot_widen_leaves_the_buffer_whole() {
        let mut b = TableBuffer::default();
        b.append(&[cell("a", Value::Int(1)), cell("t", Value::Ts(i64::MAX))])
            .unwrap();
        let row = [
            cell("a", Value::Str("2".into())),
            cell("z", Value::Bool(true)),
            cell("t", Value::Str("x".into())),
        ];
        assert!(b.append(&row).is_err());
        assert!(
            !b.has_column("z"),
            "the failed row's new column does not stay"
        );
        b.append(&[cell("a", Value::Int(3)), cell("t", Value::Ts(0))])
            .unwrap();
        assert_eq!(b.rows(), 2);
        let batch = b.take_batch();
        assert_eq!(batch.num_rows(), 2);
        // Still int64: the failed row's widening of `a` to string did not stay.
        let a = batch
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(a.values().to_vec(), [1, 3]);
        assert_eq!(batch.column(1).len(), 2);
    }

    /// The last row's columns are only hints: cells in another order, a new column in the
    /// middle, a repeated name, and a row that failed (its new columns gone) all land where
    /// their names say.
    #[test]
    fn rows_in_any_order_land_in_their_named_columns() {
        let mut b = TableBuffer::default();
        b.append(&[cell("a", Value::Int(1)), cell("s", Value::Str("x".into()))])
            .unwrap();
        b.append(&[cell("s", Value::Str("y".into())), cell("a", Value::Int(2))])
            .unwrap();
        let failing = [
            cell("n", Value::Bool(true)),
            cell("t", Value::Ts(i64::MAX)),
            cell("a", Value::Int(0)),
        ];
        b.append(&failing[1..2]).unwrap();
        let widen_t = [failing[0].clone(), cell("t", Value::Str("x".into()))];
        assert!(
            b.append(&widen_t).is_err(),
            "a timestamp too large for text"
        );
        b.append(&[
            cell("a", Value::Int(3)),
            cell("n", Value::Int(7)),
            cell("s", Value::Str("z".into())),
            cell("a", Value::Int(99)),
        ])
        .unwrap();
        let batch = b.take_batch();
        let col = |name: &str| batch.column_by_name(name).unwrap().clone();
        let a = col("a");
        let a = a.as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            [Some(1), Some(2), None, Some(3)],
            "the first of two cells named a wins"
        );
        let s = col("s");
        assert_eq!(
            s.as_string::<i32>().iter().collect::<Vec<_>>(),
            [Some("x"), Some("y"), None, Some("z")]
        );
        let n = col("n");
        assert_eq!(
            n.as_primitive::<arrow::datatypes::Int64Type>()
                .iter()
                .collect::<Vec<_>>(),
            [None, None, None, Some(7)],
            "the failed row's boolean column did not stay"
        );
    }

    #[test]
    fn widening_to_string_keeps_exact_digits_whatever_the_order() {
        let big = 9223372036854775806;
        let mut b = TableBuffer::default();
        for v in [Value::Int(big), Value::Float(1.5), Value::Str("x".into())] {
            b.append(&[cell("n", v)]).unwrap();
        }
        let batch = b.take_batch();
        let n = batch.column(0).as_string::<i32>();
        assert_eq!(
            n.iter().collect::<Vec<_>>(),
            [Some("9223372036854775806"), Some("1.5"), Some("x")]
        );

        // int + float alone: stored as text, read as float64, so a later string keeps the digits.
        b.append(&[cell("n", Value::Int(big))]).unwrap();
        b.append(&[cell("n", Value::Float(1.5))]).unwrap();
        let batch = b.take_batch();
        let schema = TableSchema::from_arrow(&batch.schema());
        assert_eq!(schema.columns[0].ty, ColumnType::Float64);
        assert_eq!(
            batch.column(0).as_string::<i32>().value(0),
            "9223372036854775806"
        );

        // Exact integers stay float64.
        b.append(&[cell("n", Value::Float(0.5))]).unwrap();
        b.append(&[cell("n", Value::Int(5))]).unwrap();
        let batch = b.take_batch();
        let f = batch
            .column(0)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(f.values().to_vec(), [0.5, 5.0]);
    }
}
