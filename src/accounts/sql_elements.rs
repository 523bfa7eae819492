//! SQL elements on a canvas (SPEC §3.4): created by any user of the team after the query is
//! checked against the team's current tables — one read-only `SELECT`, known tables and columns,
//! types that agree — so a broken query is refused with the planner's words at creation instead
//! of at the first download. The output schema found then is kept for listings. Before saving,
//! any user may preview a query's first rows, run exactly as a download runs it.

use arrow::record_batch::RecordBatch;
use futures::StreamExt;

use super::workspace::{ElementInfo, bounded_name};
use super::{AccountError, Accounts, Caller, Result};
use crate::catalog::NewSqlElementRow;
use crate::model::TeamId;
use crate::model::schema::TableSchema;
use crate::sql::{Page, QueryResult, SqlEngine};

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

/// The first rows of a query, as a download of it would return them.
pub struct SqlPreview {
    /// The output columns with their warehouse types.
    pub schema: TableSchema,
    /// The first rows (at most the number asked for), in warehouse types.
    pub batches: Vec<RecordBatch>,
    /// The query returns more rows than these.
    pub more: bool,
}

impl Accounts {
    /// Runs `sql` for the caller's team and keeps its first `rows` rows; saves nothing. The
    /// query is checked as [`Accounts::create_sql_element`] checks it, then run on `engine` as
    /// a download without `fresh` runs it (committed files; the same limits, a slot of the
    /// team's). A query with `$name` parameters is refused: a preview has no values for them.
    pub async fn preview_sql(
        &self,
        caller: &Caller,
        sql: &str,
        engine: &SqlEngine,
        rows: usize,
    ) -> Result<SqlPreview> {
        let team = TeamId::from(caller.team.id.as_str());
        // As a download without `fresh` runs it: committed tables only.
        let checked = engine.check(&team, sql, false).await?;
        if !checked.params.is_empty() {
            let names: Vec<String> = checked.params.iter().map(|p| format!("${p}")).collect();
            return Err(AccountError::Invalid {
                field: "sql",
                message: format!(
                    "the query takes parameters ({}), and a preview has no values for them; \
                     save it, then pass \"params\" with each download",
                    names.join(", ")
                ),
            });
        }
        // One row more than shown says whether there are more.
        let first = Page {
            fetch: Some(rows + 1),
            ..Page::default()
        };
        let QueryResult {
            schema,
            batches: mut stream,
            ..
        } = engine
            .run(&team, sql, &serde_json::Map::new(), false, first)
            .await?;
        let (mut batches, mut left, mut more) = (Vec::new(), rows, false);
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let take = batch.num_rows().min(left);
            if take > 0 {
                batches.push(batch.slice(0, take));
                left -= take;
            }
            if take < batch.num_rows() {
                more = true;
                break;
            }
        }
        // Stops the query and frees its slot.
        drop(stream);
        Ok(SqlPreview {
            schema,
            batches,
            more,
        })
    }

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
        let checked = engine.check(&team, &new.sql, new.fresh).await?;
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
