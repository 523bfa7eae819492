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

use arrow::record_batch::RecordBatch;

use super::event::EventRows;
use crate::warehouse::buffer::TableBuffer;

/// Fewest events in a request for its rows to be built on its task.
pub const MIN_EVENTS: usize = 16;

/// Fewest rows of one table in a request for them to be built into a batch.
pub const MIN_TABLE_ROWS: usize = 64;

/// One request's rows: a batch per table that had enough of them, and the events with rows in
/// other tables, whose rows in those tables the actor appends one by one.
pub struct TableBatches {
    /// Table name and its rows.
    pub tables: Vec<(String, RecordBatch)>,
    /// Events with a row in a table not in `tables`.
    pub rest: Vec<EventRows>,
}

impl TableBatches {
    /// Whether `table`'s rows are in a batch.
    pub fn built(&self, table: &str) -> bool {
        self.tables.iter().any(|(name, _)| name == table)
    }
}

/// Which of a request's tables are built, and which events keep rows for the actor.
pub struct Plan {
    tables: Vec<(String, TableBuffer)>,
    /// Per event: whether it has a row in a table not built.
    pub rest: Vec<bool>,
}

/// Plans and builds the rows of `events`: `None` when no table has enough rows, or when a row
/// cannot be buffered (the events then go to the actor one by one, which logs and skips such a
/// row as it always did).
pub fn build<'a>(events: &[&'a EventRows]) -> Option<Plan> {
    // Few tables a request: a scan beats hashing every row's table name.
    let mut counts: Vec<(&'a str, usize)> = Vec::new();
    for ev in events {
        for (table, _) in ev.rows() {
            match counts.iter_mut().find(|(name, _)| *name == table) {
                Some((_, n)) => *n += 1,
                None => counts.push((table, 1)),
            }
        }
    }
    let mut tables: Vec<(String, TableBuffer)> = counts
        .iter()
        .filter(|(_, n)| *n >= MIN_TABLE_ROWS)
        .map(|(name, _)| (name.to_string(), TableBuffer::default()))
        .collect();
    if tables.is_empty() {
        return None;
    }
    let mut rest = vec![false; events.len()];
    for (ev, rest) in events.iter().zip(&mut rest) {
        for (table, cells) in ev.rows() {
            match tables.iter_mut().find(|(name, _)| name == table) {
                Some((_, buffer)) => buffer.append(cells).ok()?,
                None => *rest = true,
            }
        }
    }
    Some(Plan { tables, rest })
}

impl Plan {
    /// The built batches, with the events that keep rows for the actor.
    pub fn finish(self, rest: Vec<EventRows>) -> TableBatches {
        TableBatches {
            tables: self
                .tables
                .into_iter()
                .map(|(name, mut buffer)| (name, buffer.take_batch()))
                .collect(),
            rest,
        }
    }
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
        let names: Vec<&str> = built.tables.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["tracks", "a"]);
        assert!(built.built("tracks") && !built.built("b"));
        let ids = |i: usize| -> Vec<String> {
            let col = built.tables[i].1.column_by_name("id").unwrap();
            col.as_string::<i32>()
                .iter()
                .map(|v| v.unwrap().to_string())
                .collect()
        };
        let mut tracks: Vec<String> = (0..n).map(|i| format!("id{i}")).collect();
        tracks.insert(5, "id1000".into());
        assert_eq!(ids(0), tracks, "every event's tracks row, in order");
        assert_eq!(ids(1).len(), MIN_TABLE_ROWS);
        assert!(built.tables[0].1.column_by_name("n").is_none());

        let few: Vec<EventRows> = (0..3).map(|i| track("c", i)).collect();
        let refs: Vec<&EventRows> = few.iter().collect();
        assert!(build(&refs).is_none(), "no table with enough rows");
    }
}
