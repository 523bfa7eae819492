//! The management API, `/api/v1/…` (SPEC §5.1): JSON in and out, the §2.1 error body. Who the
//! caller is comes from [`auth`]; what they may do is decided in [`crate::accounts`]. One file per
//! resource group; every handler extracts, parses, calls one `Accounts` method and maps the result.
//! Wrong methods answer 405 with `Allow`, unknown `/api/v1` paths 404, both as JSON.

pub mod audit;
pub mod auth;
pub mod canvases;
pub mod events;
pub mod members;
pub mod secrets;
pub mod session;
pub mod tables;

use axum::Router;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, any, get, post};
use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::AppState;
use super::body::read_limited;
use crate::http::error::ApiError;

/// Largest management request body.
pub const MAX_BODY: usize = 64 * 1024;

/// The `/api/v1` routes.
pub fn routes() -> Router<AppState> {
    use axum::routing::{delete, patch};
    Router::new()
        .route(
            "/api/v1/session",
            allow(
                post(session::sign_in).delete(session::sign_out),
                "POST, DELETE",
            ),
        )
        .route("/api/v1/me", allow(get(session::me), "GET, HEAD"))
        .route("/api/v1/links/use", allow(post(session::use_link), "POST"))
        .route("/api/v1/members", allow(get(members::list), "GET, HEAD"))
        .route(
            "/api/v1/members/{id}",
            allow(
                patch(members::set_role).delete(members::remove),
                "PATCH, DELETE",
            ),
        )
        .route(
            "/api/v1/invites",
            allow(
                get(members::list_invites).post(members::invite),
                "GET, HEAD, POST",
            ),
        )
        .route(
            "/api/v1/invites/{id}",
            allow(delete(members::revoke_invite), "DELETE"),
        )
        .route(
            "/api/v1/keys",
            allow(
                get(secrets::list_keys).post(secrets::create_key),
                "GET, HEAD, POST",
            ),
        )
        .route(
            "/api/v1/keys/{id}",
            allow(delete(secrets::revoke_key), "DELETE"),
        )
        .route(
            "/api/v1/tokens",
            allow(
                get(secrets::list_tokens).post(secrets::create_token),
                "GET, HEAD, POST",
            ),
        )
        .route(
            "/api/v1/tokens/{id}",
            allow(delete(secrets::revoke_token), "DELETE"),
        )
        .route(
            "/api/v1/pats",
            allow(
                get(secrets::list_pats).post(secrets::create_pat),
                "GET, HEAD, POST",
            ),
        )
        .route(
            "/api/v1/pats/{id}",
            allow(delete(secrets::revoke_pat), "DELETE"),
        )
        .route(
            "/api/v1/events/request",
            allow(post(events::request), "POST"),
        )
        .route(
            "/api/v1/canvases",
            allow(
                get(canvases::list).post(canvases::create),
                "GET, HEAD, POST",
            ),
        )
        .route(
            "/api/v1/canvases/{id}",
            allow(
                patch(canvases::rename).delete(canvases::delete),
                "PATCH, DELETE",
            ),
        )
        .route(
            "/api/v1/canvases/{id}/elements",
            allow(
                get(canvases::elements).post(canvases::create_element),
                "GET, HEAD, POST",
            ),
        )
        .route(
            "/api/v1/elements/{id}",
            allow(delete(canvases::delete_element), "DELETE"),
        )
        .route("/api/v1/tables", allow(get(tables::list), "GET, HEAD"))
        .route("/api/v1/audit", allow(get(audit::list), "GET, HEAD"))
        // Whatever else the rest of the router does with unknown paths (pages answer in HTML),
        // an API client always gets the JSON body.
        .route("/api/v1", any(no_such_endpoint))
        .route("/api/v1/{*rest}", any(no_such_endpoint))
        .layer(axum::middleware::from_fn(receive_first))
}

/// A change is looked at only once its whole body is in: the caller and its rights are
/// resolved then ([`crate::http::body::receive_first`]).
async fn receive_first(req: Request, next: axum::middleware::Next) -> Response {
    match super::body::receive_first(req, MAX_BODY).await {
        Ok(req) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// Answers other methods with 405 and `Allow`.
fn allow(route: MethodRouter<AppState>, methods: &'static str) -> MethodRouter<AppState> {
    route.fallback(move || async move { ApiError::method_not_allowed(methods) })
}

async fn no_such_endpoint() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

/// Parses a JSON request body into `T`: 400 `invalid_json` when it is not JSON, 400
/// `invalid_request` naming the field when it has the wrong shape (a missing or unknown field
/// is named too). An empty body reads as `{}`.
pub fn parse_json<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let text = if body.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        &body[..]
    };
    // Syntax first, then shape: serde_json reports some wrong types (a number where an enum
    // goes) as syntax errors when deserializing straight from the bytes.
    let value: serde_json::Value = serde_json::from_slice(text).map_err(|e| {
        ApiError::bad_request("invalid_json", format!("body is not valid JSON: {e}"))
    })?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = inner.to_string();
        let named = ["unknown field `", "missing field `"]
            .iter()
            .find_map(|p| message.strip_prefix(p))
            .and_then(|rest| rest.split_once('`'))
            .map(|(name, _)| name.to_string());
        let field = match (path.as_str(), named) {
            (".", Some(name)) => Some(name),
            (".", None) => None,
            (p, Some(name)) if !p.ends_with(&name) => Some(format!("{p}.{name}")),
            (p, _) => Some(p.to_string()),
        };
        let err = ApiError::bad_request("invalid_request", message);
        match field {
            Some(f) => err.field(f),
            None => err,
        }
    })
}

/// A JSON request body of at most [`MAX_BODY`] bytes, parsed by [`parse_json`]. As the last
/// extractor of a handler, it runs after [`auth::Protected`] (or [`crate::accounts::Caller`]): a
/// signed-out or cross-site request is refused before its body is read.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let bytes = read_limited(&parts.headers, body, MAX_BODY).await?;
        Ok(JsonBody(parse_json(&bytes)?))
    }
}

/// `201 Created` with a body that holds a secret shown this once: never cached.
pub fn created_secret(body: serde_json::Value) -> Response {
    (
        StatusCode::CREATED,
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(body),
    )
        .into_response()
}

/// `204 No Content`, the answer to a successful DELETE.
pub fn deleted() -> StatusCode {
    StatusCode::NO_CONTENT
}
