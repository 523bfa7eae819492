//! A request's rows of one table kept as their log ([`LoggedRows`]): each value with its
//! column and row, text in one block, no Arrow arrays. A small table of a request (a wide
//! request's event tables, ~30 rows of ~70 columns each) made into a batch of its own costs a
//! builder and an array a column, and the team buffer's join copies and frees them all again;
//! logged, it is one vector and one text block, appended by the team buffer straight into its
//! open builders ([`TableBuffer::append_logged`](super::buffer::TableBuffer::append_logged);
//! BENCHMARKS.md, thirty-fourth session). Made by
//! [`ColumnLog::take_logged`](super::column_log::ColumnLog::take_logged), which checks the
//! rows as building them would, so appending them to an empty buffer cannot fail.

use crate::model::schema::ColumnType;
use crate::model::value::ValueRef;

/// A logged value; text is a range of [`LoggedRows::text`].
#[derive(Debug, Clone, Copy)]
pub(super) enum Logged {
    Bool(bool),
    Int(i64),
    Float(f64),
    Ts(i64),
    Str { at: u32, len: u32 },
}

/// One value: its column (an index of [`LoggedRows::names`]) and its row.
#[derive(Debug, Clone, Copy)]
pub(super) struct LoggedEntry {
    pub column: u32,
    pub row: u32,
    pub value: Logged,
}

/// Rows of one table as their values, in row order; a column given at most once a row.
#[derive(Debug, Clone, Default)]
pub struct LoggedRows {
    /// The columns, in order of their first value.
    pub(super) names: Vec<String>,
    /// Each column's type: the widest of its values'.
    pub(super) types: Vec<ColumnType>,
    pub(super) entries: Vec<LoggedEntry>,
    pub(super) text: String,
    pub(super) rows: u32,
}

impl LoggedRows {
    pub fn rows(&self) -> usize {
        self.rows as usize
    }

    /// The columns with a value, in order of their first.
    pub fn column_names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// A logged value, its text borrowed.
    pub(super) fn value(&self, v: Logged) -> ValueRef<'_> {
        match v {
            Logged::Bool(x) => ValueRef::Bool(x),
            Logged::Int(x) => ValueRef::Int(x),
            Logged::Float(x) => ValueRef::Float(x),
            Logged::Ts(x) => ValueRef::Ts(x),
            Logged::Str { at, len } => ValueRef::Str(&self.text[at as usize..(at + len) as usize]),
        }
    }

    /// The bytes these rows hold while they wait for the team buffer: their entries, their
    /// text and their column names (more than they take once appended to its columns, which
    /// the budget's measured count then corrects).
    pub fn approx_bytes(&self) -> usize {
        self.entries.capacity() * size_of::<LoggedEntry>()
            + self.text.capacity()
            + self.names.iter().map(|n| n.capacity()).sum::<usize>()
            + self.names.capacity() * (size_of::<String>() + size_of::<ColumnType>())
    }

    /// The rows `keep` keeps (by row), numbered again from 0 in their order; `None` when none
    /// is kept. Columns left without a value are dropped, their types taken again from what
    /// is left.
    pub fn kept(self, keep: impl Fn(u32) -> bool) -> Option<LoggedRows> {
        let mut new_row = vec![u32::MAX; self.rows as usize];
        let mut rows = 0u32;
        for (r, slot) in new_row.iter_mut().enumerate() {
            if keep(r as u32) {
                *slot = rows;
                rows += 1;
            }
        }
        if rows == 0 {
            return None;
        }
        if rows == self.rows {
            return Some(self);
        }
        let mut column_of = vec![u32::MAX; self.names.len()];
        let mut out = LoggedRows {
            rows,
            ..LoggedRows::default()
        };
        for e in &self.entries {
            let row = new_row[e.row as usize];
            if row == u32::MAX {
                continue;
            }
            let c = e.column as usize;
            if column_of[c] == u32::MAX {
                column_of[c] = out.names.len() as u32;
                out.names.push(self.names[c].clone());
                out.types.push(value_type(e.value));
            }
            let column = column_of[c];
            let ty = &mut out.types[column as usize];
            *ty = ty.widen(value_type(e.value));
            out.entries.push(LoggedEntry {
                column,
                row,
                value: e.value,
            });
        }
        out.text = self.text;
        Some(out)
    }
}

/// The type of a column holding `v`.
pub(super) fn value_type(v: Logged) -> ColumnType {
    match v {
        Logged::Bool(_) => ColumnType::Boolean,
        Logged::Int(_) => ColumnType::Int64,
        Logged::Float(_) => ColumnType::Float64,
        Logged::Ts(_) => ColumnType::Timestamp,
        Logged::Str { .. } => ColumnType::String,
    }
}
