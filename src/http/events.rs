//! `POST /v1/event`: authenticate the events token, check the content type and size, validate
//! the event, and submit it. `200 {"success":true,"id":…}` once
//! [`Ingest::submit`](crate::ingest::Ingest::submit) accepts it.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tracing::error;

use super::AppState;
use super::body::{expected_len, header_str, is_json, read_limited};
use super::request_id::Scope;
use crate::catalog::TokenAuth;
use crate::http::error::ApiError;
use crate::ingest::event::parse_event;
use crate::ingest::team::AppendError;
use crate::ingest::{Accepted, IngestError, Wait};
use crate::model::TeamId;

/// Handler for a single event, behind the router's middleware (the fast lane answers `POST
/// /v1/event` itself with [`respond`]; this serves a router driven without it).
pub async fn post_event(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    respond(&state, &headers, body, &Scope::Entered).await
}

/// The answer to a single event; log lines go to `scope`.
pub async fn respond(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    scope: &Scope,
) -> Result<Response, ApiError> {
    accept(state, headers, body, scope).await.inspect_err(|e| {
        metrics::counter!("stowage_events_rejected_total", "code" => e.code).increment(1)
    })
}

async fn accept(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    scope: &Scope,
) -> Result<Response, ApiError> {
    let received_at = chrono::Utc::now();
    let team = check_token(state, header_token(headers).as_deref(), scope)?;
    if !is_json(headers) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "Content-Type must be application/json",
        ));
    }
    let limit = state.config.ingest.max_body.0 as usize;
    // No room: wait for some before the body is read, holding the turn until submitted.
    let turn = state
        .ingest
        .wait_for_room(&team, expected_len(headers, limit))
        .await;
    let body = read_limited(headers, body, limit).await?;
    let rows = parse_event(&body, received_at, state.config.limits.columns_per_table)?;
    let id = rows.id.clone();
    let wait = wait_header(headers)?;
    let retry = state.config.ingest.retry_after.0;
    drop(turn);
    let result = state
        .ingest
        .submit(&team, rows, body, received_at.timestamp_micros(), wait)
        .await;
    let kind = match result {
        Ok(Accepted::Duplicate) => "duplicate",
        Ok(Accepted::Stored) => "stored",
        Err(e) => return Err(ingest_error(&team, e, retry, scope)),
    };
    super::metrics::count("stowage_events_accepted_total", "kind", kind, 1);
    // Built by hand so `success` comes first, as SPEC §2.1 shows it.
    let mut body = Vec::with_capacity(id.len() + 32);
    body.extend_from_slice(br#"{"success":true,"id":"#);
    serde_json::to_writer(&mut body, &id).expect("a string serialises");
    body.push(b'}');
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// The team of a valid events token in a request's headers, for a handler behind the
/// router's middleware, or the 401/403 that explains why not.
pub fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<TeamId, ApiError> {
    check_token(state, header_token(headers).as_deref(), &Scope::Entered)
}

/// The events token a request's headers carry: `X-Auth-Token`, else the user name of HTTP Basic
/// auth (what Segment SDKs send; the password is ignored).
pub fn header_token(headers: &HeaderMap) -> Option<String> {
    if let Some(t) = header_str(headers, "x-auth-token").filter(|t| !t.is_empty()) {
        return Some(t.to_string());
    }
    let auth = header_str(headers, "authorization")?;
    let (scheme, creds) = auth.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(creds.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let user = text.split_once(':').map_or(text.as_str(), |(u, _)| u);
    (!user.is_empty()).then(|| user.to_string())
}

/// The team of `token`, or the 401/403 that explains why not (a catalog failure is logged to
/// `scope`).
pub fn check_token(
    state: &AppState,
    token: Option<&str>,
    scope: &Scope,
) -> Result<TeamId, ApiError> {
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing_token",
            "an events token is required: X-Auth-Token header, HTTP Basic user name, or writeKey",
        ));
    };
    match state.catalog.auth_events_token(token) {
        Ok(TokenAuth::Team(team)) => Ok(team),
        Ok(TokenAuth::EventsDisabled) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "events_disabled",
            "event ingestion is not enabled for this team; ask the operator to enable it",
        )),
        Ok(TokenAuth::Invalid) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "the events token is unknown or revoked",
        )),
        Err(e) => {
            Err(scope.log(|| ApiError::catalog_unavailable(&e, state.config.ingest.retry_after.0)))
        }
    }
}

/// `X-Stowage-Wait: committed` holds the response until the event is in a committed file.
pub fn wait_header(headers: &HeaderMap) -> Result<Wait, ApiError> {
    match header_str(headers, "x-stowage-wait") {
        None | Some("") => Ok(Wait::Ack),
        Some(v) if v.eq_ignore_ascii_case("committed") => Ok(Wait::Committed),
        Some(v) => Err(ApiError::bad_request(
            "invalid_header",
            format!("X-Stowage-Wait must be \"committed\", got {v:?}"),
        )
        .field("X-Stowage-Wait")),
    }
}

/// The client-visible error of a refused submission (a failure is logged to `scope`).
pub fn ingest_error(
    team: &TeamId,
    e: IngestError,
    retry: std::time::Duration,
    scope: &Scope,
) -> ApiError {
    match e {
        IngestError::TeamBufferFull => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "team_buffer_full",
            "this team's buffer is full; retry after the indicated delay",
        )
        .retry_after(retry),
        IngestError::Overloaded => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "the server is at capacity; retry later",
        )
        .retry_after(retry),
        IngestError::RateLimited(wait) => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            "this team's rate limit is reached; retry after the indicated delay",
        )
        .retry_after(wait),
        IngestError::Recovering => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "recovering",
            "the server is replaying its write-ahead log; retry",
        )
        .retry_after(retry),
        IngestError::Wal(_) => {
            scope.log(|| error!(team = %team, error = %e, "event not made durable"));
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "wal_unavailable",
                "the event could not be made durable; retry",
            )
            .retry_after(retry)
        }
        IngestError::ShuttingDown => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down; retry",
        )
        .retry_after(retry),
        IngestError::Append(AppendError::TooManyTables(_)) => {
            ApiError::bad_request("too_many_tables", e.to_string()).field("event")
        }
        IngestError::Append(AppendError::TooManyColumns { .. }) => {
            ApiError::bad_request("too_many_columns", e.to_string()).field("properties")
        }
        IngestError::Append(AppendError::Internal(_)) | IngestError::Rebuild => {
            scope.log(|| error!(team = %team, error = %e, "event not accepted"));
            ApiError::internal()
        }
    }
}
