//! Every error of SPEC §2.1 and §3.1 over HTTP: status, JSON error body, code, field.

use crate::common;

use std::io::Write;

use common::{SEED_EVENT, TestServer, seed, status_json};
use object_store::memory::InMemory;
use serde_json::{Value, json};
use stowage::catalog::SecretKind;
use stowage::store::faulty::FaultyStore;

fn assert_error(status: u16, body: &Value, want_status: u16, code: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["error"]["code"], json!(code), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

async fn post_event(
    t: &TestServer,
    token: Option<&str>,
    content_type: Option<&str>,
    body: Vec<u8>,
    gzip: bool,
) -> (u16, Value) {
    let mut req = t.http.post(t.url("/v1/event")).body(body);
    if let Some(tok) = token {
        req = req.header("X-Auth-Token", tok);
    }
    if let Some(ct) = content_type {
        req = req.header("Content-Type", ct);
    }
    if gzip {
        req = req.header("Content-Encoding", "gzip");
    }
    status_json(req.send().await.unwrap()).await
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

#[tokio::test]
async fn event_errors() {
    let t = TestServer::start(|_| {}).await;
    let tok = Some(t.seeded.token.as_str());
    let json_ct = Some("application/json");
    let cases: &[(&str, u16, &str, Option<&str>)] = &[
        ("{\"event\": ", 400, "invalid_json", None),
        ("[1,2]", 400, "invalid_body", None),
        ("\"just a string\"", 400, "invalid_body", None),
        ("{\"properties\":{}}", 400, "missing_event", Some("event")),
        ("{\"event\":\"\"}", 400, "invalid_event", Some("event")),
        ("{\"event\":42}", 400, "invalid_event", Some("event")),
        (
            "{\"event\":\"e\",\"timestamp\":\"not a time\"}",
            400,
            "invalid_timestamp",
            Some("timestamp"),
        ),
        (
            "{\"event\":\"e\",\"timestamp\":1354408208}",
            400,
            "invalid_timestamp",
            Some("timestamp"),
        ),
        (
            "{\"event\":\"e\",\"version\":2}",
            400,
            "unsupported_version",
            Some("version"),
        ),
        (
            "{\"event\":\"e\",\"version\":\"1\"}",
            400,
            "unsupported_version",
            Some("version"),
        ),
        (
            "{\"event\":\"e\",\"type\":\"page\"}",
            400,
            "unsupported_type",
            Some("type"),
        ),
        (
            "{\"event\":\"e\",\"properties\":\"x\"}",
            400,
            "invalid_properties",
            Some("properties"),
        ),
    ];
    for (body, status, code, field) in cases {
        let (s, b) = post_event(&t, tok, json_ct, body.as_bytes().to_vec(), false).await;
        assert_error(s, &b, *status, code);
        if let Some(f) = field {
            assert_eq!(b["error"]["field"], json!(f), "{body}");
        }
    }

    // Content type.
    let (s, b) = post_event(&t, tok, Some("text/plain"), SEED_EVENT.into(), false).await;
    assert_error(s, &b, 415, "unsupported_media_type");
    let (s, b) = post_event(&t, tok, None, SEED_EVENT.into(), false).await;
    assert_error(s, &b, 415, "unsupported_media_type");
    let (s, _) = post_event(
        &t,
        tok,
        Some("application/json; charset=utf-8"),
        SEED_EVENT.into(),
        false,
    )
    .await;
    assert_eq!(s, 200, "charset parameter is fine");

    // Size: 32 KiB by default, after decompression for gzip.
    let big = json!({"event": "e", "properties": {"pad": "x".repeat(33 * 1024)}}).to_string();
    let (s, b) = post_event(&t, tok, json_ct, big.clone().into_bytes(), false).await;
    assert_error(s, &b, 413, "payload_too_large");
    let (s, b) = post_event(&t, tok, json_ct, gz(big.as_bytes()), true).await;
    assert_error(s, &b, 413, "payload_too_large");
    let (s, b) = post_event(&t, tok, json_ct, gz(SEED_EVENT.as_bytes()), true).await;
    assert_eq!(s, 200, "gzip accepted: {b}");
    let (s, b) = post_event(&t, tok, json_ct, b"not gzip".to_vec(), true).await;
    assert_error(s, &b, 400, "invalid_gzip");

    // Auth.
    let (s, b) = post_event(&t, None, json_ct, SEED_EVENT.into(), false).await;
    assert_error(s, &b, 401, "missing_token");
    let (s, b) = post_event(&t, Some("stw_evt_nope"), json_ct, SEED_EVENT.into(), false).await;
    assert_error(s, &b, 401, "invalid_token");
    let (s, b) = post_event(&t, Some(&t.seeded.key), json_ct, SEED_EVENT.into(), false).await;
    assert_error(s, &b, 401, "invalid_token"); // a data key is not an events token

    // Events disabled, then enabled again: takes effect on the next request.
    t.catalog()
        .set_events_enabled(&t.seeded.team, false)
        .unwrap();
    let (s, b) = post_event(&t, tok, json_ct, SEED_EVENT.into(), false).await;
    assert_error(s, &b, 403, "events_disabled");
    t.catalog()
        .set_events_enabled(&t.seeded.team, true)
        .unwrap();
    let (s, _) = post_event(&t, tok, json_ct, SEED_EVENT.into(), false).await;
    assert_eq!(s, 200);

    // Revoked: stops at once.
    let tokens = t
        .catalog()
        .list_secrets(SecretKind::EventsToken, &t.seeded.team)
        .unwrap();
    // This process refuses it at once; no need to wait for the revocation to settle.
    let _settled = t
        .catalog()
        .revoke_secret(SecretKind::EventsToken, &tokens[0].id)
        .unwrap();
    let (s, b) = post_event(&t, tok, json_ct, SEED_EVENT.into(), false).await;
    assert_error(s, &b, 401, "invalid_token");

    // GET → 405 with Allow.
    let resp = t.http.get(t.url("/v1/event")).send().await.unwrap();
    assert_eq!(resp.headers()["allow"], "POST");
    let (s, b) = status_json(resp).await;
    assert_error(s, &b, 405, "method_not_allowed");
}

#[tokio::test]
async fn budgets_answer_429_with_retry_after() {
    // Flushes cannot complete while the store is down, so the budget really fills.
    let store = std::sync::Arc::new(FaultyStore::new(std::sync::Arc::new(InMemory::new())));
    let t = TestServer::start_on(
        |c| {
            c.ingest.team_budget.0 = 4_000;
            c.ingest.global_budget.0 = 1_000_000;
            c.flush.retry_backoff.0 = std::time::Duration::from_millis(10);
        },
        Some(store.clone()),
    )
    .await;
    store.fail_writes(true);
    let mut statuses = Vec::new();
    for i in 0..40 {
        let resp = t
            .http
            .post(t.url("/v1/event"))
            .header("X-Auth-Token", &t.seeded.token)
            .header("Content-Type", "application/json")
            .body(json!({"event": "e", "properties": {"i": i, "pad": "y".repeat(100)}}).to_string())
            .send()
            .await
            .unwrap();
        let retry = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        let (s, b) = status_json(resp).await;
        if s == 429 {
            assert_eq!(b["error"]["code"], json!("team_buffer_full"));
            assert_eq!(retry.as_deref(), Some("1"));
        }
        statuses.push(s);
    }
    let accepted = statuses.iter().filter(|s| **s == 200).count();
    assert!(accepted > 0 && statuses.contains(&429), "{statuses:?}");
    store.fail_writes(false);
    // A flush commits the buffer and frees the budget.
    t.flush().await;
    t.send(json!({"event": "e"})).await;
    let rows = t.rows(&t.element("e", None)).await;
    assert_eq!(
        rows.len(),
        accepted,
        "every acknowledged event is stored, none of the refused"
    );
}

/// The budget counts what buffered rows really hold, not only their admitted estimate: an
/// event of 300 integers is estimated at ~9 kB, but each of its columns' builders has room for
/// 16 rows (~39 kB in all), so while its flush cannot finish the team is refused under a 30 kB
/// budget (the estimates alone would admit a second one); once it commits, room is back.
#[tokio::test]
async fn measured_buffer_memory_counts_against_the_budget() {
    let store = std::sync::Arc::new(FaultyStore::new(std::sync::Arc::new(InMemory::new())));
    let t = TestServer::start_on(
        |c| {
            c.ingest.team_budget.0 = 30_000;
            c.flush.retry_backoff.0 = std::time::Duration::from_millis(10);
        },
        Some(store.clone()),
    )
    .await;
    let ingest = t.srv().state.ingest.clone();
    let team = t.seeded.team.as_str().into();
    store.fail_writes(true);
    let post = |i: u32| {
        let properties: serde_json::Map<String, Value> =
            (0..300).map(|p| (format!("p{p:03}"), json!(i))).collect();
        t.http
            .post(t.url("/v1/event"))
            .header("X-Auth-Token", &t.seeded.token)
            .header("Content-Type", "application/json")
            .body(json!({"event": "m", "properties": properties}).to_string())
            .send()
    };
    let (s, b) = status_json(post(0).await.unwrap()).await;
    assert_eq!(s, 200, "{b}");
    let reserved = ingest.admission().team_bytes(&team);
    assert!(reserved > 0 && reserved < 15_000, "{reserved}");
    // The actor buffers the event just after its acknowledgement.
    let counted = common::wait_for(std::time::Duration::from_secs(10), || async {
        reserved + ingest.admission().team_measured_bytes(&team) > 30_000
    })
    .await;
    assert!(
        counted,
        "the builders' bytes are counted: {reserved} reserved, {} measured",
        ingest.admission().team_measured_bytes(&team)
    );
    let (s, b) = status_json(post(1).await.unwrap()).await;
    assert_eq!(
        (s, b["error"]["code"].clone()),
        (429, json!("team_buffer_full")),
        "{b}"
    );

    store.fail_writes(false);
    t.flush().await;
    assert_eq!(
        ingest.admission().team_measured_bytes(&team),
        0,
        "nothing held after the flush"
    );
    assert_eq!(ingest.admission().team_bytes(&team), 0);
    let (s, b) = status_json(post(2).await.unwrap()).await;
    assert_eq!(s, 200, "{b}");
}

#[tokio::test]
async fn download_errors() {
    let t = TestServer::start(|_| {}).await;
    let element = t.element("tracks", None);
    let other = seed(t.catalog(), "team-b");
    let other_element = t
        .catalog()
        .create_element(&stowage::catalog::NewElement {
            canvas: other.canvas.clone(),
            table: "tracks".into(),
            ..Default::default()
        })
        .unwrap();
    let post = |key: Option<String>, body: String, accept: Option<&'static str>| {
        let mut req = t
            .http
            .post(t.url("/data/table"))
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(k) = key {
            req = req.header("x-api-key", k);
        }
        if let Some(a) = accept {
            req = req.header("Accept", a);
        }
        async move { status_json(req.send().await.unwrap()).await }
    };
    let key = Some(t.seeded.key.clone());
    let body = |c: &str, e: &str| json!({"canvasId": c, "elementId": e}).to_string();

    let (s, b) = post(None, body(&t.seeded.canvas, &element), None).await;
    assert_error(s, &b, 401, "missing_api_key");
    let (s, b) = post(
        Some("stw_data_wrong".into()),
        body(&t.seeded.canvas, &element),
        None,
    )
    .await;
    assert_error(s, &b, 401, "invalid_api_key");
    // Another team's canvas and element, real ids: the same 404 as a missing one.
    let (s, b) = post(key.clone(), body(&other.canvas, &other_element), None).await;
    assert_error(s, &b, 404, "not_found");
    let (s, b2) = post(key.clone(), body(&t.seeded.canvas, "el_doesnotexist"), None).await;
    assert_error(s, &b2, 404, "not_found");
    assert_eq!(b, b2, "no existence leak");
    // Right element, wrong canvas pairing.
    let (s, b) = post(key.clone(), body(&other.canvas, &element), None).await;
    assert_error(s, &b, 404, "not_found");
    // Bad bodies.
    let (s, b) = post(key.clone(), "{".into(), None).await;
    assert_error(s, &b, 400, "invalid_json");
    let (s, b) = post(
        key.clone(),
        json!({"canvasId": t.seeded.canvas}).to_string(),
        None,
    )
    .await;
    assert_error(s, &b, 400, "missing_field");
    assert_eq!(b["error"]["field"], json!("elementId"));
    let (s, b) = post(
        key.clone(),
        json!({"canvasId": t.seeded.canvas, "elementId": element, "columns": ["nope"]}).to_string(),
        None,
    )
    .await;
    assert_error(s, &b, 400, "unknown_column");
    let (s, b) = post(
        key.clone(),
        body(&t.seeded.canvas, &element),
        Some("image/png"),
    )
    .await;
    assert_error(s, &b, 406, "not_acceptable");
    let (s, _) = post(
        key.clone(),
        body(&t.seeded.canvas, &element),
        Some("text/html, application/json;q=0.9"),
    )
    .await;
    assert_eq!(s, 200);

    // Revoking the key works at once.
    let keys = t
        .catalog()
        .list_secrets(SecretKind::DataKey, &t.seeded.team)
        .unwrap();
    // This process refuses it at once; no need to wait for the revocation to settle.
    let _settled = t
        .catalog()
        .revoke_secret(SecretKind::DataKey, &keys[0].id)
        .unwrap();
    let (s, b) = post(key.clone(), body(&t.seeded.canvas, &element), None).await;
    assert_error(s, &b, 401, "invalid_api_key");

    // Other methods → 405 with Allow, on both paths; unknown paths → JSON 404.
    for path in ["/data/table", "/api/data/table"] {
        let resp = t.http.get(t.url(path)).send().await.unwrap();
        assert_eq!(resp.headers()["allow"], "POST");
        let (s, b) = status_json(resp).await;
        assert_error(s, &b, 405, "method_not_allowed");
    }
    let (s, b) = status_json(t.http.get(t.url("/nope")).send().await.unwrap()).await;
    assert_error(s, &b, 404, "not_found");
    let (s, _) = status_json(t.http.get(t.url("/healthz")).send().await.unwrap()).await;
    assert_eq!(s, 200);
}
