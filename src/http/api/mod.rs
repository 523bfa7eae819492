//! The management API, `/api/v1/…` (SPEC §5.1): JSON in and out, the §2.1 error body. Who the
//! caller is comes from [`auth`]; what they may do is decided in [`crate::accounts`]. One file per
//! resource group.

pub mod auth;
pub mod session;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::AppState;
use crate::accounts::AccountError;
use crate::error::ApiError;

/// Largest management request body.
pub const MAX_BODY: usize = 64 * 1024;

/// The `/api/v1` routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/session",
            post(session::sign_in).delete(session::sign_out),
        )
        .route("/api/v1/me", get(session::me))
}

impl From<AccountError> for ApiError {
    fn from(e: AccountError) -> Self {
        let msg = e.to_string();
        match e {
            AccountError::NotSignedIn => {
                ApiError::new(StatusCode::UNAUTHORIZED, "not_signed_in", msg)
            }
            AccountError::InvalidCredentials => {
                ApiError::new(StatusCode::UNAUTHORIZED, "invalid_credentials", msg)
            }
            AccountError::TooManyAttempts(wait) => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_attempts", msg)
                    .retry_after(wait)
            }
            AccountError::Csrf => ApiError::new(StatusCode::FORBIDDEN, "csrf", msg),
            AccountError::Forbidden(_) => ApiError::new(StatusCode::FORBIDDEN, "forbidden", msg),
            AccountError::EventsDisabled => {
                ApiError::new(StatusCode::FORBIDDEN, "events_disabled", msg)
            }
            AccountError::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, "not_found", msg),
            AccountError::LastOwner => ApiError::new(StatusCode::CONFLICT, "last_owner", msg),
            AccountError::Taken(_) => ApiError::new(StatusCode::CONFLICT, "email_taken", msg),
            AccountError::Gone(_) => ApiError::new(StatusCode::GONE, "link_expired", msg),
            AccountError::Invalid { field, .. } => {
                let e = ApiError::bad_request("invalid_request", msg);
                if field.is_empty() { e } else { e.field(field) }
            }
            AccountError::Catalog(c) => {
                ApiError::catalog_unavailable(&c, std::time::Duration::from_secs(1))
            }
        }
    }
}

/// Parses a JSON request body into `T`: 400 `invalid_json` when it is not JSON, 400
/// `invalid_request` naming the field when it has the wrong shape.
pub fn parse_json<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let text = if body.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        &body[..]
    };
    let de = &mut serde_json::Deserializer::from_slice(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::bad_request("invalid_json", format!("body is not valid JSON: {inner}"))
        } else {
            let err = ApiError::bad_request("invalid_request", inner.to_string());
            if path == "." { err } else { err.field(path) }
        }
    })
}
