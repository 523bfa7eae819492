//! Secrets a caller creates and revokes: the team's data API keys (`/api/v1/keys`) and events
//! tokens (`/api/v1/tokens`) — owners only, tokens only while events are enabled — and the
//! caller's own personal access tokens (`/api/v1/pats`). All three share one shape: creating
//! answers 201 `{id, <secret>, prefix, created_at, name}`, the only time the secret is shown;
//! listings show `{id, name, prefix, created_at, created_by, last_used_at}` and never a secret
//! or its hash; revoking answers 204 and the secret stops working at the next request.

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
use crate::catalog::{PatInfo, SecretInfo, SecretKind};
use crate::http::error::ApiError;

/// `POST` body of all three: an optional label.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSecret {
    /// Up to 100 characters.
    #[serde(default)]
    pub name: Option<String>,
}

/// The listing fields every kind shares.
struct Row<'a> {
    id: &'a str,
    name: Option<&'a str>,
    prefix: &'a str,
    created_at: i64,
    created_by: &'a str,
    last_used_at: Option<i64>,
}

impl<'a> From<&'a SecretInfo> for Row<'a> {
    fn from(s: &'a SecretInfo) -> Self {
        Row {
            id: &s.id,
            name: s.name.as_deref(),
            prefix: &s.prefix,
            created_at: s.created_at,
            created_by: &s.created_by,
            last_used_at: s.last_used_at,
        }
    }
}

impl<'a> From<&'a PatInfo> for Row<'a> {
    fn from(p: &'a PatInfo) -> Self {
        Row {
            id: &p.id,
            name: p.name.as_deref(),
            prefix: &p.prefix,
            created_at: p.created_at,
            created_by: &p.created_by,
            last_used_at: p.last_used_at,
        }
    }
}

impl Row<'_> {
    fn listed(&self) -> Value {
        json!({
            "id": self.id, "name": self.name, "prefix": self.prefix, "created_at": self.created_at,
            "created_by": self.created_by, "last_used_at": self.last_used_at,
        })
    }

    /// The one answer that carries the secret, under `field`.
    fn created(&self, field: &str, secret: &str) -> Response {
        created_secret(json!({
            "id": self.id, field: secret, "prefix": self.prefix,
            "created_at": self.created_at, "name": self.name,
        }))
    }
}

fn listing<'a>(list_name: &str, rows: impl IntoIterator<Item = Row<'a>>) -> Json<Value> {
    let rows: Vec<Value> = rows.into_iter().map(|r| r.listed()).collect();
    Json(json!({ list_name: rows }))
}

fn list_secrets(
    state: &AppState,
    caller: &Caller,
    kind: SecretKind,
) -> Result<Json<Value>, ApiError> {
    let list = state.accounts.secrets(caller, kind)?;
    Ok(listing(plural(kind), list.iter().map(Row::from)))
}

fn create_secret(
    state: &AppState,
    caller: &Caller,
    kind: SecretKind,
    req: NewSecret,
) -> Result<Response, ApiError> {
    let (info, secret) = state
        .accounts
        .create_secret(caller, kind, req.name.as_deref())?;
    let field = match kind {
        SecretKind::DataKey => "key",
        SecretKind::EventsToken => "token",
    };
    Ok(Row::from(&info).created(field, &secret))
}

fn plural(kind: SecretKind) -> &'static str {
    match kind {
        SecretKind::DataKey => "keys",
        SecretKind::EventsToken => "tokens",
    }
}

/// `GET /api/v1/keys` → `{"keys": […]}`
pub async fn list_keys(State(s): State<AppState>, c: Caller) -> Result<Json<Value>, ApiError> {
    list_secrets(&s, &c, SecretKind::DataKey)
}

/// `POST /api/v1/keys` → 201 `{id, key, prefix, created_at, name}`
pub async fn create_key(
    State(s): State<AppState>,
    Protected { caller: c, .. }: Protected,
    JsonBody(req): JsonBody<NewSecret>,
) -> Result<Response, ApiError> {
    create_secret(&s, &c, SecretKind::DataKey, req)
}

/// `DELETE /api/v1/keys/{id}` → 204
pub async fn revoke_key(
    State(s): State<AppState>,
    Protected { caller: c, .. }: Protected,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    // Answered once no node accepts it any more.
    s.accounts
        .revoke_secret(&c, SecretKind::DataKey, &id)?
        .wait()
        .await;
    Ok(deleted())
}

/// `GET /api/v1/tokens` → `{"tokens": […]}`
pub async fn list_tokens(State(s): State<AppState>, c: Caller) -> Result<Json<Value>, ApiError> {
    list_secrets(&s, &c, SecretKind::EventsToken)
}

/// `POST /api/v1/tokens` → 201 `{id, token, prefix, created_at, name}`; 403 `events_disabled`
/// until the operator enables events.
pub async fn create_token(
    State(s): State<AppState>,
    Protected { caller: c, .. }: Protected,
    JsonBody(req): JsonBody<NewSecret>,
) -> Result<Response, ApiError> {
    create_secret(&s, &c, SecretKind::EventsToken, req)
}

/// `DELETE /api/v1/tokens/{id}` → 204
pub async fn revoke_token(
    State(s): State<AppState>,
    Protected { caller: c, .. }: Protected,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    // Answered once no node accepts it any more.
    s.accounts
        .revoke_secret(&c, SecretKind::EventsToken, &id)?
        .wait()
        .await;
    Ok(deleted())
}

/// `GET /api/v1/pats` → `{"pats": […]}`, the caller's own.
pub async fn list_pats(State(s): State<AppState>, c: Caller) -> Result<Json<Value>, ApiError> {
    let list = s.accounts.pats(&c)?;
    Ok(listing("pats", list.iter().map(Row::from)))
}

/// `POST /api/v1/pats` → 201 `{id, token, prefix, created_at, name}`
pub async fn create_pat(
    State(s): State<AppState>,
    Protected { caller: c, .. }: Protected,
    JsonBody(req): JsonBody<NewSecret>,
) -> Result<Response, ApiError> {
    let (info, secret) = s.accounts.create_pat(&c, req.name.as_deref())?;
    Ok(Row::from(&info).created("token", &secret))
}

/// `DELETE /api/v1/pats/{id}` → 204; another user's id is 404.
pub async fn revoke_pat(
    State(s): State<AppState>,
    Protected { caller: c, .. }: Protected,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    s.accounts.revoke_pat(&c, &id)?;
    Ok(deleted())
}
