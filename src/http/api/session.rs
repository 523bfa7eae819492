//! `POST /api/v1/session` (sign in), `DELETE /api/v1/session` (sign out), `GET /api/v1/me`,
//! and `POST /api/v1/links/use` (choose a password with a one-time set-password or invite link,
//! which signs in like `POST /api/v1/session`).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::AppState;
use super::super::body::read_limited;
use super::auth::{Address, Protected, SameOrigin, clear_cookie, session_cookie, set_cookie};
use super::{MAX_BODY, parse_json};
use crate::accounts::Caller;
use crate::catalog::{Session, Team, User};
use crate::http::error::ApiError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    email: String,
    password: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UseLink {
    /// The link's secret (`stw_link_…`) or the whole link.
    link: String,
    /// The new password.
    password: String,
    /// Display name, for an invite (default: the email's local part).
    #[serde(default)]
    name: Option<String>,
}

/// The `{user, team, csrf_token}` body of sign-in and `/me`.
pub fn me_body(user: &User, team: &Team, csrf: Option<&str>) -> Value {
    json!({
        "user": {"id": user.id, "email": user.email, "name": user.name, "role": user.role},
        "team": {"id": team.id, "name": team.name, "events_enabled": team.events_enabled},
        "csrf_token": csrf,
    })
}

/// Signs in with `{"email", "password"}`; sets the session cookie.
pub async fn sign_in(
    State(state): State<AppState>,
    Address(address): Address,
    _: SameOrigin,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let body = read_limited(&headers, body, MAX_BODY).await?;
    let req: SignIn = parse_json(&body)?;
    let (session, cookie) = state
        .accounts
        .sign_in(
            &req.email,
            &req.password,
            address.as_deref(),
            session_cookie(&headers),
        )
        .await?;
    Ok(signed_in(&state, &session, &cookie))
}

/// `{"link", "password", "name"?}`: sets the password (for an invite, creates the user) and
/// signs in; 410 `link_expired` when the link was used or has expired.
pub async fn use_link(
    State(state): State<AppState>,
    Address(address): Address,
    _: SameOrigin,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let body = read_limited(&headers, body, MAX_BODY).await?;
    let req: UseLink = parse_json(&body)?;
    let secret = req.link.rsplit('/').next().unwrap_or_default().trim();
    let (session, cookie) = state
        .accounts
        .use_link(
            secret,
            req.name.as_deref(),
            &req.password,
            address.as_deref(),
        )
        .await?;
    Ok(signed_in(&state, &session, &cookie))
}

/// 200 `{user, team, csrf_token}` with the new session's cookie.
fn signed_in(state: &AppState, session: &Session, cookie: &str) -> Response {
    let body = me_body(&session.user, &session.team, Some(&session.csrf));
    (
        [
            (header::SET_COOKIE, set_cookie(state, cookie)),
            (header::CACHE_CONTROL, "no-store".into()),
        ],
        axum::Json(body),
    )
        .into_response()
}

/// Signs out: the session stops working at once; the cookie is cleared.
pub async fn sign_out(
    State(state): State<AppState>,
    Protected { caller, .. }: Protected,
) -> Result<Response, ApiError> {
    state.accounts.sign_out(&caller)?;
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, clear_cookie())],
    )
        .into_response())
}

/// The caller, its team and (for a cookie session) its CSRF token; never cached.
pub async fn me(caller: Caller) -> Response {
    (
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(me_body(&caller.user, &caller.team, caller.csrf())),
    )
        .into_response()
}
