//! Operator and owner actions on the catalog: teams, users, the events flag, keys and tokens,
//! canvases and elements, and the secret look-ups the HTTP edge authenticates with.

use super::db::{DbResult, OptionalExtension, params};
use serde::Serialize;

use super::quotas::Counted;
use super::secrets::{self, DATA_KEY_PREFIX, EVENTS_TOKEN_PREFIX};
use super::settled::Settled;
use super::{Catalog, CatalogError, Result, now_ms};
use crate::model::TeamId;

/// A team row.
#[derive(Debug, Clone, Serialize)]
pub struct Team {
    /// `tm_…`
    pub id: String,
    /// Unique name.
    pub name: String,
    /// Whether the operator enabled event ingestion.
    pub events_enabled: bool,
}

/// A user's role in its team.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// May create keys and tokens.
    Owner,
    /// May not.
    Member,
}

impl Role {
    /// `owner` / `member`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Member => "member",
        }
    }
}

/// Data API key or events token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecretKind {
    /// `x-api-key`, read access to the team's tables.
    DataKey,
    /// `X-Auth-Token`, write access to the team's warehouse.
    EventsToken,
}

impl SecretKind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            SecretKind::DataKey => "data_key",
            SecretKind::EventsToken => "events_token",
        }
    }
    fn id_prefix(self) -> &'static str {
        match self {
            SecretKind::DataKey => "key",
            SecretKind::EventsToken => "tok",
        }
    }
    fn secret_prefix(self) -> &'static str {
        match self {
            SecretKind::DataKey => DATA_KEY_PREFIX,
            SecretKind::EventsToken => EVENTS_TOKEN_PREFIX,
        }
    }
}

/// A key or token as listed (never the secret).
#[derive(Debug, Clone, Serialize)]
pub struct SecretInfo {
    /// `key_…` / `tok_…`
    pub id: String,
    /// Optional label given at creation.
    pub name: Option<String>,
    /// The first characters of the secret.
    pub prefix: String,
    /// Creating user.
    pub created_by: String,
    /// ms since epoch.
    pub created_at: i64,
    /// ms since epoch, updated at most once a minute.
    pub last_used_at: Option<i64>,
    /// ms since epoch.
    pub revoked_at: Option<i64>,
}

/// Outcome of checking an events token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenAuth {
    /// Valid for this team.
    Team(TeamId),
    /// Valid, but the operator has not enabled events for the team.
    EventsDisabled,
    /// Unknown or revoked.
    Invalid,
}

/// A table element as the download path needs it.
#[derive(Debug, Clone)]
pub struct Element {
    /// `el_…`
    pub id: String,
    /// Source warehouse table.
    pub source: String,
    /// Ordered column subset; `None` = every column of the table.
    pub columns: Option<Vec<String>>,
    /// Filter list (JSON), applied by later download features.
    pub filters: Option<serde_json::Value>,
    /// Row limit.
    pub limit: Option<u64>,
    /// The query of an SQL element (SPEC §3.4); `None` for a table element.
    pub sql: Option<String>,
    /// Downloads include rows not yet committed unless they ask otherwise (SPEC §3.5).
    pub fresh: bool,
}

/// An SQL element to store (its query already checked).
#[derive(Debug, Clone, Copy)]
pub struct NewSqlElementRow<'a> {
    /// Canvas id (of the team).
    pub canvas: &'a str,
    /// Display name.
    pub name: Option<&'a str>,
    /// The query.
    pub sql: &'a str,
    /// Its output columns, JSON `[{name, type}]`.
    pub schema: &'a serde_json::Value,
    /// Downloads read fresh by default.
    pub fresh: bool,
}

/// What `element create` takes.
#[derive(Debug, Clone, Default)]
pub struct NewElement {
    /// Canvas id.
    pub canvas: String,
    /// Source table (normalised to a warehouse name).
    pub table: String,
    /// Display name.
    pub name: Option<String>,
    /// Ordered columns (normalised).
    pub columns: Option<Vec<String>>,
    /// Filter list (download filter language), applied before a request's own.
    pub filters: Option<serde_json::Value>,
    /// Most rows the element returns.
    pub limit: Option<u64>,
    /// Downloads read fresh by default (SPEC §3.5).
    pub fresh: bool,
}

impl Catalog {
    /// Creates a team; names are unique.
    pub fn create_team(&self, name: &str) -> Result<String> {
        let name = non_empty(name, "team name")?;
        let id = secrets::new_id("tm");
        self.with(|c| {
            let n = c.execute(
                "INSERT INTO teams (id, name, created_at) VALUES (?1, ?2, ?3) ON CONFLICT(name) DO NOTHING",
                params![id, name, now_ms()],
            )?;
            if n == 0 {
                return Err(CatalogError::Refused(format!("a team named {name:?} already exists")));
            }
            Ok(id.clone())
        })
    }

    /// Finds a team by id or by name.
    pub fn find_team(&self, id_or_name: &str) -> Result<Team> {
        self.with(|c| {
            c.query_row(
                "SELECT id, name, events_enabled FROM teams WHERE id = ?1 OR name = ?1",
                [id_or_name],
                |r| {
                    Ok(Team {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        events_enabled: r.get(2)?,
                    })
                },
            )
            .optional()?
            .ok_or_else(|| CatalogError::NotFound(format!("no team {id_or_name:?}")))
        })
    }

    /// Lists every team.
    pub fn list_teams(&self) -> Result<Vec<Team>> {
        self.with(|c| {
            let mut st =
                c.prepare("SELECT id, name, events_enabled FROM teams ORDER BY created_at, id")?;
            let rows = st.query_map(params![], |r| {
                Ok(Team {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    events_enabled: r.get(2)?,
                })
            })?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// Finds a user of `team_id` by id, email or name (the first one so named); returns (id, role).
    fn find_user(&self, team_id: &str, id_or_name: &str) -> Result<(String, String)> {
        self.with(|c| {
            c.query_row(
                "SELECT id, role FROM users WHERE team_id = ?1 AND removed_at IS NULL
                 AND (id = ?2 OR email = lower(?2) OR name = ?2) ORDER BY id = ?2 DESC, created_at LIMIT 1",
                [team_id, id_or_name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?
            .ok_or_else(|| {
                CatalogError::NotFound(format!("no user {id_or_name:?} in team {team_id}"))
            })
        })
    }

    /// Turns event ingestion on or off for a team (operator action). Turning it off is in force
    /// on every node once [`Settled`] has passed ([`Catalog::set_events_enabled_settled`]).
    pub fn set_events_enabled(&self, team: &str, enabled: bool) -> Result<Team> {
        Ok(self.set_events_enabled_settled(team, enabled)?.0)
    }

    /// [`Catalog::set_events_enabled`], with when the change is in force everywhere.
    pub fn set_events_enabled_settled(&self, team: &str, enabled: bool) -> Result<(Team, Settled)> {
        let mut team = self.find_team(team)?;
        self.with(|c| {
            let tx = c.write_transaction()?;
            tx.execute(
                "UPDATE teams SET events_enabled = ?1 WHERE id = ?2",
                params![enabled, team.id],
            )?;
            tx.notify_auth_changed()?;
            tx.commit()?;
            Ok(())
        })?;
        let settled = self.auth_changed();
        if enabled {
            self.resolve_events_requests(&team.id)?;
        }
        team.events_enabled = enabled;
        Ok((team, settled))
    }

    /// Creates a key or token for `user`, who must be an owner of `team`. Returns (id, secret);
    /// the secret is not stored and cannot be shown again.
    pub fn create_secret(
        &self,
        kind: SecretKind,
        team: &str,
        user: &str,
    ) -> Result<(String, String)> {
        let (info, secret) = self.create_named_secret(kind, team, user, None)?;
        Ok((info.id, secret))
    }

    /// [`Catalog::create_secret`] with a label; returns the listing row and the secret.
    pub fn create_named_secret(
        &self,
        kind: SecretKind,
        team: &str,
        user: &str,
        name: Option<&str>,
    ) -> Result<(SecretInfo, String)> {
        let team = self.find_team(team)?;
        let (user_id, role) = self.find_user(&team.id, user)?;
        if role != "owner" {
            return Err(CatalogError::Refused(format!(
                "user {user:?} is not an owner of team {}; only owners may create keys and tokens",
                team.name
            )));
        }
        if kind == SecretKind::EventsToken && !team.events_enabled {
            return Err(CatalogError::Refused(format!(
                "events are not enabled for team {}; the operator must run `stowage admin events enable --team {}` first",
                team.name, team.id
            )));
        }
        let secret = secrets::new_secret(kind.secret_prefix());
        let info = SecretInfo {
            id: secrets::new_id(kind.id_prefix()),
            name: name.map(str::to_string),
            prefix: secrets::display_prefix(&secret),
            created_by: user_id,
            created_at: now_ms(),
            last_used_at: None,
            revoked_at: None,
        };
        self.with(|c| {
            let tx = c.write_transaction()?;
            self.ensure_room(
                &tx,
                match kind {
                    SecretKind::DataKey => Counted::Keys(&team.id),
                    SecretKind::EventsToken => Counted::Tokens(&team.id),
                },
            )?;
            tx.execute(
                "INSERT INTO secrets (id, kind, team_id, hash, prefix, created_by, created_at, name)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    info.id,
                    kind.as_str(),
                    team.id,
                    secrets::hash(&secret),
                    info.prefix,
                    info.created_by,
                    info.created_at,
                    info.name
                ],
            )?;
            tx.commit()?;
            Ok(())
        })?;
        Ok((info, secret))
    }

    /// Lists a team's keys or tokens, revoked ones included.
    pub fn list_secrets(&self, kind: SecretKind, team: &str) -> Result<Vec<SecretInfo>> {
        let team = self.find_team(team)?;
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, prefix, created_by, created_at, last_used_at, revoked_at, name FROM secrets
                 WHERE team_id = ?1 AND kind = ?2 ORDER BY created_at, id",
            )?;
            let rows = st.query_map([team.id.as_str(), kind.as_str()], |r| {
                Ok(SecretInfo {
                    id: r.get(0)?,
                    name: r.get(6)?,
                    prefix: r.get(1)?,
                    created_by: r.get(2)?,
                    created_at: r.get(3)?,
                    last_used_at: r.get(4)?,
                    revoked_at: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// Revokes a key or token by id; every node refuses it once [`Settled`] has passed.
    pub fn revoke_secret(&self, kind: SecretKind, id: &str) -> Result<Settled> {
        self.revoke_team_secret(kind, None, id)
    }

    /// Revokes a key or token of `team_id` (any team when `None`); `NotFound` for another
    /// team's id, so its existence does not leak, and — for a team's own request — for one
    /// already revoked (it is no longer listed; revoking it again would only repeat the audit
    /// entry). The operator's revoke (`None`) stays idempotent.
    pub fn revoke_team_secret(
        &self,
        kind: SecretKind,
        team_id: Option<&str>,
        id: &str,
    ) -> Result<Settled> {
        self.with(|c| {
            let tx = c.write_transaction()?;
            let n = tx.execute(
                "UPDATE secrets SET revoked_at = COALESCE(revoked_at, ?1)
                 WHERE id = ?2 AND kind = ?3 AND (CAST(?4 AS TEXT) IS NULL OR (team_id = ?4 AND revoked_at IS NULL))",
                params![now_ms(), id, kind.as_str(), team_id],
            )?;
            tx.notify_auth_changed()?;
            tx.commit()?;
            if n == 0 {
                return Err(CatalogError::NotFound(format!(
                    "no {} with id {id:?}",
                    kind.as_str()
                )));
            }
            Ok(())
        })?;
        Ok(self.auth_changed())
    }

    /// Creates a canvas in a team.
    pub fn create_canvas(&self, team: &str, name: &str) -> Result<String> {
        let team = self.find_team(team)?;
        let name = non_empty(name, "canvas name")?;
        let id = secrets::new_id("cv");
        self.with(|c| {
            let tx = c.write_transaction()?;
            self.ensure_room(&tx, Counted::Canvases(&team.id))?;
            tx.execute(
                "INSERT INTO canvases (id, team_id, name, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![id, team.id, name, now_ms()],
            )?;
            tx.commit()?;
            Ok(id.clone())
        })
    }

    /// Finds a canvas of a team by name (used to seed the demo idempotently).
    pub fn find_canvas_by_name(&self, team_id: &str, name: &str) -> Result<Option<String>> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT id FROM canvases WHERE team_id = ?1 AND name = ?2 ORDER BY created_at LIMIT 1",
                [team_id, name],
                |r| r.get(0),
            )
            .optional()?)
        })
    }

    /// Creates a table element on a canvas; returns its id. The table and column names are
    /// normalised like event names, so `--table "Purchased an Item"` means `purchased_an_item`.
    pub fn create_element(&self, e: &NewElement) -> Result<String> {
        use crate::model::naming::normalize;
        let source = normalize(&e.table);
        if source.is_empty() {
            return Err(CatalogError::Refused(format!(
                "{:?} is not a usable table name",
                e.table
            )));
        }
        let columns = match &e.columns {
            Some(cols) => {
                let cols: Vec<String> = cols.iter().map(|c| normalize(c)).collect();
                if cols.is_empty() || cols.iter().any(String::is_empty) {
                    return Err(CatalogError::Refused(
                        "--columns lists an empty or unusable name".into(),
                    ));
                }
                Some(serde_json::to_string(&cols).expect("strings serialise"))
            }
            None => None,
        };
        let id = secrets::new_id("el");
        self.with(|c| {
            let tx = c.write_transaction()?;
            let team: Option<String> = tx
                .query_row(
                    "SELECT team_id FROM canvases WHERE id = ?1",
                    [&e.canvas],
                    |r| r.get(0),
                )
                .optional()?;
            let Some(team) = team else {
                return Err(CatalogError::NotFound(format!("no canvas {:?}", e.canvas)));
            };
            self.ensure_room(&tx, Counted::Elements(&team))?;
            tx.execute(
                "INSERT INTO elements (id, canvas_id, name, source, columns, filters, row_limit, created_at, fresh)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    id,
                    e.canvas,
                    e.name,
                    source,
                    columns,
                    e.filters.as_ref().map(|f| f.to_string()),
                    e.limit.map(|l| l as i64),
                    now_ms(),
                    e.fresh as i64
                ],
            )?;
            tx.commit()?;
            Ok(id.clone())
        })
    }

    /// Creates an SQL element on a canvas of `team_id` (checked by the caller: one read-only
    /// query whose output columns are `schema`, JSON `[{name, type}]`); returns its id.
    pub fn create_sql_element(&self, team_id: &str, new: &NewSqlElementRow<'_>) -> Result<String> {
        let NewSqlElementRow {
            canvas,
            name,
            sql,
            schema,
            fresh,
        } = *new;
        let id = secrets::new_id("el");
        self.with(|c| {
            let tx = c.write_transaction()?;
            let found: Option<String> = tx
                .query_row(
                    "SELECT id FROM canvases WHERE id = ?1 AND team_id = ?2",
                    [canvas, team_id],
                    |r| r.get(0),
                )
                .optional()?;
            if found.is_none() {
                return Err(CatalogError::NotFound(format!("no canvas {canvas:?}")));
            }
            self.ensure_room(&tx, Counted::Elements(team_id))?;
            tx.execute(
                "INSERT INTO elements (id, canvas_id, name, kind, source, query, query_schema, created_at, fresh)
                 VALUES (?1, ?2, ?3, 'sql', '', ?4, ?5, ?6, ?7)",
                params![id, canvas, name, sql, schema.to_string(), now_ms(), fresh as i64],
            )?;
            tx.commit()?;
            Ok(id.clone())
        })
    }

    /// The element, if it exists on that canvas and the canvas belongs to `team`.
    pub fn element_for_team(
        &self,
        team: &TeamId,
        canvas: &str,
        element: &str,
    ) -> Result<Option<Element>> {
        self.with(|c| {
            let element = c
                .prepare_cached(
                    "SELECT e.id, e.source, e.columns, e.filters, e.row_limit, e.query, e.fresh FROM elements e
                     JOIN canvases cv ON cv.id = e.canvas_id
                     WHERE e.id = ?1 AND cv.id = ?2 AND cv.team_id = ?3",
                )?
                .query_row(params![element, canvas, team.as_str()], |r| {
                    let json = |i: usize| -> DbResult<Option<String>> { r.get(i) };
                    Ok(Element {
                        id: r.get(0)?,
                        source: r.get(1)?,
                        columns: json(2)?.and_then(|s| serde_json::from_str(&s).ok()),
                        filters: json(3)?.and_then(|s| serde_json::from_str(&s).ok()),
                        limit: r.get::<Option<i64>>(4)?.map(|l| l.max(0) as u64),
                        sql: r.get(5)?,
                        fresh: r.get::<i64>(6)? != 0,
                    })
                })
                .optional()?;
            Ok(element)
        })
    }

    /// Finds the first element of a canvas reading `source` (demo seeding).
    pub fn find_element(&self, canvas: &str, source: &str) -> Result<Option<String>> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT id FROM elements WHERE canvas_id = ?1 AND source = ?2 ORDER BY created_at LIMIT 1",
                [canvas, source],
                |r| r.get(0),
            )
            .optional()?)
        })
    }

    /// Whether a secret is live for `kind` (demo seeding reuses a still-valid one).
    pub fn secret_is_live(&self, kind: SecretKind, secret: &str) -> Result<bool> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT 1 FROM secrets WHERE hash = ?1 AND kind = ?2 AND revoked_at IS NULL",
                params![secrets::hash(secret), kind.as_str()],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
        })
    }
}

fn non_empty<'a>(s: &'a str, what: &str) -> Result<&'a str> {
    let t = s.trim();
    if t.is_empty() {
        Err(CatalogError::Refused(format!("{what} must not be empty")))
    } else {
        Ok(t)
    }
}
