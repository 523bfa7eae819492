//! `POST /api/v1/events/request` (owners): asks the operator to enable event ingestion for the
//! team. 202 `{"id", "new"}` — accepted for the operator to act on (`stowage admin events
//! requests` lists it, `admin events enable` grants it); `new` is false when the team already had
//! an open request, whose id is returned. When events are already enabled there is nothing to
//! ask for: 409 `events_enabled`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::super::AppState;
use super::auth::Protected;
use crate::http::error::ApiError;

/// 202 `{"id", "new"}`
pub async fn request(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let (id, new) = state.accounts.request_events(&caller)?;
    Ok((StatusCode::ACCEPTED, Json(json!({"id": id, "new": new}))))
}
