//! `GET /api/v1/tables` (any user): the team's warehouse tables with their columns and types,
//! rows, files, bytes and when data last arrived.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::super::AppState;
use crate::accounts::Caller;
use crate::http::error::ApiError;

/// `{"tables": [{name, columns: [{name, type}], rows, files, bytes, last_received_at}]}`
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let tables = state.accounts.tables(&caller)?;
    Ok(Json(json!({ "tables": tables })))
}
