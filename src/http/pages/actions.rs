//! The settings page's forms (`POST /settings/…`). Each one: the signed-in caller, the form's
//! `csrf` field, one [`crate::accounts`] call, then Post/Redirect/Get — the outcome (a notice,
//! or a secret to show once) goes into the session's [`super::Flash`] and the browser is sent
//! to its section of `/settings`. A refused action shows the page again with the reason and its
//! status (400/403/404/409); a missing or wrong CSRF token is the 403 "form expired" page.

use axum::extract::{FromRequest, Path, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::super::AppState;
use super::super::api::auth::{Form, MAX_FORM, Protected};
use super::flash::{Message, Secret, SecretKind as Shown};
use super::see_other;
use super::settings::{render, session_id};
use crate::accounts::workspace::NewTableElement;
use crate::accounts::{AccountError, Accounts, Caller, Result};
use crate::catalog::{Role, SecretKind};

/// A form with nothing but the token.
#[derive(Deserialize)]
pub struct Empty {}

/// An optional label.
#[derive(Deserialize)]
pub struct Named {
    #[serde(default)]
    name: String,
}

/// `POST /settings/members/invite`.
#[derive(Deserialize)]
pub struct InviteForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    role: String,
}

/// `POST /settings/members/{id}/role`.
#[derive(Deserialize)]
pub struct RoleForm {
    #[serde(default)]
    role: String,
}

/// `POST /settings/elements`.
#[derive(Deserialize)]
pub struct ElementForm {
    #[serde(default)]
    canvas: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    name: String,
}

/// A message that only tells what happened.
pub(super) fn notice(text: impl Into<String>) -> Message {
    Message {
        notice: Some(text.into()),
        secret: None,
    }
}

fn secret(kind: Shown, value: String, label: Option<String>) -> Message {
    Message {
        notice: None,
        secret: Some(Secret { kind, value, label }),
    }
}

fn optional(s: &str) -> Option<&str> {
    Some(s.trim()).filter(|s| !s.is_empty())
}

fn role(s: &str) -> Result<Role> {
    match s {
        "owner" => Ok(Role::Owner),
        "member" => Ok(Role::Member),
        _ => Err(AccountError::Invalid {
            field: "role",
            message: "choose owner or member".into(),
        }),
    }
}

/// A settings form of at most `MAX` bytes, ready to run: the caller and the parsed form, taken
/// as a [`Protected`] change (same origin, the form's CSRF token). Extracting it answers,
/// instead, 303 to `/login` when signed out and the 403 "form expired" page for a cross-site
/// post or a missing or wrong token (as [`super::super::api::auth::FormRefused`] is answered).
pub struct Action<F, const MAX: usize = MAX_FORM> {
    pub(super) state: AppState,
    pub(super) caller: Caller,
    pub(super) form: F,
}

impl<F: DeserializeOwned + Send, const MAX: usize> FromRequest<AppState> for Action<F, MAX> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> std::result::Result<Self, Response> {
        let Protected { caller, form } = Protected::<Form<F, MAX>>::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Action {
            state: state.clone(),
            caller,
            form: form.fields,
        })
    }
}

impl<F> Action<F> {
    /// Runs `act` with the accounts, the caller and the form. Its message goes to the
    /// session's flash and the browser to `/settings#{section}` ([`succeeded`]); a refusal
    /// shows the page again with the reason and its status.
    fn run(
        self,
        section: &str,
        act: impl FnOnce(&Accounts, &Caller, F) -> Result<Message>,
    ) -> Response {
        let Action {
            state,
            caller,
            form,
        } = self;
        match act(&state.accounts, &caller, form) {
            Ok(message) => succeeded(&state, &caller, section, message),
            Err(AccountError::NotSignedIn) => see_other("/login"),
            Err(e) => render(
                &state,
                &caller,
                super::status_of(&e),
                Some(super::describe(&e)),
                None,
            ),
        }
    }
}

/// The answer to an action that succeeded: its message goes to the session's flash and the
/// browser to `/settings#{section}` (Post/Redirect/Get).
pub(super) fn succeeded(
    state: &AppState,
    caller: &Caller,
    section: &str,
    message: Message,
) -> Response {
    match session_id(caller) {
        Some((id, key)) => {
            state.flash.put(id, key, &message);
            see_other(&format!("/settings#{section}"))
        }
        // A token caller has no session to keep the message for: show it now.
        None => render(state, caller, StatusCode::OK, None, Some(message)),
    }
}

/// Invites someone; the link is shown once.
pub async fn invite(action: Action<InviteForm>) -> Response {
    action.run("members", |a, c, f| {
        let url = a.invite(c, &f.email, role(&f.role)?)?;
        Ok(secret(
            Shown::Invite,
            url,
            Some(f.email.trim().to_lowercase()),
        ))
    })
}

/// Changes a member's role.
pub async fn set_role(Path(id): Path<String>, action: Action<RoleForm>) -> Response {
    action.run("members", |a, c, f| {
        let u = a.set_role(c, &id, role(&f.role)?)?;
        let role = match u.role {
            Role::Owner => "an owner",
            Role::Member => "a member",
        };
        Ok(notice(format!("{} is now {role}.", u.name)))
    })
}

/// Removes a member.
pub async fn remove_member(Path(id): Path<String>, action: Action<Empty>) -> Response {
    action.run("members", |a, c, _| {
        let u = a.remove_member(c, &id)?;
        Ok(notice(format!(
            "{} was removed; their sessions and tokens stopped working.",
            u.name
        )))
    })
}

/// Creates a data key; shown once.
pub async fn create_key(action: Action<Named>) -> Response {
    action.run("keys", |a, c, f| {
        let (info, key) = a.create_secret(c, SecretKind::DataKey, optional(&f.name))?;
        Ok(secret(Shown::DataKey, key, info.name))
    })
}

/// Revokes a pending invite; its link stops working.
pub async fn revoke_invite(Path(id): Path<String>, action: Action<Empty>) -> Response {
    action.run("members", |a, c, _| {
        a.revoke_invite(c, &id)?;
        Ok(notice("Invite revoked; its link no longer works."))
    })
}

/// Revokes a data key; answers once no node accepts it any more.
pub async fn revoke_key(Path(id): Path<String>, action: Action<Empty>) -> Response {
    revoke(
        action,
        "keys",
        SecretKind::DataKey,
        &id,
        "Key revoked; it no longer works.",
    )
    .await
}

/// Revokes a key or token; the page answers once the revocation is in force on every node.
async fn revoke(
    action: Action<Empty>,
    section: &str,
    kind: SecretKind,
    id: &str,
    done: &'static str,
) -> Response {
    let mut settled = None;
    let page = action.run(section, |a, c, _| {
        settled = Some(a.revoke_secret(c, kind, id)?);
        Ok(notice(done))
    });
    if let Some(settled) = settled {
        settled.wait().await;
    }
    page
}

/// Asks the operator to enable events.
pub async fn request_events(action: Action<Empty>) -> Response {
    action.run("events", |a, c, _| {
        let (_, new) = a.request_events(c)?;
        Ok(notice(if new {
            "Access requested. Once the operator enables events, create an events token here."
        } else {
            "Access was already requested; the operator has not enabled events yet."
        }))
    })
}

/// Creates an events token; shown once.
pub async fn create_token(action: Action<Named>) -> Response {
    action.run("events", |a, c, f| {
        let (info, token) = a.create_secret(c, SecretKind::EventsToken, optional(&f.name))?;
        Ok(secret(Shown::EventsToken, token, info.name))
    })
}

/// Revokes an events token; answers once no node accepts it any more.
pub async fn revoke_token(Path(id): Path<String>, action: Action<Empty>) -> Response {
    let done = "Events token revoked; it no longer works.";
    revoke(action, "events", SecretKind::EventsToken, &id, done).await
}

/// Creates a canvas.
pub async fn create_canvas(action: Action<Named>) -> Response {
    action.run("canvases", |a, c, f| {
        let canvas = a.create_canvas(c, &f.name)?;
        Ok(notice(format!("Canvas “{}” created.", canvas.name)))
    })
}

/// Deletes a canvas and its elements.
pub async fn delete_canvas(Path(id): Path<String>, action: Action<Empty>) -> Response {
    action.run("canvases", |a, c, _| {
        a.delete_canvas(c, &id)?;
        Ok(notice("Canvas deleted; its share URLs no longer work."))
    })
}

/// Creates a table element on a canvas.
pub async fn create_element(action: Action<ElementForm>) -> Response {
    action.run("canvases", |a, c, f| {
        let new = NewTableElement {
            source: f.source,
            name: optional(&f.name).map(str::to_string),
            ..Default::default()
        };
        let e = a.create_element(c, &f.canvas, &new)?;
        Ok(notice(format!(
            "Table element on {} created.",
            e.element.source
        )))
    })
}

/// Deletes a table element.
pub async fn delete_element(Path(id): Path<String>, action: Action<Empty>) -> Response {
    action.run("canvases", |a, c, _| {
        a.delete_element(c, &id)?;
        Ok(notice(
            "Table element deleted; its share URL no longer works.",
        ))
    })
}

/// Creates a personal access token; shown once.
pub async fn create_pat(action: Action<Named>) -> Response {
    action.run("pats", |a, c, f| {
        let (info, token) = a.create_pat(c, optional(&f.name))?;
        Ok(secret(Shown::Pat, token, info.name))
    })
}

/// Revokes one of the caller's personal access tokens.
pub async fn revoke_pat(Path(id): Path<String>, action: Action<Empty>) -> Response {
    action.run("pats", |a, c, _| {
        a.revoke_pat(c, &id)?;
        Ok(notice("Personal access token revoked; it no longer works."))
    })
}
