//! The direct build against the usual one: the same messages, the same tables, batch for batch.

use super::*;
use crate::bench::generator::Generator;
use crate::bench::mixes::Mix;
use crate::ingest::segment::parse_message;
use crate::warehouse::buffer::TableBuffer;

const MAX_COLUMNS: usize = 1000;

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp_micros(1_795_000_000_123_456).unwrap()
}

/// Each table's rows as the usual way builds them: cells, then every row appended whole; `Err`
/// when it refuses a message.
fn usual(msgs: &[String], shared: Shared) -> Result<Vec<(String, RecordBatch)>, String> {
    let mut tables: Vec<(String, TableBuffer)> = Vec::new();
    for m in msgs {
        let top = Top::parse(m).map_err(|e| e.to_string())?;
        let (_, rows) = parse_message(&top, None, shared, now(), MAX_COLUMNS, None)
            .map_err(|e| format!("{m}: {e:?}"))?;
        for (table, cells) in rows.rows() {
            let at = match tables.iter().position(|(n, _)| n == table) {
                Some(at) => at,
                None => {
                    tables.push((table.to_string(), TableBuffer::default()));
                    tables.len() - 1
                }
            };
            tables[at].1.append(cells).map_err(|e| e.to_string())?;
        }
    }
    Ok(tables
        .into_iter()
        .map(|(n, mut b)| (n, b.take_batch()))
        .collect())
}

thread_local! {
    /// Values a table logs before building them, for the tests that set it (else the default).
    static CHUNK_VALUES: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    /// Rows below which a table is logged, not built (else the default).
    static LOG_BELOW: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

fn direct(msgs: &[String], shared: Shared) -> Result<Vec<DirectTable>, Unsupported> {
    let mut build = DirectBuild {
        chunk_values: CHUNK_VALUES.get(),
        log_below: LOG_BELOW.get(),
        ..DirectBuild::default()
    };
    for m in msgs {
        let top = Top::parse(m).map_err(|_| Unsupported)?;
        build.message(&top, shared, now(), MAX_COLUMNS)?;
    }
    build.finish()
}

/// A table's rows as one batch (logged ones built).
fn batch_of(rows: &DirectRows) -> RecordBatch {
    match rows {
        DirectRows::Batch(batch) => batch.clone(),
        DirectRows::Logged(rows) => TableBuffer::batch_of(rows),
    }
}

fn assert_same(msgs: &[String]) {
    assert_eq!(
        compare(msgs),
        Ok(true),
        "built directly, as the usual way builds it"
    );
}

/// The usual way and the direct way compared without panicking: `Ok(true)` when the direct way
/// built the request and agrees, `Ok(false)` when it declined, `Err` on a divergence.
fn compare(msgs: &[String]) -> Result<bool, String> {
    compare_with(msgs, Shared::default())
}

/// [`compare`] of a batch whose messages share `shared`: its tables logged where they have few
/// rows (the server's way), then every table built, whatever its rows.
fn compare_with(msgs: &[String], shared: Shared) -> Result<bool, String> {
    let logged = compare_once(msgs, shared)?;
    let before = LOG_BELOW.replace(Some(0));
    let built = compare_once(msgs, shared);
    LOG_BELOW.set(before);
    match (logged, built?) {
        (a, b) if a == b => Ok(a),
        (a, b) => Err(format!("logged took it: {a}, built took it: {b}")),
    }
}

fn compare_once(msgs: &[String], shared: Shared) -> Result<bool, String> {
    let got = match std::panic::catch_unwind(|| direct(msgs, shared)) {
        Ok(Ok(got)) => got,
        Ok(Err(Unsupported)) => return Ok(false),
        Err(_) => return Err("direct panicked".into()),
    };
    let want = match std::panic::catch_unwind(|| usual(msgs, shared)) {
        Ok(Ok(w)) => w,
        Ok(Err(e)) => return Err(format!("direct built, usual refused: {e}")),
        Err(_) => return Err("usual panicked".into()),
    };
    let got_names: Vec<&str> = got.iter().map(|t| t.name.as_str()).collect();
    let want_names: Vec<&str> = want.iter().map(|(n, _)| n.as_str()).collect();
    if got_names != want_names {
        return Err(format!("tables {got_names:?} vs {want_names:?}"));
    }
    for ((name, want), got) in want.iter().zip(&got) {
        let got_batch = batch_of(&got.rows);
        let mut gs: Vec<String> = got_batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let mut ws: Vec<String> = want
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        gs.sort();
        ws.sort();
        if gs != ws {
            return Err(format!("{name}: columns {gs:?} vs {ws:?}"));
        }
        let order: Vec<usize> = want
            .schema()
            .fields()
            .iter()
            .map(|f| got_batch.schema().index_of(f.name()).unwrap())
            .collect();
        let g = got_batch.project(&order).unwrap();
        if g.schema() != want.schema() {
            return Err(format!(
                "{name}: schema {:?} vs {:?}",
                g.schema(),
                want.schema()
            ));
        }
        if &g != want {
            return Err(format!("{name}: rows {g:?} vs {want:?}"));
        }
        if got.events.len() != want.num_rows() {
            return Err(format!("{name}: events"));
        }
    }
    Ok(true)
}

#[test]
fn every_mix_is_built_as_the_usual_way_builds_it() {
    for mix in [Mix::Shop, Mix::Wide, Mix::Narrow, Mix::Sdk, Mix::Strings] {
        let mut generator = Generator::new("0123456789abcdef", 11, now()).with_mix(mix);
        let msgs: Vec<String> = (0..400).map(|_| generator.message().to_string()).collect();
        assert_same(&msgs);
    }
}

/// A table's rows built a few values at a time and joined at the end are the rows built at
/// once: every mix, and the shapes below, at several sizes of the pieces.
#[test]
fn rows_built_in_pieces_are_the_rows_built_at_once() {
    for chunk in [1, 7, 100] {
        CHUNK_VALUES.set(Some(chunk));
        for mix in [Mix::Shop, Mix::Wide, Mix::Narrow, Mix::Sdk, Mix::Strings] {
            let mut generator = Generator::new("0123456789abcdef", 11, now()).with_mix(mix);
            let msgs: Vec<String> = (0..120).map(|_| generator.message().to_string()).collect();
            assert_same(&msgs);
        }
        shapes_nobody_here_generates_are_built_as_the_usual_way_builds_them();
        // Events of one table whose last rows have no value of their own.
        let msgs: Vec<String> = (0..40)
            .map(|i| {
                let props = if i < 30 {
                    r#","properties":{"a":1,"b":"x"}"#
                } else {
                    ""
                };
                format!(r#"{{"type":"track","event":"e","userId":"u","messageId":"m{i}"{props}}}"#)
            })
            .collect();
        assert_same(&msgs);
    }
    CHUNK_VALUES.set(None);
}

#[test]
fn shapes_nobody_here_generates_are_built_as_the_usual_way_builds_them() {
    let msgs: Vec<String> = [
        // Names to normalise, escapes in values and keys, nesting past the flattening depth,
        // arrays, an empty object, nulls, names reserved for standard columns.
        r#"{"type":"track","event":"Page Viewed","userId":"u1","messageId":"m1","properties":{"productId":"p\"1","Page Title":"caf\u00e9","k\u0065y":1,"deep":{"a":{"b":{"c":1}}},"list":[1,{"x":2}],"empty":{},"gone":null,"timestamp":5,"context_x":true,"id":"own"},"context":{"ip":"1.2.3.4","library":{"name":"x","version":"1"},"traits":{"plan":"pro"}}}"#,
        // The same event later: a column widened (int, then float, then text), a new column.
        r#"{"type":"track","event":"Page Viewed","anonymousId":"a2","messageId":"m2","properties":{"productId":7,"deep":{"a":{"b":{"c":2}}},"later":-0,"big":12345678901234567890}}"#,
        r#"{"type":"track","event":"page viewed","anonymousId":"a3","messageId":"m3","properties":{"productId":2.5,"later":1.5e3},"timestamp":"2026-01-02T03:04:05.678+02:00","sentAt":"2026-01-02T03:04:06Z"}"#,
        r#"{"type":"track","event":"page_viewed","userId":42,"messageId":"m4","properties":{"productId":"text now"}}"#,
        // The other calls, with their own columns and properties that would take them.
        r#"{"type":"page","name":"Home","category":"docs","userId":"u5","messageId":"m5","properties":{"name":"clash","path":"/"}}"#,
        r#"{"type":"screen","name":"Main","userId":"u6","messageId":"m6"}"#,
        r#"{"type":"identify","userId":"u7","messageId":"m7","traits":{"email":"a@b.c","Plan":"pro"}}"#,
        r#"{"type":"identify","userId":"u8","messageId":"m8","context":{"traits":{"email":"x@y.z"}}}"#,
        r#"{"type":"group","groupId":"g9","userId":"u9","messageId":"m9","traits":{"group_id":"clash","size":3}}"#,
        r#"{"type":"alias","userId":"u10","previousId":"p10","messageId":"m10"}"#,
        r#"{"type":"track","event":"tracks","userId":"u11","messageId":"m11","properties":null,"context":{}}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_same(&msgs);
}

#[test]
fn what_flattening_must_resolve_is_left_to_the_usual_way() {
    let base = r#""type":"track","event":"e","userId":"u","messageId":"m""#;
    for rest in [
        // Two keys on one column, or one key twice: `_unmapped` keeps the loser.
        r#""properties":{"a":1,"A":2}"#,
        r#""properties":{"a":1,"a":2}"#,
        r#""properties":{"a_b":1,"a":{"b":2}}"#,
        r#""context":{"page_path":"/","page":{"path":"/x"}}"#,
        // A name that makes no column, a number out of range, a refused message.
        r#""properties":{"!!":1}"#,
        r#""properties":{"n":1e400}"#,
        r#""properties":[1]"#,
    ] {
        let msg = format!("{{{base},{rest}}}");
        assert_eq!(
            direct(std::slice::from_ref(&msg), Shared::default()).err(),
            Some(Unsupported),
            "{msg}"
        );
    }
    // Over the column limit: the usual way names the fault.
    let many: Vec<String> = (0..MAX_COLUMNS).map(|i| format!("\"p{i}\":1")).collect();
    let msg = format!("{{{base},\"properties\":{{{}}}}}", many.join(","));
    assert_eq!(direct(&[msg], Shared::default()).err(), Some(Unsupported));
}

#[test]
fn each_row_names_the_message_it_came_from() {
    let msgs: Vec<String> = [
        r#"{"type":"track","event":"a","userId":"u","messageId":"m1"}"#,
        r#"{"type":"identify","userId":"u","messageId":"m2"}"#,
        r#"{"type":"track","event":"b","userId":"u","messageId":"m3"}"#,
        r#"{"type":"track","event":"a","userId":"u","messageId":"m4"}"#,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let tables = direct(&msgs, Shared::default()).unwrap();
    assert!(
        tables
            .iter()
            .all(|t| t.events.len() == batch_of(&t.rows).num_rows())
    );
    let events: Vec<(&str, &[u32])> = tables
        .iter()
        .map(|t| (t.name.as_str(), t.events.as_slice()))
        .collect();
    assert_eq!(
        events,
        vec![
            ("tracks", &[0, 2, 3][..]),
            ("a", &[0, 3][..]),
            ("identifies", &[1][..]),
            ("b", &[2][..]),
        ]
    );
}

/// Duplicates leave the tables: only the rows of the messages kept stay, and a table with none
/// left goes; a row of a message not in the list is refused, not dropped.
#[test]
fn the_rows_of_messages_not_logged_are_taken_out() {
    let msgs: Vec<String> = (0..4)
        .map(|i| {
            let event = ["a", "b", "a", "a"][i];
            format!(r#"{{"type":"track","event":"{event}","userId":"u","messageId":"m{i}"}}"#)
        })
        .collect();
    // Logged (few rows, the server's way), then built.
    for log_below in [None, Some(0)] {
        LOG_BELOW.set(log_below);
        let tables = direct(&msgs, Shared::default()).unwrap();
        let logged = tables
            .iter()
            .filter(|t| matches!(t.rows, DirectRows::Logged(_)))
            .count();
        assert_eq!(logged, if log_below.is_none() { 3 } else { 0 });
        let kept = rows_of(tables, &[true, false, false, true], 4)
            .unwrap()
            .finish(Vec::new());
        let ids = |name: &str| -> Vec<String> {
            let batch = match kept.tables.iter().find(|t| t.table == name) {
                Some(t) => t.batch.clone(),
                None => {
                    let t = kept.logged.iter().find(|t| t.table == name).unwrap();
                    TableBuffer::batch_of(&t.rows)
                }
            };
            let id = batch.column_by_name("id").unwrap();
            let id = id
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .unwrap();
            id.iter().map(|v| v.unwrap().to_string()).collect()
        };
        assert_eq!(ids("tracks"), ["m0", "m3"]);
        assert_eq!(ids("a"), ["m0", "m3"]);
        assert!(!kept.built("b"), "b kept no row");
        let tables = direct(&msgs, Shared::default()).unwrap();
        assert!(rows_of(tables, &[true, true], 2).is_err());
    }
    LOG_BELOW.set(None);
}

/// A message's scratch vectors keep their room for the next message, at another lifetime.
#[test]
fn recycled_scratch_keeps_its_room() {
    let text = String::from("borrowed");
    let mut v: Vec<&str> = Vec::with_capacity(64);
    v.push(&text);
    let u: Vec<&'static str> = recycle(v);
    assert!(u.is_empty());
    assert!(u.capacity() >= 64, "room {}", u.capacity());
}

#[path = "direct_campaign_tests.rs"]
mod campaign;
