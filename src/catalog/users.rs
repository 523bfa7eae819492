//! Users of a team (SPEC §5.1): creation with an email, roles with the last-owner rule (a role
//! change ends the user's sessions; an owner demoted or removed loses their pending invites),
//! removal, and password hashes (stored as given: the caller
//! hashes). The one-time links that set a password or accept an invite are in `links`.

use super::db::{Conn, DbError, DbResult, OptionalExtension, Row, params};
use serde::Serialize;

use super::admin::Role;
use super::{Catalog, CatalogError, Result, now_ms, secrets};

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
            if user.role != role {
                // Whoever holds a session signs in again under the new role, and an owner who
                // is no longer one has no pending invites (they would never work again).
                end_sessions_of(&tx, user_id, now_ms())?;
                if role == Role::Member {
                    revoke_invites_of(&tx, user_id, now_ms())?;
                }
            }
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
            end_sessions_of(&tx, user_id, now)?;
            revoke_pats_of(&tx, user_id, now)?;
            revoke_invites_of(&tx, user_id, now)?;
            tx.commit()?;
            Ok(user)
        })?;
        Ok(user)
    }
}

/// Ends every live session of `user_id` (inside the caller's transaction, if any).
pub(super) fn end_sessions_of(c: &Conn, user_id: &str, now: i64) -> DbResult<usize> {
    c.execute(
        "UPDATE sessions SET revoked_at = ?1 WHERE user_id = ?2 AND revoked_at IS NULL",
        params![now, user_id],
    )
}

/// Revokes every pending invite `user_id` sent (inside the caller's transaction).
pub(super) fn revoke_invites_of(c: &Conn, user_id: &str, now: i64) -> DbResult<usize> {
    c.execute(
        "UPDATE links SET revoked_at = ?1 WHERE created_by = ?2 AND kind = 'invite'
         AND used_at IS NULL AND revoked_at IS NULL",
        params![now, user_id],
    )
}

/// Revokes every live personal access token of `user_id` (inside the caller's transaction).
pub(super) fn revoke_pats_of(c: &Conn, user_id: &str, now: i64) -> DbResult<usize> {
    c.execute(
        "UPDATE pats SET revoked_at = ?1 WHERE user_id = ?2 AND revoked_at IS NULL",
        params![now, user_id],
    )
}

pub(super) fn insert_user(
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

    #[test]
    fn a_team_always_keeps_an_owner() {
        for db in crate::catalog::testdb::each() {
            a_team_always_keeps_an_owner_on(&db);
        }
    }

    fn a_team_always_keeps_an_owner_on(db: &crate::catalog::testdb::TestDb) {
        let (c, team) = db.open_with_team();
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
}
