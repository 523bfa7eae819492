//! Speaking the Segment endpoints in tests (`tests/segment.rs`, `tests/segment_rules.rs`): a
//! POST with a chosen label, auth and encoding, gzip, a valid message, the ids a table holds.
#![allow(dead_code)]

use std::io::Write;

use base64::Engine;
use serde_json::{Value, json};

use super::{TestServer, status_json};

/// POSTs `body` to a Segment endpoint: `Content-Type` when given, HTTP Basic auth with the
/// token when given, `Content-Encoding: gzip` when `gzip` (the body is sent as given).
pub async fn post(
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

/// POSTs a JSON `body` to `/v1/batch` with `token` (the common case of [`post`]).
pub async fn post_batch(t: &TestServer, token: &str, body: Vec<u8>) -> (u16, Value) {
    post(
        t,
        "/v1/batch",
        Some(token),
        Some("application/json"),
        body,
        false,
    )
    .await
}

/// `data` gzipped.
pub fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A valid track message with `messageId` `id`, stored in table `clicked`.
pub fn track(id: &str) -> Value {
    json!({"type": "track", "event": "Clicked", "userId": "u", "messageId": id, "properties": {"n": 1}})
}

/// Rows of `table` after a flush (an empty list when the table does not exist).
pub async fn table_ids(t: &TestServer, table: &str) -> Vec<String> {
    t.flush().await;
    let element = t.element(table, None);
    let (status, doc) = t.download(&element, json!({})).await;
    if status == 404 {
        return Vec::new();
    }
    assert_eq!(status, 200, "{doc}");
    super::ids(&doc)
}
