//! The baseline of SPEC §6: a bare axum handler that reads the body, parses it with serde_json
//! and answers 200 `{"success":true}` (400 when it is not a JSON object), on a normal
//! multi-thread tokio runtime. `/v1/event` and `/v1/batch` (a `{"batch":[…]}` object, or NDJSON
//! parsed line by line) do the same work stowage's parse does, and nothing else: no auth, no
//! validation, no WAL. `benches/compare_ingest.sh` builds and runs it.
//!
//! ```sh
//! cargo build --release --manifest-path benches/bare_axum/Cargo.toml
//! benches/bare_axum/target/release/bare_axum --listen 127.0.0.1:0   # prints "listening on ADDR"
//! ```

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

fn answer(ok: bool) -> Response {
    let json = [(header::CONTENT_TYPE, "application/json")];
    if ok {
        (StatusCode::OK, json, r#"{"success":true}"#).into_response()
    } else {
        let body = r#"{"error":{"code":"invalid_json","message":"not a JSON object"}}"#;
        (StatusCode::BAD_REQUEST, json, body).into_response()
    }
}

async fn event(body: Bytes) -> Response {
    answer(serde_json::from_slice::<Value>(&body).is_ok_and(|v| v.is_object()))
}

async fn batch(headers: HeaderMap, body: Bytes) -> Response {
    let ndjson = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-ndjson"));
    let ok = if ndjson {
        body.split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .all(|line| serde_json::from_slice::<Value>(line).is_ok_and(|v| v.is_object()))
    } else {
        serde_json::from_slice::<Value>(&body).is_ok_and(|v| v["batch"].is_array())
    };
    answer(ok)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut listen = "127.0.0.1:8090".to_string();
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--listen", Some(addr)) => listen = addr,
            _ => {
                eprintln!("usage: bare_axum [--listen ADDR]");
                std::process::exit(2);
            }
        }
    }
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bare_axum: cannot listen on {listen}: {e}");
            std::process::exit(1);
        }
    };
    let app = Router::new()
        .route("/v1/event", post(event))
        .route("/v1/batch", post(batch))
        .layer(DefaultBodyLimit::max(4 << 20));
    match listener.local_addr() {
        Ok(addr) => println!("listening on {addr}"),
        Err(e) => eprintln!("bare_axum: {e}"),
    }
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("bare_axum: {e}");
        std::process::exit(1);
    }
}
