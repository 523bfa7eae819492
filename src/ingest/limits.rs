//! The table and column limits (SPEC §4.2), checked before an event is written to the WAL so a
//! refused event is never logged. Each team's known tables and columns (committed ones from the
//! catalog, plus everything admitted since) are kept here.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;

use super::bulk::ColumnNames;
use super::event::{EventRows, RowCells};
use super::team::AppendError;
use crate::catalog::{Catalog, CatalogError};
use crate::config::LimitsConfig;
use crate::model::TeamId;
use crate::model::value::Value;

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
        self.admit_all(team, std::iter::once((0, ev)), enforce)
            .map_err(|(_, e)| e)
    }

    /// [`Limits::admit_all`] for a request whose rows were built into a batch per table
    /// ([`bulk`](super::bulk)): each built table's columns looked up once, instead of every
    /// event's cells (~4 % of a narrow batch's CPU), and `rows`, the rows outside those batches,
    /// cell by cell. `Ok(true)`: admitted, and recorded. `Ok(false)`: a table or a column would
    /// pass a limit, and nothing is recorded; [`Limits::admit_all`] then finds the event at
    /// fault. What a request adds only grows, event by event, so when the whole of it fits, no
    /// event passed a limit on the way.
    pub fn admit_gathered<'a>(
        &self,
        team: &TeamId,
        tables: impl Iterator<Item = (&'a str, ColumnNames<'a>)>,
        rows: impl Iterator<Item = (&'a str, RowCells<'a>)>,
    ) -> Result<bool, AppendError> {
        let shape = self
            .shape(team)
            .map_err(|e| AppendError::Internal(e.to_string()))?;
        let mut known = shape.lock().unwrap_or_else(|p| p.into_inner());
        let mut added: HashMap<&'a str, HashSet<&'a str>> = HashMap::new();
        let mut add = |table: &'a str, names: &mut dyn Iterator<Item = &'a str>| {
            let have = known.get(table);
            let mine = added.entry(table).or_default();
            for name in names {
                if !have.is_some_and(|k| k.contains(name)) {
                    mine.insert(name);
                }
            }
        };
        for (table, mut names) in tables {
            add(table, &mut names);
        }
        for (table, cells) in rows {
            add(
                table,
                &mut cells
                    .filter(|(_, v)| *v != Value::Null)
                    .map(|(name, _)| &**name),
            );
        }
        let new_tables = added.keys().filter(|t| !known.contains_key(**t)).count();
        if known.len() + new_tables > self.cfg.tables_per_team {
            return Ok(false);
        }
        let columns = |table: &str| known.get(table).map_or(0, HashSet::len);
        if added
            .iter()
            .any(|(table, cols)| columns(table) + cols.len() > self.cfg.columns_per_table)
        {
            return Ok(false);
        }
        for (table, cols) in added {
            let cols = cols.into_iter().map(str::to_string);
            match known.get_mut(table) {
                Some(have) => have.extend(cols),
                None => {
                    known.insert(table.to_string(), cols.collect());
                }
            }
        }
        Ok(true)
    }

    /// [`Limits::admit`] for a batch, all or nothing: the first event (by its given index) that
    /// would pass a limit, counting what the events before it add, refuses the whole batch and
    /// nothing is recorded.
    pub fn admit_all<'a>(
        &self,
        team: &TeamId,
        events: impl Iterator<Item = (usize, &'a EventRows)>,
        enforce: bool,
    ) -> Result<(), (usize, AppendError)> {
        let shape = self
            .shape(team)
            .map_err(|e| (0, AppendError::Internal(e.to_string())))?;
        let mut tables = shape.lock().unwrap_or_else(|p| p.into_inner());
        // What this batch adds (new tables, and new columns of any table), checked together
        // with what is known, merged only at the end. A known column costs one lookup.
        let mut added: HashMap<String, HashSet<String>> = HashMap::new();
        for (index, ev) in events {
            for (table, cells) in ev.rows() {
                let known = tables.get(table);
                if known.is_none() && !added.contains_key(table) {
                    let new_tables = added.keys().filter(|t| !tables.contains_key(*t)).count();
                    if enforce && tables.len() + new_tables + 1 > self.cfg.tables_per_team {
                        return Err((index, AppendError::TooManyTables(self.cfg.tables_per_team)));
                    }
                    added.insert(table.to_string(), HashSet::new());
                }
                // Only non-null cells can create a column.
                for (c, _) in cells.filter(|(_, v)| *v != Value::Null) {
                    if !known.is_some_and(|k| k.contains(&**c))
                        && !added.get(table).is_some_and(|m| m.contains(&**c))
                    {
                        added
                            .entry(table.to_string())
                            .or_default()
                            .insert(c.to_string());
                    }
                }
                let mine = added.get(table).map_or(0, HashSet::len);
                if enforce && known.map_or(0, HashSet::len) + mine > self.cfg.columns_per_table {
                    return Err((
                        index,
                        AppendError::TooManyColumns {
                            table: table.to_string(),
                            limit: self.cfg.columns_per_table,
                        },
                    ));
                }
            }
        }
        for (table, cols) in added {
            tables.entry(table).or_default().extend(cols);
        }
        Ok(())
    }
}
