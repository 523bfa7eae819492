//! `GET /login` (the sign-in form), `POST /login` (sign in, then to `/settings`) and
//! `POST /logout`. A failed sign-in is answered the same whether or not the email exists;
//! throttled ones get 429 with `Retry-After`.

use askama::Template;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;

use super::super::AppState;
use super::super::api::auth::{
    Address, CrossSite, Form, FormRefused, Protected, SameOrigin, Signed, clear_cookie,
    session_cookie, set_cookie,
};
use super::actions::Empty;
use super::view::Chrome;
use super::{form_expired, page, read_form, see_other, view};
use crate::accounts::AccountError;

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage<'a> {
    chrome: Option<Chrome>,
    title: &'a str,
    email: &'a str,
    error: Option<String>,
}

/// The sign-in form; a signed-in visitor goes straight to the settings.
pub async fn form(Signed(caller): Signed) -> Response {
    if caller.is_ok() {
        return see_other("/settings");
    }
    page(
        StatusCode::OK,
        &LoginPage {
            chrome: None,
            title: "Sign in",
            email: "",
            error: None,
        },
    )
}

#[derive(Deserialize)]
struct SignInForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

/// Signs in from the form: the session cookie and 303 to `/settings`, or the form again.
pub async fn sign_in(
    State(state): State<AppState>,
    Address(address): Address,
    origin: Result<SameOrigin, CrossSite>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if origin.is_err() {
        return form_expired();
    }
    let form: SignInForm = match read_form(&headers, body).await {
        Ok(f) => f,
        Err(resp) => return resp,
    };
    let result = state
        .accounts
        .sign_in(
            &form.email,
            &form.password,
            address.as_deref(),
            session_cookie(&headers),
        )
        .await;
    let e = match result {
        Ok((_, cookie)) => {
            let mut resp = see_other("/settings");
            if let Ok(v) = HeaderValue::from_str(&set_cookie(&state, &cookie)) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            return resp;
        }
        Err(e) => e,
    };
    let text = match &e {
        AccountError::InvalidCredentials => "Wrong email or password.".to_string(),
        AccountError::TooManyAttempts(wait) => format!(
            "Too many failed sign-ins. Try again in {}.",
            view::duration(*wait)
        ),
        other => super::describe(other),
    };
    let mut resp = page(
        super::status_of(&e),
        &LoginPage {
            chrome: None,
            title: "Sign in",
            email: form.email.trim(),
            error: Some(view::sentence(&text)),
        },
    );
    let retry = match e {
        AccountError::TooManyAttempts(wait) => Some(wait),
        AccountError::Busy => Some(std::time::Duration::from_secs(1)),
        _ => None,
    };
    if let Some(wait) = retry {
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(wait.as_secs_f64().ceil().max(1.0) as u64),
        );
    }
    resp
}

/// Signs out (the session stops working at once), clears the cookie, 303 to `/login`.
pub async fn sign_out(
    State(state): State<AppState>,
    change: Result<Protected<Form<Empty>>, FormRefused>,
) -> Response {
    let caller = match change {
        Ok(Protected { caller, .. }) => caller,
        Err(FormRefused::Account(AccountError::Csrf)) => return form_expired(),
        Err(FormRefused::Unreadable(e)) => return super::unreadable(&e),
        // Nobody to sign out; make sure no stale cookie stays behind either.
        Err(FormRefused::Account(_)) => return with_cleared_cookie(see_other("/login")),
    };
    if let Err(e) = state.accounts.sign_out(&caller) {
        return super::error_page(&e);
    }
    with_cleared_cookie(see_other("/login"))
}

fn with_cleared_cookie(mut resp: Response) -> Response {
    if let Ok(v) = HeaderValue::from_str(&clear_cookie()) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}
