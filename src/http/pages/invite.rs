//! `GET/POST /invite/{secret}`: a one-time link — a set-password link from the operator, or an
//! owner's invite — shows its form (name for an invite, password twice), and using it signs
//! the user in and leads to `/settings`. A used or expired link is a 410 page. The secret is
//! never logged (the request log cuts it out of the path) and never put into the page.

use askama::Template;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;

use super::super::AppState;
use super::super::api::auth::{Address, CrossSite, SameOrigin, set_cookie};
use super::view::Chrome;
use super::{form_expired, message, page, read_form, see_other, view};
use crate::accounts::AccountError;
use crate::catalog::{Link, LinkKind};

#[derive(Template)]
#[template(path = "invite.html")]
struct InvitePage {
    chrome: Option<Chrome>,
    title: String,
    team: String,
    email: String,
    /// An invite (asks for a name) rather than a set-password link.
    invite: bool,
    role: &'static str,
    name: String,
    error: Option<String>,
}

impl InvitePage {
    fn of(link: &Link, name: &str, error: Option<String>) -> InvitePage {
        let (invite, email, role) = match &link.kind {
            LinkKind::Invite { email, role } => (true, email.clone(), role.as_str()),
            LinkKind::Password { .. } => {
                let user = link.user.as_ref();
                let email = user.and_then(|u| u.email.clone()).unwrap_or_default();
                (false, email, user.map_or("member", |u| u.role.as_str()))
            }
        };
        InvitePage {
            chrome: None,
            title: if invite {
                format!("Join {}", link.team.name)
            } else {
                "Choose your password".into()
            },
            team: link.team.name.clone(),
            email,
            invite,
            role,
            name: name.to_string(),
            error,
        }
    }
}

fn gone() -> Response {
    message(
        StatusCode::GONE,
        "This link can no longer be used",
        "It was already used, or it has expired. Ask an owner of your team (or the operator) for \
         a new one — or, if you already chose a password, sign in.",
        ("/login", "Go to sign in"),
    )
}

/// The link's form, or 410.
pub async fn form(State(state): State<AppState>, Path(secret): Path<String>) -> Response {
    match state.accounts.link(&secret) {
        Ok(link) => page(StatusCode::OK, &InvitePage::of(&link, "", None)),
        Err(AccountError::Gone(_)) => gone(),
        Err(e) => super::error_page(&e),
    }
}

#[derive(Deserialize)]
struct AcceptForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    confirm: String,
}

/// Uses the link: the password is set (and, for an invite, the user created), the user is
/// signed in and sent to `/settings`; otherwise the form again with what to fix.
pub async fn accept(
    State(state): State<AppState>,
    Path(secret): Path<String>,
    Address(address): Address,
    // The secret in the path is what a forger cannot know; the origin check stops a page
    // elsewhere from using a link it somehow holds to sign this browser in.
    origin: Result<SameOrigin, CrossSite>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if origin.is_err() {
        return form_expired();
    }
    let form: AcceptForm = match read_form(&headers, body).await {
        Ok(f) => f,
        Err(resp) => return resp,
    };
    let link = match state.accounts.link(&secret) {
        Ok(link) => link,
        Err(AccountError::Gone(_)) => return gone(),
        Err(e) => return super::error_page(&e),
    };
    let again = |status: StatusCode, text: &str| {
        page(
            status,
            &InvitePage::of(&link, &form.name, Some(view::sentence(text))),
        )
    };
    if form.password != form.confirm {
        return again(
            StatusCode::BAD_REQUEST,
            "The two passwords differ; type the same password twice",
        );
    }
    let name = matches!(link.kind, LinkKind::Invite { .. }).then_some(form.name.as_str());
    match state
        .accounts
        .use_link(&secret, name, &form.password, address.as_deref())
        .await
    {
        Ok((_, cookie)) => {
            let mut resp = see_other("/settings");
            if let Ok(v) = HeaderValue::from_str(&set_cookie(&state, &cookie)) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        Err(AccountError::Gone(_)) => gone(),
        Err(e @ (AccountError::Invalid { .. } | AccountError::Taken(_))) => {
            again(super::status_of(&e), &super::describe(&e))
        }
        Err(e) => super::error_page(&e),
    }
}
