//! Checking data keys and events tokens on the request path without a catalog query each time:
//! a cache of live secrets (by SHA-256) on a dedicated read connection. `last_used_at` is
//! recorded in memory and written by [`Catalog::write_last_used`] off the request path.
//!
//! On PostgreSQL the cache is emptied whenever a transaction that can end a secret's validity
//! (revocation, events turned on or off) commits on any node: it sends `NOTIFY` (see
//! [`super::db::listen`]), delivered once it commits — no polling. This process's own changes
//! empty its cache at once. To leave no window between a commit and the notification's arrival
//! on another node, the cache is trusted only while the listener's heartbeat lease holds
//! ([`REVOCATION_LEASE`]), and a revocation answers only once that lease has passed since its
//! commit ([`Settled`]): after that, every node has seen it or stopped trusting its cache. While
//! the listening connection is down, nothing is cached: every check queries the catalog.
//!
//! On SQLite the cache is emptied whenever anything has committed since it was filled
//! (`PRAGMA data_version`, which changes when *another* connection — this process's pool or
//! another process such as the admin CLI — commits). The pragma takes SQLite's shared lock (a
//! few syscalls), so it is re-read at most every [`RECHECK`] — 1 ms: a secret revoked by another
//! process (the admin CLI) stops working for every request that starts a millisecond after the
//! revocation committed; one revoked through this process's catalog, at the very next request.

use std::collections::HashMap;
use std::sync::Mutex;

use super::db::{Conn, OptionalExtension, params};

use super::admin::{SecretKind, TokenAuth};
use super::db::listen::Listener;
use super::settled::{REVOCATION_LEASE, Settled};
use super::{Catalog, Result, now_ms, secrets};
use crate::model::TeamId;

/// The catalog is re-checked for changes at most this often.
const RECHECK: std::time::Duration = std::time::Duration::from_millis(1);

/// `last_used_at` is written at most this often per secret.
const LAST_USED_RESOLUTION_MS: i64 = 60_000;

/// A live secret as last read.
#[derive(Clone)]
struct Hit {
    id: String,
    team: TeamId,
    events_enabled: bool,
}

struct State {
    conn: Conn,
    version: i64,
    checked_at: Option<std::time::Instant>,
    live: HashMap<(SecretKind, Vec<u8>), Hit>,
}

/// The cache and the pending `last_used_at` writes.
pub(super) struct AuthCache {
    state: Mutex<State>,
    /// PostgreSQL: the change notifications (SQLite: `None`, `PRAGMA data_version` instead).
    listener: Option<Listener>,
    /// Secret id → (time last used, time last written).
    used: Mutex<HashMap<String, (i64, i64)>>,
}

impl AuthCache {
    pub(super) fn new(conn: Conn, listener: Option<Listener>) -> AuthCache {
        AuthCache {
            state: Mutex::new(State {
                conn,
                version: -1,
                checked_at: None,
                live: HashMap::new(),
            }),
            listener,
            used: Mutex::new(HashMap::new()),
        }
    }
}

impl Catalog {
    /// After a change that can affect a secret's validity made through this catalog: the next
    /// check here re-reads the catalog, however recent the last one was; returns when every
    /// other process is sure to have seen it.
    pub(super) fn auth_changed(&self) -> Settled {
        let mut s = self.auth.state.lock().unwrap_or_else(|p| p.into_inner());
        s.checked_at = None;
        s.live.clear();
        let wait = if self.auth.listener.is_some() {
            REVOCATION_LEASE
        } else {
            RECHECK * 2
        };
        Settled(std::time::Instant::now() + wait)
    }

    /// PostgreSQL: the number of change notifications received so far (`None` when not
    /// listening, or on SQLite).
    #[cfg(test)]
    pub(super) fn change_generation(&self) -> Option<u64> {
        self.auth.listener.as_ref().and_then(|l| l.generation())
    }

    /// PostgreSQL: waits until a change notification newer than `before` has arrived.
    #[cfg(test)]
    pub(super) fn wait_for_change_notice(
        &self,
        before: Option<u64>,
        timeout: std::time::Duration,
    ) -> bool {
        let until = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < until {
            if self.change_generation() > before {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        false
    }

    /// The team a live secret of `kind` belongs to, with whether events are enabled for it.
    /// Looked up by SHA-256, so timing reveals nothing about the secret itself.
    fn authenticate(&self, kind: SecretKind, secret: &str) -> Result<Option<(TeamId, bool)>> {
        let hash = secrets::hash(secret);
        let hit = {
            let mut s = self.auth.state.lock().unwrap_or_else(|p| p.into_inner());
            let now = std::time::Instant::now();
            let trusted = match &self.auth.listener {
                Some(listener) if !listener.heard_within(REVOCATION_LEASE) => {
                    // A revocation may have committed that this node has not heard of yet.
                    s.live.clear();
                    false
                }
                Some(listener) => match listener.generation() {
                    Some(generation) => {
                        let generation = generation as i64;
                        if generation != s.version {
                            s.live.clear();
                            s.version = generation;
                        }
                        true
                    }
                    None => {
                        s.live.clear();
                        false
                    }
                },
                None => {
                    if s.checked_at
                        .is_none_or(|t| now.duration_since(t) >= RECHECK)
                    {
                        let version: i64 =
                            s.conn
                                .query_row("PRAGMA data_version", params![], |r| r.get(0))?;
                        if version != s.version {
                            s.live.clear();
                            s.version = version;
                        }
                        s.checked_at = Some(now);
                    }
                    true
                }
            };
            let key = (kind, hash);
            match s.live.get(&key) {
                Some(hit) => Some(hit.clone()),
                None => {
                    let found = lookup(&s.conn, kind, &key.1)?;
                    if let (Some(hit), true) = (&found, trusted) {
                        s.live.insert(key, hit.clone());
                    }
                    found
                }
            }
        };
        Ok(hit.map(|h| {
            self.note_used(&h.id);
            (h.team, h.events_enabled)
        }))
    }

    fn note_used(&self, id: &str) {
        let now = now_ms();
        let mut used = self.auth.used.lock().unwrap_or_else(|p| p.into_inner());
        match used.get_mut(id) {
            Some((last, _)) => *last = now,
            None => {
                used.insert(id.to_string(), (now, i64::MIN));
            }
        }
    }

    /// Writes `last_used_at` of secrets used since their last write (at most once a minute
    /// each). Called periodically off the request path; a busy catalog only delays it.
    pub fn write_last_used(&self) -> Result<usize> {
        let due: Vec<(String, i64)> = {
            let used = self.auth.used.lock().unwrap_or_else(|p| p.into_inner());
            used.iter()
                .filter(|(_, (last, written))| {
                    last.saturating_sub(*written) >= LAST_USED_RESOLUTION_MS
                })
                .map(|(id, (last, _))| (id.clone(), *last))
                .collect()
        };
        if due.is_empty() {
            return Ok(0);
        }
        self.with(|c| {
            // Each update only raises one row's time: no need to hold every team's writes back.
            let tx = c.shared_write_transaction()?;
            for (id, at) in &due {
                tx.execute(
                    "UPDATE secrets SET last_used_at = CASE WHEN COALESCE(last_used_at, 0) > ?1 THEN last_used_at ELSE ?1 END
                     WHERE id = ?2",
                    params![at, id],
                )?;
            }
            tx.commit()?;
            Ok(())
        })?;
        let mut used = self.auth.used.lock().unwrap_or_else(|p| p.into_inner());
        for (id, at) in &due {
            if let Some(e) = used.get_mut(id) {
                e.1 = *at;
            }
        }
        Ok(due.len())
    }

    /// Checks a data API key.
    pub fn auth_data_key(&self, secret: &str) -> Result<Option<TeamId>> {
        Ok(self
            .authenticate(SecretKind::DataKey, secret)?
            .map(|(t, _)| t))
    }

    /// Checks an events token.
    pub fn auth_events_token(&self, secret: &str) -> Result<TokenAuth> {
        Ok(match self.authenticate(SecretKind::EventsToken, secret)? {
            None => TokenAuth::Invalid,
            Some((_, false)) => TokenAuth::EventsDisabled,
            Some((team, true)) => TokenAuth::Team(team),
        })
    }
}

fn lookup(conn: &Conn, kind: SecretKind, hash: &[u8]) -> Result<Option<Hit>> {
    Ok(conn
        .prepare_cached(
            "SELECT s.id, s.team_id, t.events_enabled FROM secrets s
             JOIN teams t ON t.id = s.team_id
             WHERE s.hash = ?1 AND s.kind = ?2 AND s.revoked_at IS NULL",
        )?
        .query_row(params![hash, kind.as_str()], |r| {
            Ok(Hit {
                id: r.get(0)?,
                team: TeamId::from(r.get::<String>(1)?.as_str()),
                events_enabled: r.get(2)?,
            })
        })
        .optional()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Role;

    #[test]
    fn cached_secrets_follow_revocation_by_another_process_at_once() {
        for db in crate::catalog::testdb::each() {
            cached_secrets_follow_revocation_by_another_process_at_once_on(&db);
        }
    }

    fn cached_secrets_follow_revocation_by_another_process_at_once_on(
        db: &crate::catalog::testdb::TestDb,
    ) {
        let server = db.open();
        // The admin CLI: another process, another open of the same catalog.
        let cli = db.open();
        let team = cli.create_team("t").unwrap();
        cli.create_user(&team, None, "o", Role::Owner).unwrap();
        cli.set_events_enabled(&team, true).unwrap();
        let (id, token) = cli
            .create_secret(SecretKind::EventsToken, &team, "o")
            .unwrap();
        for _ in 0..3 {
            assert!(matches!(
                server.auth_events_token(&token).unwrap(),
                TokenAuth::Team(_)
            ));
        }
        // The documented bound on SQLite: changes are seen by requests starting RECHECK after
        // them. On PostgreSQL: once the notification has arrived (no polling; here, on one
        // machine, within milliseconds — the test allows a generous deadline).
        let later = |before: Option<u64>| {
            std::thread::sleep(RECHECK);
            if db.is_postgres() {
                assert!(
                    server.wait_for_change_notice(before, std::time::Duration::from_secs(5)),
                    "the change notification never arrived"
                );
            }
        };
        let before = server.change_generation();
        cli.set_events_enabled(&team, false).unwrap();
        later(before);
        assert_eq!(
            server.auth_events_token(&token).unwrap(),
            TokenAuth::EventsDisabled
        );
        let before = server.change_generation();
        cli.set_events_enabled(&team, true).unwrap();
        later(before);
        assert!(matches!(
            server.auth_events_token(&token).unwrap(),
            TokenAuth::Team(_)
        ));
        // last_used_at is written off the request path, once.
        assert_eq!(server.write_last_used().unwrap(), 1);
        assert_eq!(server.write_last_used().unwrap(), 0);
        let listed = cli.list_secrets(SecretKind::EventsToken, &team).unwrap();
        assert!(listed[0].last_used_at.is_some());
        // Once the revocation has settled, the other process refuses the token, whether or not
        // its notification has arrived: no waiting for it here.
        cli.revoke_secret(SecretKind::EventsToken, &id)
            .unwrap()
            .wait_blocking();
        assert_eq!(
            server.auth_events_token(&token).unwrap(),
            TokenAuth::Invalid
        );
        assert_eq!(
            server.auth_data_key(&token).unwrap(),
            None,
            "kinds never mix"
        );
    }
}
