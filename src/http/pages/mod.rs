//! The server-rendered pages (SPEC §5.1): `/login`, `/invite/{secret}` and `/settings` with its
//! forms, one stylesheet and one small script (copy-to-clipboard only). HTML comes from the
//! askama templates under `templates/`. Every action is a plain `<form method="post">` carrying
//! the session's CSRF token in a hidden `csrf` field; it answers with a redirect
//! (Post/Redirect/Get, secrets shown once through [`flash`]) or with the page again and the
//! error on it — never a JSON body; the "New SQL table" form's preview ([`sql`]) answers with
//! the page and the query's first rows. Who may do what is decided in [`crate::accounts`]: a page
//! shows what those calls return and never checks a permission itself.

pub mod actions;
pub mod flash;
pub mod invite;
pub mod login;
mod rows;
pub mod settings;
pub mod sql;
mod sql_draft;
mod view;

use askama::Template;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;

use super::AppState;
use super::api::auth::{FormRefused, MAX_FORM};
use super::body;
use crate::accounts::AccountError;
use crate::http::error::ApiError;

pub use flash::Flash;

/// Only this origin's styles, scripts and form targets; never inside a frame.
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; \
                   form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The pages' routes.
pub fn routes() -> Router<AppState> {
    use actions as a;
    Router::new()
        .route("/login", get(login::form).post(login::sign_in))
        .route("/logout", post(login::sign_out))
        .route("/invite/{secret}", get(invite::form).post(invite::accept))
        .route("/settings", get(settings::show))
        .route("/settings/members/invite", post(a::invite))
        .route("/settings/members/{id}/role", post(a::set_role))
        .route("/settings/members/{id}/remove", post(a::remove_member))
        .route("/settings/invites/{id}/revoke", post(a::revoke_invite))
        .route("/settings/keys", post(a::create_key))
        .route("/settings/keys/{id}/revoke", post(a::revoke_key))
        .route("/settings/events/request", post(a::request_events))
        .route("/settings/tokens", post(a::create_token))
        .route("/settings/tokens/{id}/revoke", post(a::revoke_token))
        .route("/settings/canvases", post(a::create_canvas))
        .route("/settings/canvases/{id}/delete", post(a::delete_canvas))
        .route("/settings/elements", post(a::create_element))
        .route("/settings/elements/{id}/delete", post(a::delete_element))
        .route("/settings/pats", post(a::create_pat))
        .route("/settings/pats/{id}/revoke", post(a::revoke_pat))
        .route("/static/style.css", get(style))
        .route("/static/copy.js", get(script))
        .layer(axum::middleware::from_fn(|req, next| {
            receive_first(req, next, MAX_FORM)
        }))
        // The SQL form carries a whole query: a larger body, for these two routes alone.
        .merge(
            Router::new()
                .route("/settings/sql-elements", post(sql::create))
                .route("/settings/sql-elements/preview", post(sql::preview))
                .layer(axum::middleware::from_fn(|req, next| {
                    receive_first(req, next, sql::MAX_SQL_FORM)
                })),
        )
        .layer(axum::middleware::map_response(harden))
}

/// A form is looked at only once its whole body (at most `limit` bytes) is in: the caller and
/// its rights are resolved then ([`crate::http::body::receive_first`]); a body that cannot be
/// received gets an HTML page.
async fn receive_first(
    req: axum::extract::Request,
    next: axum::middleware::Next,
    limit: usize,
) -> Response {
    match super::body::receive_first(req, limit).await {
        Ok(req) => next.run(req).await,
        Err(e) => message(
            e.status,
            "The form could not be read",
            &view::sentence(&e.message),
            ("/settings", "Back to settings"),
        ),
    }
}

/// Headers on every response of the pages: not stored by caches (they show secrets and CSRF
/// tokens), never framed, only this origin's styles and scripts, and the invite secret in a
/// URL never sent as a referrer to another site.
async fn harden(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // `same-origin`, not `no-referrer`: with the latter a browser sends `Origin: null` on form
    // posts, which the same-origin check would refuse.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    resp
}

async fn style() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../../../static/style.css"),
    )
}

async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../../static/copy.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// A rendered template with `status`.
pub(crate) fn page(status: StatusCode, template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            html,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "a page template failed to render");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "internal error; the page could not be shown",
            )
                .into_response()
        }
    }
}

/// 303 to `location` (after a form, the browser follows with a GET).
pub(crate) fn see_other(location: &str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

/// A page that only says something, with a way on.
#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage<'a> {
    chrome: Option<view::Chrome>,
    title: &'a str,
    text: &'a str,
    link: (&'a str, &'a str),
}

/// A plain message page (no signed-in header).
pub(crate) fn message(status: StatusCode, title: &str, text: &str, link: (&str, &str)) -> Response {
    page(
        status,
        &MessagePage {
            chrome: None,
            title,
            text,
            link,
        },
    )
}

/// 403 for a form without the session's CSRF token, or posted from another site.
pub(crate) fn form_expired() -> Response {
    message(
        StatusCode::FORBIDDEN,
        "This form has expired",
        "The form was sent without a valid security token — it may be from an old tab, or from \
         another site. Reload the page and try again.",
        ("/settings", "Back to settings"),
    )
}

/// The status a failed account action is answered with.
pub(crate) fn status_of(e: &AccountError) -> StatusCode {
    match e {
        AccountError::NotSignedIn | AccountError::InvalidCredentials => StatusCode::UNAUTHORIZED,
        AccountError::TooManyAttempts(_) => StatusCode::TOO_MANY_REQUESTS,
        AccountError::Busy | AccountError::Catalog(_) => StatusCode::SERVICE_UNAVAILABLE,
        AccountError::LimitReached(_) => StatusCode::CONFLICT,
        AccountError::Csrf | AccountError::Forbidden(_) | AccountError::EventsDisabled => {
            StatusCode::FORBIDDEN
        }
        AccountError::NotFound(_) => StatusCode::NOT_FOUND,
        AccountError::LastOwner | AccountError::Taken(_) | AccountError::EventsEnabled => {
            StatusCode::CONFLICT
        }
        AccountError::Gone(_) => StatusCode::GONE,
        AccountError::Invalid { .. } => StatusCode::BAD_REQUEST,
        AccountError::Sql(sql) => crate::http::error::ApiError::from_sql_status(sql),
    }
}

/// What a person is told about a failed action: the accounts' own words as a sentence, never a
/// catalog's internals (those are logged).
pub(crate) fn describe(e: &AccountError) -> String {
    use crate::sql::SqlError;
    const TRY_AGAIN: &str = "The service could not complete this just now; try again in a moment.";
    let text = match e {
        AccountError::Catalog(c) | AccountError::Sql(SqlError::Catalog(c)) => {
            tracing::warn!(error = %c, "a settings page action failed in the catalog");
            TRY_AGAIN.to_string()
        }
        AccountError::Sql(SqlError::Internal(cause)) => {
            tracing::warn!(error = %cause, "a settings page query failed inside the service");
            TRY_AGAIN.to_string()
        }
        AccountError::LastOwner => {
            "A team must keep at least one owner: make someone else an owner first.".to_string()
        }
        AccountError::NotFound(_) => {
            "That item no longer exists — someone may have deleted it. Reload the page.".into()
        }
        other => other.to_string(),
    };
    view::sentence(&text)
}

/// A page for an error outside any form: the status and what happened.
pub(crate) fn error_page(e: &AccountError) -> Response {
    message(
        status_of(e),
        "Something went wrong",
        &describe(e),
        ("/settings", "Back to settings"),
    )
}

/// Reads a form-urlencoded body into `T`; a body that cannot be read or parsed is answered
/// with an HTML page (400/413/408), not the API's JSON.
pub(crate) async fn read_form<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
) -> Result<T, Response> {
    body::read_form(headers, body, MAX_FORM)
        .await
        .map_err(|e| unreadable(&e))
}

/// The page for a form body that could not be read: its status and why.
pub(crate) fn unreadable(e: &ApiError) -> Response {
    message(
        e.status,
        "The form could not be read",
        &view::sentence(&e.message),
        ("/settings", "Back to settings"),
    )
}

/// How the pages answer a refused change of a form: signed out → the sign-in form; a
/// cross-site request or a missing or wrong token → the "form expired" page; a body that could
/// not be read → what was wrong with it; otherwise the error page.
impl IntoResponse for FormRefused {
    fn into_response(self) -> Response {
        match self {
            FormRefused::Account(AccountError::NotSignedIn) => see_other("/login"),
            FormRefused::Account(AccountError::Csrf) => form_expired(),
            FormRefused::Account(e) => error_page(&e),
            FormRefused::Unreadable(e) => unreadable(&e),
        }
    }
}
