//! Sign-in sessions and personal access tokens: who a cookie or a `Bearer stw_pat_…` belongs to.
//! Only SHA-256 hashes of the secrets are kept; a session's CSRF token is derived from its
//! cookie secret ([`secrets::csrf_token`]), never stored. Both are looked up on every management request
//! (rare next to ingestion), so a revocation is seen by the very next request on any process;
//! `last_seen_at` / `last_used_at` are written at most once a minute each.

use super::db::{DbResult, OptionalExtension, Row, params};
use serde::Serialize;

use super::admin::Team;
use super::quotas::Counted;
use super::users::{USER_COLUMNS, User, user_row};
use super::{Catalog, CatalogError, Result, now_ms, secrets};

/// Prefix of session cookie values.
pub const SESSION_PREFIX: &str = "stw_ses_";
/// Prefix of personal access tokens.
pub const PAT_PREFIX: &str = "stw_pat_";

/// Activity times are written at most this often.
const TOUCH_MS: i64 = 60_000;

/// A live session with its user and team.
#[derive(Debug, Clone)]
pub struct Session {
    /// `se_…`
    pub id: String,
    /// The signed-in user.
    pub user: User,
    /// The user's team.
    pub team: Team,
    /// The session's CSRF token, derived from the cookie secret.
    pub csrf: String,
    /// What its shown-once messages are sealed under, derived from the cookie secret.
    pub flash_key: secrets::FlashKey,
}

/// A personal access token as listed (never the secret).
#[derive(Debug, Clone, Serialize)]
pub struct PatInfo {
    /// `pat_…`
    pub id: String,
    /// Label.
    pub name: Option<String>,
    /// First characters of the token.
    pub prefix: String,
    /// The owning user.
    pub created_by: String,
    /// ms since epoch.
    pub created_at: i64,
    /// ms since epoch, kept to about a minute.
    pub last_used_at: Option<i64>,
}

/// A live token with its user and team.
#[derive(Debug, Clone)]
pub struct PatAuth {
    /// `pat_…`
    pub id: String,
    /// Its user.
    pub user: User,
    /// The user's team.
    pub team: Team,
}

/// Expiry rules of sessions, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// A session unused this long has expired.
    pub idle_ms: i64,
    /// A session this old has expired, however active.
    pub absolute_ms: i64,
}

fn team_of(r: &Row<'_>, at: usize) -> DbResult<Team> {
    Ok(Team {
        id: r.get(at)?,
        name: r.get(at + 1)?,
        events_enabled: r.get(at + 2)?,
    })
}

impl Catalog {
    /// Starts a session for `user_id`; returns (session, cookie secret).
    pub fn create_session(
        &self,
        user_id: &str,
        address: Option<&str>,
    ) -> Result<(Session, String)> {
        self.start_session(user_id, address, None)?
            .ok_or_else(|| CatalogError::NotFound(format!("no user {user_id:?}")))
    }

    /// Starts a session for `user_id` only if its password hash is still `password_hash` (the
    /// one just verified): checked and inserted in one write transaction, so a reset or removal
    /// that commits while the password was being checked wins. `None` when it did.
    pub fn create_session_for_password(
        &self,
        user_id: &str,
        password_hash: &str,
        address: Option<&str>,
    ) -> Result<Option<(Session, String)>> {
        self.start_session(user_id, address, Some(password_hash))
    }

    fn start_session(
        &self,
        user_id: &str,
        address: Option<&str>,
        password_hash: Option<&str>,
    ) -> Result<Option<(Session, String)>> {
        let secret = secrets::new_secret(SESSION_PREFIX);
        let csrf = secrets::csrf_token(&secret);
        let id = secrets::new_id("se");
        let now = now_ms();
        let started = self.with(|c| {
            let tx = c.write_transaction()?;
            let current: Option<Option<String>> = tx
                .query_row(
                    "SELECT password_hash FROM users WHERE id = ?1 AND removed_at IS NULL",
                    params![user_id],
                    |r| r.get(0),
                )
                .optional()?;
            let still = match (current, password_hash) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(now_hash), Some(expected)) => now_hash.as_deref() == Some(expected),
            };
            if !still {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO sessions (id, hash, user_id, csrf, address, created_at, last_seen_at)
                 VALUES (?1, ?2, ?3, '', ?4, ?5, ?5)",
                params![id, secrets::hash(&secret), user_id, address, now],
            )?;
            tx.commit()?;
            Ok(true)
        })?;
        if !started {
            return Ok(None);
        }
        let user = self
            .user(user_id)?
            .ok_or_else(|| CatalogError::NotFound(format!("no user {user_id:?}")))?;
        let team = self.find_team(&user.team_id)?;
        Ok(Some((
            Session {
                id,
                user,
                team,
                csrf,
                flash_key: secrets::flash_key(&secret),
            },
            secret,
        )))
    }

    /// The live session behind a cookie value: not revoked, not idle or older than `limits`,
    /// its user not removed. Notes the activity (written at most once a minute, or every half
    /// idle limit when that is shorter).
    pub fn session(&self, secret: &str, limits: SessionLimits) -> Result<Option<Session>> {
        if !secret.starts_with(SESSION_PREFIX) {
            return Ok(None);
        }
        let now = now_ms();
        self.with(|c| {
            let found = c
                .prepare_cached(&format!(
                    "SELECT s.id, s.last_seen_at, {USER_COLUMNS}, t.id, t.name, t.events_enabled
                     FROM sessions s JOIN users u ON u.id = s.user_id JOIN teams t ON t.id = u.team_id
                     WHERE s.hash = ?1 AND s.revoked_at IS NULL AND u.removed_at IS NULL
                       AND s.created_at > ?2 AND s.last_seen_at > ?3"
                ))?
                .query_row(
                    params![
                        secrets::hash(secret),
                        now - limits.absolute_ms,
                        now - limits.idle_ms
                    ],
                    |r| {
                        Ok((
                            Session {
                                id: r.get(0)?,
                                csrf: secrets::csrf_token(secret),
                                flash_key: secrets::flash_key(secret),
                                user: user_row(r, 2)?,
                                team: team_of(r, 8)?,
                            },
                            r.get::<i64>(1)?,
                        ))
                    },
                )
                .optional()?;
            let Some((session, last_seen)) = found else {
                return Ok(None);
            };
            // Written once a minute, an idle limit under two minutes would end sessions in use.
            if now - last_seen >= TOUCH_MS.min(limits.idle_ms / 2) {
                c.execute(
                    "UPDATE sessions SET last_seen_at = ?1 WHERE id = ?2",
                    params![now, session.id],
                )?;
            }
            Ok(Some(session))
        })
    }

    /// Ends a session at once.
    pub fn revoke_session(&self, id: &str) -> Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE sessions SET revoked_at = COALESCE(revoked_at, ?1) WHERE id = ?2",
                params![now_ms(), id],
            )?;
            Ok(())
        })
    }

    /// Ends the session behind a cookie value, if it is one (a new sign-in replacing it).
    pub fn revoke_session_by_secret(&self, secret: &str) -> Result<()> {
        if !secret.starts_with(SESSION_PREFIX) {
            return Ok(());
        }
        self.with(|c| {
            c.execute(
                "UPDATE sessions SET revoked_at = ?1 WHERE hash = ?2 AND revoked_at IS NULL",
                params![now_ms(), secrets::hash(secret)],
            )?;
            Ok(())
        })
    }

    /// Creates a personal access token for `user_id`; returns its listing row and the secret.
    pub fn create_pat(&self, user_id: &str, name: Option<&str>) -> Result<(PatInfo, String)> {
        let secret = secrets::new_secret(PAT_PREFIX);
        let info = PatInfo {
            id: secrets::new_id("pat"),
            name: name.map(str::to_string),
            prefix: secrets::display_prefix(&secret),
            created_by: user_id.to_string(),
            created_at: now_ms(),
            last_used_at: None,
        };
        self.with(|c| {
            let tx = c.write_transaction()?;
            self.ensure_room(&tx, Counted::Pats(user_id))?;
            tx.execute(
                "INSERT INTO pats (id, hash, user_id, name, prefix, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    info.id,
                    secrets::hash(&secret),
                    user_id,
                    info.name,
                    info.prefix,
                    info.created_at
                ],
            )?;
            tx.commit()?;
            Ok(())
        })?;
        Ok((info, secret))
    }

    /// The live token behind `secret`, its user not removed. Notes the use (written at most once
    /// a minute).
    pub fn pat(&self, secret: &str) -> Result<Option<PatAuth>> {
        if !secret.starts_with(PAT_PREFIX) {
            return Ok(None);
        }
        let now = now_ms();
        self.with(|c| {
            let found = c
                .prepare_cached(&format!(
                    "SELECT p.id, COALESCE(p.last_used_at, 0), {USER_COLUMNS}, t.id, t.name, t.events_enabled
                     FROM pats p JOIN users u ON u.id = p.user_id JOIN teams t ON t.id = u.team_id
                     WHERE p.hash = ?1 AND p.revoked_at IS NULL AND u.removed_at IS NULL"
                ))?
                .query_row(params![secrets::hash(secret)], |r| {
                    Ok((
                        PatAuth {
                            id: r.get(0)?,
                            user: user_row(r, 2)?,
                            team: team_of(r, 8)?,
                        },
                        r.get::<i64>(1)?,
                    ))
                })
                .optional()?;
            let Some((pat, last_used)) = found else {
                return Ok(None);
            };
            if now - last_used >= TOUCH_MS {
                c.execute(
                    "UPDATE pats SET last_used_at = ?1 WHERE id = ?2",
                    params![now, pat.id],
                )?;
            }
            Ok(Some(pat))
        })
    }

    /// The user's live tokens.
    pub fn list_pats(&self, user_id: &str) -> Result<Vec<PatInfo>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, name, prefix, user_id, created_at, last_used_at FROM pats
                 WHERE user_id = ?1 AND revoked_at IS NULL ORDER BY created_at, id",
            )?;
            let rows = st.query_map([user_id], |r| {
                Ok(PatInfo {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    prefix: r.get(2)?,
                    created_by: r.get(3)?,
                    created_at: r.get(4)?,
                    last_used_at: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// Revokes one of the user's tokens; `NotFound` for anyone else's.
    pub fn revoke_pat(&self, user_id: &str, id: &str) -> Result<()> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE pats SET revoked_at = ?1 WHERE id = ?2 AND user_id = ?3 AND revoked_at IS NULL",
                params![now_ms(), id, user_id],
            )?;
            if n == 0 {
                return Err(CatalogError::NotFound(format!("no access token {id:?}")));
            }
            Ok(())
        })
    }
}
