//! Per-team (and per-user) counts with a ceiling (SPEC §5.2): live data keys, live events tokens,
//! live personal access tokens of a user, canvases, elements and pending invites. Each creation
//! counts and inserts inside one write transaction, so concurrent requests cannot pass the
//! ceiling together; beyond it the creation fails with [`CatalogError::LimitReached`]. A catalog
//! opened by the operator's CLI has no ceilings (the operator is trusted); a serving process sets
//! them from `[accounts]` with [`Catalog::set_quotas`].

use super::db::{Conn, params};
use super::{Catalog, CatalogError, Result, now_ms};
use crate::config::AccountsConfig;

/// The ceilings; `u64::MAX` is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    /// Live data API keys per team.
    pub keys: u64,
    /// Live events tokens per team.
    pub tokens: u64,
    /// Live personal access tokens per user.
    pub pats_per_user: u64,
    /// Canvases per team.
    pub canvases: u64,
    /// Elements per team, over all its canvases.
    pub elements: u64,
    /// Unused, unexpired, unrevoked invites per team.
    pub invites: u64,
}

impl Quotas {
    /// No ceiling at all.
    pub const NONE: Quotas = Quotas {
        keys: u64::MAX,
        tokens: u64::MAX,
        pats_per_user: u64::MAX,
        canvases: u64::MAX,
        elements: u64::MAX,
        invites: u64::MAX,
    };

    /// The ceilings `[accounts]` sets for a serving process.
    pub fn from_config(accounts: &AccountsConfig) -> Quotas {
        Quotas {
            keys: accounts.max_keys,
            tokens: accounts.max_tokens,
            pats_per_user: accounts.max_pats_per_user,
            canvases: accounts.max_canvases,
            elements: accounts.max_elements,
            invites: accounts.max_invites,
        }
    }
}

/// One counted kind of thing, with the id its count is kept for.
#[derive(Debug, Clone, Copy)]
pub(super) enum Counted<'a> {
    /// Live data keys of a team.
    Keys(&'a str),
    /// Live events tokens of a team.
    Tokens(&'a str),
    /// Live personal access tokens of a user.
    Pats(&'a str),
    /// Canvases of a team.
    Canvases(&'a str),
    /// Elements on the canvases of a team.
    Elements(&'a str),
    /// Pending invites of a team.
    Invites(&'a str),
}

impl Counted<'_> {
    fn ceiling(self, q: &Quotas) -> (u64, &'static str, &'static str) {
        match self {
            Counted::Keys(_) => (q.keys, "data API keys", "accounts.max_keys"),
            Counted::Tokens(_) => (q.tokens, "events tokens", "accounts.max_tokens"),
            Counted::Pats(_) => (
                q.pats_per_user,
                "personal access tokens",
                "accounts.max_pats_per_user",
            ),
            Counted::Canvases(_) => (q.canvases, "canvases", "accounts.max_canvases"),
            Counted::Elements(_) => (q.elements, "elements", "accounts.max_elements"),
            Counted::Invites(_) => (q.invites, "pending invites", "accounts.max_invites"),
        }
    }

    fn count(self, c: &Conn) -> Result<u64> {
        let n: i64 = match self {
            Counted::Keys(team) | Counted::Tokens(team) => {
                let kind = if matches!(self, Counted::Keys(_)) {
                    "data_key"
                } else {
                    "events_token"
                };
                c.query_row(
                    "SELECT COUNT(*) FROM secrets WHERE team_id = ?1 AND kind = ?2 AND revoked_at IS NULL",
                    params![team, kind],
                    |r| r.get(0),
                )?
            }
            Counted::Pats(user) => c.query_row(
                "SELECT COUNT(*) FROM pats WHERE user_id = ?1 AND revoked_at IS NULL",
                params![user],
                |r| r.get(0),
            )?,
            Counted::Canvases(team) => c.query_row(
                "SELECT COUNT(*) FROM canvases WHERE team_id = ?1",
                params![team],
                |r| r.get(0),
            )?,
            Counted::Elements(team) => c.query_row(
                "SELECT COUNT(*) FROM elements e JOIN canvases c ON c.id = e.canvas_id
                 WHERE c.team_id = ?1",
                params![team],
                |r| r.get(0),
            )?,
            Counted::Invites(team) => c.query_row(
                "SELECT COUNT(*) FROM links WHERE team_id = ?1 AND kind = 'invite'
                 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ?2",
                params![team, now_ms()],
                |r| r.get(0),
            )?,
        };
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

impl Catalog {
    /// Sets the ceilings this handle enforces (a serving process, from `[accounts]`).
    pub fn set_quotas(&self, quotas: Quotas) {
        *self.quotas.write().unwrap_or_else(|p| p.into_inner()) = quotas;
    }

    fn quotas(&self) -> Quotas {
        *self.quotas.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Inside a write transaction, before inserting one more of `what`: `LimitReached` when the
    /// count is already at its ceiling.
    pub(super) fn ensure_room(&self, c: &Conn, what: Counted<'_>) -> Result<()> {
        let (ceiling, noun, key) = what.ceiling(&self.quotas());
        if ceiling == u64::MAX || what.count(c)? < ceiling {
            return Ok(());
        }
        Err(CatalogError::LimitReached(format!(
            "the limit of {ceiling} {noun} is reached ({key}); delete or revoke some first"
        )))
    }
}
