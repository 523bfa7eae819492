//! A batch request's rows built into one Arrow batch per table on the request's own task, so the
//! team actor takes them whole ([`BufferedTable::push`](super::buffered::BufferedTable::push))
//! instead of appending cell by cell. Built where the cells were just made, the rows are still
//! in the core's cache and the cells are freed by the thread that allocated them; appended by
//! the actor, on another core, every cell was a cache miss and a cross-thread free (the actor's
//! appends cost ~3× in the server what they cost in `benches/batch_stages.rs`).

use arrow::record_batch::RecordBatch;

use super::event::EventRows;
use crate::warehouse::buffer::TableBuffer;

/// Fewest events in a request for its rows to be built on its task: below that, a batch per
/// table costs more than the actor's appends.
pub const MIN_EVENTS: usize = 16;

/// One request's rows: a batch per table, in the order the tables first appear.
pub struct TableBatches {
    /// Table name and its rows.
    pub tables: Vec<(String, RecordBatch)>,
    /// Events the batches hold.
    pub events: usize,
}

/// The rows of `events` as a batch per table, or `None` when a row cannot be buffered (the
/// events then go to the actor one by one, which logs and skips such a row as it always did).
pub fn build<'a>(events: impl Iterator<Item = &'a EventRows>) -> Option<TableBatches> {
    let mut tables: Vec<(String, TableBuffer)> = Vec::new();
    let mut count = 0;
    for ev in events {
        count += 1;
        for (table, cells) in ev.rows() {
            // Few tables a request: a scan beats hashing every row's table name.
            let at = match tables.iter().position(|(name, _)| name == table) {
                Some(at) => at,
                None => {
                    tables.push((table.to_string(), TableBuffer::default()));
                    tables.len() - 1
                }
            };
            tables[at].1.append(cells).ok()?;
        }
    }
    Some(TableBatches {
        tables: tables
            .into_iter()
            .map(|(name, mut buffer)| (name, buffer.take_batch()))
            .collect(),
        events: count,
    })
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

    /// Every row of every event lands in its table's batch, in order: `tracks` first (the
    /// first event's first row), then the event tables as they first appear.
    #[test]
    fn a_request_becomes_a_batch_per_table() {
        let events = [track("a", 0), track("b", 1), track("a", 2)];
        let built = build(events.iter()).unwrap();
        assert_eq!(built.events, 3);
        let names: Vec<&str> = built.tables.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["tracks", "a", "b"]);
        let ids = |i: usize| -> Vec<String> {
            let col = built.tables[i].1.column_by_name("id").unwrap();
            col.as_string::<i32>()
                .iter()
                .map(|v| v.unwrap().to_string())
                .collect()
        };
        assert_eq!(ids(0), ["id0", "id1", "id2"]);
        assert_eq!(ids(1), ["id0", "id2"]);
        assert!(
            built.tables[0].1.column_by_name("n").is_none(),
            "tracks has no properties"
        );
        assert_eq!(built.tables[1].1.column_by_name("n").unwrap().len(), 2);
    }
}
