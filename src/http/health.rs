//! Liveness (`/healthz`: the process answers, and which node it is) and readiness (`/readyz`:
//! WAL recovery done and the catalog answers), and the headers every response carries:
//! `X-Content-Type-Options: nosniff`, and — when `server.node_header` is on — the node's name
//! (`X-Stowage-Node`), so behind a load balancer one can tell who answered. It is off by
//! default: a host name tells an outsider about the deployment.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use serde_json::{Value, json};

use super::AppState;

/// 200 while the server is serving.
pub async fn healthz(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"status": "ok", "node": state.config.node.id}))
}

/// Adds `X-Content-Type-Options: nosniff`, and `X-Stowage-Node` when configured.
pub fn add_headers(state: &AppState, headers: &mut axum::http::HeaderMap) {
    headers.insert(
        axum::http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if state.config.server.node_header
        && let Ok(v) = HeaderValue::from_str(&state.config.node.id)
        && !v.is_empty()
    {
        headers.insert("x-stowage-node", v);
    }
}

/// 200 when the catalog answers, else 503.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let catalog = state.catalog.clone();
    let ok = tokio::task::spawn_blocking(move || catalog.ping())
        .await
        .unwrap_or(false);
    if ok {
        (StatusCode::OK, Json(json!({"status": "ready"})))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "catalog unavailable"})),
        )
    }
}
