//! The HTTP edge's error type: every failure a client can see, with its status, its stable
//! snake_case code and the JSON body `{"error": {"code", "message", "field"}}` — and the one
//! place the layers' own errors become it: a refused input ([`Invalid`]), a refused download
//! ([`DownloadError`]), a refused account action ([`AccountError`]), a refused or failed SQL
//! element query ([`SqlError`]). The engine never returns
//! it.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::accounts::AccountError;
use crate::download::DownloadError;
use crate::model::Invalid;
use crate::model::fresh::FreshError;
use crate::sql::SqlError;

/// A client-visible error. Internal causes are logged, never sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human text.
    pub message: String,
    /// JSON path of the offending field, when there is one.
    pub field: Option<String>,
    /// `Retry-After` for 429/503.
    pub retry_after: Option<Duration>,
    /// `Allow` for 405.
    pub allow: Option<&'static str>,
    /// Per-item errors of a refused batch (`error.errors`).
    pub errors: Option<Box<Vec<serde_json::Value>>>,
    /// Also put `code` and `message` at the top level of the body, where Segment SDKs read
    /// them (the Segment endpoints, SPEC §2.2).
    pub segment: bool,
}

impl ApiError {
    /// An error with a status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
            allow: None,
            errors: None,
            segment: false,
        }
    }

    /// 400 with a code.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// Names the offending field.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Adds `Retry-After`.
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// 404 `not_found`, the same whether the thing is missing or someone else's.
    pub fn not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such canvas or element for this key",
        )
    }

    /// 405 with `Allow`.
    pub fn method_not_allowed(allow: &'static str) -> Self {
        let mut e = Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("this endpoint only accepts {allow}"),
        );
        e.allow = Some(allow);
        e
    }

    /// 503 for a catalog that does not answer (logged here; the cause is not sent).
    pub fn catalog_unavailable(cause: &dyn std::fmt::Display, retry_after: Duration) -> Self {
        tracing::error!(error = %cause, "catalog unavailable");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "catalog unavailable; retry",
        )
        .retry_after(retry_after)
    }

    /// 500 that hides the cause (which the caller has logged).
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; the request was not completed",
        )
    }

    /// In the Segment shape: `code` and `message` at the top level too.
    pub fn segment(mut self) -> Self {
        self.segment = true;
        self
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        let mut err = json!({"code": self.code, "message": self.message});
        if let Some(f) = &self.field {
            err["field"] = json!(f);
        }
        if let Some(errors) = &self.errors {
            err["errors"] = json!(errors);
        }
        if self.segment {
            json!({"code": self.code, "message": self.message, "error": err})
        } else {
            json!({ "error": err })
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            self.body().to_string(),
        )
            .into_response();
        if let Some(after) = self.retry_after {
            let secs = after.as_secs_f64().ceil().max(1.0) as u64;
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::REQUEST_TIMEOUT
            || self.status == StatusCode::PAYLOAD_TOO_LARGE
        {
            // 408: the rest of the body is not coming; do not wait for the next request on this
            // socket. 413: the rest of the body was not read, so the server closes the socket;
            // said up front, a keep-alive client does not send its next request into it.
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if let Some(allow) = self.allow {
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        resp
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        let mut api = ApiError::bad_request(e.code, e.message);
        api.field = e.field;
        api
    }
}

impl From<DownloadError> for ApiError {
    fn from(e: DownloadError) -> Self {
        match e {
            DownloadError::Invalid(invalid) => invalid.into(),
            DownloadError::NotFound => ApiError::not_found(),
            DownloadError::CursorExpired(message) => {
                ApiError::new(StatusCode::GONE, "cursor_expired", message).field("cursor")
            }
            DownloadError::NotAcceptable(message) => {
                ApiError::new(StatusCode::NOT_ACCEPTABLE, "not_acceptable", message)
            }
            DownloadError::Catalog(cause) => {
                tracing::error!(error = %cause, "catalog read failed during download");
                ApiError::internal()
            }
            DownloadError::Sql(e) => e.into(),
            DownloadError::Fresh(e) => e.into(),
        }
    }
}

impl ApiError {
    /// The status an SQL error is answered with (the settings page shows its message inline).
    pub fn from_sql_status(e: &SqlError) -> StatusCode {
        match e {
            SqlError::Invalid(_)
            | SqlError::Params(_)
            | SqlError::Unordered
            | SqlError::Cursor(_) => StatusCode::BAD_REQUEST,
            SqlError::Expired(_) => StatusCode::GONE,
            SqlError::TooLarge(_) | SqlError::Timeout(_) | SqlError::Failed(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            SqlError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            SqlError::Catalog(_) | SqlError::Fresh(_) => StatusCode::SERVICE_UNAVAILABLE,
            SqlError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<SqlError> for ApiError {
    fn from(e: SqlError) -> Self {
        let msg = e.to_string();
        let unprocessable = StatusCode::UNPROCESSABLE_ENTITY;
        match e {
            SqlError::Invalid(_) => ApiError::bad_request("invalid_sql", msg).field("sql"),
            SqlError::Params(_) => ApiError::bad_request("invalid_params", msg).field("params"),
            SqlError::Unordered => ApiError::bad_request("cursor_needs_order", msg).field("cursor"),
            SqlError::Cursor(_) => ApiError::bad_request("invalid_cursor", msg).field("cursor"),
            SqlError::Expired(_) => {
                ApiError::new(StatusCode::GONE, "cursor_expired", msg).field("cursor")
            }
            SqlError::TooLarge(_) => ApiError::new(unprocessable, "query_too_large", msg),
            SqlError::Timeout(_) => ApiError::new(unprocessable, "query_timeout", msg),
            SqlError::Failed(_) => ApiError::new(unprocessable, "query_failed", msg),
            SqlError::Busy(_) => ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", msg)
                .retry_after(Duration::from_secs(1)),
            SqlError::Catalog(c) => ApiError::catalog_unavailable(&c, Duration::from_secs(1)),
            SqlError::Fresh(e) => e.into(),
            SqlError::Internal(cause) => {
                tracing::error!(error = %cause, "SQL query failed inside the service");
                ApiError::internal()
            }
        }
    }
}

impl From<FreshError> for ApiError {
    fn from(e: FreshError) -> Self {
        let code = match e {
            FreshError::Unavailable(_) => "fresh_unavailable",
            FreshError::Timeout(_) => "fresh_timeout",
        };
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, e.to_string())
            .retry_after(Duration::from_secs(1))
    }
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
            AccountError::Busy => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", msg)
                .retry_after(std::time::Duration::from_secs(1)),
            AccountError::LimitReached(_) => {
                ApiError::new(StatusCode::CONFLICT, "limit_reached", msg)
            }
            AccountError::Csrf => ApiError::new(StatusCode::FORBIDDEN, "csrf", msg),
            AccountError::Forbidden(_) => ApiError::new(StatusCode::FORBIDDEN, "forbidden", msg),
            AccountError::EventsDisabled => {
                ApiError::new(StatusCode::FORBIDDEN, "events_disabled", msg)
            }
            AccountError::EventsEnabled => {
                ApiError::new(StatusCode::CONFLICT, "events_enabled", msg)
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
            AccountError::Sql(e) => e.into(),
        }
    }
}
