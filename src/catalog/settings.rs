//! Operator tuning per team (SPEC §2.2.1, §2.2.2): flush triggers, buffer budget and rate limit
//! overrides, `None` meaning the global default, with a generation number that every change
//! bumps so running servers notice.

use std::collections::HashMap;

use super::db::{DbResult, OptionalExtension, Row, params};
use serde::Serialize;

use super::{Catalog, Result};
use crate::model::TeamId;

/// One team's overrides; `None` is the global default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TeamSettings {
    /// `flush.interval`, ms.
    pub flush_interval_ms: Option<u64>,
    /// `flush.max_rows`.
    pub flush_max_rows: Option<u64>,
    /// `flush.max_bytes`.
    pub flush_max_bytes: Option<u64>,
    /// `ingest.team_budget`, bytes.
    pub budget_bytes: Option<u64>,
    /// Events per second (no limit when `None`).
    pub rate_per_sec: Option<f64>,
    /// Burst, events (default: one second at the rate).
    pub rate_burst: Option<u64>,
}

/// A change to one setting: keep it, set it, or reset it to the default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change<T> {
    /// Leave as is.
    Keep,
    /// Override.
    Set(T),
    /// Back to the global default.
    Reset,
}

impl<T> Change<T> {
    fn apply(self, current: Option<T>) -> Option<T> {
        match self {
            Change::Keep => current,
            Change::Set(v) => Some(v),
            Change::Reset => None,
        }
    }
}

/// Changes to a team's settings.
#[derive(Debug, Clone, Copy)]
pub struct SettingsChange {
    /// Flush interval, ms.
    pub flush_interval_ms: Change<u64>,
    /// Rows per table.
    pub flush_max_rows: Change<u64>,
    /// Bytes per team.
    pub flush_max_bytes: Change<u64>,
    /// Buffer budget, bytes.
    pub budget_bytes: Change<u64>,
    /// Events per second.
    pub rate_per_sec: Change<f64>,
    /// Burst, events.
    pub rate_burst: Change<u64>,
}

fn to_i64(v: Option<u64>) -> Option<i64> {
    v.map(|v| v.min(i64::MAX as u64) as i64)
}

fn to_u64(v: Option<i64>) -> Option<u64> {
    v.map(|v| v.max(0) as u64)
}

/// The six settings columns of a row, starting at column `at`.
fn settings_at(r: &Row<'_>, at: usize) -> DbResult<TeamSettings> {
    Ok(TeamSettings {
        flush_interval_ms: to_u64(r.get(at)?),
        flush_max_rows: to_u64(r.get(at + 1)?),
        flush_max_bytes: to_u64(r.get(at + 2)?),
        budget_bytes: to_u64(r.get(at + 3)?),
        rate_per_sec: r.get(at + 4)?,
        rate_burst: to_u64(r.get(at + 5)?),
    })
}

impl Catalog {
    /// A team's overrides (all `None` when it has none).
    pub fn team_settings(&self, team: &str) -> Result<TeamSettings> {
        let team = self.find_team(team)?;
        Ok(self
            .all_team_settings()?
            .remove(&TeamId::from(team.id.as_str()))
            .unwrap_or_default())
    }

    /// Every team's overrides.
    pub fn all_team_settings(&self) -> Result<HashMap<TeamId, TeamSettings>> {
        self.with(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT team_id, flush_interval_ms, flush_max_rows, flush_max_bytes, budget_bytes,
                        rate_per_sec, rate_burst FROM team_settings",
            )?;
            let rows = stmt.query_map(params![], |r| {
                Ok((
                    TeamId::from(r.get::<String>(0)?.as_str()),
                    settings_at(r, 1)?,
                ))
            })?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// Applies `change` to a team's settings and bumps the generation; returns the new ones.
    pub fn set_team_settings(&self, team: &str, change: SettingsChange) -> Result<TeamSettings> {
        let team = self.find_team(team)?;
        self.with(|c| {
            let tx = c.write_transaction()?;
            let current: TeamSettings = tx
                .query_row(
                    "SELECT flush_interval_ms, flush_max_rows, flush_max_bytes, budget_bytes,
                            rate_per_sec, rate_burst FROM team_settings WHERE team_id = ?1",
                    [&team.id],
                    |r| settings_at(r, 0),
                )
                .optional()?
                .unwrap_or_default();
            let new = TeamSettings {
                flush_interval_ms: change.flush_interval_ms.apply(current.flush_interval_ms),
                flush_max_rows: change.flush_max_rows.apply(current.flush_max_rows),
                flush_max_bytes: change.flush_max_bytes.apply(current.flush_max_bytes),
                budget_bytes: change.budget_bytes.apply(current.budget_bytes),
                rate_per_sec: change.rate_per_sec.apply(current.rate_per_sec),
                rate_burst: change.rate_burst.apply(current.rate_burst),
            };
            tx.execute(
                "INSERT INTO team_settings (team_id, flush_interval_ms, flush_max_rows,
                    flush_max_bytes, budget_bytes, rate_per_sec, rate_burst)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (team_id) DO UPDATE SET flush_interval_ms = ?2, flush_max_rows = ?3,
                    flush_max_bytes = ?4, budget_bytes = ?5, rate_per_sec = ?6, rate_burst = ?7",
                params![
                    team.id,
                    to_i64(new.flush_interval_ms),
                    to_i64(new.flush_max_rows),
                    to_i64(new.flush_max_bytes),
                    to_i64(new.budget_bytes),
                    new.rate_per_sec,
                    to_i64(new.rate_burst),
                ],
            )?;
            tx.execute(
                "UPDATE settings_generation SET generation = generation + 1 WHERE id = 1",
                params![],
            )?;
            tx.commit()?;
            Ok(new)
        })
    }

    /// The settings generation: changes whenever any team's settings change.
    pub fn settings_generation(&self) -> Result<i64> {
        self.with(|c| {
            Ok(
                c.prepare_cached("SELECT generation FROM settings_generation WHERE id = 1")?
                    .query_row(params![], |r| r.get(0))?,
            )
        })
    }
}
