//! The workspace any user of a team may use and shape (SPEC §5.1): canvases, their table
//! elements with share URLs, and the warehouse tables with columns and sizes. Ids of another
//! team read as missing.

use serde::Serialize;
use serde_json::Value;

use super::{AccountError, Accounts, Caller, Result};
use crate::catalog::{CanvasRow, ElementRow, NewElement};
use crate::model::TeamId;

/// `{app_url}/canvas/<canvasId>/element/<elementId>/new-canvas`
pub fn share_url(app_url: &str, canvas: &str, element: &str) -> String {
    format!(
        "{}/canvas/{canvas}/element/{element}/new-canvas",
        app_url.trim_end_matches('/')
    )
}

/// A canvas with its elements.
#[derive(Debug, Clone, Serialize)]
pub struct CanvasInfo {
    /// `cv_…`
    pub id: String,
    /// Display name.
    pub name: String,
    /// ms since epoch.
    pub created_at: i64,
    /// Its table elements.
    pub elements: Vec<ElementInfo>,
}

/// A table element with its share URL.
#[derive(Debug, Clone, Serialize)]
pub struct ElementInfo {
    /// The stored element.
    #[serde(flatten)]
    pub element: ElementRow,
    /// `{app_url}/canvas/<canvasId>/element/<elementId>/new-canvas`
    pub share_url: String,
}

/// What creating a table element takes.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTableElement {
    /// Source warehouse table (normalised like event names).
    pub source: String,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
    /// Ordered column subset.
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    /// Filter list (download filter language).
    #[serde(default)]
    pub filters: Option<Value>,
    /// Most rows.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Downloads read fresh by default (SPEC §3.5).
    #[serde(default)]
    pub fresh: bool,
}

/// A column of a warehouse table.
#[derive(Debug, Clone, Serialize)]
pub struct ColumnInfo {
    /// Column name.
    pub name: String,
    /// Warehouse type.
    #[serde(rename = "type")]
    pub ty: String,
}

/// A warehouse table with its size.
#[derive(Debug, Clone, Serialize)]
pub struct TableInfo {
    /// Table name.
    pub name: String,
    /// Columns in order.
    pub columns: Vec<ColumnInfo>,
    /// Rows, files, bytes, last received.
    #[serde(flatten)]
    pub stats: crate::catalog::TableStats,
}

/// Most characters in a name (canvas, element, source table as typed).
pub const MAX_NAME_CHARS: usize = 200;

/// Largest element row limit (what the catalog stores as a signed 64-bit integer).
const MAX_LIMIT: u64 = i64::MAX as u64;

/// Most filters on one element.
const MAX_FILTERS: usize = 100;

/// A name as given: trimmed, 1 to [`MAX_NAME_CHARS`] characters, no control characters.
/// `field` is the request field it came in, `what` what it names in the message ("a canvas
/// name").
pub fn bounded_name(name: &str, field: &'static str, what: &str) -> Result<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > MAX_NAME_CHARS || n.chars().any(char::is_control) {
        return Err(AccountError::Invalid {
            field,
            message: format!(
                "{what} is 1 to {MAX_NAME_CHARS} characters, without control characters"
            ),
        });
    }
    Ok(n.to_string())
}

impl Accounts {
    fn app_url(&self) -> &str {
        &self.app_url
    }

    pub(super) fn element_info(&self, element: ElementRow) -> ElementInfo {
        ElementInfo {
            share_url: share_url(self.app_url(), &element.canvas_id, &element.id),
            element,
        }
    }

    /// The team's canvases with their elements.
    pub fn canvases(&self, caller: &Caller) -> Result<Vec<CanvasInfo>> {
        let canvases = self.catalog.list_canvases(&caller.team.id)?;
        let mut by_canvas: std::collections::HashMap<String, Vec<ElementInfo>> =
            std::collections::HashMap::new();
        for e in self.catalog.list_elements(&caller.team.id, None)? {
            by_canvas
                .entry(e.canvas_id.clone())
                .or_default()
                .push(self.element_info(e));
        }
        Ok(canvases
            .into_iter()
            .map(|c| CanvasInfo {
                elements: by_canvas.remove(&c.id).unwrap_or_default(),
                id: c.id,
                name: c.name,
                created_at: c.created_at,
            })
            .collect())
    }

    /// Creates a canvas.
    pub fn create_canvas(&self, caller: &Caller, name: &str) -> Result<CanvasInfo> {
        let name = bounded_name(name, "name", "a canvas name")?;
        let id = self.catalog.create_canvas(&caller.team.id, &name)?;
        self.catalog
            .audit(&caller.event("canvas.create", Some(&id)))?;
        let CanvasRow {
            id,
            name,
            created_at,
        } = self.catalog.canvas(&caller.team.id, &id)?;
        Ok(CanvasInfo {
            id,
            name,
            created_at,
            elements: Vec::new(),
        })
    }

    /// Renames a canvas.
    pub fn rename_canvas(&self, caller: &Caller, id: &str, name: &str) -> Result<CanvasInfo> {
        let name = bounded_name(name, "name", "a canvas name")?;
        self.catalog.rename_canvas(&caller.team.id, id, &name)?;
        let c = self.catalog.canvas(&caller.team.id, id)?;
        let elements = self
            .catalog
            .list_elements(&caller.team.id, Some(id))?
            .into_iter()
            .map(|e| self.element_info(e))
            .collect();
        Ok(CanvasInfo {
            id: c.id,
            name: c.name,
            created_at: c.created_at,
            elements,
        })
    }

    /// Deletes a canvas and its elements.
    pub fn delete_canvas(&self, caller: &Caller, id: &str) -> Result<()> {
        self.catalog.delete_canvas(&caller.team.id, id)?;
        self.catalog
            .audit(&caller.event("canvas.delete", Some(id)))?;
        Ok(())
    }

    /// The elements of one canvas of the team.
    pub fn elements(&self, caller: &Caller, canvas_id: &str) -> Result<Vec<ElementInfo>> {
        self.catalog.canvas(&caller.team.id, canvas_id)?;
        Ok(self
            .catalog
            .list_elements(&caller.team.id, Some(canvas_id))?
            .into_iter()
            .map(|e| self.element_info(e))
            .collect())
    }

    /// Creates a table element on a canvas of the team. Its columns and filters are checked
    /// against the table now (known columns, no repeats, typed filter values), not at the first
    /// download: an element on a table that has no data yet may name neither.
    pub fn create_element(
        &self,
        caller: &Caller,
        canvas_id: &str,
        new: &NewTableElement,
    ) -> Result<ElementInfo> {
        self.catalog.canvas(&caller.team.id, canvas_id)?;
        let invalid =
            |field: &'static str, message: String| AccountError::Invalid { field, message };
        let source =
            crate::model::naming::normalize(&bounded_name(&new.source, "source", "a table name")?);
        if source.is_empty() {
            return Err(invalid(
                "source",
                format!("{:?} is not a usable table name", new.source),
            ));
        }
        let name = match new.name.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(n) => Some(bounded_name(n, "name", "an element name")?),
        };
        if new.limit.is_some_and(|l| l == 0 || l > MAX_LIMIT) {
            return Err(invalid("limit", format!("limit is 1 to {MAX_LIMIT} rows")));
        }
        let schemas = self
            .catalog
            .team_schemas(&TeamId::from(caller.team.id.as_str()))?;
        let known = schemas
            .get(&source)
            .map(|s| s.columns.as_slice())
            .unwrap_or_default();
        let unknown = |c: &str| {
            if known.is_empty() {
                format!("table {source} has no data yet, so no column {c:?}")
            } else {
                format!("table {source} has no column {c:?}")
            }
        };
        if let Some(columns) = &new.columns {
            if columns.is_empty() || columns.len() > known.len().max(1) {
                return Err(invalid(
                    "columns",
                    format!(
                        "columns lists 1 to {} of the table's columns",
                        known.len().max(1)
                    ),
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for c in columns {
                let n = crate::model::naming::normalize(c);
                if !known.iter().any(|col| col.name == n) {
                    return Err(invalid("columns", unknown(c)));
                }
                if !seen.insert(n) {
                    return Err(invalid("columns", format!("column {c:?} is listed twice")));
                }
            }
        }
        if let Some(f) = &new.filters {
            let list = f
                .as_array()
                .ok_or_else(|| invalid("filters", "filters is a list of filters".into()))?;
            if list.len() > MAX_FILTERS {
                return Err(invalid("filters", format!("at most {MAX_FILTERS} filters")));
            }
            crate::download::filter::parse(f, known, "filters")
                .map_err(|e| invalid("filters", e.message))?;
        }
        let id = self
            .catalog
            .create_element(&NewElement {
                canvas: canvas_id.to_string(),
                table: source,
                name,
                columns: new.columns.clone(),
                filters: new.filters.clone(),
                limit: new.limit,
                fresh: new.fresh,
            })
            .map_err(|e| match e {
                crate::catalog::CatalogError::Refused(m) => invalid("columns", m),
                other => other.into(),
            })?;
        self.catalog
            .audit(&caller.event("element.create", Some(&id)))?;
        Ok(self.element_info(self.catalog.element_row(&caller.team.id, &id)?))
    }

    /// Deletes an element of the team; its share URL stops working.
    pub fn delete_element(&self, caller: &Caller, id: &str) -> Result<()> {
        self.catalog.delete_element(&caller.team.id, id)?;
        self.catalog
            .audit(&caller.event("element.delete", Some(id)))?;
        Ok(())
    }

    /// The team's warehouse tables: columns and types, rows, files, bytes, last received.
    pub fn tables(&self, caller: &Caller) -> Result<Vec<TableInfo>> {
        let team = TeamId::from(caller.team.id.as_str());
        let schemas = self.catalog.team_schemas(&team)?;
        let mut stats = self.catalog.table_stats(&team)?;
        let mut tables: Vec<TableInfo> = schemas
            .into_iter()
            .map(|(name, schema)| TableInfo {
                columns: schema
                    .columns
                    .iter()
                    .map(|c| ColumnInfo {
                        name: c.name.clone(),
                        ty: c.ty.as_str().to_string(),
                    })
                    .collect(),
                stats: stats.remove(&name).unwrap_or_default(),
                name,
            })
            .collect();
        tables.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(tables)
    }
}
