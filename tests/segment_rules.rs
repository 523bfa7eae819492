//! How the Segment endpoints read what trackers send (SPEC §2.2, issue #26): the body as JSON
//! whatever its `Content-Type` says, unless a batch is labelled NDJSON (what `sendBeacon` and
//! RudderStack's Node SDK send is accepted).

mod common;

use common::TestServer;
use common::segment::{gz, post, table_ids, track};
use serde_json::json;

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
