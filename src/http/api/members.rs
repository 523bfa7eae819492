//! The team's people: `GET /api/v1/members` (any user), and for owners `POST /api/v1/invites`
//! (an invite link, shown once), `GET /api/v1/invites` and `DELETE /api/v1/invites/{id}` (the
//! pending ones), `PATCH /api/v1/members/{id}` (role) and `DELETE /api/v1/members/{id}` —
//! neither of which may leave the team without an owner.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::AppState;
use super::auth::Protected;
use super::{JsonBody, created_secret, deleted};
use crate::accounts::Caller;
use crate::catalog::{Role, User, now_ms};
use crate::http::error::ApiError;

/// `POST /api/v1/invites`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewInvite {
    /// Who is invited.
    pub email: String,
    /// The role given on acceptance.
    pub role: Role,
}

/// `PATCH /api/v1/members/{id}`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleChange {
    /// The new role.
    pub role: Role,
}

fn member(u: &User) -> Value {
    json!({"id": u.id, "email": u.email, "name": u.name, "role": u.role, "created_at": u.created_at})
}

/// `{"members": [{id, email, name, role, created_at}]}`, owners first.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    let members = state.accounts.members(&caller)?;
    Ok(Json(
        json!({"members": members.iter().map(member).collect::<Vec<_>>()}),
    ))
}

/// 201 `{"invite_url", "expires_at"}`: the link is shown this once (only its hash is kept).
/// `expires_at` (ms) is an upper bound, taken just after the link was stored.
pub async fn invite(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
    JsonBody(req): JsonBody<NewInvite>,
) -> Result<Response, ApiError> {
    let url = state.accounts.invite(&caller, &req.email, req.role)?;
    let expires_at = now_ms().saturating_add(state.accounts.link_ttl_ms());
    Ok(created_secret(
        json!({"invite_url": url, "expires_at": expires_at}),
    ))
}

/// `{"invites": [{id, email, role, created_by, created_at, expires_at}]}`: pending invites
/// (never their links).
pub async fn list_invites(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    let invites = state.accounts.invites(&caller)?;
    Ok(Json(json!({ "invites": invites })))
}

/// 204; the invite's link stops working at once.
pub async fn revoke_invite(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.accounts.revoke_invite(&caller, &id)?;
    Ok(deleted())
}

/// 200 with the member as changed; 409 `last_owner` for the team's only owner.
pub async fn set_role(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
    Path(id): Path<String>,
    JsonBody(req): JsonBody<RoleChange>,
) -> Result<Json<Value>, ApiError> {
    let user = state.accounts.set_role(&caller, &id, req.role)?;
    Ok(Json(member(&user)))
}

/// 204; the member's sessions and tokens stop working at once.
pub async fn remove(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.accounts.remove_member(&caller, &id)?;
    Ok(deleted())
}
