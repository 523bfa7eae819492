//! `stowage admin element create --canvas C --sql '…' [--name N]`: the operator's way to make an
//! SQL element. The query is checked against the canvas team's current tables — as the API
//! checks it — before it is stored, with the output schema listings show.

use std::sync::Arc;

use super::output::AdminError;
use crate::catalog::{Catalog, CatalogError, NewSqlElementRow};
use crate::config::Config;
use crate::model::TeamId;
use crate::sql::{SqlEngine, SqlError};

/// Checks `sql` and creates the element on `canvas`; returns its id.
pub fn create(
    config: &Config,
    catalog: &Catalog,
    canvas: &str,
    name: Option<&str>,
    sql: &str,
    fresh: bool,
) -> Result<String, AdminError> {
    let team = catalog
        .canvas_team(canvas)?
        .ok_or_else(|| CatalogError::NotFound(format!("no canvas {canvas:?}")))?;
    let refused = |m: String| AdminError::InvalidArgument(m);
    let store = crate::store::open(config).map_err(|e| refused(e.to_string()))?;
    let location = crate::catalog::Location::of(config)?;
    let engine = SqlEngine::new(
        Arc::new(Catalog::open_location(&location)?),
        store,
        config.sql.clone(),
        config.download.batch_rows,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| refused(e.to_string()))?;
    let checked = rt
        // Offline: no buffers to lend, so committed tables decide.
        .block_on(engine.check(&TeamId::from(team.as_str()), sql, false))
        .map_err(|e| match e {
            SqlError::Invalid(m) | SqlError::Params(m) => AdminError::InvalidSql(m),
            SqlError::Catalog(c) => AdminError::Catalog(c),
            other => refused(other.to_string()),
        })?;
    let schema = checked.schema_json();
    Ok(catalog.create_sql_element(
        &team,
        &NewSqlElementRow {
            canvas,
            name,
            sql: sql.trim(),
            schema: &schema,
            fresh,
        },
    )?)
}
