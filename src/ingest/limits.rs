//! The table and column limits (SPEC §4.2), checked before an event is written to the WAL so a
//! refused event is never logged. Each team's known tables and columns (committed ones from the
//! catalog, plus everything admitted since) are kept here.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;

use super::event::{Cell, EventRows, Value};
use super::team::AppendError;
use crate::catalog::{Catalog, CatalogError, TeamId};
use crate::config::LimitsConfig;

/// A team's known tables and their columns, shared behind a lock.
type Shape = Arc<Mutex<HashMap<String, HashSet<String>>>>;

/// Known shape of every team that has sent events since start.
pub struct Limits {
    cfg: LimitsConfig,
    catalog: Arc<Catalog>,
    teams: DashMap<TeamId, Shape>,
}

impl Limits {
    /// Limits from the config, shapes loaded from `catalog` on first use per team.
    pub fn new(cfg: LimitsConfig, catalog: Arc<Catalog>) -> Self {
        Self {
            cfg,
            catalog,
            teams: DashMap::new(),
        }
    }

    fn shape(&self, team: &TeamId) -> Result<Shape, CatalogError> {
        if let Some(s) = self.teams.get(team) {
            return Ok(s.clone());
        }
        let tables = self
            .catalog
            .team_schemas(team)?
            .into_iter()
            .map(|(t, s)| (t, s.columns.into_iter().map(|c| c.name).collect()))
            .collect();
        Ok(self
            .teams
            .entry(team.clone())
            .or_insert_with(|| Arc::new(Mutex::new(tables)))
            .clone())
    }

    /// Refuses an event that would pass a limit; otherwise records its tables and columns.
    /// `enforce = false` (WAL replay) only records.
    pub fn admit(&self, team: &TeamId, ev: &EventRows, enforce: bool) -> Result<(), AppendError> {
        let shape = self
            .shape(team)
            .map_err(|e| AppendError::Internal(e.to_string()))?;
        let mut tables = shape.lock().unwrap_or_else(|p| p.into_inner());
        if enforce {
            let new_tables = ["tracks", ev.table.as_str()]
                .iter()
                .filter(|t| !tables.contains_key(**t))
                .count();
            if tables.len() + new_tables > self.cfg.tables_per_team {
                return Err(AppendError::TooManyTables(self.cfg.tables_per_team));
            }
            // Every table the event writes; only non-null cells can create a column.
            for (table, cells) in [
                (
                    "tracks",
                    &mut ev.tracks_row() as &mut dyn Iterator<Item = &Cell>,
                ),
                (ev.table.as_str(), &mut ev.event_row()),
            ] {
                let known = tables.get(table);
                let new_cols = cells
                    .filter(|(c, v)| *v != Value::Null && !known.is_some_and(|k| k.contains(c)))
                    .count();
                if known.map_or(0, HashSet::len) + new_cols > self.cfg.columns_per_table {
                    return Err(AppendError::TooManyColumns {
                        table: table.to_string(),
                        limit: self.cfg.columns_per_table,
                    });
                }
            }
        }
        let columns = |cells: &mut dyn Iterator<Item = &Cell>| -> Vec<String> {
            cells
                .filter(|(_, v)| v.column_type().is_some())
                .map(|(c, _)| c.clone())
                .collect()
        };
        tables
            .entry("tracks".into())
            .or_default()
            .extend(columns(&mut ev.tracks_row()));
        let entry = tables.entry(ev.table.clone()).or_default();
        entry.extend(columns(&mut ev.event_row()));
        Ok(())
    }
}
