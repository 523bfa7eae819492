//! `stowage bench ingest`, the real binary: against a real server in single mode (every request
//! acknowledged, every event stored once under its own messageId), against a stub `/v1/batch`
//! in the batch, NDJSON, gzip and Basic-auth variants, and with a clear error for a bad URL.

use crate::common;

use std::collections::HashSet;
use std::io::Read;
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use common::TestServer;
use common::process::BIN;
use serde_json::{Value, json};

/// Runs `stowage bench …` off the async threads; exit success, stdout, stderr.
async fn bench(args: Vec<String>) -> (bool, String, String) {
    let out = tokio::task::spawn_blocking(move || {
        Command::new(BIN).arg("bench").args(&args).output().unwrap()
    })
    .await
    .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_mode_stores_every_event_once() {
    let t = TestServer::start(|_| {}).await;
    let mut a = args("ingest --mode single --count 200 -c 4 --json -q --url");
    a.extend([t.url(""), "--token".into(), t.seeded.token.clone()]);
    let (ok, stdout, stderr) = bench(a).await;
    assert!(ok, "{stderr}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["requests"], 200, "{summary}");
    assert_eq!(summary["ok"], 200);
    assert_eq!(summary["events"], 200);
    assert_eq!(summary["status"], json!({"200": 200}));
    assert_eq!(summary["transport_errors"], 0);
    assert_eq!(summary["mode"], "single");
    let p50 = summary["latency_ms"]["p50"].as_f64().unwrap();
    let p99 = summary["latency_ms"]["p99"].as_f64().unwrap();
    assert!(0.0 < p50 && p50 <= p99 && p99 <= summary["latency_ms"]["max"].as_f64().unwrap());

    t.flush().await;
    let rows = t.rows(&t.element("tracks", None)).await;
    let prefix = format!("bench-{}-", summary["run_id"].as_str().unwrap());
    let ids: HashSet<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(rows.len(), 200, "every event stored once");
    assert_eq!(ids.len(), 200, "under 200 distinct ids");
    assert!(ids.iter().all(|id| id.starts_with(&prefix)), "{ids:?}");
    let events: HashSet<&str> = rows.iter().map(|r| r["event"].as_str().unwrap()).collect();
    assert!(events.len() >= 4, "several event names: {events:?}");
}

/// What the stub `/v1/batch` saw.
#[derive(Default)]
struct Seen {
    ids: Vec<String>,
    requests: Vec<(String, String, bool)>,
}

/// A stand-in for `/v1/batch` (SPEC §2.2) that checks the shape and records the messageIds.
async fn stub_batch(
    State(seen): State<Arc<Mutex<Seen>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let header = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let gzip = header("content-encoding") == "gzip";
    let mut raw = Vec::new();
    if gzip {
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut raw)
            .unwrap();
    } else {
        raw = body.to_vec();
    }
    let content_type = header("content-type");
    let messages: Vec<Value> = if content_type == "application/x-ndjson" {
        let text = String::from_utf8(raw).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    } else {
        let v: Value = serde_json::from_slice(&raw).unwrap();
        v["batch"].as_array().unwrap().clone()
    };
    let ids: Vec<String> = messages
        .iter()
        .map(|m| m["messageId"].as_str().unwrap().to_string())
        .collect();
    let auth = if headers.contains_key("x-auth-token") {
        header("x-auth-token")
    } else {
        header("authorization")
    };
    let mut s = seen.lock().unwrap();
    s.ids.extend(ids.iter().cloned());
    s.requests.push((content_type, auth, gzip));
    (
        StatusCode::OK,
        json!({"success": true, "ids": ids}).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_and_ndjson_bodies_reach_the_batch_endpoint() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let app = Router::new()
        .route("/v1/batch", post(stub_batch))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let cases = [
        (
            "batch",
            "--auth basic --gzip",
            "application/json",
            "Basic dG9rOg==",
            true,
        ),
        (
            "ndjson",
            "--auth header",
            "application/x-ndjson",
            "tok",
            false,
        ),
    ];
    for (mode, extra, content_type, auth, gzip) in cases {
        let mut a = args(&format!(
            "ingest --mode {mode} --batch-size 50 --count 10 -c 2 --json -q --token tok {extra} --url"
        ));
        a.push(url.clone());
        let (ok, stdout, stderr) = bench(a).await;
        assert!(ok, "{mode}: {stderr}");
        let summary: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(summary["ok"], 10, "{summary}");
        assert_eq!(summary["events"], 500);
        assert_eq!(summary["batch_size"], 50);
        let mut s = seen.lock().unwrap();
        assert_eq!(s.ids.len(), 500, "{mode}");
        assert_eq!(s.ids.iter().collect::<HashSet<_>>().len(), 500, "{mode}");
        let want = (content_type.to_string(), auth.to_string(), gzip);
        assert!(
            s.requests.iter().all(|r| *r == want),
            "{mode}: {:?}",
            s.requests[0]
        );
        *s = Seen::default();
    }
}

#[tokio::test]
async fn bad_urls_and_dead_servers_are_clear_errors() {
    for (url, message) in [
        ("ftp://127.0.0.1:1", "invalid URL \"ftp://127.0.0.1:1\""),
        ("127.0.0.1:8080", "invalid URL"),
        ("http://127.0.0.1:1", "cannot connect to http://127.0.0.1:1"),
    ] {
        let (ok, stdout, stderr) =
            bench(args(&format!("ingest -q --count 1 --token t --url {url}"))).await;
        assert!(!ok, "{url}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(stderr.contains(message), "{url}: {stderr}");
    }
    let (ok, _, stderr) = bench(args("ingest --url http://127.0.0.1:1 --token t -n 0")).await;
    assert!(
        !ok && stderr.contains("--count must be at least 1"),
        "{stderr}"
    );
}
