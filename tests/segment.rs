//! The Segment endpoints' contract over HTTP (SPEC §2.2): auth by Basic, header or writeKey;
//! all-or-nothing validation listing every bad index; limits (gzip decompressed only up to the
//! limit, messages per batch); duplicates stored once; the Segment error shape.

mod common;

use std::io::Write;

use base64::Engine;
use common::{TestServer, status_json};
use serde_json::{Value, json};

async fn post(
    t: &TestServer,
    path: &str,
    auth: Option<&str>,
    content_type: Option<&str>,
    body: Vec<u8>,
    gzip: bool,
) -> (u16, Value) {
    let mut req = t.http.post(t.url(path));
    if let Some(label) = content_type {
        req = req.header("Content-Type", label);
    }
    if let Some(token) = auth {
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{token}:"));
        req = req.header("Authorization", format!("Basic {basic}"));
    }
    if gzip {
        req = req.header("Content-Encoding", "gzip");
    }
    status_json(req.body(body).send().await.unwrap()).await
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn track(id: &str) -> Value {
    json!({"type": "track", "event": "Clicked", "userId": "u", "messageId": id, "properties": {"n": 1}})
}

/// Rows of `table` after a flush (an empty list when the table does not exist).
async fn table_ids(t: &TestServer, table: &str) -> Vec<String> {
    t.flush().await;
    let element = t.element(table, None);
    let (status, doc) = t.download(&element, json!({})).await;
    if status == 404 {
        return Vec::new();
    }
    assert_eq!(status, 200, "{doc}");
    common::ids(&doc)
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
    let (s, v) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/json"),
        body(json!({})),
        false,
    )
    .await;
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
    let (s, v) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/json"),
        body(json!({})),
        false,
    )
    .await;
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
    let (s, v) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/json"),
        serde_json::to_vec(&batch).unwrap(),
        false,
    )
    .await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["code"], json!("invalid_batch"));
    let errors: Vec<(u64, String)> = v["error"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().unwrap(),
                e["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
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
    let (s, v) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/json"),
        serde_json::to_vec(&json!({"batch": many})).unwrap(),
        false,
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
    let (s, v) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/json"),
        body,
        false,
    )
    .await;
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
    let (s, v) = post(
        &t,
        "/v1/batch",
        Some(&token),
        Some("application/json"),
        serde_json::to_vec(&batch).unwrap(),
        false,
    )
    .await;
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

/// SPEC §2.2 "Content type": the Segment endpoints read the body as JSON whatever the label
/// says (none, `text/plain` as `sendBeacon` sends it, form-urlencoded as RudderStack's Node SDK
/// labels the body it gzips itself, JSON with a charset), gzip or not; only an NDJSON label
/// changes how a batch is read. A body that is not JSON is still a 400 in the Segment shape, and
/// `/v1/event` keeps its own rule (JSON only).
#[tokio::test]
async fn segment_endpoints_read_json_whatever_the_label_says() {
    let t = TestServer::start(|_| {}).await;
    let token = t.seeded.token.clone();
    let labels = [
        None,
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("application/json; charset=utf-8"),
        Some("application/json"),
    ];
    let mut stored = Vec::new();
    for (i, label) in labels.into_iter().enumerate() {
        for gzip in [false, true] {
            let encode = |body: Vec<u8>| if gzip { gz(&body) } else { body };
            let id = format!("label{i}-gzip-{gzip}");
            // Shaped as RudderStack's Node SDK sends it: a batch `timestamp` beside `sentAt`.
            let batch = json!({"batch": [track(&format!("{id}-batch"))],
                               "timestamp": "2026-03-01T10:00:00Z", "sentAt": "2026-03-01T10:00:00Z"});
            let body = encode(serde_json::to_vec(&batch).unwrap());
            let (s, v) = post(&t, "/v1/batch", Some(&token), label, body, gzip).await;
            assert_eq!(s, 200, "/v1/batch labelled {label:?}, gzip {gzip}: {v}");
            assert_eq!(v["ids"], json!([format!("{id}-batch")]), "{v}");
            let body = encode(track(&format!("{id}-track")).to_string().into_bytes());
            let (s, v) = post(&t, "/v1/track", Some(&token), label, body, gzip).await;
            assert_eq!(s, 200, "/v1/track labelled {label:?}, gzip {gzip}: {v}");
            assert_eq!(v["id"], json!(format!("{id}-track")), "{v}");
            stored.extend([format!("{id}-batch"), format!("{id}-track")]);
        }
    }
    let mut ids = table_ids(&t, "clicked").await;
    ids.sort();
    stored.sort();
    assert_eq!(ids, stored);

    // Not JSON, whatever the label: 400 with `code` at the top level, where SDKs read it.
    for label in [
        None,
        Some("application/x-www-form-urlencoded"),
        Some("text/plain"),
    ] {
        for path in ["/v1/batch", "/v1/track"] {
            let (s, v) = post(
                &t,
                path,
                Some(&token),
                label,
                b"batch=1&a=2".to_vec(),
                false,
            )
            .await;
            assert_eq!(
                (s, v["code"].as_str(), v["error"]["code"].as_str()),
                (400, Some("invalid_json"), Some("invalid_json")),
                "{path} labelled {label:?}: {v}"
            );
        }
    }
    // `/v1/event` keeps the seed's rule: JSON only.
    let seed = common::SEED_EVENT.into();
    let (s, v) = post(
        &t,
        "/v1/event",
        Some(&token),
        Some("text/plain"),
        seed,
        false,
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (415, Some("unsupported_media_type")),
        "{v}"
    );
}

/// What a browser's `navigator.sendBeacon(url, JSON.stringify(msg))` sends: `text/plain;
/// charset=UTF-8`, no auth header, the `writeKey` in the body.
#[tokio::test]
async fn a_send_beacon_request_is_accepted() {
    let t = TestServer::start(|_| {}).await;
    let token = t.seeded.token.clone();
    let beacon = Some("text/plain;charset=UTF-8");
    let mut single = track("beacon-track");
    single["writeKey"] = json!(token);
    let (s, v) = post(
        &t,
        "/v1/track",
        None,
        beacon,
        single.to_string().into(),
        false,
    )
    .await;
    assert_eq!((s, &v["id"]), (200, &json!("beacon-track")), "{v}");
    let batch = json!({"writeKey": token, "batch": [track("beacon-batch")]});
    let (s, v) = post(
        &t,
        "/v1/batch",
        None,
        beacon,
        batch.to_string().into(),
        false,
    )
    .await;
    assert_eq!((s, &v["ids"]), (200, &json!(["beacon-batch"])), "{v}");
    let mut ids = table_ids(&t, "clicked").await;
    ids.sort();
    assert_eq!(ids, ["beacon-batch", "beacon-track"]);
}
