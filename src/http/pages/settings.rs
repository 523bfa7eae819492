//! `GET /settings`: the team's page. Every section is filled from one [`crate::accounts`] call
//! with the caller; a section whose call answers "forbidden" is left out (data keys, events
//! tokens and the audit log for members), so what a member sees follows the accounts' rules.
//! The page also shows, once, a secret or notice left by the form that redirected here, and the
//! "New SQL table" form as its last preview or refusal left it ([`SqlDraft`]). Long
//! lists (members, tables) show their first [`PAGE_ROWS`] and say how many more the API lists;
//! the others are bounded by the per-team ceilings (`accounts.max_*`).

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::super::AppState;
use super::super::api::auth::Signed;
use super::flash::{Message, SecretKind as Shown};
use super::rows::{
    AuditView, CanvasView, InviteView, MemberView, SecretView, ShownView, TableView, events_curl,
};
use super::sql_draft::SqlDraft;
use super::view::{self, Chrome};
use super::{page, see_other};
use crate::accounts::{AccountError, Caller, Result};
use crate::catalog::SecretKind;

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    chrome: Option<Chrome>,
    title: String,
    csrf: String,
    error: Option<String>,
    notice: Option<String>,
    shown: Option<ShownView>,
    /// May use the owner-only actions ([`Caller::require_owner`]).
    owner: bool,
    link_ttl: String,
    members: Vec<MemberView>,
    /// Members past [`PAGE_ROWS`], not shown.
    members_more: usize,
    /// Pending invites (owners).
    invites: Option<Vec<InviteView>>,
    keys: Option<Vec<SecretView>>,
    events_enabled: bool,
    events_requested: bool,
    tokens: Option<Vec<SecretView>>,
    events_curl: String,
    canvases: Vec<CanvasView>,
    tables: Vec<TableView>,
    /// Tables past [`PAGE_ROWS`], not shown.
    tables_more: usize,
    pats: Vec<SecretView>,
    audit: Option<Vec<AuditView>>,
    /// The "New SQL table" form.
    sql: SqlDraft,
}

impl SettingsPage {
    /// The shown-once secret if it belongs in `section`.
    fn shown_in(&self, section: &str) -> Option<&ShownView> {
        self.shown.as_ref().filter(|s| s.section == section)
    }
}

/// The page, or 303 to `/login` when not signed in.
pub async fn show(State(state): State<AppState>, Signed(caller): Signed) -> Response {
    let caller = match caller {
        Ok(c) => c,
        Err(AccountError::NotSignedIn) => return see_other("/login"),
        Err(e) => return super::error_page(&e),
    };
    let message = session_id(&caller).and_then(|(id, key)| state.flash.take(id, key));
    render(&state, &caller, StatusCode::OK, None, message)
}

/// The session id a flash message is kept under, and the key it is sealed with.
pub(super) fn session_id(caller: &Caller) -> Option<(&str, &crate::catalog::secrets::FlashKey)> {
    match &caller.via {
        crate::accounts::Via::Session { id, flash_key, .. } => Some((id, flash_key)),
        crate::accounts::Via::Pat { .. } => None,
    }
}

/// The page with `status`, an error message near the top and a one-time message.
pub(super) fn render(
    state: &AppState,
    caller: &Caller,
    status: StatusCode,
    error: Option<String>,
    message: Option<Message>,
) -> Response {
    let message = message.unwrap_or_default();
    answer(status, build(state, caller, error, message))
}

/// The page with `status` and the "New SQL table" form holding `draft` (what was typed, and
/// the preview or why it was refused, shown beside the form).
pub(super) fn render_draft(
    state: &AppState,
    caller: &Caller,
    status: StatusCode,
    draft: SqlDraft,
) -> Response {
    let built =
        build(state, caller, None, Message::default()).map(|p| SettingsPage { sql: draft, ..p });
    answer(status, built)
}

fn answer(status: StatusCode, built: Result<SettingsPage>) -> Response {
    match built {
        Ok(p) => page(status, &p),
        Err(AccountError::NotSignedIn) => see_other("/login"),
        Err(e) => super::error_page(&e),
    }
}

/// `Ok(None)` when the accounts refuse the caller this section.
fn allowed<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(AccountError::Forbidden(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

fn build(
    state: &AppState,
    caller: &Caller,
    error: Option<String>,
    message: Message,
) -> Result<SettingsPage> {
    let a = &state.accounts;
    let base = a.public_url();
    let shown = message.secret.map(ShownView::of);
    // A key or token just created goes into the commands that use it.
    let fresh = |kind, placeholder: &str| {
        shown
            .as_ref()
            .filter(|s| s.kind == kind)
            .map_or_else(|| placeholder.to_string(), |s| s.value.clone())
    };
    let key = fresh(Shown::DataKey, "<your data key>");
    let token = fresh(Shown::EventsToken, "<your events token>");
    let secrets = |kind| -> Result<Option<Vec<SecretView>>> {
        Ok(allowed(a.secrets(caller, kind))?
            .map(|list| list.into_iter().map(SecretView::of).collect()))
    };
    let events_enabled = caller.team.events_enabled;
    let (members, members_more) = first_rows(a.members(caller)?);
    let (tables, tables_more) = first_rows(a.tables(caller)?);
    Ok(SettingsPage {
        chrome: Some(Chrome::of(caller)),
        title: format!("{} settings", caller.team.name),
        csrf: caller.csrf().unwrap_or_default().to_string(),
        error,
        notice: message.notice,
        owner: caller.require_owner().is_ok(),
        link_ttl: view::duration(state.config.accounts.link_ttl.0),
        members: map(members, |u| MemberView::of(u, &caller.user.id)),
        members_more,
        invites: allowed(a.invites(caller))?.map(|list| map(list, InviteView::of)),
        keys: secrets(SecretKind::DataKey)?,
        events_enabled,
        events_requested: !events_enabled && a.events_requested(caller)?,
        tokens: secrets(SecretKind::EventsToken)?,
        events_curl: events_curl(base, &token),
        canvases: map(a.canvases(caller)?, |c| CanvasView::of(c, base, &key)),
        tables: map(tables, TableView::of),
        tables_more,
        pats: map(a.pats(caller)?, SecretView::of_pat),
        audit: allowed(a.audit_log(caller, 50, None))?.map(|log| map(log, AuditView::of)),
        shown,
        sql: SqlDraft::default(),
    })
}

/// Most rows of a long list the page shows.
pub const PAGE_ROWS: usize = 100;

/// The first [`PAGE_ROWS`] of `list`, and how many were left out.
fn first_rows<T>(mut list: Vec<T>) -> (Vec<T>, usize) {
    let more = list.len().saturating_sub(PAGE_ROWS);
    list.truncate(PAGE_ROWS);
    (list, more)
}

fn map<T, U>(list: Vec<T>, f: impl FnMut(T) -> U) -> Vec<U> {
    list.into_iter().map(f).collect()
}
