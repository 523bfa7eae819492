//! The settings page's "New SQL table" form (SPEC §3.4): `POST /settings/sql-elements/preview`
//! runs the query through [`crate::accounts::Accounts::preview_sql`] and shows the page again
//! with its first rows; `POST /settings/sql-elements` saves it through
//! [`crate::accounts::Accounts::create_sql_element`], as the API does, and redirects to the
//! canvas list (Post/Redirect/Get). A refused query — the planner's words, a statement that is
//! not a `SELECT`, a limit reached — is shown beside the form with its status and the query
//! still in it. Both take the session's CSRF token like every settings form ([`Action`]), and
//! a body large enough for a query of [`MAX_SQL_BYTES`].

use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::super::AppState;
use super::actions::{Action, notice, succeeded};
use super::settings::render_draft;
use super::sql_draft::{PREVIEW_ROWS, PreviewTable, SqlDraft};
use super::{describe, see_other, status_of};
use crate::accounts::sql_elements::NewSqlElement;
use crate::accounts::{AccountError, Caller};
use crate::http::api::auth::MAX_FORM;
use crate::sql::MAX_SQL_BYTES;

/// Largest body of the form: a query of [`MAX_SQL_BYTES`] with every byte percent-encoded (three
/// bytes each), and room for the other fields.
pub const MAX_SQL_FORM: usize = 3 * MAX_SQL_BYTES + MAX_FORM;

/// `POST /settings/sql-elements[/preview]`.
#[derive(Deserialize)]
pub struct SqlForm {
    /// The canvas to save on (a preview keeps it selected).
    #[serde(default)]
    canvas: String,
    #[serde(default)]
    sql: String,
    /// Optional element name.
    #[serde(default)]
    name: String,
}

/// The form, taken like every settings form but with room for a long query.
type SqlAction = Action<SqlForm, MAX_SQL_FORM>;

impl SqlForm {
    /// The form as typed, to show again.
    fn draft(self) -> SqlDraft {
        SqlDraft {
            canvas: self.canvas,
            name: self.name,
            sql: self.sql,
            ..SqlDraft::default()
        }
    }
}

/// Shows the page again with the query's first [`PREVIEW_ROWS`] rows under the form, or why it
/// cannot run beside it; saves nothing.
pub async fn preview(action: SqlAction) -> Response {
    let Action {
        state,
        caller,
        form,
    } = action;
    let outcome = state
        .accounts
        .preview_sql(&caller, &form.sql, &state.sql, PREVIEW_ROWS)
        .await;
    let mut draft = form.draft();
    match outcome.map(|preview| PreviewTable::of(&preview)) {
        Ok(Ok(table)) => {
            draft.preview = Some(table);
            render_draft(&state, &caller, StatusCode::OK, draft)
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "a preview's rows could not be shown as text");
            draft.error = Some("The rows could not be shown as text; try a download.".into());
            render_draft(&state, &caller, StatusCode::UNPROCESSABLE_ENTITY, draft)
        }
        Err(e) => refused(&state, &caller, draft, &e),
    }
}

/// Saves the query as an SQL element on the chosen canvas and redirects to the canvas list; a
/// refusal shows the page again with the reason beside the form.
pub async fn create(action: SqlAction) -> Response {
    let new = NewSqlElement {
        sql: action.form.sql.clone(),
        name: Some(action.form.name.clone()),
        ..NewSqlElement::default()
    };
    let (state, caller) = (&action.state, &action.caller);
    let created = state
        .accounts
        .create_sql_element(caller, &action.form.canvas, &new, &state.sql)
        .await;
    match created {
        Ok(element) => {
            let message = match element.element.name {
                Some(name) => notice(format!("SQL table “{name}” created.")),
                None => notice("SQL table created."),
            };
            succeeded(state, caller, "canvases", message)
        }
        Err(e) => refused(state, caller, action.form.draft(), &e),
    }
}

/// The page again with `draft` in the form and why it was refused beside it (signed out: the
/// sign-in form).
fn refused(state: &AppState, caller: &Caller, mut draft: SqlDraft, e: &AccountError) -> Response {
    if let AccountError::NotSignedIn = e {
        return see_other("/login");
    }
    draft.error = Some(describe(e));
    render_draft(state, caller, status_of(e), draft)
}
