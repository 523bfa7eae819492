//! SQL elements on a canvas (SPEC §3.4): created by any user of the team after the query is
//! checked against the team's current tables — one read-only `SELECT`, known tables and columns,
//! types that agree — so a broken query is refused with the planner's words at creation instead
//! of at the first download. The output schema found then is kept for listings.

use super::workspace::{ElementInfo, bounded_name};
use super::{Accounts, Caller, Result};
use crate::catalog::NewSqlElementRow;
use crate::model::TeamId;
use crate::sql::SqlEngine;

/// What creating an SQL element takes: `{"sql": "SELECT …", "name"?: "…"}`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSqlElement {
    /// One read-only query over the team's warehouse tables.
    pub sql: String,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
    /// Downloads read fresh by default (SPEC §3.5).
    #[serde(default)]
    pub fresh: bool,
}

impl Accounts {
    /// Checks the query with `engine` and creates the element on a canvas of the team.
    pub async fn create_sql_element(
        &self,
        caller: &Caller,
        canvas_id: &str,
        new: &NewSqlElement,
        engine: &SqlEngine,
    ) -> Result<ElementInfo> {
        self.catalog.canvas(&caller.team.id, canvas_id)?;
        let name = match new.name.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(n) => Some(bounded_name(n, "name", "an element name")?),
        };
        let team = TeamId::from(caller.team.id.as_str());
        let checked = engine.check(&team, &new.sql).await?;
        let schema = checked.schema_json();
        let id = self.catalog.create_sql_element(
            &caller.team.id,
            &NewSqlElementRow {
                canvas: canvas_id,
                name: name.as_deref(),
                sql: new.sql.trim(),
                schema: &schema,
                fresh: new.fresh,
            },
        )?;
        self.catalog
            .audit(&caller.event("element.create", Some(&id)))?;
        Ok(self.element_info(self.catalog.element_row(&caller.team.id, &id)?))
    }
}
