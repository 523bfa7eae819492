//! How the Segment endpoints read what trackers send (SPEC §2.2, issue #26): the body as JSON
//! whatever its `Content-Type` says, unless a batch is labelled NDJSON (what `sendBeacon` and
//! RudderStack's Node SDK send is accepted), and the clock-skew rule of the time columns
//! `timestamp`, `original_timestamp`, `sent_at`, `received_at` for Segment- and
//! RudderStack-shaped messages.

use crate::common;

use common::segment::{gz, post, table_ids, track};
use common::{TestServer, micros};
use serde_json::{Value, json};

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

/// One message shape of the clock-skew test and the times it must be stored with.
struct SkewCase {
    /// Suffix of the message ids.
    name: &'static str,
    /// The message's time fields.
    fields: Value,
    /// The client's event time the row must keep as `original_timestamp`.
    client_time: Option<&'static str>,
    /// The `sentAt` that applies (the message's, else the batch's).
    sent_at: Option<&'static str>,
}

/// A message of `call` with `id` and the time `fields`.
fn message(call: &str, id: &str, fields: &Value) -> Value {
    let mut m = json!({"type": call, "userId": "u", "messageId": id});
    match call {
        "track" => m["event"] = json!("Clicked"),
        "group" => m["groupId"] = json!("g"),
        "alias" => m["previousId"] = json!("p"),
        _ => {}
    }
    m.as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    m
}

/// SPEC §2.2 "Clock skew" over HTTP, for every call, Segment- and RudderStack-shaped messages,
/// gzip on and off: `original_timestamp` is the client's event time (`timestamp`, else
/// `originalTimestamp`); `sent_at` is the message's `sentAt`, else the batch's; `timestamp` is
/// `received_at − (sent_at − client time)`, the client time when nothing says when it was sent,
/// and `received_at` when the client gave no time.
#[tokio::test]
async fn clock_skew_rule_for_segment_and_rudderstack_messages() {
    const CLIENT: &str = "2026-03-01T10:00:07.250Z";
    const APP: &str = "2026-03-01T10:00:05.000Z";
    const OWN_SENT: &str = "2026-03-01T10:00:10.000Z";
    const BATCH_SENT: &str = "2026-03-01T10:00:11.500Z";
    let t = TestServer::start(|_| {}).await;
    let token = t.seeded.token.clone();
    let case = |name, fields, client_time, sent_at| SkewCase {
        name,
        fields,
        client_time,
        sent_at,
    };
    let batched = [
        case(
            "segment",
            json!({"timestamp": CLIENT}),
            Some(CLIENT),
            Some(BATCH_SENT),
        ),
        case(
            "segment-own-sent-at",
            json!({"timestamp": CLIENT, "sentAt": OWN_SENT}),
            Some(CLIENT),
            Some(OWN_SENT),
        ),
        case(
            "rudderstack",
            json!({"originalTimestamp": CLIENT, "sentAt": OWN_SENT}),
            Some(CLIENT),
            Some(OWN_SENT),
        ),
        case(
            "rudderstack-app-time",
            json!({"timestamp": APP, "originalTimestamp": CLIENT, "sentAt": OWN_SENT}),
            Some(APP),
            Some(OWN_SENT),
        ),
        case(
            "rudderstack-batch-sent-at",
            json!({"originalTimestamp": CLIENT}),
            Some(CLIENT),
            Some(BATCH_SENT),
        ),
        case("no-client-time", json!({}), None, Some(BATCH_SENT)),
    ];
    // Single calls have no batch: without their own sentAt nothing corrects the client's time.
    let single = [
        case(
            "single-segment",
            json!({"timestamp": CLIENT}),
            Some(CLIENT),
            None,
        ),
        case(
            "single-rudderstack",
            json!({"originalTimestamp": CLIENT}),
            Some(CLIENT),
            None,
        ),
        case(
            "single-rudderstack-sent-at",
            json!({"originalTimestamp": CLIENT, "sentAt": OWN_SENT}),
            Some(CLIENT),
            Some(OWN_SENT),
        ),
        case("single-none", json!({}), None, None),
    ];
    let calls = ["track", "identify", "page", "screen", "group", "alias"];
    let now = || chrono::Utc::now().timestamp_micros();
    let first_sent = now();
    let mut expected = std::collections::HashMap::new();
    for gzip in [false, true] {
        let mut batch = Vec::new();
        for call in calls {
            for c in &batched {
                let id = format!("{call}-{}-gzip-{gzip}", c.name);
                batch.push(message(call, &id, &c.fields));
                expected.insert(id, c);
            }
        }
        // RudderStack's Node SDK shape: a batch `timestamp` (ignored) beside `sentAt`.
        let body = json!({"batch": batch, "sentAt": BATCH_SENT, "timestamp": BATCH_SENT});
        let body = serde_json::to_vec(&body).unwrap();
        let (label, body) = match gzip {
            true => (Some("application/x-www-form-urlencoded"), gz(&body)),
            false => (Some("application/json"), body),
        };
        let (s, v) = post(&t, "/v1/batch", Some(&token), label, body, gzip).await;
        assert_eq!(s, 200, "{v}");
    }
    for call in calls {
        for c in &single {
            let id = format!("{call}-{}", c.name);
            let body = message(call, &id, &c.fields).to_string().into_bytes();
            let (s, v) = post(&t, &format!("/v1/{call}"), Some(&token), None, body, false).await;
            assert_eq!(s, 200, "{v}");
            expected.insert(id, c);
        }
    }
    let last_answered = now();
    t.flush().await;
    let time = |v: &Value| (!v.is_null()).then(|| micros(v));
    let mut checked = 0;
    // Every message's row is checked: the counts must match at the end.
    for table in stowage::model::naming::CALL_TABLES {
        let element = t.element(table, None);
        for row in t.rows(&element).await {
            let c = expected[row["id"].as_str().unwrap()];
            let received = micros(&row["received_at"]);
            assert!(
                (first_sent..=last_answered).contains(&received),
                "received_at is the server's clock: {row}"
            );
            let client = c.client_time.map(|v| micros(&json!(v)));
            let sent = c.sent_at.map(|v| micros(&json!(v)));
            assert_eq!(time(&row["original_timestamp"]), client, "{row}");
            assert_eq!(time(&row["sent_at"]), sent, "{row}");
            let timestamp = match (client, sent) {
                (Some(client), Some(sent)) => received - (sent - client),
                (Some(client), None) => client,
                (None, _) => received,
            };
            assert_eq!(micros(&row["timestamp"]), timestamp, "{} {row}", c.name);
            checked += 1;
        }
    }
    assert_eq!(checked, expected.len(), "every message has its row");

    // An unreadable originalTimestamp is refused like any other time field, and named.
    let bad = message(
        "identify",
        "bad",
        &json!({"originalTimestamp": "yesterday"}),
    );
    let body = bad.to_string().into_bytes();
    let (s, v) = post(&t, "/v1/identify", Some(&token), None, body, false).await;
    assert_eq!(
        (s, v["code"].as_str(), v["error"]["field"].as_str()),
        (400, Some("invalid_timestamp"), Some("originalTimestamp")),
        "{v}"
    );
}

/// A body that is not UTF-8 is a 400 `invalid_json` on every ingest route, whatever its size
/// (an NDJSON batch long enough to be built straight into tables too), and nothing of it is
/// stored: the check runs on the whole body before any message is read.
#[tokio::test]
async fn a_body_that_is_not_utf8_is_refused_whole() {
    let t = TestServer::start(|_| {}).await;
    let token = t.seeded.token.clone();
    let bad_line = |id: &str| {
        let mut line = track(id).to_string().into_bytes();
        let at = line.windows(7).position(|w| w == b"Clicked").unwrap();
        line[at + 1] = 0xff; // inside the event name: not UTF-8
        line
    };
    // 100 lines, the bad one in the middle; and the JSON batch and single call of it.
    let mut ndjson = Vec::new();
    for i in 0..100 {
        let line = if i == 50 {
            bad_line("utf8-nd-50")
        } else {
            track(&format!("utf8-nd-{i}")).to_string().into_bytes()
        };
        ndjson.extend(line);
        ndjson.push(b'\n');
    }
    let mut batch = br#"{"batch":["#.to_vec();
    batch.extend(bad_line("utf8-batch"));
    batch.extend(b"]}");
    let cases = [
        ("/v1/batch", Some("application/x-ndjson"), ndjson),
        ("/v1/batch", Some("application/json"), batch),
        (
            "/v1/track",
            Some("application/json"),
            bad_line("utf8-track"),
        ),
    ];
    for (path, label, body) in cases {
        let (s, v) = post(&t, path, Some(&token), label, body, false).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_json")),
            "{path} {label:?}: {v}"
        );
    }
    let resp = t
        .http
        .post(t.url("/v1/event"))
        .header("X-Auth-Token", &token)
        .header("Content-Type", "application/json")
        .body(bad_line("utf8-event"))
        .send()
        .await
        .unwrap();
    let (s, v) = common::status_json(resp).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("invalid_json")),
        "{v}"
    );
    assert!(table_ids(&t, "clicked").await.is_empty(), "nothing stored");
}
