//! A batch request's rows built into one Arrow batch per table on the request's own task, so the
//! team actor takes them whole ([`BufferedTable::push`](super::buffered::BufferedTable::push))
//! instead of appending cell by cell. Built where the cells were just made, the rows are still
//! in the core's cache and the cells are freed by the thread that allocated them; appended by
//! the actor, on another core, every cell was a cache miss and a cross-thread free (the actor's
//! appends cost ~3× in the server what they cost in `benches/batch_stages.rs`).
//!
//! Only tables with [`MIN_TABLE_ROWS`] rows in the request are built so: a batch costs a builder
//! per column to make and an alignment per column to join, which a few rows of a wide table do
//! not pay back (the wide mix, 12 tables of ~60 columns, ~28 rows each a request, took 10–15 %
//! more CPU an event when every table was built). The events with rows in the other tables go
//! to the actor whole, which appends just those rows.
//!
//! A track call's two rows (`tracks` and its event table) start with the same cells, the call's
//! own ([`EventRows::fixed`]). An event table of track calls built beside `tracks` takes those
//! columns from the `tracks` batch, one gather a column, and appends only the rest of each row
//! (`batch_stages` `bulk_build`: narrow −20 to −27 %, shop −13 %; BENCHMARKS.md). Its columns
//! come in that order: the call's own, then context and properties, where whole rows put a
//! column first seen late (a `user_id` from the third event on) after them. Every reader of a
//! batch, the joins, the flush and the catalog match columns by name, so only the order in
//! which a new table's columns are listed can differ.

use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{Field, Schema};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::event::EventRows;
use crate::model::value::Name;
use crate::warehouse::buffer::TableBuffer;
use crate::warehouse::logged_rows::LoggedRows;

/// Fewest events in a request for its rows to be built on its task.
pub const MIN_EVENTS: usize = 16;

/// Fewest rows of one table in a request for them to be built into a batch.
pub const MIN_TABLE_ROWS: usize = 64;

/// The table every track call also writes a row to.
const TRACKS: &str = "tracks";

/// One table's rows of a request, in one batch.
pub struct TableBatch {
    pub table: String,
    pub batch: RecordBatch,
}

/// One table's rows of a request, logged ([`super::direct`]'s few rows of a table).
pub struct TableLogged {
    pub table: String,
    pub rows: LoggedRows,
}

/// One request's rows: a batch per table that had enough of them, the logged rows of others,
/// and the events with rows in other tables, whose rows in those tables the actor appends one
/// by one.
pub struct TableBatches {
    pub tables: Vec<TableBatch>,
    pub logged: Vec<TableLogged>,
    /// Events with a row in a table not in `tables`.
    pub rest: Vec<EventRows>,
}

impl TableBatches {
    /// Whether `table`'s rows are in a batch or logged.
    pub fn built(&self, table: &str) -> bool {
        self.tables.iter().any(|t| t.table == table) || self.logged.iter().any(|t| t.table == table)
    }
}

/// How one table's rows are gathered.
enum Rows {
    /// Every cell of every row appended.
    Whole(TableBuffer),
    /// The rows of an event table whose every event is a track call, with `tracks` built too:
    /// the call's own cells (id, event, times, user: [`EventRows::fixed`]) are already in the
    /// `tracks` batch, so they are gathered from it, one `take` a column, at `picks` (each
    /// event's row there); only the rest of each row (context, properties) is appended.
    BesideTracks {
        rest: TableBuffer,
        picks: Vec<u32>,
        /// The call's own columns these events have, in order of first appearance.
        fixed: Vec<Name>,
    },
}

/// A table's column names.
pub type ColumnNames<'a> = Box<dyn Iterator<Item = &'a str> + 'a>;

/// A request's built batches, and which events keep rows for the actor.
pub struct Plan {
    tables: Vec<TableBatch>,
    logged: Vec<TableLogged>,
    /// Per event: whether it has a row in a table not built.
    pub rest: Vec<bool>,
}

/// A table's rows in a request: how many, and whether every event writing one is a track call.
struct Count<'a> {
    table: &'a str,
    rows: usize,
    all_tracked: bool,
}

/// Plans and builds the rows of `events`: `None` when no table has enough rows, or when a row
/// cannot be buffered (the events then go to the actor one by one, which logs and skips such a
/// row as it always did).
pub fn build<'a>(events: &[&'a EventRows]) -> Option<Plan> {
    // Few tables a request: a scan beats hashing every row's table name.
    let mut counts: Vec<Count<'a>> = Vec::new();
    for ev in events {
        for (table, _) in ev.rows() {
            match counts.iter_mut().find(|c| c.table == table) {
                Some(c) => {
                    c.rows += 1;
                    c.all_tracked &= ev.tracks;
                }
                None => counts.push(Count {
                    table,
                    rows: 1,
                    all_tracked: ev.tracks,
                }),
            }
        }
    }
    let tracks_built = counts
        .iter()
        .any(|c| c.table == TRACKS && c.rows >= MIN_TABLE_ROWS);
    let mut tables: Vec<(String, Rows)> = counts
        .iter()
        .filter(|c| c.rows >= MIN_TABLE_ROWS)
        .map(|c| {
            let rows = if tracks_built && c.all_tracked && c.table != TRACKS {
                Rows::BesideTracks {
                    rest: TableBuffer::for_rows(c.rows),
                    picks: Vec::with_capacity(c.rows),
                    fixed: Vec::new(),
                }
            } else {
                Rows::Whole(TableBuffer::for_rows(c.rows))
            };
            (c.table.to_string(), rows)
        })
        .collect();
    if tables.is_empty() {
        return None;
    }
    let mut rest = vec![false; events.len()];
    // Each track call's row in the `tracks` batch, when it is built.
    let mut tracks_row = 0u32;
    for (ev, rest) in events.iter().zip(&mut rest) {
        for (table, cells) in ev.rows() {
            match tables.iter_mut().find(|(name, _)| name == table) {
                Some((_, Rows::Whole(buffer))) => buffer.append(cells).ok()?,
                Some((_, Rows::BesideTracks { rest, picks, fixed })) => {
                    // Not a track call: the table would not have been planned so.
                    let at = tracks_row.checked_sub(1)?;
                    for (name, _) in &ev.standard[..ev.fixed] {
                        if !fixed.iter().any(|f| same_name(f, name)) {
                            fixed.push(name.clone());
                        }
                    }
                    picks.push(at);
                    rest.append(ev.standard[ev.fixed..].iter().chain(&ev.properties))
                        .ok()?;
                }
                None => *rest = true,
            }
            if table == TRACKS {
                tracks_row += 1;
            }
        }
    }
    Some(Plan {
        tables: batches(tables)?,
        logged: Vec::new(),
        rest,
    })
}

/// The batch of each table, `tracks` first taken so the tables beside it can gather from it;
/// `None` if one cannot be gathered.
fn batches(tables: Vec<(String, Rows)>) -> Option<Vec<TableBatch>> {
    let mut built: Vec<TableBatch> = Vec::with_capacity(tables.len());
    let mut beside = Vec::new();
    for (table, rows) in tables {
        match rows {
            Rows::Whole(mut buffer) => built.push(TableBatch {
                table,
                batch: buffer.take_batch(),
            }),
            Rows::BesideTracks { rest, picks, fixed } => beside.push((table, rest, picks, fixed)),
        }
    }
    if beside.is_empty() {
        return Some(built);
    }
    let tracks = &built.iter().find(|t| t.table == TRACKS)?.batch;
    let mut gathered = Vec::with_capacity(beside.len());
    for (table, mut rest, picks, fixed) in beside {
        // No context or property in any of the events (empty or null-only objects): no column
        // of their own, and a batch of none cannot be made.
        let own = if rest.column_names().next().is_some() {
            Some(rest.take_batch())
        } else {
            None
        };
        let batch = beside_tracks(tracks, own, picks, &fixed).ok()?;
        gathered.push(TableBatch { table, batch });
    }
    built.extend(gathered);
    Some(built)
}

impl Plan {
    /// The plan of `events` events whose every row is in `tables` or `logged`.
    pub(super) fn whole(tables: Vec<TableBatch>, logged: Vec<TableLogged>, events: usize) -> Plan {
        Plan {
            tables,
            logged,
            rest: vec![false; events],
        }
    }

    /// Each built or logged table's name and its columns' names.
    pub fn columns(&self) -> impl Iterator<Item = (&str, ColumnNames<'_>)> {
        let built = self.tables.iter().map(|t| {
            let names = t
                .batch
                .schema_ref()
                .fields()
                .iter()
                .map(|f| f.name().as_str());
            (t.table.as_str(), Box::new(names) as ColumnNames<'_>)
        });
        let logged = self.logged.iter().map(|t| {
            (
                t.table.as_str(),
                Box::new(t.rows.column_names()) as ColumnNames<'_>,
            )
        });
        built.chain(logged)
    }

    /// Whether `table`'s rows are in a batch or logged.
    pub fn built(&self, table: &str) -> bool {
        self.tables.iter().any(|t| t.table == table) || self.logged.iter().any(|t| t.table == table)
    }

    /// The built batches and logged rows, with the events that keep rows for the actor.
    pub fn finish(self, rest: Vec<EventRows>) -> TableBatches {
        TableBatches {
            tables: self.tables,
            logged: self.logged,
            rest,
        }
    }
}

/// Whether two column names are the same; the call's own names are static, so the same
/// address says so without comparing the text.
pub(super) fn same_name(a: &Name, b: &Name) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

/// An event table's batch: the `fixed` columns taken from `tracks` at `picks`, then the columns
/// of `own` (none when its events had no context or property); an error if one of those takes
/// a `fixed` name (the call's own names are reserved, so none should, and a batch would hold
/// the name twice).
pub(super) fn beside_tracks(
    tracks: &RecordBatch,
    own: Option<RecordBatch>,
    picks: Vec<u32>,
    fixed: &[Name],
) -> Result<RecordBatch, ArrowError> {
    if let Some(own) = &own
        && let Some(f) = own
            .schema()
            .fields()
            .iter()
            .find(|f| fixed.iter().any(|n| n == f.name()))
    {
        return Err(ArrowError::SchemaError(format!(
            "{} is the call's own",
            f.name()
        )));
    }
    let rows = picks.len();
    let indices = UInt32Array::from(picks);
    let own_columns = own.as_ref().map_or(0, RecordBatch::num_columns);
    let mut fields: Vec<Arc<Field>> = Vec::with_capacity(fixed.len() + own_columns);
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(fields.capacity());
    let schema = tracks.schema();
    for name in fixed {
        let (i, field) = schema
            .column_with_name(name)
            .ok_or_else(|| ArrowError::SchemaError(format!("{name} is not in tracks")))?;
        fields.push(Arc::new(field.clone()));
        columns.push(take(tracks.column(i), &indices, None)?);
    }
    if let Some(own) = own {
        fields.extend(own.schema().fields().iter().cloned());
        columns.extend(own.columns().iter().cloned());
    }
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}
#[cfg(test)]
mod tests {
    use arrow::array::AsArray;

    use super::*;
    use crate::model::value::Value;

    fn track(table: &str, n: i64) -> EventRows {
        EventRows {
            id: format!("id{n}"),
            client_id: true,
            tracks: true,
            table: table.to_string(),
            standard: vec![("id".into(), Value::Str(format!("id{n}")))],
            fixed: 1,
            tracks_only: vec![],
            properties: vec![("n".into(), Value::Int(n))],
        }
    }

    /// The rows of tables with enough of them land in their table's batch, in order; an event
    /// with a row in another table is kept for the actor.
    #[test]
    fn tables_with_enough_rows_become_batches_and_the_rest_stays() {
        let n = MIN_TABLE_ROWS as i64;
        let mut events: Vec<EventRows> = (0..n).map(|i| track("a", i)).collect();
        events.insert(5, track("b", 1000));
        let refs: Vec<&EventRows> = events.iter().collect();
        let plan = build(&refs).unwrap();
        let rest_at: Vec<usize> = (0..events.len()).filter(|&i| plan.rest[i]).collect();
        assert_eq!(rest_at, [5], "only the event of the small table");
        let built = plan.finish(vec![events[5].clone()]);
        let names: Vec<&str> = built.tables.iter().map(|t| t.table.as_str()).collect();
        assert_eq!(names, ["tracks", "a"]);
        assert!(built.built("tracks") && !built.built("b"));
        let ids = |i: usize| -> Vec<String> {
            let col = built.tables[i].batch.column_by_name("id").unwrap();
            col.as_string::<i32>()
                .iter()
                .map(|v| v.unwrap().to_string())
                .collect()
        };
        let mut tracks: Vec<String> = (0..n).map(|i| format!("id{i}")).collect();
        tracks.insert(5, "id1000".into());
        assert_eq!(ids(0), tracks, "every event's tracks row, in order");
        assert_eq!(ids(1).len(), MIN_TABLE_ROWS);
        assert!(built.tables[0].batch.column_by_name("n").is_none());

        let few: Vec<EventRows> = (0..3).map(|i| track("c", i)).collect();
        let refs: Vec<&EventRows> = few.iter().collect();
        assert!(build(&refs).is_none(), "no table with enough rows");
    }

    /// Messages of two events and an identify, in shapes that vary from one to the next: a
    /// `userId` on some, a `sentAt` on others, context on every third (one key sometimes null),
    /// and a property that is an integer, then a float, then text.
    fn varied(n: usize) -> Vec<EventRows> {
        let now = chrono::Utc::now();
        (0..n)
            .map(|i| {
                let event = ["Signed Up", "Clicked"][i % 2];
                let mut m = serde_json::json!({
                    "type": "track",
                    "event": event,
                    "messageId": format!("m{i}"),
                    "anonymousId": format!("a{}", i % 7),
                    "timestamp": "2026-11-26T14:07:05.478Z",
                    "properties": {"n": i, "plan": "pro"},
                });
                if i % 5 == 0 {
                    m["userId"] = format!("u{i}").into();
                }
                if i % 3 == 1 {
                    m["sentAt"] = "2026-11-26T14:07:06Z".into();
                }
                if i % 3 == 0 {
                    m["context"] = serde_json::json!({"ip": "10.0.0.1", "os": {"name": "x"}});
                    if i % 9 == 0 {
                        m["context"]["ip"] = serde_json::Value::Null;
                    }
                }
                if i > 150 {
                    m["properties"]["n"] = (i as f64 / 3.0).into();
                }
                if i > 200 {
                    m["properties"]["n"] = "many".into();
                }
                if i % 50 == 7 {
                    m = serde_json::json!({"type": "identify", "userId": "u", "messageId": format!("m{i}")});
                }
                let text = m.to_string();
                let top: crate::ingest::top_fields::Top = serde_json::from_str(&text).unwrap();
                let shared = crate::ingest::segment::Shared::default();
                crate::ingest::segment::parse_message(&top, None, shared, now, 1000, None)
                    .unwrap()
                    .1
            })
            .collect()
    }

    /// An event table gathered beside `tracks` holds what appending its whole rows would: the
    /// same columns, of the same types, with the same values, whatever each event carried — also
    /// when no event of the table has a context or a property of its own.
    #[test]
    fn a_table_gathered_beside_tracks_equals_its_rows_appended_whole() {
        let mut events = varied(240);
        for ev in events.iter_mut().filter(|e| e.table == "clicked") {
            ev.standard.truncate(ev.fixed);
            ev.properties.clear();
        }
        let refs: Vec<&EventRows> = events.iter().collect();
        let built = build(&refs).unwrap().finish(Vec::new());
        assert!(built.built("tracks"));
        for table in ["signed_up", "clicked"] {
            let mut whole = TableBuffer::default();
            for ev in events.iter().filter(|e| e.table == table) {
                whole.append(ev.event_row()).unwrap();
            }
            let want = whole.take_batch();
            let got = &built
                .tables
                .iter()
                .find(|t| t.table == table)
                .unwrap()
                .batch;
            let names = |b: &RecordBatch| -> Vec<String> {
                let mut v: Vec<String> = b
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect();
                v.sort();
                v
            };
            assert_eq!(names(got), names(&want), "{table}");
            assert!(names(&want).contains(&"user_id".to_string()));
            assert!(names(&want).contains(&"sent_at".to_string()));
            for field in want.schema().fields() {
                let name = field.name();
                let (a, b) = (
                    got.column_by_name(name).unwrap(),
                    want.column_by_name(name).unwrap(),
                );
                assert_eq!(a.data_type(), b.data_type(), "{table}.{name}");
                assert_eq!(a.as_ref(), b.as_ref(), "{table}.{name}");
            }
            assert_eq!(got.num_rows(), want.num_rows());
        }
        // The identify calls' table is not a track call's: appended whole, or left to the actor.
        assert!(!built.built("identifies"));
    }
}
