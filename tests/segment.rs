//! The Segment endpoints' contract over HTTP (SPEC §2.2): auth by Basic, header or writeKey;
//! all-or-nothing validation listing every bad index; limits (gzip decompressed only up to the
//! limit, messages per batch); duplicates stored once; the Segment error shape.

use crate::common;

use common::segment::{gz, post, post_batch, table_ids, track};
use common::{TestServer, status_json};
use serde_json::{Value, json};

/// The index and code of each message a refused batch names.
fn batch_errors(v: &Value) -> Vec<(u64, String)> {
    v["error"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().unwrap(),
                e["code"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn auth_by_basic_header_or_write_key_and_segment_error_shape() {
    let t = TestServer::start(|_| {}).await;
    let token = t.seeded.token.clone();
    let body = |extra: Value| {
        let mut b = json!({"batch": [track("a1")]});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::to_vec(&b).unwrap()
    };
    let (s, v) = post_batch(&t, &token, body(json!({}))).await;
    assert_eq!((s, &v["ids"]), (200, &json!(["a1"])), "{v}");
    let (s, v) = post(
        &t,
        "/v1/batch",
        None,
        Some("application/json"),
        body(json!({"writeKey": token})),
        false,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let resp = t
        .http
        .post(t.url("/v1/track"))
        .header("X-Auth-Token", &token)
        .header("Content-Type", "application/json")
        .body(track("a2").to_string())
        .send()
        .await
        .unwrap();
    let (s, v) = status_json(resp).await;
    assert_eq!((s, &v["id"]), (200, &json!("a2")), "{v}");

    for (auth, code, status) in [
        (None, "missing_token", 401),
        (Some("stw_evt_nope"), "invalid_token", 401),
    ] {
        let (s, v) = post(
            &t,
            "/v1/batch",
            auth,
            Some("application/json"),
            body(json!({})),
            false,
        )
        .await;
        assert_eq!(s, status, "{v}");
        // Segment SDKs read `code` and `message` at the top level.
        assert_eq!(v["code"], json!(code), "{v}");
        assert_eq!(v["error"]["code"], json!(code), "{v}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    }
    t.catalog()
        .set_events_enabled(&t.seeded.team, false)
        .unwrap();
    let (s, v) = post_batch(&t, &token, body(json!({}))).await;
    assert_eq!(
        (s, v["code"].as_str()),
        (403, Some("events_disabled")),
        "{v}"
    );
}

#[tokio::test]
async fn one_bad_message_refuses_the_batch_listing_every_bad_index() {
    let t = TestServer::start(|_| {}).await;
    let token = t.seeded.token.clone();
    let batch = json!({"batch": [
        track("ok-1"),
        {"type": "track", "userId": "u"},
        {"type": "identify", "traits": {"a": 1}},
        {"type": "group", "userId": "u"},
        {"type": "alias", "userId": "u"},
        {"type": "launch", "userId": "u"},
        {"type": "track", "event": "E", "userId": "u", "timestamp": "yesterday"},
        7,
        track("ok-2"),
    ]});
    let (s, v) = post_batch(&t, &token, serde_json::to_vec(&batch).unwrap()).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["code"], json!("invalid_batch"));
    let errors = batch_errors(&v);
    let expected: Vec<(u64, String)> = [
        (1, "missing_event"),
        (2, "missing_user"),
        (3, "missing_group_id"),
        (4, "missing_previous_id"),
        (5, "unsupported_type"),
        (6, "invalid_timestamp"),
        (7, "invalid_body"),
    ]
    .into_iter()
    .map(|(i, c)| (i, c.to_string()))
    .collect();
    assert_eq!(errors, expected, "{v}");
    // Nothing of it was stored, not even the valid messages.
    assert!(table_ids(&t, "clicked").await.is_empty());
}

#[tokio::test]
async fn ndjson_gzip_duplicates_and_limits() {
    let t = TestServer::start(|c| {
        c.ingest.max_batch_events = 10;
        c.ingest.max_batch_body = stowage::config::ByteSize(64 * 1024);
    })
    .await;
    let token = t.seeded.token.clone();
    // NDJSON, gzip, a duplicate inside the batch and CRLF line ends.
    let lines = [track("n1"), track("n2"), track("n1"), track("n3")]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\r\n");
    let (s, v) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/x-ndjson"),
        gz(lines.as_bytes()),
        true,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["ids"], json!(["n1", "n2", "n1", "n3"]));
    // Sent again: acknowledged, not stored again.
    let (s, _) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/x-ndjson"),
        lines.clone().into_bytes(),
        false,
    )
    .await;
    assert_eq!(s, 200);
    let mut ids = table_ids(&t, "clicked").await;
    ids.sort();
    assert_eq!(ids, ["n1", "n2", "n3"]);

    // More messages than allowed.
    let many: Vec<Value> = (0..11).map(|i| track(&format!("m{i}"))).collect();
    let (s, v) = post_batch(
        &t,
        &token,
        serde_json::to_vec(&json!({"batch": many})).unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["code"].as_str()),
        (413, Some("too_many_events")),
        "{v}"
    );
    // A gzip bomb: 64 MiB of zeros inflates only up to the limit, then 413.
    let bomb = gz(&vec![b' '; 64 << 20]);
    assert!(bomb.len() < 128 * 1024);
    let (s, v) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/json"),
        bomb,
        true,
    )
    .await;
    assert_eq!(
        (s, v["code"].as_str()),
        (413, Some("payload_too_large")),
        "{v}"
    );
    // A batch context that every message would repeat is refused before it is expanded.
    let ctx = json!({"blob": "x".repeat(40 * 1024)});
    let many: Vec<Value> = (0..10).map(|i| track(&format!("c{i}"))).collect();
    let body = serde_json::to_vec(&json!({"context": ctx, "batch": many})).unwrap();
    let (s, v) = post_batch(&t, &token, body).await;
    assert_eq!(
        (s, v["code"].as_str()),
        (413, Some("payload_too_large")),
        "{v}"
    );
    // Not gzip at all.
    let (s, v) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/json"),
        b"{\"batch\":[]}".to_vec(),
        true,
    )
    .await;
    assert_eq!((s, v["code"].as_str()), (400, Some("invalid_gzip")), "{v}");
}

#[tokio::test]
async fn batch_context_fills_missing_keys_and_event_names_avoid_call_tables() {
    let t = TestServer::start(|_| {}).await;
    let token = t.seeded.token.clone();
    let batch = json!({
        "context": {"library": {"name": "batch-lib"}, "ip": "1.1.1.1"},
        "batch": [
            {"type": "track", "event": "Pages", "userId": "u", "messageId": "p1", "context": {"ip": "2.2.2.2"}},
        ]
    });
    let (s, v) = post_batch(&t, &token, serde_json::to_vec(&batch).unwrap()).await;
    assert_eq!(s, 200, "{v}");
    t.flush().await;
    let element = t.element("pages_event", None);
    let rows = t.rows(&element).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0]["context_ip"],
        json!("2.2.2.2"),
        "the message's own key wins"
    );
    assert_eq!(rows[0]["context_library_name"], json!("batch-lib"));
    assert!(
        table_ids(&t, "pages").await.is_empty(),
        "a track call never lands in pages"
    );
}

/// A batch large enough to be built into a batch per table (`ingest::bulk`, 64 rows of a table)
/// is checked against the table and column limits by those batches' columns: within them it is
/// stored and its columns count for later requests; past them the event at fault is named, and
/// nothing of the batch is kept, neither its rows nor its columns.
#[tokio::test]
async fn limits_hold_for_batches_built_per_table() {
    const COLUMNS: usize = 40;
    let t = TestServer::start(|c| {
        c.limits.columns_per_table = COLUMNS;
        c.limits.tables_per_team = 3;
    })
    .await;
    let token = t.seeded.token.clone();
    let message = |i: usize, event: &str, props: &[String]| {
        let props: serde_json::Map<String, Value> =
            props.iter().map(|p| (p.clone(), json!(i))).collect();
        json!({"type": "track", "event": event, "userId": "u", "messageId": format!("{event}-{i}"),
               "properties": props})
    };
    let names = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>();
    let send = |messages: Vec<Value>| {
        let body = serde_json::to_vec(&json!({ "batch": messages })).unwrap();
        post_batch(&t, &token, body)
    };
    let p = names("p", 10);
    let (s, v) = send((0..80).map(|i| message(i, "Big", &p)).collect()).await;
    assert_eq!(s, 200, "{v}");
    t.flush().await;
    let element = t.element("big", None);
    let row = t.rows(&element).await[0].clone();
    let standard = row.as_object().unwrap().len() - p.len();

    // Event 50 brings 40 more columns: refused, and named.
    let mut wide = p.clone();
    wide.extend(names("q", 40));
    let batch = (0..80)
        .map(|i| message(100 + i, "Big", if i == 50 { &wide } else { &p }))
        .collect();
    let (s, v) = send(batch).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(
        batch_errors(&v),
        [(50, "too_many_columns".to_string())],
        "{v}"
    );

    // Its columns were not kept: ten of them fit now, and are kept.
    let mut ten = p.clone();
    ten.extend(names("q", 10));
    let (s, v) = send((0..80).map(|i| message(200 + i, "Big", &ten)).collect()).await;
    assert_eq!(s, 200, "nothing of the refused batch counts: {v}");

    // Those ten count: columns that would fit without them are refused from the first event.
    let room = COLUMNS - standard - p.len(); // before the ten
    let mut more = p.clone();
    more.extend(names("r", room - 5));
    let (s, v) = send((0..80).map(|i| message(300 + i, "Big", &more)).collect()).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(
        batch_errors(&v),
        [(0, "too_many_columns".to_string())],
        "{v}"
    );

    // Tables: `tracks` and `big` are known; a third fits, a fourth does not (rows of tables too
    // small to be built are checked one by one).
    let mut batch: Vec<Value> = (0..80).map(|i| message(400 + i, "Big", &p)).collect();
    batch[70] = message(470, "Other One", &p);
    batch[75] = message(475, "Other Two", &p);
    let (s, v) = send(batch).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(
        batch_errors(&v),
        [(75, "too_many_tables".to_string())],
        "{v}"
    );

    t.flush().await;
    let ids: std::collections::HashSet<i64> = t
        .rows(&element)
        .await
        .iter()
        .map(|r| r["p0"].as_i64().unwrap())
        .collect();
    assert_eq!(
        ids.len(),
        160,
        "the two stored batches, and nothing of the refused ones"
    );
    assert!(ids.iter().all(|i| *i < 80 || (200..280).contains(i)));
}
