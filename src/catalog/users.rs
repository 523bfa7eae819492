//! Users of a team (SPEC §5.1): creation with an email, roles with the last-owner rule, removal,
//! password hashes (stored as given: the caller hashes), and the one-time links that set a
//! password or accept an invite.

use super::db::{Conn, DbError, DbResult, OptionalExtension, Row, params};
use serde::Serialize;

use super::admin::{Role, Team};
use super::{Catalog, CatalogError, Result, now_ms, secrets};

/// Prefix of one-time link secrets (set-password and invite links).
pub const LINK_PREFIX: &str = "stw_link_";

/// A user as shown to its team.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct User {
    /// `us_…`
    pub id: String,
    /// The team.
    #[serde(skip)]
    pub team_id: String,
    /// Sign-in email (lowercase); `None` for users created before accounts existed.
    pub email: Option<String>,
    /// Display name.
    pub name: String,
    /// Owner or member.
    pub role: Role,
    /// ms since epoch.
    pub created_at: i64,
}

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

pub(super) const USER_COLUMNS: &str = "u.id, u.team_id, u.email, u.name, u.role, u.created_at";

pub(super) fn user_row(r: &Row<'_>, at: usize) -> DbResult<User> {
    let role: String = r.get(at + 4)?;
    Ok(User {
        id: r.get(at)?,
        team_id: r.get(at + 1)?,
        email: r.get(at + 2)?,
        name: r.get(at + 3)?,
        role: if role == "owner" {
            Role::Owner
        } else {
            Role::Member
        },
        created_at: r.get(at + 5)?,
    })
}

/// The canonical form of an email: trimmed, lowercase; refused unless it looks like one.
pub fn normalize_email(email: &str) -> Result<String> {
    let e = email.trim().to_lowercase();
    let ok = e.len() <= 254
        && e.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && !domain.is_empty() && !domain.contains('@')
        })
        && !e.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(e)
    } else {
        Err(CatalogError::Invalid {
            field: "email",
            message: format!("{email:?} is not an email address"),
        })
    }
}

/// A display name: trimmed, 1 to 100 characters, no control characters.
pub fn normalize_name(name: &str) -> Result<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 100 || n.chars().any(char::is_control) {
        return Err(CatalogError::Invalid {
            field: "name",
            message: "a name is 1 to 100 characters, without control characters".into(),
        });
    }
    Ok(n.to_string())
}

fn email_taken(e: &DbError) -> bool {
    e.is_unique_violation("users", "email")
}

impl Catalog {
    /// Creates a user in a team (id or name). The email, when given, must not belong to another
    /// user.
    pub fn create_user(
        &self,
        team: &str,
        email: Option<&str>,
        name: &str,
        role: Role,
    ) -> Result<User> {
        let team = self.find_team(team)?;
        let email = email.map(normalize_email).transpose()?;
        let name = normalize_name(name)?;
        self.with(|c| insert_user(c, &team.id, email.as_deref(), &name, role, None))
    }

    /// A user who has not been removed.
    pub fn user(&self, id: &str) -> Result<Option<User>> {
        self.with(|c| {
            Ok(c.query_row(
                &format!(
                    "SELECT {USER_COLUMNS} FROM users u WHERE u.id = ?1 AND u.removed_at IS NULL"
                ),
                [id],
                |r| user_row(r, 0),
            )
            .optional()?)
        })
    }

    /// The user with this email (not removed) and its password hash, for signing in.
    pub fn user_for_sign_in(&self, email: &str) -> Result<Option<(User, Option<String>)>> {
        let Ok(email) = normalize_email(email) else {
            return Ok(None);
        };
        self.with(|c| {
            Ok(c.query_row(
                &format!(
                    "SELECT {USER_COLUMNS}, u.password_hash FROM users u
                     WHERE u.email = ?1 AND u.removed_at IS NULL"
                ),
                [email],
                |r| Ok((user_row(r, 0)?, r.get(6)?)),
            )
            .optional()?)
        })
    }

    /// Gives a user (found by id, email or name within a team) an email; for users created
    /// before accounts existed.
    pub fn set_user_email(&self, user_id: &str, email: &str) -> Result<User> {
        let email = normalize_email(email)?;
        self.with(|c| {
            let n = c
                .execute(
                    "UPDATE users SET email = ?1 WHERE id = ?2 AND removed_at IS NULL",
                    params![email, user_id],
                )
                .map_err(|e| taken_or(e, &email))?;
            if n == 0 {
                return Err(CatalogError::NotFound(format!("no user {user_id:?}")));
            }
            Ok(())
        })?;
        self.user(user_id)?
            .ok_or_else(|| CatalogError::NotFound(format!("no user {user_id:?}")))
    }

    /// Sets a user's password hash directly (the demo owner; people use a link).
    pub fn set_password_hash(&self, user_id: &str, phc: &str) -> Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE users SET password_hash = ?1 WHERE id = ?2",
                params![phc, user_id],
            )?;
            Ok(())
        })
    }

    /// The stored password hash of a user, if any.
    pub fn password_hash(&self, user_id: &str) -> Result<Option<String>> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT password_hash FROM users WHERE id = ?1",
                [user_id],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
        })
    }

    /// The team's users, owners first.
    pub fn list_members(&self, team_id: &str) -> Result<Vec<User>> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {USER_COLUMNS} FROM users u WHERE u.team_id = ?1 AND u.removed_at IS NULL
                 ORDER BY u.role = 'member', u.created_at, u.id"
            ))?;
            let rows = st.query_map([team_id], |r| user_row(r, 0))?;
            Ok(rows.collect::<DbResult<_>>()?)
        })
    }

    /// Changes a member's role; refuses to leave the team without an owner.
    pub fn set_role(&self, team_id: &str, user_id: &str, role: Role) -> Result<User> {
        self.with(|c| {
            let tx = c.write_transaction()?;
            let user = member(&tx, team_id, user_id)?;
            if user.role == Role::Owner && role == Role::Member {
                ensure_other_owner(&tx, team_id, user_id)?;
            }
            tx.execute(
                "UPDATE users SET role = ?1 WHERE id = ?2",
                params![role.as_str(), user_id],
            )?;
            tx.commit()?;
            Ok(User { role, ..user })
        })
    }

    /// Removes a member: it can no longer sign in, and its sessions and access tokens stop
    /// working at once. Keys it created stay (they belong to the team). Never the last owner.
    pub fn remove_member(&self, team_id: &str, user_id: &str) -> Result<User> {
        let user = self.with(|c| {
            let tx = c.write_transaction()?;
            let user = member(&tx, team_id, user_id)?;
            if user.role == Role::Owner {
                ensure_other_owner(&tx, team_id, user_id)?;
            }
            let now = now_ms();
            tx.execute(
                "UPDATE users SET removed_at = ?1 WHERE id = ?2",
                params![now, user_id],
            )?;
            tx.execute(
                "UPDATE sessions SET revoked_at = ?1 WHERE user_id = ?2 AND revoked_at IS NULL",
                params![now, user_id],
            )?;
            tx.execute(
                "UPDATE pats SET revoked_at = ?1 WHERE user_id = ?2 AND revoked_at IS NULL",
                params![now, user_id],
            )?;
            tx.commit()?;
            Ok(user)
        })?;
        Ok(user)
    }

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
        let found = self.with(|c| find_link(c, secret))?;
        let Some((id, team_id, kind, expires_at)) = found else {
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
            let Some((id, team_id, kind, _)) = find_link(&tx, secret)? else {
                return Err(CatalogError::Gone(
                    "this link was already used or has expired".into(),
                ));
            };
            tx.execute(
                "UPDATE links SET used_at = ?1 WHERE id = ?2",
                params![now_ms(), id],
            )?;
            let user_id = match kind {
                LinkKind::Password { user_id } => {
                    let n = tx.execute(
                        "UPDATE users SET password_hash = ?1 WHERE id = ?2 AND removed_at IS NULL",
                        params![password_hash, user_id],
                    )?;
                    if n == 0 {
                        return Err(CatalogError::Gone("this user was removed".into()));
                    }
                    user_id
                }
                LinkKind::Invite { email, role } => {
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
}

fn insert_user(
    c: &Conn,
    team_id: &str,
    email: Option<&str>,
    name: &str,
    role: Role,
    password_hash: Option<&str>,
) -> Result<User> {
    let id = secrets::new_id("us");
    let created_at = now_ms();
    c.execute(
        "INSERT INTO users (id, team_id, name, role, created_at, email, password_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            id,
            team_id,
            name,
            role.as_str(),
            created_at,
            email,
            password_hash
        ],
    )
    .map_err(|e| taken_or(e, email.unwrap_or_default()))?;
    Ok(User {
        id,
        team_id: team_id.into(),
        email: email.map(str::to_string),
        name: name.into(),
        role,
        created_at,
    })
}

fn taken_or(e: DbError, email: &str) -> CatalogError {
    if email_taken(&e) {
        CatalogError::Taken(format!("{email} already has an account"))
    } else {
        e.into()
    }
}

type LinkRow = (String, String, LinkKind, i64);

fn find_link(c: &Conn, secret: &str) -> Result<Option<LinkRow>> {
    if !secret.starts_with(LINK_PREFIX) {
        return Ok(None);
    }
    let row = c
        .query_row(
            "SELECT id, team_id, kind, user_id, email, role, expires_at FROM links
             WHERE hash = ?1 AND used_at IS NULL AND expires_at > ?2",
            params![secrets::hash(secret), now_ms()],
            |r| {
                let kind: String = r.get(2)?;
                let kind = if kind == "password" {
                    LinkKind::Password { user_id: r.get(3)? }
                } else {
                    LinkKind::Invite {
                        email: r.get(4)?,
                        role: if r.get::<String>(5)? == "owner" {
                            Role::Owner
                        } else {
                            Role::Member
                        },
                    }
                };
                Ok((r.get(0)?, r.get(1)?, kind, r.get(6)?))
            },
        )
        .optional()?;
    Ok(row)
}

fn member(tx: &Conn, team_id: &str, user_id: &str) -> Result<User> {
    tx.query_row(
        &format!(
            "SELECT {USER_COLUMNS} FROM users u WHERE u.id = ?1 AND u.team_id = ?2 AND u.removed_at IS NULL"
        ),
        [user_id, team_id],
        |r| user_row(r, 0),
    )
    .optional()?
    .ok_or_else(|| CatalogError::NotFound(format!("no member {user_id:?}")))
}

fn ensure_other_owner(tx: &Conn, team_id: &str, user_id: &str) -> Result<()> {
    let others: i64 = tx.query_row(
        "SELECT COUNT(*) FROM users WHERE team_id = ?1 AND role = 'owner' AND removed_at IS NULL AND id <> ?2",
        [team_id, user_id],
        |r| r.get(0),
    )?;
    if others == 0 {
        return Err(CatalogError::LastOwner);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(db: &crate::catalog::testdb::TestDb) -> (Catalog, String) {
        let c = db.open();
        let team = c.create_team("t").unwrap();
        (c, team)
    }

    #[test]
    fn a_team_always_keeps_an_owner() {
        for db in crate::catalog::testdb::each() {
            a_team_always_keeps_an_owner_on(&db);
        }
    }

    fn a_team_always_keeps_an_owner_on(db: &crate::catalog::testdb::TestDb) {
        let (c, team) = catalog(db);
        let a = c
            .create_user(&team, Some("A@x.io"), "a", Role::Owner)
            .unwrap();
        assert_eq!(a.email.as_deref(), Some("a@x.io"), "emails are lowercased");
        let b = c
            .create_user(&team, Some("b@x.io"), "b", Role::Member)
            .unwrap();
        assert!(matches!(
            c.set_role(&team, &a.id, Role::Member),
            Err(CatalogError::LastOwner)
        ));
        assert!(matches!(
            c.remove_member(&team, &a.id),
            Err(CatalogError::LastOwner)
        ));
        c.set_role(&team, &b.id, Role::Owner).unwrap();
        c.remove_member(&team, &a.id).unwrap();
        assert!(matches!(
            c.remove_member(&team, &b.id),
            Err(CatalogError::LastOwner)
        ));
        assert!(c.user(&a.id).unwrap().is_none(), "removed");
        // Its email is free again; another team's id reads as missing.
        c.create_user(&team, Some("a@x.io"), "a again", Role::Member)
            .unwrap();
        assert!(matches!(
            c.create_user(&team, Some("b@x.io"), "dup", Role::Member),
            Err(CatalogError::Taken(_))
        ));
        let other = c.create_team("u").unwrap();
        assert!(matches!(
            c.set_role(&other, &b.id, Role::Member),
            Err(CatalogError::NotFound(_))
        ));
    }

    #[test]
    fn links_work_once_and_expire() {
        for db in crate::catalog::testdb::each() {
            links_work_once_and_expire_on(&db);
        }
    }

    fn links_work_once_and_expire_on(db: &crate::catalog::testdb::TestDb) {
        let (c, team) = catalog(db);
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
}
