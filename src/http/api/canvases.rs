//! The team's canvases and their table and SQL elements (any user of the team): `GET/POST
//! /api/v1/canvases`, `PATCH/DELETE /api/v1/canvases/{id}`, `GET/POST
//! /api/v1/canvases/{id}/elements`, `DELETE /api/v1/elements/{id}`. Every element carries its
//! `share_url`; another team's ids answer 404 like missing ones.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::AppState;
use super::auth::Protected;
use super::{JsonBody, deleted};
use crate::accounts::Caller;
use crate::accounts::sql_elements::NewSqlElement;
use crate::accounts::workspace::NewTableElement;
use crate::http::error::ApiError;

/// `POST /api/v1/canvases` and `PATCH /api/v1/canvases/{id}`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CanvasName {
    /// 1 to 200 characters.
    pub name: String,
}

type Created = (StatusCode, Json<Value>);

/// `{"canvases": [{id, name, created_at, elements: […]}]}`
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let canvases = state.accounts.canvases(&caller)?;
    Ok(Json(json!({ "canvases": canvases })))
}

/// 201 with the new canvas.
pub async fn create(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
    JsonBody(req): JsonBody<CanvasName>,
) -> Result<Created, ApiError> {
    let canvas = state.accounts.create_canvas(&caller, &req.name)?;
    Ok((StatusCode::CREATED, Json(json!(canvas))))
}

/// 200 with the renamed canvas.
pub async fn rename(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<CanvasName>,
) -> Result<Json<Value>, ApiError> {
    let canvas = state.accounts.rename_canvas(&caller, &id, &req.name)?;
    Ok(Json(json!(canvas)))
}

/// 204; the canvas's elements (and their share URLs) go with it.
pub async fn delete(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.accounts.delete_canvas(&caller, &id)?;
    Ok(deleted())
}

/// `{"elements": [{id, canvas_id, name, source, columns, filters, limit, created_at, share_url}]}`
pub async fn elements(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let elements = state.accounts.elements(&caller, &id)?;
    Ok(Json(json!({ "elements": elements })))
}

/// 201 with the new element and its share URL: a table element from `{source, name?,
/// columns?, filters?, limit?, fresh?}`, an SQL element from `{sql, name?, fresh?}` (checked
/// now: 400 `invalid_sql` with the planner's message).
pub async fn create_element(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Created, ApiError> {
    let bytes = axum::body::Bytes::from(body.to_string());
    let element = if body.get("sql").is_some() {
        let req: NewSqlElement = super::parse_json(&bytes)?;
        state
            .accounts
            .create_sql_element(&caller, &id, &req, &state.sql)
            .await?
    } else {
        let req: NewTableElement = super::parse_json(&bytes)?;
        state.accounts.create_element(&caller, &id, &req)?
    };
    Ok((StatusCode::CREATED, Json(json!(element))))
}

/// 204; the element's share URL stops working.
pub async fn delete_element(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.accounts.delete_element(&caller, &id)?;
    Ok(deleted())
}
