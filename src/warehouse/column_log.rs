//! A table's rows logged value by value and built column by column at the end: each column is
//! made once, of the type its values widen to, with room for exactly its rows and its text, and
//! filled in one pass, where a [`TableBuffer`](super::buffer::TableBuffer) checks, widens and
//! null-fills its columns row by row and grows their builders by doubling. For rows that are
//! all known before any is read (a request's), it builds the batch `TableBuffer` would
//! ([`super::column::ColumnBuilder`] appends every value, and `finish` names the columns as
//! `take_batch` does): the types widen the same way whatever the order of the values, and a
//! value placed in a text column reads as the text a widened column gives it. It refuses what
//! a `TableBuffer` resolves one way or the other depending on order: a column given twice in
//! a row (the buffer keeps the first), a time outside the calendar in a text column (the
//! buffer refuses it when widening, writes empty text when appending).
//!
//! A log's room outlives it: dropped, its emptied vector goes to its thread's [`ROOM`] for the
//! next log made there, so a request's logs (tens to hundreds of KiB each, on pages of their
//! own: [`crate::allocator::placement`]) do not fault their pages in afresh every request.

use std::cell::RefCell;

use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use super::column::{ColumnBuilder, finished_batch};
use super::logged_rows::{Logged, LoggedEntry, LoggedRows};
use crate::model::reuse::recycle;
use crate::model::schema::ColumnType;
use crate::model::value::{ValueCow, ValueRef};

/// One value: its column (a number the caller names in [`ColumnLog::finish`]) and its row.
struct Entry<'a> {
    column: u32,
    row: u32,
    value: ValueCow<'a>,
}

/// A column while the log is read: its number, type, text bytes and rows filled.
struct Plan {
    column: u32,
    ty: ColumnType,
    text_bytes: usize,
    /// Whether a timestamp is among its values.
    times: bool,
    /// Rows filled so far (while building).
    filled: u32,
}

/// The most bytes of emptied logs a thread keeps for its next logs: a request of wide events
/// logs ~13 tables of ~80 KiB, one of narrow events ~4 of up to ~160 KiB.
const ROOM_BYTES: usize = 8 << 20;

thread_local! {
    /// Emptied logs' vectors, for the next logs made on this thread (at most [`ROOM_BYTES`]).
    static ROOM: RefCell<Vec<Vec<Entry<'static>>>> = const { RefCell::new(Vec::new()) };
}

/// The rows of one table, logged.
#[derive(Default)]
pub struct ColumnLog<'a> {
    entries: Vec<Entry<'a>>,
    rows: u32,
}

impl Drop for ColumnLog<'_> {
    fn drop(&mut self) {
        let bytes = |v: &Vec<Entry>| v.capacity() * size_of::<Entry>();
        if self.entries.capacity() == 0 || bytes(&self.entries) > ROOM_BYTES {
            return;
        }
        let entries = recycle(std::mem::take(&mut self.entries));
        // `try_with`: a log dropped while its thread ends has no room to go to.
        let _ = ROOM.try_with(|room| {
            let mut room = room.borrow_mut();
            if room.iter().map(bytes).sum::<usize>() + bytes(&entries) <= ROOM_BYTES {
                room.push(entries);
            }
        });
    }
}

/// An emptied vector from this thread's [`ROOM`], or a new one.
fn room<'a>() -> Vec<Entry<'a>> {
    ROOM.try_with(|room| room.borrow_mut().pop())
        .ok()
        .flatten()
        .map(recycle)
        .unwrap_or_default()
}

impl<'a> ColumnLog<'a> {
    /// Logs a row of `(column, value)` pairs, each column at most once (a second value of one
    /// column in a row fails [`ColumnLog::finish`]). Nulls are left out: a column made only
    /// of nulls is no column, as in a `TableBuffer`.
    pub fn push_row(&mut self, values: impl IntoIterator<Item = (u32, ValueCow<'a>)>) {
        if self.entries.capacity() == 0 {
            self.entries = room();
        }
        let row = self.rows;
        for (column, value) in values {
            if !matches!(value.value(), ValueRef::Null) {
                self.entries.push(Entry { column, row, value });
            }
        }
        self.rows += 1;
    }

    pub fn rows(&self) -> usize {
        self.rows as usize
    }

    /// Values logged (nulls are not).
    pub fn values(&self) -> usize {
        self.entries.len()
    }

    /// The rows as a batch, columns in the order of their first value, column `n` named
    /// `names[n]`; `None` when no row has a value (a batch of rows without columns cannot be
    /// made). `Err` when a row gives a column twice or a value cannot take its column's type.
    pub fn finish(mut self, names: &[String]) -> Result<Option<RecordBatch>, ArrowError> {
        self.take_batch(names)
    }

    /// [`ColumnLog::finish`], leaving the log empty with its room kept for the rows to come
    /// (so a table built in pieces allocates and faults in its log once).
    pub fn take_batch(&mut self, names: &[String]) -> Result<Option<RecordBatch>, ArrowError> {
        let built = self.build(names);
        self.entries.clear();
        self.rows = 0;
        built
    }

    /// The rows as [`LoggedRows`], without building them, leaving the log empty with its room
    /// kept: `None` when no row has a value, `Err` where [`ColumnLog::finish`] fails (so a
    /// buffer with none of their columns takes them without fail).
    pub fn take_logged(&mut self, names: &[String]) -> Result<Option<LoggedRows>, ArrowError> {
        let logged = self.logged(names);
        self.entries.clear();
        self.rows = 0;
        logged
    }

    fn logged(&self, names: &[String]) -> Result<Option<LoggedRows>, ArrowError> {
        let (at, mut plans) = self.plans(names)?;
        if plans.is_empty() {
            return Ok(None);
        }
        let text_bytes: usize = plans
            .iter()
            .filter(|p| p.ty == ColumnType::String)
            .map(|p| p.text_bytes)
            .sum();
        let mut out = LoggedRows {
            names: plans
                .iter()
                .map(|p| names[p.column as usize].clone())
                .collect(),
            types: plans.iter().map(|p| p.ty).collect(),
            entries: Vec::with_capacity(self.entries.len()),
            text: String::with_capacity(text_bytes),
            rows: self.rows,
        };
        for e in &self.entries {
            let i = at[e.column as usize];
            if i == u32::MAX {
                continue; // a null (never logged)
            }
            let plan = &mut plans[i as usize];
            if e.row < plan.filled {
                return Err(ArrowError::InvalidArgumentError(format!(
                    "column {} given twice in a row",
                    names[e.column as usize]
                )));
            }
            plan.filled = e.row + 1;
            let value = match e.value.value() {
                ValueRef::Null => continue,
                ValueRef::Bool(x) => Logged::Bool(x),
                ValueRef::Int(x) => Logged::Int(x),
                ValueRef::Float(x) => Logged::Float(x),
                ValueRef::Ts(x) => Logged::Ts(x),
                ValueRef::Str(s) => {
                    let end = out.text.len().saturating_add(s.len());
                    let (Ok(at), Ok(len), Ok(_)) = (
                        u32::try_from(out.text.len()),
                        u32::try_from(s.len()),
                        u32::try_from(end),
                    ) else {
                        return Err(ArrowError::InvalidArgumentError(
                            "over 4 GiB of text in one log".into(),
                        ));
                    };
                    out.text.push_str(s);
                    Logged::Str { at, len }
                }
            };
            out.entries.push(LoggedEntry {
                column: i,
                row: e.row,
                value,
            });
        }
        Ok(Some(out))
    }

    /// A log of `own`'s rows, each led by this log's values of the columns `fixed` in row
    /// `picks[r]` (an event table's rows, the call's own values taken from `tracks`); `None`
    /// when `own` logs a column of `fixed` (that table is built as a batch, which says so).
    pub fn beside(&self, own: &ColumnLog<'a>, picks: &[u32], fixed: &[u32]) -> Option<Self> {
        if picks.len() != own.rows() {
            return None;
        }
        let widest = fixed.iter().max().map_or(0, |m| *m as usize + 1);
        let mut is_fixed = vec![false; widest];
        fixed.iter().for_each(|&c| is_fixed[c as usize] = true);
        let fixed_column = |c: u32| is_fixed.get(c as usize).copied().unwrap_or(false);
        if own.entries.iter().any(|e| fixed_column(e.column)) {
            return None;
        }
        // Where each row's values start among this log's (they are logged row by row).
        let mut starts = vec![0u32; self.rows as usize + 1];
        for e in &self.entries {
            starts[e.row as usize + 1] += 1;
        }
        for r in 0..self.rows as usize {
            starts[r + 1] += starts[r];
        }
        let mut out = ColumnLog::default();
        out.entries = room();
        out.entries
            .reserve(own.entries.len() + picks.len() * fixed.len());
        let mut next = own.entries.iter().peekable();
        for (r, &pick) in picks.iter().enumerate() {
            let from = *starts.get(pick as usize)? as usize;
            let to = starts[pick as usize + 1] as usize;
            let row = r as u32;
            for e in self.entries[from..to]
                .iter()
                .filter(|e| fixed_column(e.column))
            {
                out.entries.push(Entry {
                    column: e.column,
                    row,
                    value: e.value.clone(),
                });
            }
            while let Some(e) = next.next_if(|e| e.row == row) {
                out.entries.push(Entry {
                    column: e.column,
                    row,
                    value: e.value.clone(),
                });
            }
        }
        out.rows = picks.len() as u32;
        Some(out)
    }

    /// Each logged column's plan (its type, its text's size), in order of first value, and
    /// per column number its plan's index (`u32::MAX`: no value). `Err` when a time outside the
    /// calendar would be written as text, which a `TableBuffer` widening its column refuses.
    fn plans(&self, names: &[String]) -> Result<(Vec<u32>, Vec<Plan>), ArrowError> {
        let mut at: Vec<u32> = vec![u32::MAX; names.len()];
        let mut plans: Vec<Plan> = Vec::new();
        for e in &self.entries {
            let value = e.value.value();
            let Some(ty) = value.column_type() else {
                continue;
            };
            let slot = at.get_mut(e.column as usize).ok_or_else(|| {
                ArrowError::InvalidArgumentError(format!("column {} has no name", e.column))
            })?;
            let plan = match *slot {
                u32::MAX => {
                    *slot = plans.len() as u32;
                    plans.push(Plan {
                        column: e.column,
                        ty,
                        text_bytes: 0,
                        times: false,
                        filled: 0,
                    });
                    plans.last_mut().expect("just pushed")
                }
                i => {
                    let plan = &mut plans[i as usize];
                    plan.ty = plan.ty.widen(ty);
                    plan
                }
            };
            plan.times |= matches!(value, ValueRef::Ts(_));
            plan.text_bytes += match value {
                ValueRef::Str(s) => s.len(),
                // A number or time placed in a text column: room for its text.
                _ => 24,
            };
        }
        // A time placed in a text column takes its text; one outside the calendar has none,
        // which a `TableBuffer` widening its column refuses. So does the log.
        if plans.iter().any(|p| p.times && p.ty == ColumnType::String) {
            for e in &self.entries {
                if let ValueRef::Ts(us) = e.value.value()
                    && plans[at[e.column as usize] as usize].ty == ColumnType::String
                    && chrono::DateTime::from_timestamp_micros(us).is_none()
                {
                    return Err(ArrowError::CastError(format!(
                        "{}: {us} is not a time that can be written as text",
                        names[e.column as usize]
                    )));
                }
            }
        }
        Ok((at, plans))
    }

    fn build(&self, names: &[String]) -> Result<Option<RecordBatch>, ArrowError> {
        let (at, mut plans) = self.plans(names)?;
        if plans.is_empty() {
            return Ok(None);
        }
        let rows = self.rows as usize;
        let mut builders: Vec<ColumnBuilder> = plans
            .iter()
            .map(|p| ColumnBuilder::with_room(p.ty, rows, p.text_bytes))
            .collect();
        for e in &self.entries {
            let i = at[e.column as usize];
            if i == u32::MAX {
                continue; // a null (never logged)
            }
            let i = i as usize;
            let plan = &mut plans[i];
            if e.row < plan.filled {
                return Err(ArrowError::InvalidArgumentError(format!(
                    "column {} given twice in a row",
                    names[e.column as usize]
                )));
            }
            let b = &mut builders[i];
            if e.row > plan.filled {
                b.append_nulls((e.row - plan.filled) as usize);
            }
            b.append(e.value.value());
            plan.filled = e.row + 1;
        }
        for (plan, b) in plans.iter().zip(&mut builders) {
            if plan.filled < self.rows {
                b.append_nulls((self.rows - plan.filled) as usize);
            }
        }
        let named = plans
            .iter()
            .map(|p| names[p.column as usize].as_str())
            .zip(&mut builders);
        Ok(Some(finished_batch(named, rows)))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::model::value::{Cell, Value};
    use crate::warehouse::buffer::TableBuffer;

    /// A dropped log's room goes to the next log made on its thread, emptied, and a log that
    /// grew past what a thread keeps is freed instead.
    #[test]
    fn a_dropped_log_s_room_serves_the_next() {
        let names = vec!["a".to_string()];
        let mut log = ColumnLog::default();
        for i in 0..1000 {
            log.push_row([(0, ValueCow::Owned(Value::Int(i)))]);
        }
        let (at, capacity) = (log.entries.as_ptr() as usize, log.entries.capacity());
        assert!(log.finish(&names).expect("builds").is_some());
        let mut next = ColumnLog::default();
        next.push_row([(0, ValueCow::Owned(Value::Int(7)))]);
        assert_eq!(
            next.entries.as_ptr() as usize,
            at,
            "the room was not handed on"
        );
        assert_eq!(next.entries.capacity(), capacity);
        assert_eq!(next.values(), 1, "the room came back empty");
        drop(next);
        // Too large to keep: the room a thread keeps stays within ROOM_BYTES.
        let mut huge = ColumnLog::default();
        huge.entries.reserve(ROOM_BYTES / size_of::<Entry>() + 1);
        let huge_at = huge.entries.as_ptr() as usize;
        drop(huge);
        ROOM.with(|room| {
            let room = room.borrow();
            assert!(room.iter().all(|v| v.as_ptr() as usize != huge_at));
            let kept: usize = room.iter().map(|v| v.capacity() * size_of::<Entry>()).sum();
            assert!(kept <= ROOM_BYTES, "{kept}");
        });
    }

    /// Rows of values of every type, widening every way and in either order, with nulls and
    /// columns first seen late, build the batch a `TableBuffer` builds of them.
    #[test]
    fn a_log_builds_what_a_buffer_builds() {
        let names: Vec<String> = ["a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let rows: Vec<Vec<(u32, Value)>> = vec![
            vec![(0, Value::Int(1)), (1, Value::Null), (2, Value::Bool(true))],
            vec![
                (0, Value::Float(2.5)),
                (3, Value::Ts(1_700_000_000_000_000)),
            ],
            vec![(2, Value::Str("x\"y".into())), (1, Value::Int(i64::MAX))],
            vec![],
            vec![
                (1, Value::Float(0.1)),
                (3, Value::Str("later".into())),
                (4, Value::Null),
            ],
            vec![(5, Value::Float(1e300)), (0, Value::Int(3))],
            vec![(5, Value::Int(7)), (4, Value::Str("é".into()))],
            vec![
                (4, Value::Str("long ".repeat(40))),
                (2, Value::Str("s".into())),
            ],
        ];
        let mut log = ColumnLog::default();
        let mut buffer = TableBuffer::default();
        for row in &rows {
            log.push_row(row.iter().map(|(c, v)| (*c, ValueCow::Owned(v.clone()))));
            let cells: Vec<Cell> = row
                .iter()
                .map(|(c, v)| (names[*c as usize].clone().into(), v.clone()))
                .collect();
            buffer.append(&cells).expect("appends");
        }
        assert_eq!(log.rows(), rows.len());
        let logged = log.finish(&names).expect("builds").expect("has columns");
        assert_eq!(logged, buffer.take_batch());
        assert_eq!(logged.num_rows(), rows.len());
        // Columns in the order of their first value; b, an integer too large for a float
        // beside a float, kept as text.
        let schema = logged.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["a", "c", "d", "b", "f", "e"]);
        let b = schema.field_with_name("b").expect("b");
        assert_eq!(b.data_type(), &arrow::datatypes::DataType::Utf8);
    }

    /// A number below its argument, drawn from `seed` by xorshift.
    pub(in crate::warehouse) fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        }
    }

    /// `n` random rows over columns `c0`..`c7` drawn by `next` (a number below its
    /// argument): each column mostly of a type of its own, sometimes of any other, with nulls.
    pub(in crate::warehouse) fn random_rows(
        next: &mut impl FnMut(u64) -> u64,
        n: usize,
    ) -> Vec<Vec<(u32, Value)>> {
        (0..n)
            .map(|_| {
                let mut free: Vec<u32> = (0..8).collect();
                (0..next(6))
                    .map(|_| {
                        let column = free.remove(next(free.len() as u64) as usize);
                        // Mostly a type of the column's own, sometimes any other.
                        let kind = if next(30) == 0 {
                            next(7)
                        } else {
                            [1, 2, 3, 4, 5, 0, 2, 3][column as usize]
                        };
                        let value = match kind {
                            0 => Value::Null,
                            1 => Value::Bool(next(2) == 0),
                            2 => Value::Int(next(100) as i64 - 50),
                            3 => Value::Float(next(100) as f64 / 8.0),
                            4 => Value::Str(format!("s{}", next(10))),
                            _ => Value::Ts(next(1_000_000) as i64),
                        };
                        (column, value)
                    })
                    .collect()
            })
            .collect()
    }

    /// Random rows of distinct columns in any order, values of every type (nulls too, on known
    /// and unknown columns), logged and appended to a buffer, give the same batch: tables of
    /// 20 rows, so that some columns keep one type and others widen.
    #[test]
    fn random_rows_logged_are_random_rows_appended() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let names: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
        let mut kept_types = 0;
        for _ in 0..300 {
            let mut log = ColumnLog::default();
            let mut buffer = TableBuffer::default();
            for row in random_rows(&mut next, 20) {
                let cells: Vec<Cell> = row
                    .iter()
                    .map(|(c, v)| (names[*c as usize].clone().into(), v.clone()))
                    .collect();
                buffer.append(&cells).expect("appends");
                log.push_row(row.into_iter().map(|(c, v)| (c, ValueCow::Owned(v))));
            }
            let want = buffer.take_batch();
            let Some(logged) = log.finish(&names).expect("builds") else {
                assert_eq!(want.num_columns(), 0);
                continue;
            };
            kept_types += logged
                .schema()
                .fields()
                .iter()
                .filter(|f| f.data_type() != &arrow::datatypes::DataType::Utf8)
                .count();
            assert_eq!(logged, want);
        }
        assert!(
            kept_types > 300,
            "columns that did not widen to text: {kept_types}"
        );
    }

    #[test]
    fn a_column_given_twice_in_a_row_or_never_given_a_value() {
        let names = vec!["a".to_string()];
        let mut log = ColumnLog::default();
        log.push_row([(0, ValueCow::Borrowed(ValueRef::Null))]);
        assert_eq!(log.rows(), 1);
        assert!(log.finish(&names).expect("builds").is_none());

        let mut log = ColumnLog::default();
        log.push_row([
            (0, ValueCow::Borrowed(ValueRef::Int(1))),
            (0, ValueCow::Borrowed(ValueRef::Int(2))),
        ]);
        assert!(log.finish(&names).is_err());

        let mut log = ColumnLog::default();
        log.push_row([(1, ValueCow::Borrowed(ValueRef::Int(1)))]);
        assert!(log.finish(&names).is_err(), "a column without a name");

        // A time outside the calendar cannot be text, in either order.
        for values in [
            [ValueRef::Ts(i64::MAX), ValueRef::Str("s")],
            [ValueRef::Str("s"), ValueRef::Ts(i64::MAX)],
        ] {
            let mut log = ColumnLog::default();
            for v in values {
                log.push_row([(0, ValueCow::Borrowed(v))]);
            }
            assert!(log.finish(&names).is_err());
        }
        let mut log = ColumnLog::default();
        log.push_row([(0, ValueCow::Borrowed(ValueRef::Ts(i64::MAX)))]);
        assert!(log.finish(&names).expect("a time column").is_some());
    }
}
