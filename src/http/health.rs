//! Liveness (`/healthz`: the process answers) and readiness (`/readyz`: WAL recovery done and
//! the catalog answers).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;

/// 200 while the server is serving.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
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
