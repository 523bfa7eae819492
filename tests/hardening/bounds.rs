//! Bounded input (SPEC §5.2): names ≤ 200 characters without control characters, element columns
//! and filters checked against the table at creation, and per-team counts with a ceiling —
//! held also when the creations arrive at once.

use futures::future::join_all;
use serde_json::{Value, json};

use super::client::Resp;
use super::{Demo, DemoField};

async fn new_element(demo: &Demo, canvas: &str, body: Value) -> Resp {
    demo.api
        .post(
            &demo.owner,
            &format!("/api/v1/canvases/{canvas}/elements"),
            body,
        )
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn names_columns_and_filters_are_checked_at_creation() {
    let demo = Demo::start(&[("STOWAGE_FLUSH__INTERVAL", "100ms")]).await;
    // A table with data: the event is answered once it is in a committed file.
    let committed = demo
        .api
        .http
        .post(format!("{}/v1/event", demo.api.base))
        .header("X-Auth-Token", demo.proc.demo_str("events_token"))
        .header("Content-Type", "application/json")
        .header("X-Stowage-Wait", "committed")
        .body(r#"{"event":"Signed Up","properties":{"plan":"pro"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(committed.status(), 200);
    let canvas = demo.proc.demo_str("canvas_id");
    let long = "x".repeat(60_000);
    let cases = [
        (json!({"source": "tracks", "name": long}), "name"),
        (json!({"source": "tracks", "name": "bell\u{7}"}), "name"),
        (json!({"source": long}), "source"),
        (
            json!({"source": "tracks", "columns": (0..5000).map(|i| format!("c{i}")).collect::<Vec<_>>()}),
            "columns",
        ),
        (
            json!({"source": "tracks", "columns": ["no_such_column"]}),
            "columns",
        ),
        (
            json!({"source": "tracks", "filters": [{"junk": 1}]}),
            "filters",
        ),
        (
            json!({"source": "tracks", "filters": [{"column": "nope", "op": "eq", "value": 1}]}),
            "filters",
        ),
        (
            json!({"source": "signed_up", "filters": [{"column": "timestamp", "op": "gt", "value": "not a time"}]}),
            "filters",
        ),
        (
            json!({"source": "signed_up", "columns": ["plan", "plan"]}),
            "columns",
        ),
        (
            json!({"source": "no_data_yet", "columns": ["plan"]}),
            "columns",
        ),
    ];
    for (body, field) in cases {
        let r = new_element(&demo, &canvas, body).await;
        r.expect(400, Some("invalid_request"), field);
        assert_eq!(r.json["error"]["field"], field, "{}", r.text);
    }
    // What the table has is accepted.
    let r = new_element(
        &demo,
        &canvas,
        json!({"source": "Signed Up", "columns": ["plan", "event"],
               "filters": [{"column": "plan", "op": "eq", "value": "pro"}]}),
    )
    .await;
    r.ok(201, "known columns and a typed filter");
    let r = demo
        .api
        .post(
            &demo.owner,
            "/api/v1/canvases",
            json!({"name": "y".repeat(201)}),
        )
        .await;
    r.expect(400, Some("invalid_request"), "canvas name over 200");
    let r = demo
        .api
        .post(
            &demo.owner,
            "/api/v1/canvases",
            json!({"name": "y".repeat(200)}),
        )
        .await;
    r.ok(201, "canvas name of 200");
    // Nothing of the refused ones was stored.
    let listed = demo.api.get(&demo.owner, "/api/v1/canvases").await;
    assert!(listed.text.len() < 20_000, "{} bytes", listed.text.len());
}

/// 20 creations sent at once against a ceiling of 5: exactly 5 are made, the rest are 409
/// `limit_reached`; revoking one makes room for one more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counts_have_ceilings_also_under_concurrency() {
    let demo = Demo::start(&[
        ("STOWAGE_ACCOUNTS__MAX_PATS_PER_USER", "5"),
        ("STOWAGE_ACCOUNTS__MAX_CANVASES", "5"),
        ("STOWAGE_ACCOUNTS__MAX_KEYS", "5"),
        ("STOWAGE_ACCOUNTS__MAX_INVITES", "5"),
    ])
    .await;
    // The demo already has one canvas and one data key.
    let burst = |path: &'static str, body: Value| {
        let demo = &demo;
        join_all((0..20).map(move |i| {
            let mut body = body.clone();
            if let Some(email) = body.get_mut("email") {
                *email = format!("burst{i}@invite.example").into();
            }
            async move { demo.api.post(&demo.owner, path, body).await }
        }))
    };
    for (path, body, already) in [
        ("/api/v1/pats", json!({"name": "p"}), 0),
        ("/api/v1/canvases", json!({"name": "c"}), 1),
        ("/api/v1/keys", json!({"name": "k"}), 1),
        ("/api/v1/invites", json!({"email": "", "role": "member"}), 0),
    ] {
        let answers = burst(path, body).await;
        let made = answers.iter().filter(|r| r.status == 201).count();
        for r in answers.iter().filter(|r| r.status != 201) {
            r.expect(409, Some("limit_reached"), path);
        }
        assert_eq!(made + already, 5, "{path}: {made} made beyond {already}");
    }
    // Revoking a token makes room for one more.
    let pats = demo.api.get(&demo.owner, "/api/v1/pats").await;
    let id = pats.json["pats"][0]["id"].as_str().unwrap().to_string();
    demo.api
        .delete(&demo.owner, &format!("/api/v1/pats/{id}"))
        .await
        .ok(204, "revoke");
    demo.api
        .post(&demo.owner, "/api/v1/pats", json!({"name": "again"}))
        .await
        .ok(201, "room again");
    // The page stays small whatever was tried.
    let (status, page) = demo.page(&demo.owner, "/settings").await;
    assert_eq!(status, 200);
    assert!(page.len() < 200_000, "settings is {} bytes", page.len());
}
