//! End to end over HTTP: events in, Parquet committed, tables back out as JSON.

use crate::common;

use std::time::Duration;

use common::{SEED_EVENT, TestServer, wait_for};
use serde_json::{Value, json};

fn names(meta: &Value) -> Vec<(String, String)> {
    meta.as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["type"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn seed_sample_event_round_trips() {
    let t = TestServer::start(|_| {}).await;
    let (status, body) = t.send_raw(SEED_EVENT).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], json!(true));
    let id = body["id"].as_str().unwrap();
    assert!(
        uuid::Uuid::parse_str(id).is_ok(),
        "generated id is a UUID: {id}"
    );
    t.flush().await;

    let element = t.element("purchased_an_item", None);
    let (status, table) = t.download(&element, json!({})).await;
    assert_eq!(status, 200, "{table}");
    let meta = names(&table["meta"]);
    for (col, ty) in [
        ("id", "string"),
        ("event", "string"),
        ("event_text", "string"),
        ("timestamp", "timestamp"),
        ("received_at", "timestamp"),
        ("revenue", "string"),
        ("shipping_method", "string"),
    ] {
        assert!(
            meta.contains(&(col.into(), ty.into())),
            "{col}:{ty} missing from {meta:?}"
        );
    }
    assert_eq!(table["rows"], json!(1));
    assert_eq!(table["next_cursor"], Value::Null);
    let row = &table["data"][0];
    assert_eq!(row["id"], json!(id));
    assert_eq!(row["event"], json!("purchased_an_item"));
    assert_eq!(row["event_text"], json!("Purchased an Item"));
    assert_eq!(row["timestamp"], json!("2012-12-02T00:30:08.276Z"));
    assert_eq!(row["revenue"], json!("39.95"));
    assert_eq!(row["shipping_method"], json!("Premium"));
    assert!(row["received_at"].as_str().unwrap().ends_with('Z'));

    // The alternate path serves the same table.
    let resp = t
        .http
        .post(t.url("/api/data/table"))
        .header("x-api-key", &t.seeded.key)
        .header("Content-Type", "application/json")
        .body(json!({"canvasId": t.seeded.canvas, "elementId": element}).to_string())
        .send()
        .await
        .unwrap();
    let (status, alt) = common::status_json(resp).await;
    assert_eq!(status, 200);
    assert_eq!(alt, table);
}

#[tokio::test]
async fn hundreds_of_events_land_in_tracks_and_event_tables_in_order() {
    let t = TestServer::start(|_| {}).await;
    let kinds = ["Signed Up", "Page Viewed", "orderCompleted"];
    let mut sent: Vec<(usize, String)> = Vec::new();
    for i in 0..300usize {
        let kind = i % 3;
        let id = t
            .send(json!({"event": kinds[kind], "messageId": format!("m-{i:04}"), "userId": format!("u{}", i % 7),
                         "properties": {"n": i, "label": format!("row {i}")}}))
            .await;
        assert_eq!(id, format!("m-{i:04}"), "messageId becomes the id");
        sent.push((kind, id));
        if i % 70 == 69 {
            t.flush().await; // several files per table
        }
    }
    t.flush().await;

    let tracks = t.rows(&t.element("tracks", None)).await;
    let ids: Vec<&str> = tracks.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let expected: Vec<&str> = sent.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(
        ids, expected,
        "tracks holds every event once, in ingestion order"
    );
    assert!(
        tracks.iter().all(|r| r.get("n").is_none()),
        "tracks has standard columns only"
    );

    for (k, table) in ["signed_up", "page_viewed", "order_completed"]
        .iter()
        .enumerate()
    {
        let rows = t.rows(&t.element(table, None)).await;
        let got: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
        let want: Vec<&str> = sent
            .iter()
            .filter(|(kind, _)| *kind == k)
            .map(|(_, id)| id.as_str())
            .collect();
        assert_eq!(got, want, "{table}");
        for r in &rows {
            let n = r["n"].as_i64().unwrap();
            assert_eq!(r["label"], json!(format!("row {n}")));
            assert_eq!(r["user_id"], json!(format!("u{}", n % 7)));
        }
    }
    let files = t
        .catalog()
        .snapshot(&t.seeded.team.as_str().into(), "tracks")
        .unwrap()
        .unwrap()
        .files;
    assert!(
        files.len() >= 4,
        "flushes made several files: {}",
        files.len()
    );
}

#[tokio::test]
async fn widening_across_flushes_keeps_every_value() {
    let t = TestServer::start(|_| {}).await;
    for v in [json!(1), json!(2.5), json!("three"), json!(true)] {
        t.send(json!({"event": "measure", "properties": {"v": v}}))
            .await;
        t.flush().await;
    }
    let (status, table) = t.download(&t.element("measure", None), json!({})).await;
    assert_eq!(status, 200);
    assert!(names(&table["meta"]).contains(&("v".into(), "string".into())));
    let values: Vec<Value> = table["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["v"].clone())
        .collect();
    assert_eq!(
        values,
        vec![json!("1"), json!("2.5"), json!("three"), json!("true")]
    );
    let files = t
        .catalog()
        .snapshot(&t.seeded.team.as_str().into(), "measure")
        .unwrap()
        .unwrap()
        .files;
    assert_eq!(files.len(), 4, "one file per flush");

    // int then float only widens to float64.
    t.send(json!({"event": "ratio", "properties": {"r": 2}}))
        .await;
    t.flush().await;
    t.send(json!({"event": "ratio", "properties": {"r": 0.5}}))
        .await;
    t.flush().await;
    let (_, table) = t.download(&t.element("ratio", None), json!({})).await;
    assert!(names(&table["meta"]).contains(&("r".into(), "float64".into())));
    let values: Vec<Value> = table["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["r"].clone())
        .collect();
    assert_eq!(values, vec![json!(2.0), json!(0.5)]);
}

#[tokio::test]
async fn columns_limit_and_element_columns() {
    let t = TestServer::start(|_| {}).await;
    t.send(json!({"event": "e", "properties": {"a": 1, "b": "x", "c": null}}))
        .await;
    t.send(json!({"event": "e", "properties": {"a": 2, "c": true}}))
        .await;
    t.flush().await;
    let element = t.element("e", Some(&["c", "a", "b"]));
    let (status, table) = t.download(&element, json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(
        names(&table["meta"]),
        vec![
            ("c".into(), "boolean".into()),
            ("a".into(), "int64".into()),
            ("b".into(), "string".into())
        ]
    );
    assert_eq!(
        table["data"][0],
        json!({"c": null, "a": 1, "b": "x"}),
        "explicit nulls"
    );
    assert_eq!(table["data"][1], json!({"c": true, "a": 2, "b": null}));

    let (status, table) = t
        .download(&element, json!({"columns": ["b", "a"], "limit": 1}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(table["data"], json!([{"b": "x", "a": 1}]));
    assert_eq!(table["rows"], json!(1));
}

#[tokio::test]
async fn element_on_a_table_without_data_is_empty() {
    let t = TestServer::start(|_| {}).await;
    let (status, table) = t.download(&t.element("tracks", None), json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(table["rows"], json!(0));
    assert_eq!(table["data"], json!([]));
    assert_eq!(
        names(&table["meta"]).len(),
        5,
        "tracks' standard columns are known up front"
    );
    let (status, table) = t
        .download(
            &t.element("nothing_yet", Some(&["a", "timestamp"])),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        names(&table["meta"]),
        vec![
            ("a".into(), "string".into()),
            ("timestamp".into(), "timestamp".into())
        ]
    );
}

#[tokio::test]
async fn flush_timer_fires_without_further_traffic() {
    let t = TestServer::start(|c| c.flush.interval.0 = Duration::from_millis(150)).await;
    let element = t.element("tick", None);
    t.send(json!({"event": "tick"})).await;
    // No flush call and no more events: only the timer can commit this row.
    let committed = wait_for(Duration::from_secs(10), || async {
        t.rows(&element).await.len() == 1
    })
    .await;
    assert!(committed, "the flush timer did not fire");
}

#[tokio::test]
async fn row_and_byte_triggers_flush_without_the_timer() {
    let t = TestServer::start(|c| c.flush.max_rows = 10).await;
    let element = t.element("burst", None);
    for i in 0..25 {
        t.send(json!({"event": "burst", "properties": {"i": i}}))
            .await;
    }
    let two_files = wait_for(Duration::from_secs(10), || async {
        t.catalog()
            .snapshot(&t.seeded.team.as_str().into(), "burst")
            .unwrap()
            .is_some_and(|s| s.files.len() >= 2)
    })
    .await;
    assert!(two_files, "row trigger did not flush");
    // The timer is an hour: only the row trigger can have committed these. Rows that arrive
    // while a triggered flush is running go into the next one, so the last 5 may or may not
    // have been swept along, depending on timing.
    let rows = t.rows(&element).await;
    assert!(
        rows.len() >= 20,
        "both row-triggered flushes committed: {}",
        rows.len()
    );

    let t = TestServer::start(|c| c.flush.max_bytes.0 = 2_000).await;
    for i in 0..20 {
        t.send(json!({"event": "bytes", "properties": {"pad": "x".repeat(200), "i": i}}))
            .await;
    }
    let flushed = wait_for(Duration::from_secs(10), || async {
        t.catalog()
            .snapshot(&t.seeded.team.as_str().into(), "bytes")
            .unwrap()
            .is_some()
    })
    .await;
    assert!(flushed, "byte trigger did not flush");
}

#[tokio::test]
async fn idle_team_actors_stop_and_restart_on_demand() {
    let t = TestServer::start(|c| c.ingest.idle_timeout.0 = Duration::from_millis(100)).await;
    t.send(json!({"event": "first"})).await;
    t.flush().await;
    assert_eq!(t.srv().state.ingest.active_teams(), 1);
    let stopped = wait_for(Duration::from_secs(10), || async {
        t.srv().state.ingest.active_teams() == 0
    })
    .await;
    assert!(stopped, "idle actor did not stop");
    t.send(json!({"event": "second"})).await;
    // The ack comes from the WAL; the dispatcher starts the actor right after.
    let restarted = wait_for(Duration::from_secs(10), || async {
        t.srv().state.ingest.active_teams() == 1
    })
    .await;
    assert!(restarted, "a new event starts a fresh actor");
    t.flush().await;
    let rows = t.rows(&t.element("tracks", None)).await;
    assert_eq!(rows.len(), 2);
}
