//! Fresh reads on one node (SPEC §3.5), over real HTTP: events acknowledged and still buffered
//! (a one-hour flush interval) are downloadable at once with `"fresh": true`, in every format,
//! for table and SQL elements, exactly once — also while flushes commit during the reads, and
//! across a flush that happens between two reads. Without `fresh` only committed files are
//! read, and no fresh read flushes anything.

use crate::common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use common::{TestServer, status_json};
use serde_json::{Value, json};
use stowage::catalog::NewElement;
use stowage::model::TeamId;

/// Sends `n` Segment messages in one `/v1/batch`; returns their message ids.
async fn batch(t: &TestServer, event: &str, from: usize, n: usize) -> Vec<String> {
    let ids: Vec<String> = (from..from + n).map(|i| format!("b-{event}-{i}")).collect();
    let messages: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(k, id)| {
            json!({"type": "track", "event": event, "messageId": id, "userId": format!("u{}", k % 7),
                   "properties": {"amount": if k % 2 == 0 { json!(k) } else { json!(k as f64 + 0.5) },
                                  "plan": "pro"}})
        })
        .collect();
    t.batch(messages).await;
    ids
}

/// Sends one `/v1/event`; returns the id the server gave it.
async fn single(t: &TestServer, event: &str, i: usize) -> String {
    t.send(json!({"event": event, "userId": "u1", "properties": {"amount": i, "note": format!("s-{i}")}}))
        .await
}

/// The `id` column of a JSON download.
fn ids_of(body: &Value) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data: {body}"))
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// Asserts `got` holds every id of `want` exactly once and nothing else.
fn exactly(got: &[String], want: &HashSet<String>, what: &str) {
    let set: HashSet<&String> = got.iter().collect();
    assert_eq!(set.len(), got.len(), "{what}: an id was read twice");
    let missing: Vec<_> = want.iter().filter(|w| !set.contains(w)).take(5).collect();
    assert!(missing.is_empty(), "{what}: missing {missing:?}");
    assert_eq!(got.len(), want.len(), "{what}: extra rows");
}

/// Committed data files of `table` (0 if the table does not exist yet).
fn committed_files(t: &TestServer, table: &str) -> usize {
    let team = TeamId::from(t.seeded.team.as_str());
    t.catalog()
        .snapshot(&team, table)
        .unwrap()
        .map_or(0, |s| s.files.len())
}

/// Downloads `element` in `format` and returns the response bytes (asserting 200).
async fn raw(t: &TestServer, element: &str, format: &str) -> bytes::Bytes {
    let body =
        json!({"canvasId": t.seeded.canvas, "elementId": element, "format": format, "fresh": true});
    let resp = t
        .http
        .post(t.url("/data/table"))
        .header("x-api-key", &t.seeded.key)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{format}");
    resp.bytes().await.unwrap()
}

/// Rows in a download of `format`.
fn rows_in(format: &str, data: &bytes::Bytes) -> usize {
    match format {
        "ndjson" => data
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        "csv" => {
            let mut r = csv::Reader::from_reader(data.as_ref());
            r.records().inspect(|rec| assert!(rec.is_ok())).count()
        }
        "arrow" => {
            arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(data.to_vec()), None)
                .unwrap()
                .map(|b| b.unwrap().num_rows())
                .sum()
        }
        "parquet" => {
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(data.clone())
                .unwrap()
                .build()
                .unwrap()
                .map(|b| b.unwrap().num_rows())
                .sum()
        }
        other => panic!("no counter for {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_events_are_read_fresh_exactly_once_without_a_flush() {
    let t = TestServer::start(|_| {}).await; // flush.interval 1 h: nothing flushes by itself
    let tracks = t.element("tracks", None);
    let orders = t.element("order_completed", None);
    let mut sent = HashSet::new();
    for i in 0..100 {
        sent.insert(single(&t, "Order Completed", i).await);
    }
    for from in (0..400).step_by(100) {
        sent.extend(
            batch(
                &t,
                if from % 200 == 0 {
                    "Order Completed"
                } else {
                    "Signed Up"
                },
                from,
                100,
            )
            .await,
        );
    }
    assert_eq!(sent.len(), 500);

    // An integer float64 cannot hold exactly, lent before the column turns float.
    let big = t
        .send(json!({"event": "Big Number", "userId": "u1", "properties": {"n": 9007199254740993_i64}}))
        .await;
    let (status, body) = t.download(&tracks, json!({"fresh": true})).await;
    assert_eq!(status, 200, "{body}");
    sent.insert(big.clone());
    exactly(&ids_of(&body), &sent, "fresh tracks");
    let (_, body) = t.download(&orders, json!({"fresh": true})).await;
    let orders_sent: HashSet<String> = sent
        .iter()
        .filter(|id| **id != big && (!id.starts_with("b-") || id.contains("-Order Completed-")))
        .cloned()
        .collect();
    exactly(&ids_of(&body), &orders_sent, "fresh order_completed");
    // amount was an integer and a float: the buffered column reads widened.
    assert!(
        body["meta"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "amount" && m["type"] == "float64"),
        "{}",
        body["meta"]
    );
    assert_eq!(
        committed_files(&t, "tracks"),
        0,
        "a fresh read must not flush"
    );

    // Without fresh: committed files only (nothing yet).
    let (status, body) = t.download(&tracks, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ids_of(&body).len(), 0);

    // Every format carries the buffered rows.
    for format in ["ndjson", "csv", "arrow", "parquet"] {
        let data = raw(&t, &tracks, format).await;
        assert_eq!(rows_in(format, &data), 501, "{format}");
    }

    // A column that turns to text after the buffer was lent: the flush joins the lent
    // (float64) and the later (string) batches under the widened type.
    sent.insert(
        t.send(
            json!({"event": "Order Completed", "userId": "u9", "properties": {"amount": "n/a"}}),
        )
        .await,
    );
    // Half committed, half buffered: still each once. Filters, columns and limit apply to both.
    sent.insert(
        t.send(json!({"event": "Big Number", "userId": "u1", "properties": {"n": 1.5}}))
            .await,
    );
    t.flush().await;
    // Read as float64 meanwhile; a later string shows the digits were kept.
    sent.insert(
        t.send(json!({"event": "Big Number", "userId": "u1", "properties": {"n": "s"}}))
            .await,
    );
    t.flush().await;
    let committed = sent.len();
    let big_numbers = t.element("big_number", None);
    let (_, body) = t.download(&big_numbers, json!({})).await;
    let n: Vec<String> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["n"].to_string())
        .collect();
    assert!(
        n.iter().any(|v| v.contains("9007199254740993")),
        "exact digits kept across the flush's join: {n:?}"
    );
    let (_, body) = t.download(&orders, json!({})).await;
    assert!(
        body["meta"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "amount" && m["type"] == "string"),
        "{}",
        body["meta"]
    );
    let amounts: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["amount"].as_str())
        .collect();
    assert!(
        amounts.contains(&"n/a") && amounts.contains(&"1.5") && amounts.contains(&"2"),
        "{amounts:?}"
    );
    assert!(committed_files(&t, "tracks") > 0);
    for i in 100..150 {
        sent.insert(single(&t, "Order Completed", i).await);
    }
    let (_, body) = t.download(&tracks, json!({"fresh": true})).await;
    exactly(&ids_of(&body), &sent, "fresh tracks after a flush");
    let (_, body) = t
        .download(
            &tracks,
            json!({"fresh": true, "columns": ["id"],
            "filters": [{"column": "event_text", "op": "eq", "value": "Signed Up"}]}),
        )
        .await;
    assert_eq!(ids_of(&body).len(), 200, "{body}");
    let (_, body) = t
        .download(&tracks, json!({"fresh": true, "limit": 520}))
        .await;
    assert_eq!(ids_of(&body).len(), 520);
    let total = sent.len();
    assert!(
        body.get("next_cursor").is_none_or(Value::is_null),
        "a fresh read hands out no cursor: {body}"
    );
    let (_, body) = t.download(&tracks, json!({})).await;
    assert_eq!(ids_of(&body).len(), committed, "committed only");
    assert_eq!(total, 554);

    // A cursor cannot resume a fresh read.
    let (status, body) = t
        .download(&tracks, json!({"fresh": true, "cursor": "abc"}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("fresh_with_cursor")),
        "{body}"
    );
    let (status, body) = t.download(&tracks, json!({"fresh": "yes"})).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_element_can_read_fresh_by_default_and_sql_elements_read_fresh() {
    let t = TestServer::start(|_| {}).await;
    let fresh_element = t
        .catalog()
        .create_element(&NewElement {
            canvas: t.seeded.canvas.clone(),
            table: "tracks".into(),
            fresh: true,
            ..Default::default()
        })
        .unwrap();
    let mut sent = HashSet::new();
    sent.extend(batch(&t, "Signed Up", 0, 40).await);
    t.flush().await;
    sent.extend(batch(&t, "Signed Up", 40, 30).await);
    let (_, body) = t.download(&fresh_element, json!({})).await;
    exactly(&ids_of(&body), &sent, "element fresh by default");
    let (_, body) = t.download(&fresh_element, json!({"fresh": false})).await;
    assert_eq!(
        ids_of(&body).len(),
        40,
        "fresh: false reads committed files only"
    );
    // Paging such an element: a cursor continues the committed snapshot, not a fresh read.
    let (_, first) = t
        .download(&fresh_element, json!({"fresh": false, "limit": 25}))
        .await;
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a full page has a cursor");
    let (status, second) = t
        .download(&fresh_element, json!({"cursor": cursor, "limit": 25}))
        .await;
    assert_eq!(status, 200, "{second}");
    let mut paged = ids_of(&first);
    paged.extend(ids_of(&second));
    assert_eq!(
        paged.len(),
        40,
        "the second page holds the rest of the committed rows"
    );

    // An SQL element over a table with committed and buffered rows, and one only buffered.
    let owner = t
        .catalog()
        .create_user(
            &t.seeded.team,
            Some("o@fresh.example"),
            "O",
            stowage::catalog::Role::Owner,
        )
        .unwrap();
    let (_, pat) = t.catalog().create_pat(&owner.id, None).unwrap();
    let post = |body: Value| {
        let req = t
            .http
            .post(t.url(&format!("/api/v1/canvases/{}/elements", t.seeded.canvas)))
            .bearer_auth(&pat)
            .header("Content-Type", "application/json")
            .body(body.to_string());
        async move { status_json(req.send().await.unwrap()).await }
    };
    let create = |sql: &str| {
        let sent = post(json!({ "sql": sql }));
        async move {
            let (status, body) = sent.await;
            assert_eq!(status, 201, "{body}");
            body["id"].as_str().unwrap().to_string()
        }
    };
    let counts = create("SELECT count(*) AS n, count(DISTINCT id) AS d FROM tracks").await;
    let (_, body) = t.download(&counts, json!({"fresh": true})).await;
    assert_eq!(body["data"][0], json!({"n": 70, "d": 70}), "{body}");
    let (_, body) = t.download(&counts, json!({})).await;
    assert_eq!(body["data"][0], json!({"n": 40, "d": 40}), "{body}");
    // A table that exists only in the buffer is known to a fresh query.
    for i in 0..3 {
        single(&t, "Trial Started", i).await;
    }
    // Created through the API: checked against the buffers when the element reads fresh, and
    // refused (the table does not exist yet) when it does not.
    let query = "SELECT count(*) AS n FROM trial_started";
    let (status, body) = post(json!({"sql": query})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_sql")),
        "{body}"
    );
    let (status, body) = post(json!({"sql": query, "fresh": true})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["schema"],
        json!([{"name": "n", "type": "int64"}]),
        "{body}"
    );
    let only_buffered = body["id"].as_str().unwrap().to_string();
    let (status, body) = t.download(&only_buffered, json!({})).await;
    assert_eq!(
        (status, &body["data"][0]),
        (200, &json!({"n": 3})),
        "{body}"
    );
    let (status, body) = t.download(&only_buffered, json!({"fresh": false})).await;
    assert_eq!(
        status, 400,
        "not committed: the table does not exist yet: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_reads_during_flushes_see_every_acknowledged_event_once() {
    // Tiny flushes: commits happen all the time, also while each read runs.
    let t = Arc::new(TestServer::start(|c| c.flush.max_rows = 7).await);
    let tracks = t.element("tracks", None);
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let (t, acked, stop) = (t.clone(), acked.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let ids = if i % 3 == 0 {
                    batch(&t, "Page Viewed", i, 5).await
                } else {
                    vec![single(&t, "Page Viewed", i).await]
                };
                acked.lock().unwrap().extend(ids);
                i += 5;
            }
        })
    };
    let mut last_len = 0;
    // At least 20 reads, and until flushes committed between reads at least 10 times (the
    // team's WAL watermark moved), so reads overlap commits whatever the machine's speed.
    let team = TeamId::from(t.seeded.team.as_str());
    let mut watermarks = HashSet::new();
    let mut read = 0;
    while read < 20 || watermarks.len() < 10 {
        assert!(read < 2000, "flushes never committed during the reads");
        read += 1;
        watermarks.insert(t.catalog().watermark(&team).unwrap());
        // Every event acknowledged before the read starts.
        common::wait_for(std::time::Duration::from_secs(10), || {
            let n = acked.lock().unwrap().len();
            async move { n > last_len }
        })
        .await;
        let before: HashSet<String> = acked.lock().unwrap().iter().cloned().collect();
        last_len = before.len();
        let (status, body) = t.download(&tracks, json!({"fresh": true})).await;
        assert_eq!(status, 200, "{body}");
        let got = ids_of(&body);
        let set: HashSet<&String> = got.iter().collect();
        assert_eq!(set.len(), got.len(), "read {read}: an event was read twice");
        let missing: Vec<_> = before
            .iter()
            .filter(|id| !set.contains(id))
            .take(5)
            .collect();
        assert!(
            missing.is_empty(),
            "read {read}: missing acknowledged {missing:?}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sender.await.unwrap();
    // At rest: fresh and committed agree once everything is flushed.
    t.flush().await;
    let all: HashSet<String> = acked.lock().unwrap().iter().cloned().collect();
    let (_, body) = t.download(&tracks, json!({"fresh": true})).await;
    exactly(&ids_of(&body), &all, "fresh at rest");
    let (_, body) = t.download(&tracks, json!({})).await;
    exactly(&ids_of(&body), &all, "committed at rest");
}
