//! Logged rows ([`LoggedRows`]) appended to a buffer against the same rows appended one by
//! one, and what a buffer does with rows its columns cannot take.

use super::*;
use crate::model::value::{Cell, Value, ValueCow};
use crate::warehouse::column_log::ColumnLog;
use crate::warehouse::column_log::tests::{random_rows, xorshift};

fn cells(names: &[String], row: &[(u32, Value)]) -> Vec<Cell> {
    row.iter()
        .map(|(c, v)| (names[*c as usize].clone().into(), v.clone()))
        .collect()
}

/// Rows logged and appended to a buffer holding other rows give what appending them row
/// by row gives: the same columns, widened the same way, in the same order; and the rows a
/// mask keeps, what appending just those gives.
#[test]
fn logged_rows_append_as_their_rows_would() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let names: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
    let (mut widened, mut dropped) = (0, 0);
    for round in 0..300 {
        let (n_before, n_after) = (next(12) as usize, 1 + next(20) as usize);
        let before = random_rows(&mut next, n_before);
        let after = random_rows(&mut next, n_after);
        let keep: Vec<bool> = after
            .iter()
            .map(|_| round % 2 == 0 || next(3) > 0)
            .collect();
        let (mut want, mut got) = (TableBuffer::default(), TableBuffer::default());
        for row in &before {
            want.append(&cells(&names, row)).expect("appends");
            got.append(&cells(&names, row)).expect("appends");
        }
        let types_before: Vec<ColumnType> = got.columns.iter().map(|c| c.ty()).collect();
        let mut log = ColumnLog::default();
        for (row, keep) in after.iter().zip(&keep) {
            if *keep {
                want.append(&cells(&names, row)).expect("appends");
            }
            log.push_row(row.iter().map(|(c, v)| (*c, ValueCow::Owned(v.clone()))));
        }
        let Some(logged) = log.take_logged(&names).expect("checked") else {
            assert!(after.iter().flatten().all(|(_, v)| *v == Value::Null));
            continue;
        };
        assert_eq!(logged.rows(), after.len());
        let Some(logged) = logged.kept(|r| keep[r as usize]) else {
            assert!(keep.iter().all(|k| !k));
            continue;
        };
        dropped += usize::from(keep.iter().any(|k| !k));
        got.append_logged(&logged).expect("appends");
        widened += types_before
            .iter()
            .zip(&got.columns)
            .filter(|(t, c)| **t != c.ty())
            .count();
        assert_eq!(got.rows(), want.rows());
        let (got, want) = (got.take_batch(), want.take_batch());
        // The same columns in the same order; and so the same batch.
        let order: Vec<usize> = want
            .schema()
            .fields()
            .iter()
            .map(|f| got.schema().index_of(f.name()).expect("the same columns"))
            .collect();
        assert_eq!(got.num_columns(), want.num_columns(), "round {round}");
        assert!(
            order.iter().enumerate().all(|(i, o)| i == *o),
            "round {round}"
        );
        assert_eq!(got, want, "round {round}");
        assert_eq!(TableBuffer::batch_of(&logged).num_rows(), logged.rows());
    }
    assert!(widened > 20, "columns widened by logged rows: {widened}");
    assert!(dropped > 50, "rounds that dropped rows: {dropped}");
}

/// Rows a buffer's columns cannot take leave it as it was: a time outside the calendar
/// for a column of text, with another column new and one widened on the way.
#[test]
fn rows_a_column_cannot_take_leave_the_buffer_whole() {
    let names: Vec<String> = ["t", "n", "new"].iter().map(|s| s.to_string()).collect();
    let mut buffer = TableBuffer::default();
    let row = |t: &str| vec![(names[0].clone().into(), Value::Str(t.into()))];
    buffer.append(&row("text")).expect("appends");
    let n: Vec<Cell> = vec![(names[1].clone().into(), Value::Int(1))];
    buffer.append(&n).expect("appends");
    let mut log = ColumnLog::default();
    log.push_row([
        (1, ValueCow::Owned(Value::Float(0.5))),
        (2, ValueCow::Owned(Value::Bool(true))),
    ]);
    log.push_row([(0, ValueCow::Owned(Value::Ts(i64::MAX)))]);
    let logged = log.take_logged(&names).expect("a time of its own column");
    let logged = logged.expect("has values");
    let before = (buffer.rows(), buffer.columns.len(), buffer.columns[1].ty());
    assert!(buffer.append_logged(&logged).is_err());
    let after = (buffer.rows(), buffer.columns.len(), buffer.columns[1].ty());
    assert_eq!(after, before, "nothing of the rows stays");
    assert!(!buffer.has_column("new"));
    buffer.append(&row("more")).expect("still appends");
    assert_eq!(buffer.take_batch().num_rows(), 3);
}
