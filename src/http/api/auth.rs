//! Who is calling the management API and the settings page: a `stowage_session` cookie or an
//! `Authorization: Bearer stw_pat_…` token, resolved to a [`Caller`] on every request (so a
//! revoked session or token stops working at once); the client address for the audit log; the
//! same-origin rule for changes; and the session cookie itself.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};

use super::super::AppState;
use super::super::body::header_str;
use super::super::edge::ClientAddr;
use crate::accounts::{AccountError, Caller};
use crate::catalog::PAT_PREFIX;
use crate::http::error::ApiError;

/// Name of the session cookie.
pub const COOKIE: &str = "stowage_session";

/// The client address of a request (the connection's peer), as text.
pub fn client_address(parts: &Parts) -> Option<String> {
    parts
        .extensions
        .get::<ClientAddr>()
        .map(|a| a.0.ip().to_string())
}

/// The session cookie's value, if sent.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
}

/// `Set-Cookie` for a new session.
pub fn set_cookie(state: &AppState, value: &str) -> String {
    let secure = if state.config.server.public_url.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
        state.accounts.cookie_max_age()
    )
}

/// `Set-Cookie` that removes the session cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0")
}

/// Whether the request comes from this site: `Origin`, when present, must be the configured
/// public URL's origin, or the host the request was sent to under the public URL's scheme
/// (scheme, host and port all compared: `https://host` is another origin than `http://host`);
/// and `Sec-Fetch-Site`, when present, must not say cross-site.
pub fn same_origin(state: &AppState, headers: &HeaderMap) -> bool {
    if header_str(headers, "sec-fetch-site").is_some_and(|s| s.eq_ignore_ascii_case("cross-site")) {
        return false;
    }
    let Some(origin) = header_str(headers, header::ORIGIN.as_str()) else {
        return true;
    };
    let public = state.config.server.public_url.trim_end_matches('/');
    if !public.is_empty() && origin.eq_ignore_ascii_case(public) {
        return true;
    }
    let scheme = if public.starts_with("https://") {
        "https"
    } else {
        "http"
    };
    let host = header_str(headers, header::HOST.as_str()).unwrap_or_default();
    let origin_host = origin
        .get(..scheme.len() + 3)
        .filter(|p| p.eq_ignore_ascii_case(&format!("{scheme}://")))
        .map(|_| &origin[scheme.len() + 3..]);
    !host.is_empty() && origin_host.is_some_and(|h| h.eq_ignore_ascii_case(host))
}

/// Resolves the caller of a request: a bearer token wins over a cookie.
pub fn caller(state: &AppState, parts: &Parts) -> Result<Caller, AccountError> {
    let address = client_address(parts);
    if let Some(auth) = header_str(&parts.headers, header::AUTHORIZATION.as_str()) {
        let token = auth
            .strip_prefix("Bearer ")
            .or_else(|| auth.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| t.starts_with(PAT_PREFIX))
            .ok_or(AccountError::NotSignedIn)?;
        return state.accounts.from_pat(token, address);
    }
    let cookie = session_cookie(&parts.headers).ok_or(AccountError::NotSignedIn)?;
    state.accounts.from_session(cookie, address)
}

/// Extractor for any signed-in caller. Methods that change state (all but GET and HEAD) also
/// need, from a cookie caller, the `X-CSRF-Token` header and a same-origin request; form posts
/// of the settings page use [`Signed`] instead and check the form's `csrf` field.
impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = caller(state, parts)?;
        if parts.method != Method::GET && parts.method != Method::HEAD {
            if caller.csrf().is_some() && !same_origin(state, &parts.headers) {
                return Err(AccountError::Csrf.into());
            }
            caller.check_csrf(header_str(&parts.headers, "x-csrf-token"))?;
        }
        Ok(caller)
    }
}

/// For pages: the caller or why there is none, for the handler to answer in HTML (a redirect
/// to the sign-in form). The CSRF token is checked by the handler (HTML forms carry it in the
/// body); same-origin is enforced here for changes.
#[derive(Debug)]
pub struct Signed(pub Result<Caller, AccountError>);

impl FromRequestParts<AppState> for Signed {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let caller = caller(state, parts).and_then(|caller| {
            if parts.method != Method::GET
                && parts.method != Method::HEAD
                && caller.csrf().is_some()
                && !same_origin(state, &parts.headers)
            {
                return Err(AccountError::Csrf);
            }
            Ok(caller)
        });
        Ok(Signed(caller))
    }
}

/// The client address, as an extractor (never fails).
#[derive(Debug, Clone)]
pub struct Address(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for Address {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Address(client_address(parts)))
    }
}
