//! One-time links (SPEC §5.1, §5.2): set-password links (the operator's `admin user create/reset`)
//! and invites (owners). Only a link's SHA-256 is kept. Using a set-password link ends every
//! session and revokes every personal access token of its user; an invite works only while its
//! creator may still invite, and owners list and revoke the pending ones.

use super::db::{Conn, OptionalExtension, params};
use serde::Serialize;

use super::admin::{Role, Team};
use super::quotas::Counted;
use super::users::{User, end_sessions_of, insert_user, normalize_name, revoke_pats_of};
use super::{Catalog, CatalogError, Result, now_ms, secrets};

/// Prefix of one-time link secrets (set-password and invite links).
pub const LINK_PREFIX: &str = "stw_link_";

/// What a one-time link does when used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkKind {
    /// Sets the password of an existing user.
    Password {
        /// The user.
        user_id: String,
    },
    /// Creates a user of the team with this email and role.
    Invite {
        /// Lowercase email.
        email: String,
        /// Role given on acceptance.
        role: Role,
    },
}

/// A link that is still usable.
#[derive(Debug, Clone)]
pub struct Link {
    /// `ln_…`
    pub id: String,
    /// The team it belongs to.
    pub team: Team,
    /// What it does.
    pub kind: LinkKind,
    /// For a password link: the user's email and name.
    pub user: Option<User>,
    /// ms since epoch.
    pub expires_at: i64,
}

/// A pending invite as owners see it (never the link).
#[derive(Debug, Clone, Serialize)]
pub struct InviteInfo {
    /// `ln_…`
    pub id: String,
    /// The invited address.
    pub email: String,
    /// The role the invite gives.
    pub role: Role,
    /// The owner who sent it (`None`: the operator).
    pub created_by: Option<String>,
    /// ms since epoch.
    pub created_at: i64,
    /// ms since epoch.
    pub expires_at: i64,
}

impl Catalog {
    /// Creates a one-time link valid for `ttl_ms`; returns (id, secret). Only the secret's hash
    /// is kept. Creating a password link retires the user's earlier unused ones.
    pub fn create_link(
        &self,
        team_id: &str,
        kind: &LinkKind,
        created_by: Option<&str>,
        ttl_ms: i64,
    ) -> Result<(String, String)> {
        let secret = secrets::new_secret(LINK_PREFIX);
        let id = secrets::new_id("ln");
        let now = now_ms();
        self.with(|c| {
            let tx = c.transaction()?;
            let (kind_s, user_id, email, role) = match kind {
                LinkKind::Password { user_id } => {
                    tx.execute(
                        "UPDATE links SET used_at = ?1 WHERE user_id = ?2 AND kind = 'password' AND used_at IS NULL",
                        params![now, user_id],
                    )?;
                    ("password", Some(user_id.as_str()), None, None)
                }
                LinkKind::Invite { email, role } => {
                    self.ensure_room(&tx, Counted::Invites(team_id))?;
                    ("invite", None, Some(email.as_str()), Some(role.as_str()))
                }
            };
            tx.execute(
                "INSERT INTO links (id, hash, kind, team_id, user_id, email, role, created_by, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    id,
                    secrets::hash(&secret),
                    kind_s,
                    team_id,
                    user_id,
                    email,
                    role,
                    created_by,
                    now,
                    now.saturating_add(ttl_ms)
                ],
            )?;
            tx.commit()?;
            Ok(())
        })?;
        Ok((id, secret))
    }

    /// The link behind `secret` if it is unused and unexpired.
    pub fn link(&self, secret: &str) -> Result<Option<Link>> {
        let found = self.with(|c| {
            let Some(link) = find_link(c, secret)? else {
                return Ok(None);
            };
            if let LinkKind::Invite { .. } = &link.kind
                && ensure_may_invite(c, &link.team_id, link.created_by.as_deref()).is_err()
            {
                return Ok(None);
            }
            Ok(Some(link))
        })?;
        let Some(LinkRow {
            id,
            team_id,
            kind,
            expires_at,
            ..
        }) = found
        else {
            return Ok(None);
        };
        let team = self.find_team(&team_id)?;
        let user = match &kind {
            LinkKind::Password { user_id } => match self.user(user_id)? {
                Some(u) => Some(u),
                None => return Ok(None),
            },
            LinkKind::Invite { .. } => None,
        };
        Ok(Some(Link {
            id,
            team,
            kind,
            user,
            expires_at,
        }))
    }

    /// Uses a link once: sets the user's password (password link) or creates the invited user
    /// with `name` and the password (invite). `Gone` if the link was used or expired meanwhile.
    pub fn use_link(&self, secret: &str, name: Option<&str>, password_hash: &str) -> Result<User> {
        let name = name.map(normalize_name).transpose()?;
        let user_id = self.with(|c| {
            let tx = c.write_transaction()?;
            let Some(link) = find_link(&tx, secret)? else {
                return Err(CatalogError::Gone(
                    "this link was already used or has expired".into(),
                ));
            };
            let now = now_ms();
            tx.execute(
                "UPDATE links SET used_at = ?1 WHERE id = ?2",
                params![now, link.id],
            )?;
            let team_id = link.team_id;
            let user_id = match link.kind {
                LinkKind::Password { user_id } => {
                    let n = tx.execute(
                        "UPDATE users SET password_hash = ?1 WHERE id = ?2 AND removed_at IS NULL",
                        params![password_hash, user_id],
                    )?;
                    if n == 0 {
                        return Err(CatalogError::Gone("this user was removed".into()));
                    }
                    // A new password ends whatever the old one (or a thief of it) opened.
                    end_sessions_of(&tx, &user_id, now)?;
                    revoke_pats_of(&tx, &user_id, now)?;
                    user_id
                }
                LinkKind::Invite { email, role } => {
                    ensure_may_invite(&tx, &team_id, link.created_by.as_deref())?;
                    let name = name
                        .clone()
                        .unwrap_or_else(|| email.split('@').next().unwrap_or("member").to_string());
                    insert_user(
                        &tx,
                        &team_id,
                        Some(&email),
                        &name,
                        role,
                        Some(password_hash),
                    )?
                    .id
                }
            };
            tx.commit()?;
            Ok(user_id)
        })?;
        self.user(&user_id)?
            .ok_or_else(|| CatalogError::NotFound(format!("no user {user_id:?}")))
    }

    /// The team's pending invites: unused, unrevoked, unexpired, whose creator may still invite.
    pub fn list_invites(&self, team_id: &str) -> Result<Vec<InviteInfo>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT l.id, l.email, l.role, l.created_by, l.created_at, l.expires_at FROM links l
                 LEFT JOIN users u ON u.id = l.created_by
                 WHERE l.team_id = ?1 AND l.kind = 'invite' AND l.used_at IS NULL
                   AND l.revoked_at IS NULL AND l.expires_at > ?2
                   AND (l.created_by IS NULL
                        OR (u.team_id = ?1 AND u.removed_at IS NULL AND u.role = 'owner'))
                 ORDER BY l.created_at, l.id",
            )?;
            let rows = st.query_map(params![team_id, now_ms()], |r| {
                Ok(InviteInfo {
                    id: r.get(0)?,
                    email: r.get(1)?,
                    role: role_of(&r.get::<String>(2)?),
                    created_by: r.get(3)?,
                    created_at: r.get(4)?,
                    expires_at: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<super::db::DbResult<_>>()?)
        })
    }

    /// Revokes a pending invite of the team; `NotFound` for anyone else's or a used one.
    pub fn revoke_invite(&self, team_id: &str, id: &str) -> Result<()> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE links SET revoked_at = ?1 WHERE id = ?2 AND team_id = ?3 AND kind = 'invite'
                 AND used_at IS NULL AND revoked_at IS NULL",
                params![now_ms(), id, team_id],
            )?;
            if n == 0 {
                return Err(CatalogError::NotFound(format!("no pending invite {id:?}")));
            }
            Ok(())
        })
    }

    /// A password reset by the operator: the old password stops working, and every session and
    /// personal access token of the user ends — whoever held them (the user, or a thief of the
    /// old password) must sign in again with the password the new link sets.
    pub fn reset_access(&self, user_id: &str) -> Result<()> {
        self.with(|c| {
            let tx = c.write_transaction()?;
            let now = now_ms();
            tx.execute(
                "UPDATE users SET password_hash = NULL WHERE id = ?1",
                params![user_id],
            )?;
            end_sessions_of(&tx, user_id, now)?;
            revoke_pats_of(&tx, user_id, now)?;
            tx.commit()?;
            Ok(())
        })
    }
}

/// A usable link as stored.
struct LinkRow {
    id: String,
    team_id: String,
    kind: LinkKind,
    created_by: Option<String>,
    expires_at: i64,
}

fn role_of(text: &str) -> Role {
    if text == "owner" {
        Role::Owner
    } else {
        Role::Member
    }
}

fn find_link(c: &Conn, secret: &str) -> Result<Option<LinkRow>> {
    if !secret.starts_with(LINK_PREFIX) {
        return Ok(None);
    }
    let row = c
        .query_row(
            "SELECT id, team_id, kind, user_id, email, role, expires_at, created_by FROM links
             WHERE hash = ?1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ?2",
            params![secrets::hash(secret), now_ms()],
            |r| {
                let kind: String = r.get(2)?;
                let kind = if kind == "password" {
                    LinkKind::Password { user_id: r.get(3)? }
                } else {
                    LinkKind::Invite {
                        email: r.get(4)?,
                        role: role_of(&r.get::<String>(5)?),
                    }
                };
                Ok(LinkRow {
                    id: r.get(0)?,
                    team_id: r.get(1)?,
                    kind,
                    expires_at: r.get(6)?,
                    created_by: r.get(7)?,
                })
            },
        )
        .optional()?;
    Ok(row)
}

/// An invite works only while whoever made it may still invite: still a member of the team, and
/// an owner. Invites the operator made (no creator) always may.
fn ensure_may_invite(c: &Conn, team_id: &str, created_by: Option<&str>) -> Result<()> {
    let Some(creator) = created_by else {
        return Ok(());
    };
    let still_owner: Option<String> = c
        .query_row(
            "SELECT id FROM users WHERE id = ?1 AND team_id = ?2 AND removed_at IS NULL AND role = 'owner'",
            [creator, team_id],
            |r| r.get(0),
        )
        .optional()?;
    match still_owner {
        Some(_) => Ok(()),
        None => Err(CatalogError::Gone(
            "this invite is no longer valid: whoever sent it may no longer invite".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_work_once_and_expire() {
        for db in crate::catalog::testdb::each() {
            links_work_once_and_expire_on(&db);
        }
    }

    fn links_work_once_and_expire_on(db: &crate::catalog::testdb::TestDb) {
        let (c, team) = db.open_with_team();
        let invite = LinkKind::Invite {
            email: "new@x.io".into(),
            role: Role::Member,
        };
        let (_, secret) = c.create_link(&team, &invite, None, 60_000).unwrap();
        assert!(c.link(&secret).unwrap().is_some());
        let user = c.use_link(&secret, Some("New"), "$phc").unwrap();
        assert_eq!((user.name.as_str(), user.role), ("New", Role::Member));
        assert!(c.link(&secret).unwrap().is_none());
        assert!(matches!(
            c.use_link(&secret, None, "$phc"),
            Err(CatalogError::Gone(_))
        ));
        let (_, expired) = c.create_link(&team, &invite, None, -1).unwrap();
        assert!(matches!(
            c.use_link(&expired, None, "$phc"),
            Err(CatalogError::Gone(_))
        ));
        // A newer set-password link retires the older one.
        let pw = LinkKind::Password {
            user_id: user.id.clone(),
        };
        let (_, first) = c.create_link(&team, &pw, None, 60_000).unwrap();
        let (_, second) = c.create_link(&team, &pw, None, 60_000).unwrap();
        assert!(c.link(&first).unwrap().is_none());
        c.use_link(&second, None, "$new").unwrap();
        assert_eq!(c.password_hash(&user.id).unwrap().as_deref(), Some("$new"));
        assert!(c.link("stw_link_nonsense").unwrap().is_none());
    }

    #[test]
    fn a_password_link_ends_access_and_an_invite_needs_its_creators_rights() {
        for db in crate::catalog::testdb::each() {
            a_password_link_ends_access_and_an_invite_needs_its_creators_rights_on(&db);
        }
    }

    fn a_password_link_ends_access_and_an_invite_needs_its_creators_rights_on(
        db: &crate::catalog::testdb::TestDb,
    ) {
        let (c, team) = db.open_with_team();
        let limits = crate::catalog::SessionLimits {
            idle_ms: 60_000,
            absolute_ms: 60_000,
        };
        let owner = c
            .create_user(&team, Some("o@x.io"), "o", Role::Owner)
            .unwrap();
        let (_, cookie) = c.create_session(&owner.id, None).unwrap();
        let (_, pat) = c.create_pat(&owner.id, None).unwrap();
        let pw = LinkKind::Password {
            user_id: owner.id.clone(),
        };
        let (_, link) = c.create_link(&team, &pw, None, 60_000).unwrap();
        assert!(c.session(&cookie, limits).unwrap().is_some());
        c.use_link(&link, None, "$phc").unwrap();
        assert!(
            c.session(&cookie, limits).unwrap().is_none(),
            "session ended"
        );
        assert!(c.pat(&pat).unwrap().is_none(), "token revoked");

        // An invite from an owner who is then demoted (or removed) no longer works.
        let other = c
            .create_user(&team, Some("b@x.io"), "b", Role::Owner)
            .unwrap();
        let invite = LinkKind::Invite {
            email: "n@x.io".into(),
            role: Role::Owner,
        };
        let (id, sent) = c
            .create_link(&team, &invite, Some(&other.id), 60_000)
            .unwrap();
        assert_eq!(c.list_invites(&team).unwrap()[0].id, id);
        c.set_role(&team, &other.id, Role::Member).unwrap();
        assert!(c.link(&sent).unwrap().is_none());
        assert!(c.list_invites(&team).unwrap().is_empty());
        assert!(matches!(
            c.use_link(&sent, None, "$phc"),
            Err(CatalogError::Gone(_))
        ));
        // The owner's own invite works until revoked.
        let (id, mine) = c
            .create_link(&team, &invite, Some(&owner.id), 60_000)
            .unwrap();
        c.revoke_invite(&team, &id).unwrap();
        assert!(c.link(&mine).unwrap().is_none());
        assert!(matches!(
            c.revoke_invite(&team, &id),
            Err(CatalogError::NotFound(_))
        ));
    }
}
