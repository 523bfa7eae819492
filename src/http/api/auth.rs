//! Who is calling the management API and the settings page: a `stowage_session` cookie or an
//! `Authorization: Bearer stw_pat_…` token, resolved to a [`Caller`] on every request (so a
//! revoked session or token stops working at once); the client address for the audit log; the
//! cross-site rules for every change ([`Protected`] for a signed-in caller's, [`SameOrigin`] for
//! signing in); and the session cookie itself.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::super::AppState;
use super::super::body::{header_str, read_form};
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
fn same_origin(state: &AppState, headers: &HeaderMap) -> bool {
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

/// The origin rule of a change: a browser's — a cookie caller's, or a visitor's signing in —
/// must come from this site ([`same_origin`]); a personal access token caller is a script and
/// may call from anywhere.
fn check_origin(
    state: &AppState,
    headers: &HeaderMap,
    caller: Option<&Caller>,
) -> Result<(), AccountError> {
    let browser = caller.is_none_or(|c| c.csrf().is_some());
    if browser && !same_origin(state, headers) {
        return Err(AccountError::Csrf);
    }
    Ok(())
}

/// The token rule of a change: a cookie caller presents its session's CSRF token, in the
/// `X-CSRF-Token` header or else in the form's `csrf` field. Token callers pass.
fn check_token(
    headers: &HeaderMap,
    caller: &Caller,
    form_token: Option<&str>,
) -> Result<(), AccountError> {
    caller.check_csrf(header_str(headers, "x-csrf-token").or(form_token))
}

/// Extractor for any signed-in caller, for reads; a change takes [`Protected`] instead.
impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Ok(caller(state, parts)?)
    }
}

/// A change by a signed-in caller that passed the cross-site rules: from a cookie caller, a
/// request from this site carrying the session's CSRF token (`X-CSRF-Token`, or the form's
/// `csrf` field); from a personal access token, any request. Every change of the management API
/// and of the settings pages takes one. The API's is `Protected` (token in the header, the
/// JSON body read after it, refusals as the API's JSON errors); the pages' is
/// `Protected<Form<T>>` (the form read with it, refusals as [`FormRefused`], which the pages
/// answer in HTML).
#[derive(Debug)]
pub struct Protected<F = ()> {
    /// Who is making the change.
    pub caller: Caller,
    /// The form's fields, for a page form.
    pub form: F,
}

impl FromRequestParts<AppState> for Protected {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = caller(state, parts)?;
        check_origin(state, &parts.headers, Some(&caller))?;
        check_token(&parts.headers, &caller, None)?;
        Ok(Protected { caller, form: () })
    }
}

/// Largest form body of the settings pages (a form that carries more names a larger `MAX`).
pub const MAX_FORM: usize = 16 * 1024;

/// A form-urlencoded body of at most `MAX` bytes: its fields `T` and the session's CSRF token
/// (`csrf`).
#[derive(Debug, Deserialize)]
pub struct Form<T, const MAX: usize = MAX_FORM> {
    /// The session's CSRF token, from the page's hidden field.
    #[serde(default)]
    csrf: String,
    /// The form's own fields.
    #[serde(flatten)]
    pub fields: T,
}

/// Why a page form's change was refused: the caller or a cross-site rule, or a body that could
/// not be read (its status and message, for the page to show).
#[derive(Debug)]
pub enum FormRefused {
    /// Not signed in, a cross-site request ([`AccountError::Csrf`]), or the accounts failed.
    Account(AccountError),
    /// The body is too large, too slow, or not a form.
    Unreadable(ApiError),
}

impl<T: DeserializeOwned + Send, const MAX: usize> FromRequest<AppState>
    for Protected<Form<T, MAX>>
{
    type Rejection = FormRefused;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, FormRefused> {
        let (parts, body) = req.into_parts();
        let caller = caller(state, &parts).map_err(FormRefused::Account)?;
        // A cross-site post is refused before its body is read.
        check_origin(state, &parts.headers, Some(&caller)).map_err(FormRefused::Account)?;
        let form: Form<T, MAX> = read_form(&parts.headers, body, MAX)
            .await
            .map_err(FormRefused::Unreadable)?;
        check_token(&parts.headers, &caller, Some(&form.csrf)).map_err(FormRefused::Account)?;
        Ok(Protected { caller, form })
    }
}

/// Signing in (or using a one-time link) from this site: before there is a session there is no
/// token, so a request from another site is refused by its origin alone — a cross-site page
/// must not sign a visitor into someone else's account.
#[derive(Debug)]
pub struct SameOrigin;

/// A sign-in from another site (answered 403 `csrf` by the API; the pages show their "form
/// expired" page).
#[derive(Debug)]
pub struct CrossSite;

impl axum::response::IntoResponse for CrossSite {
    fn into_response(self) -> axum::response::Response {
        ApiError::from(AccountError::Csrf).into_response()
    }
}

impl FromRequestParts<AppState> for SameOrigin {
    type Rejection = CrossSite;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, CrossSite> {
        check_origin(state, &parts.headers, None).map_err(|_| CrossSite)?;
        Ok(SameOrigin)
    }
}

/// For pages: the caller or why there is none, for the handler to answer in HTML (a redirect
/// to the sign-in form). For reads; a page's change takes `Protected<Form<T>>`.
#[derive(Debug)]
pub struct Signed(pub Result<Caller, AccountError>);

impl FromRequestParts<AppState> for Signed {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Signed(caller(state, parts)))
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
