//! The audit log (who did what to a team, when, from which address — never a secret) and the
//! owners' requests to enable events, which the operator lists and grants.

use super::db::{DbResult, params};
use serde::Serialize;

use super::{Catalog, Result, now_ms, secrets};

/// One thing to record.
#[derive(Debug, Clone, Default)]
pub struct AuditEvent<'a> {
    /// The team concerned, when known (a failed sign-in for an unknown email has none).
    pub team_id: Option<&'a str>,
    /// Acting user id; `None` for the operator or an unknown caller.
    pub actor_id: Option<&'a str>,
    /// Acting user's email (or the email tried, for a failed sign-in).
    pub actor_email: Option<&'a str>,
    /// Stable action name, e.g. `session.sign_in`, `key.create`, `member.remove`.
    pub action: &'a str,
    /// The id acted on.
    pub target: Option<&'a str>,
    /// Client address.
    pub address: Option<&'a str>,
    /// Short free text (role names, reasons); never a secret.
    pub detail: Option<&'a str>,
}

/// A recorded entry.
#[derive(Debug, Clone, Serialize)]
pub struct AuditEntry {
    /// Increasing id.
    pub id: i64,
    /// ms since epoch.
    pub at: i64,
    /// Acting user id.
    pub actor_id: Option<String>,
    /// Acting user's email.
    pub actor_email: Option<String>,
    /// Action name.
    pub action: String,
    /// Id acted on.
    pub target: Option<String>,
    /// Client address.
    pub address: Option<String>,
    /// Detail.
    pub detail: Option<String>,
}

/// An open request to enable events.
#[derive(Debug, Clone, Serialize)]
pub struct EventsRequest {
    /// `er_…`
    pub id: String,
    /// Team id.
    pub team_id: String,
    /// Team name.
    pub team_name: String,
    /// Requesting user id.
    pub requested_by: String,
    /// Requesting user's email.
    pub requested_by_email: Option<String>,
    /// ms since epoch.
    pub requested_at: i64,
}

impl Catalog {
    /// Appends to the audit log.
    pub fn audit(&self, e: &AuditEvent<'_>) -> Result<()> {
        self.with(|c| {
            c.prepare_cached(
                "INSERT INTO audit_log (team_id, at, actor_id, actor_email, action, target, address, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                e.team_id,
                now_ms(),
                e.actor_id,
                e.actor_email,
                e.action,
                e.target,
                e.address,
                e.detail
            ])?;
            Ok(())
        })
    }

    /// The team's newest audit entries, newest first, with ids below `before` when given.
    pub fn audit_log(
        &self,
        team_id: &str,
        limit: u32,
        before: Option<i64>,
    ) -> Result<Vec<AuditEntry>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, at, actor_id, actor_email, action, target, address, detail FROM audit_log
                 WHERE team_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3",
            )?;
            let rows = st.query_map(
                params![team_id, before.unwrap_or(i64::MAX), limit],
                |r| {
                    Ok(AuditEntry {
                        id: r.get(0)?,
                        at: r.get(1)?,
                        actor_id: r.get(2)?,
                        actor_email: r.get(3)?,
                        action: r.get(4)?,
                        target: r.get(5)?,
                        address: r.get(6)?,
                        detail: r.get(7)?,
                    })
                },
            )?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// Records an owner's request to enable events; one open request per team (asking again
    /// returns the open one). Returns (request id, whether it is new).
    pub fn request_events(&self, team_id: &str, user_id: &str) -> Result<(String, bool)> {
        self.with(|c| {
            let tx = c.write_transaction()?;
            let open: Option<String> = super::db::OptionalExtension::optional(tx.query_row(
                "SELECT id FROM events_requests WHERE team_id = ?1 AND resolved_at IS NULL",
                [team_id],
                |r| r.get(0),
            ))?;
            if let Some(id) = open {
                return Ok((id, false));
            }
            let id = secrets::new_id("er");
            tx.execute(
                "INSERT INTO events_requests (id, team_id, requested_by, requested_at) VALUES (?1, ?2, ?3, ?4)",
                params![id, team_id, user_id, now_ms()],
            )?;
            tx.commit()?;
            Ok((id, true))
        })
    }

    /// Open requests to enable events, oldest first.
    pub fn events_requests(&self) -> Result<Vec<EventsRequest>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT r.id, r.team_id, t.name, r.requested_by, u.email, r.requested_at
                 FROM events_requests r JOIN teams t ON t.id = r.team_id
                 LEFT JOIN users u ON u.id = r.requested_by
                 WHERE r.resolved_at IS NULL ORDER BY r.requested_at, r.id",
            )?;
            let rows = st.query_map(params![], |r| {
                Ok(EventsRequest {
                    id: r.get(0)?,
                    team_id: r.get(1)?,
                    team_name: r.get(2)?,
                    requested_by: r.get(3)?,
                    requested_by_email: r.get(4)?,
                    requested_at: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// Whether the team has an open request.
    pub fn events_requested(&self, team_id: &str) -> Result<bool> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT EXISTS (SELECT 1 FROM events_requests WHERE team_id = ?1 AND resolved_at IS NULL)",
                [team_id],
                |r| r.get(0),
            )?)
        })
    }

    /// Closes the team's open requests (the operator enabled events).
    pub(super) fn resolve_events_requests(&self, team_id: &str) -> Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE events_requests SET resolved_at = ?1 WHERE team_id = ?2 AND resolved_at IS NULL",
                params![now_ms(), team_id],
            )?;
            Ok(())
        })
    }
}
