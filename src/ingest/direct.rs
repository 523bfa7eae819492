//! A request's messages built straight into one Arrow batch per table, without making cells:
//! the first step of the columnar path (BENCHMARKS.md, fifteenth session). A message's standard
//! cells are made as the usual way makes them ([`super::segment::message_parts`]), their text
//! borrowed from the body (twenty-eighth session); its context and properties go from the
//! body's text into the tables' logs, their values borrowed from the body too. Their
//! members, nested objects' too, come from what the validating walk recorded
//! ([`Top::object`]), not from another walk over their text. Every column a request writes is
//! named once and numbered ([`KeyPaths`]); a table logs each value with its column's number
//! ([`ColumnLog`]) and makes its columns once, at the end, each of its final type and size
//! (BENCHMARKS.md, twenty-seventh session), where
//! [`flatten`](crate::model::flatten::flatten) makes a name and a cell for every value and
//! [`TableBuffer::append`](crate::warehouse::buffer::TableBuffer::append) finds each cell's
//! column by its name and widens and null-fills its builders row by row. A table with fewer
//! than [`MIN_TABLE_ROWS`] rows in the request is not built but handed over as its log
//! ([`LoggedRows`]), which the team buffer appends into its open columns: a batch of a few
//! rows costs an array a column to make and again to join (thirty-fourth session).
//!
//! It takes only what needs none of flattening's bookkeeping: an object whose values land on
//! distinct columns. A message it does not take (a collision, which `_unmapped` resolves, a
//! name that makes no column, a value the parser refuses, a row over the column limit) ends the
//! build ([`Unsupported`]); the caller then builds the request the usual way, which also names
//! the fault. So every row it builds is the row the usual way builds, which its tests check
//! against [`super::event::finish`] and `TableBuffer::append` of the cells.

use arrow::array::BooleanArray;
use arrow::compute::filter_record_batch;
use arrow::datatypes::Schema;
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use chrono::{DateTime, Utc};
use std::sync::Arc;

use super::bulk::{MIN_TABLE_ROWS, Plan, TableBatch, TableLogged, beside_tracks};
use super::event::Parts;
use super::key_paths::{self, KeyPaths};
use super::segment::{Call, Shared, message_parts};
use super::top_fields::Top;
use crate::model::flatten::{self, MAX_FLATTEN_DEPTH};
use crate::model::members::RawObject;
use crate::model::reuse::recycle;
use crate::model::value::{Name, Value, ValueCow, ValueRef};
use crate::warehouse::column_log::ColumnLog;
use crate::warehouse::logged_rows::LoggedRows;
use crate::warehouse::unify;

/// The table every track call also writes a row to.
const TRACKS: &str = "tracks";

/// Values a table logs before the rows so far are made into a batch of their own (joined with
/// the others at the end, [`unify::join`]): a log entry takes ~40 bytes where a built value
/// takes ~8, and a batch-wide context repeats in every message, so a request of many small
/// messages would otherwise hold several times its rows' size until its end (~2.5 MiB a table
/// at most this way). A shop or wide request logs ~20,000 values a table, under it.
const CHUNK_VALUES: usize = 1 << 16;

/// Why a request is not built directly: its messages go the usual way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsupported;

/// A table's rows in a request: built, or (a few rows) logged.
pub enum DirectRows {
    Batch(RecordBatch),
    Logged(LoggedRows),
}

/// One table's rows in a request.
pub struct DirectTable {
    /// The table's name.
    pub name: String,
    /// Its rows, in the order of the messages.
    pub rows: DirectRows,
    /// For each row, the index of the message it came from.
    pub events: Vec<u32>,
}

/// A table being built.
struct Building<'a> {
    name: String,
    /// Its rows; for an event table, the rows without the call's own cells: those not yet
    /// built, and the batches of those built ([`CHUNK_VALUES`]).
    log: ColumnLog<'a>,
    built: Vec<RecordBatch>,
    /// For each row, the index of the message it came from.
    events: Vec<u32>,
    /// An event table's rows in `tracks`, whose call's own columns it gathers from there.
    picks: Vec<u32>,
    /// The call's own columns of an event table (numbers of the request's columns), in order
    /// of first appearance.
    fixed: Vec<u32>,
}

/// A value of a row and the number of its column among the request's.
struct Numbered<'a> {
    number: u32,
    value: ValueCow<'a>,
}

/// A value found in an object, before its column's name is looked up.
struct Found<'a> {
    path: u32,
    value: ValueCow<'a>,
}

/// The value of one JSON value's text, as [`flatten::typed`] reads it, borrowing its text.
fn logged_value(text: &str) -> Result<ValueCow<'_>, Unsupported> {
    let b = text.as_bytes();
    Ok(match b.first() {
        Some(b'"') if b.len() >= 2 && !b.contains(&b'\\') => {
            ValueCow::Borrowed(ValueRef::Str(&text[1..text.len() - 1]))
        }
        Some(b'[' | b'{') => ValueCow::Borrowed(ValueRef::Str(text)),
        _ => match flatten::typed(text).map_err(|_| Unsupported)? {
            Value::Str(s) => ValueCow::Owned(Value::Str(s)),
            other => ValueCow::Borrowed(match other {
                Value::Null => ValueRef::Null,
                Value::Bool(x) => ValueRef::Bool(x),
                Value::Int(x) => ValueRef::Int(x),
                Value::Float(x) => ValueRef::Float(x),
                Value::Ts(x) => ValueRef::Ts(x),
                Value::Str(_) => unreachable!("matched above"),
            }),
        },
    })
}

/// A request's tables, built message by message; `'a` is the request's body.
#[derive(Default)]
pub struct DirectBuild<'a> {
    paths: KeyPaths,
    tables: Vec<Building<'a>>,
    /// Per column number, the last message that wrote it (to find two values on one column).
    written: Vec<u32>,
    messages: u32,
    /// Room of a message's scratch vectors, kept for the next ([`recycle`]).
    found_room: Vec<Found<'static>>,
    row_room: Vec<Numbered<'static>>,
    own_room: Vec<Numbered<'static>>,
    /// The numbers of a track call's own columns, kept for the next.
    fixed_room: Vec<u32>,
    /// Values a table logs before building them ([`CHUNK_VALUES`]; fewer in tests).
    chunk_values: Option<usize>,
    /// Rows below which a table is logged, not built ([`MIN_TABLE_ROWS`]; others in tests).
    log_below: Option<usize>,
}

/// What the answer and the log need of a message built directly.
#[derive(Debug)]
pub struct Built {
    /// The message's call.
    pub call: Call,
    /// Its id (`messageId`, or a new UUIDv7).
    pub id: String,
    /// Whether the id came from the client.
    pub client_id: bool,
}

impl<'a> DirectBuild<'a> {
    /// Validates one Segment message of a batch ([`message_parts`]) and adds its rows.
    pub fn message(
        &mut self,
        msg: &Top<'a>,
        shared: Shared<'a>,
        received_at: DateTime<Utc>,
        max_columns: usize,
    ) -> Result<Built, Unsupported> {
        let (call, mut parts) =
            message_parts(msg, None, shared, received_at, None).map_err(|_| Unsupported)?;
        self.add(msg, &mut parts, max_columns)?;
        Ok(Built {
            call,
            id: parts.id.into_owned(),
            client_id: parts.client_id,
        })
    }

    /// Adds the rows of one message: `tracks` (track calls) and its own table, which take its
    /// standard cells out of `parts`. `msg` is the message `parts` were read from, whose tape
    /// has its objects' members.
    pub(super) fn add(
        &mut self,
        msg: &Top<'a>,
        parts: &mut Parts<'a>,
        max_columns: usize,
    ) -> Result<(), Unsupported> {
        self.messages += 1;
        let stamp = self.messages;
        let mut found: Vec<Found> = recycle(std::mem::take(&mut self.found_room));
        if let Some(ctx) = &parts.context {
            let root = self.paths.root(None);
            self.walk(msg, ctx, root, 1, &mut found)?;
        }
        let context_values = found.len();
        if let Some(props) = &parts.properties {
            let root = self.paths.root(Some(parts.reserved));
            self.walk(msg, props, root, 1, &mut found)?;
        }
        let mut row: Vec<Numbered> = recycle(std::mem::take(&mut self.row_room));
        let standard = parts.standard.len();
        for (place, (name, value)) in std::mem::take(&mut parts.standard).into_iter().enumerate() {
            row.push(Numbered {
                number: self.paths.standard(place, &name),
                value,
            });
        }
        for f in found.drain(..) {
            row.push(Numbered {
                number: self.paths.column(f.path),
                value: f.value,
            });
        }
        self.found_room = recycle(found);
        if self.written.len() < self.paths.names.len() {
            self.written.resize(self.paths.names.len(), 0);
        }
        for cell in &row {
            let n = cell.number as usize;
            if self.written[n] == stamp {
                return Err(Unsupported); // two values on one column: `_unmapped`
            }
            self.written[n] = stamp;
        }
        let tracks_cells = standard + context_values;
        let non_null = |cells: &[Numbered]| {
            cells
                .iter()
                .filter(|c| !matches!(c.value.value(), ValueRef::Null))
                .count()
        };
        if non_null(&row) > max_columns
            || (parts.tracks && non_null(&row[..tracks_cells]) > max_columns)
        {
            return Err(Unsupported);
        }
        let appended = self.append_row(parts, standard, &mut row, tracks_cells);
        self.row_room = recycle(row);
        appended
    }

    /// Appends a message's `row` (its `standard` cells, then context, then properties) to its
    /// tables, emptying it: `tracks` takes the first `tracks_cells`.
    fn append_row(
        &mut self,
        parts: &Parts,
        standard: usize,
        row: &mut Vec<Numbered<'a>>,
        tracks_cells: usize,
    ) -> Result<(), Unsupported> {
        let event = self.messages - 1;
        let names = &self.paths.names;
        let chunk = self.chunk_values.unwrap_or(CHUNK_VALUES);
        if !parts.tracks {
            let t = table(&mut self.tables, &parts.table);
            return t.append(row.drain(..), event, names, chunk);
        }
        // A track call's event table takes the call's own cells from `tracks`, a column at a
        // time when it is finished (as `bulk` does): only the rest of its row is appended. The
        // context goes to both.
        let mut own_row: Vec<Numbered<'a>> = recycle(std::mem::take(&mut self.own_room));
        own_row.extend(row[standard..tracks_cells].iter().map(|c| Numbered {
            number: c.number,
            value: c.value.clone(),
        }));
        own_row.extend(row.drain(tracks_cells..));
        let fixed = &mut self.fixed_room;
        fixed.clear();
        fixed.extend(row[..standard].iter().map(|c| c.number));
        let tracks = table(&mut self.tables, TRACKS);
        tracks.append(row.drain(..), event, names, chunk)?;
        let at = tracks.events.len() as u32 - 1;
        let own = table(&mut self.tables, &parts.table);
        for n in fixed.iter() {
            if !own.fixed.contains(n) {
                own.fixed.push(*n);
            }
        }
        own.picks.push(at);
        let appended = own.append(own_row.drain(..), event, names, chunk);
        self.own_room = recycle(own_row);
        appended
    }

    /// The values of `obj` (at key path `at`, `depth` keys deep) in `found`, in the order
    /// [`flatten`](crate::model::flatten::flatten) gives their cells.
    fn walk(
        &mut self,
        msg: &Top<'a>,
        obj: &RawObject<'a>,
        at: u32,
        depth: usize,
        found: &mut Vec<Found<'a>>,
    ) -> Result<(), Unsupported> {
        let mut before = key_paths::NONE;
        for (key, text) in &obj.0 {
            if !key.bytes().any(|b| b.is_ascii_alphanumeric()) {
                return Err(Unsupported);
            }
            let path = self.paths.member(at, before, key).ok_or(Unsupported)?;
            before = path;
            if text.starts_with('{') && depth < MAX_FLATTEN_DEPTH {
                let inner = msg
                    .object(text)
                    .unwrap_or_else(|| RawObject::of_valid(text))
                    .map_err(|_| Unsupported)?;
                if !inner.0.is_empty() {
                    self.walk(msg, &inner, path, depth + 1, found)?;
                    continue;
                }
            }
            found.push(Found {
                path,
                value: logged_value(text)?,
            });
        }
        Ok(())
    }

    /// The tables built, in the order their first rows came. A table of fewer than
    /// [`MIN_TABLE_ROWS`] rows is logged instead ([`LoggedRows`]): a batch of a few rows costs
    /// an array a column to make and to join (BENCHMARKS.md, thirty-fourth session). An event
    /// table so logged takes its calls' own values from the log of `tracks`, as a built one
    /// takes them from its batch.
    pub fn finish(self) -> Result<Vec<DirectTable>, Unsupported> {
        let mut tables = self.tables;
        let names = &self.paths.names;
        let tracks_at = tables.iter().position(|t| t.name == TRACKS);
        let log_below = self.log_below.unwrap_or(MIN_TABLE_ROWS);
        let small = |t: &Building| t.built.is_empty() && t.events.len() < log_below;
        let mut logged: Vec<Option<LoggedRows>> = tables.iter().map(|_| None).collect();
        let tracks_log = tracks_at
            .filter(|&i| tables[i].built.is_empty())
            .map(|i| std::mem::take(&mut tables[i].log));
        for (i, t) in tables.iter_mut().enumerate() {
            if Some(i) == tracks_at || !small(t) {
                continue;
            }
            let mut log = if t.picks.is_empty() {
                std::mem::take(&mut t.log)
            } else {
                match &tracks_log {
                    Some(tracks) => tracks
                        .beside(&t.log, &t.picks, &t.fixed)
                        .ok_or(Unsupported)?,
                    None => continue,
                }
            };
            let rows = log.take_logged(names).map_err(|_| Unsupported)?;
            logged[i] = Some(rows.ok_or(Unsupported)?);
        }
        if let (Some(i), Some(log)) = (tracks_at, tracks_log) {
            tables[i].log = log;
        }
        let tracks = match tracks_at {
            Some(i) if small(&tables[i]) => {
                let rows = tables[i].log.take_logged(names).map_err(|_| Unsupported)?;
                logged[i] = Some(rows.ok_or(Unsupported)?);
                None
            }
            Some(i) => Some(tables[i].rows(names)?.ok_or(Unsupported)?),
            None => None,
        };
        let mut out = Vec::with_capacity(tables.len());
        for (mut t, logged) in tables.into_iter().zip(logged) {
            let rows = match (logged, &tracks, t.picks.is_empty()) {
                (Some(rows), _, _) => DirectRows::Logged(rows),
                (None, Some(tracks), _) if t.name == TRACKS => DirectRows::Batch(tracks.clone()),
                (None, _, true) => DirectRows::Batch(t.rows(names)?.ok_or(Unsupported)?),
                (None, Some(tracks), false) => {
                    let fixed: Vec<Name> = t
                        .fixed
                        .iter()
                        .map(|&n| names[n as usize].clone().into())
                        .collect();
                    let own = t.rows(names)?;
                    DirectRows::Batch(
                        beside_tracks(tracks, own, t.picks, &fixed).map_err(|_| Unsupported)?,
                    )
                }
                (None, None, false) => return Err(Unsupported),
            };
            out.push(DirectTable {
                name: t.name,
                rows,
                events: t.events,
            });
        }
        Ok(out)
    }
}

/// The plan of a request's `tables` for the events `kept` (indexed by event): each table's
/// rows of those events, the tables left without any dropped; `Err` (the batch is then built
/// the usual way) if a row's event is not in `kept`.
pub fn rows_of(tables: Vec<DirectTable>, kept: &[bool], events: usize) -> Result<Plan, ArrowError> {
    let mut built = Vec::with_capacity(tables.len());
    let mut logged = Vec::new();
    for t in tables {
        if t.events.iter().any(|&e| e as usize >= kept.len()) {
            return Err(ArrowError::InvalidArgumentError(format!(
                "{}: a row of a message beyond the {} given",
                t.name,
                kept.len()
            )));
        }
        let all = t.events.iter().all(|&e| kept[e as usize]);
        match t.rows {
            DirectRows::Logged(rows) => {
                let rows = if all {
                    Some(rows)
                } else {
                    rows.kept(|r| kept[t.events[r as usize] as usize])
                };
                if let Some(rows) = rows {
                    logged.push(TableLogged {
                        table: t.name,
                        rows,
                    });
                }
            }
            DirectRows::Batch(batch) if all => built.push(TableBatch {
                table: t.name,
                batch,
            }),
            DirectRows::Batch(batch) => {
                let mask: BooleanArray = t.events.iter().map(|&e| Some(kept[e as usize])).collect();
                let batch = filter_record_batch(&batch, &mask)?;
                if batch.num_rows() > 0 {
                    built.push(TableBatch {
                        table: t.name,
                        batch,
                    });
                }
            }
        }
    }
    Ok(Plan::whole(built, logged, events))
}

/// Each message's estimate for the budgets: the tables' memory shared out by the length of
/// the messages' text (`lengths`, in message order).
pub fn sizes(tables: &[DirectTable], lengths: &[usize]) -> Vec<u64> {
    let memory: usize = tables
        .iter()
        .map(|t| match &t.rows {
            DirectRows::Batch(batch) => batch.get_array_memory_size(),
            DirectRows::Logged(rows) => rows.approx_bytes(),
        })
        .sum();
    let text = lengths.iter().sum::<usize>().max(1) as f64;
    let per_byte = memory as f64 / text;
    lengths
        .iter()
        .map(|&n| (n as f64 * per_byte).ceil() as u64)
        .collect()
}

/// The table `name` among `tables`, made when missing.
fn table<'t, 'a>(tables: &'t mut Vec<Building<'a>>, name: &str) -> &'t mut Building<'a> {
    let at = match tables.iter().position(|t| t.name == name) {
        Some(at) => at,
        None => {
            tables.push(Building {
                name: name.to_string(),
                log: ColumnLog::default(),
                built: Vec::new(),
                events: Vec::new(),
                picks: Vec::new(),
                fixed: Vec::new(),
            });
            tables.len() - 1
        }
    };
    &mut tables[at]
}

impl<'a> Building<'a> {
    /// Appends a row of values numbered as the request's columns, whose names are `names`;
    /// builds the rows logged so far once `chunk` values are.
    fn append(
        &mut self,
        row: impl Iterator<Item = Numbered<'a>>,
        event: u32,
        names: &[String],
        chunk: usize,
    ) -> Result<(), Unsupported> {
        self.log.push_row(row.map(|c| (c.number, c.value)));
        self.events.push(event);
        if self.log.values() >= chunk {
            // A log with values has columns.
            let batch = self.log.take_batch(names).map_err(|_| Unsupported)?;
            self.built.extend(batch);
        }
        Ok(())
    }

    /// All its rows as one batch; `None` if no row has a value.
    fn rows(&mut self, names: &[String]) -> Result<Option<RecordBatch>, Unsupported> {
        let log = std::mem::take(&mut self.log);
        let logged_rows = log.rows();
        let last = log.finish(names).map_err(|_| Unsupported)?;
        if self.built.is_empty() {
            return Ok(last);
        }
        let mut parts = std::mem::take(&mut self.built);
        match last {
            Some(b) => parts.push(b),
            // Rows without a value after the built ones: nulls in every column.
            None if logged_rows > 0 => parts.push(
                RecordBatch::try_new_with_options(
                    Arc::new(Schema::empty()),
                    Vec::new(),
                    &RecordBatchOptions::new().with_row_count(Some(logged_rows)),
                )
                .map_err(|_| Unsupported)?,
            ),
            None => {}
        }
        unify::join(&parts).map(Some).map_err(|_| Unsupported)
    }
}

#[cfg(test)]
#[path = "direct_tests.rs"]
mod tests;
