//! Team actions of signed-in users, each with its permission check (SPEC §5.1 table) and audit
//! entry: members and invites, data keys, events tokens, the events request, personal access
//! tokens, the audit log, and the one-time links that set a password or accept an invite.

use crate::catalog::{
    AuditEntry, AuditEvent, InviteInfo, Link, LinkKind, PatInfo, Role, SecretInfo, SecretKind,
    Session, Settled, User, normalize_email,
};

use super::{AccountError, Accounts, Caller, Result, password};

/// A secret's optional label: trimmed, at most 100 characters, `None` when empty.
fn label(name: Option<&str>) -> Result<Option<String>> {
    let Some(n) = name.map(str::trim).filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    if n.chars().count() > 100 || n.chars().any(char::is_control) {
        return Err(AccountError::Invalid {
            field: "name",
            message: "a name is at most 100 characters, without control characters".into(),
        });
    }
    Ok(Some(n.to_string()))
}

impl Accounts {
    /// The team's members (any user).
    pub fn members(&self, caller: &Caller) -> Result<Vec<User>> {
        Ok(self.catalog.list_members(&caller.team.id)?)
    }

    /// Invites `email` as `role` (owners); returns the invite URL, shown this once. Answered
    /// alike whether or not the email has an account anywhere (no enumeration across teams):
    /// a collision is told to whoever uses the link.
    pub fn invite(&self, caller: &Caller, email: &str, role: Role) -> Result<String> {
        caller.require_owner()?;
        let email = normalize_email(email)?;
        let (id, secret) = self.catalog.create_link(
            &caller.team.id,
            &LinkKind::Invite {
                email: email.clone(),
                role,
            },
            Some(&caller.user.id),
            self.link_ttl_ms(),
        )?;
        let detail = format!("{email} as {}", role.as_str());
        self.catalog.audit(&AuditEvent {
            detail: Some(&detail),
            ..caller.event("member.invite", Some(&id))
        })?;
        Ok(self.link_url(&secret))
    }

    /// The team's pending invites (owners).
    pub fn invites(&self, caller: &Caller) -> Result<Vec<InviteInfo>> {
        caller.require_owner()?;
        Ok(self.catalog.list_invites(&caller.team.id)?)
    }

    /// Revokes a pending invite of the team (owners); its link stops working at once.
    pub fn revoke_invite(&self, caller: &Caller, id: &str) -> Result<()> {
        caller.require_owner()?;
        self.catalog.revoke_invite(&caller.team.id, id)?;
        self.catalog
            .audit(&caller.event("member.invite_revoke", Some(id)))?;
        Ok(())
    }

    /// Changes a member's role (owners); never leaves the team without an owner. The member's
    /// sessions end (they sign in again under the new role).
    pub fn set_role(&self, caller: &Caller, user_id: &str, role: Role) -> Result<User> {
        caller.require_owner()?;
        let user = self.catalog.set_role(&caller.team.id, user_id, role)?;
        self.catalog.audit(&AuditEvent {
            detail: Some(role.as_str()),
            ..caller.event("member.role", Some(user_id))
        })?;
        Ok(user)
    }

    /// Removes a member (owners); its sessions and tokens stop working at once.
    pub fn remove_member(&self, caller: &Caller, user_id: &str) -> Result<User> {
        caller.require_owner()?;
        let user = self.catalog.remove_member(&caller.team.id, user_id)?;
        self.catalog.audit(&AuditEvent {
            detail: user.email.as_deref(),
            ..caller.event("member.remove", Some(user_id))
        })?;
        Ok(user)
    }

    /// The team's data keys or events tokens (owners), revoked ones left out.
    pub fn secrets(&self, caller: &Caller, kind: SecretKind) -> Result<Vec<SecretInfo>> {
        caller.require_owner()?;
        let mut list = self.catalog.list_secrets(kind, &caller.team.id)?;
        list.retain(|s| s.revoked_at.is_none());
        Ok(list)
    }

    /// Creates a data key or events token (owners; tokens only while events are enabled).
    /// Returns its listing row and the secret, which is never available again.
    pub fn create_secret(
        &self,
        caller: &Caller,
        kind: SecretKind,
        name: Option<&str>,
    ) -> Result<(SecretInfo, String)> {
        caller.require_owner()?;
        if kind == SecretKind::EventsToken && !caller.team.events_enabled {
            return Err(AccountError::EventsDisabled);
        }
        let name = label(name)?;
        let (info, secret) = self.catalog.create_named_secret(
            kind,
            &caller.team.id,
            &caller.user.id,
            name.as_deref(),
        )?;
        self.catalog
            .audit(&caller.event(action(kind, "create"), Some(&info.id)))?;
        Ok((info, secret))
    }

    /// Revokes a data key or events token of the caller's team (owners); every node refuses it
    /// once the returned [`Settled`] has passed (the caller answers then).
    pub fn revoke_secret(&self, caller: &Caller, kind: SecretKind, id: &str) -> Result<Settled> {
        caller.require_owner()?;
        let settled = self
            .catalog
            .revoke_team_secret(kind, Some(&caller.team.id), id)?;
        self.catalog
            .audit(&caller.event(action(kind, "revoke"), Some(id)))?;
        Ok(settled)
    }

    /// Asks the operator to enable events (owners). Returns (request id, whether it is new);
    /// `EventsEnabled` when there is nothing to ask for.
    pub fn request_events(&self, caller: &Caller) -> Result<(String, bool)> {
        caller.require_owner()?;
        if caller.team.events_enabled {
            return Err(AccountError::EventsEnabled);
        }
        let (id, new) = self
            .catalog
            .request_events(&caller.team.id, &caller.user.id)?;
        if new {
            self.catalog
                .audit(&caller.event("events.request", Some(&id)))?;
        }
        Ok((id, new))
    }

    /// Whether the team has an open events request.
    pub fn events_requested(&self, caller: &Caller) -> Result<bool> {
        Ok(self.catalog.events_requested(&caller.team.id)?)
    }

    /// The caller's own personal access tokens.
    pub fn pats(&self, caller: &Caller) -> Result<Vec<PatInfo>> {
        Ok(self.catalog.list_pats(&caller.user.id)?)
    }

    /// Creates a personal access token for the caller; the secret is shown this once.
    pub fn create_pat(&self, caller: &Caller, name: Option<&str>) -> Result<(PatInfo, String)> {
        let name = label(name)?;
        let (info, secret) = self.catalog.create_pat(&caller.user.id, name.as_deref())?;
        self.catalog
            .audit(&caller.event("pat.create", Some(&info.id)))?;
        Ok((info, secret))
    }

    /// Revokes one of the caller's tokens; another user's id is `NotFound`.
    pub fn revoke_pat(&self, caller: &Caller, id: &str) -> Result<()> {
        self.catalog.revoke_pat(&caller.user.id, id)?;
        self.catalog.audit(&caller.event("pat.revoke", Some(id)))?;
        Ok(())
    }

    /// The team's audit log, newest first (owners).
    pub fn audit_log(
        &self,
        caller: &Caller,
        limit: u32,
        before: Option<i64>,
    ) -> Result<Vec<AuditEntry>> {
        caller.require_owner()?;
        Ok(self
            .catalog
            .audit_log(&caller.team.id, limit.clamp(1, 500), before)?)
    }

    /// The one-time link behind `secret`, if still usable.
    pub fn link(&self, secret: &str) -> Result<Link> {
        self.catalog
            .link(secret)?
            .ok_or_else(|| AccountError::Gone("this link was already used or has expired".into()))
    }

    /// Uses a one-time link: sets the password (and, for an invite, creates the user named
    /// `name`), then signs the user in. A set-password link ends every other session and
    /// revokes every personal access token of the user first. Returns the new session and its
    /// cookie value.
    pub async fn use_link(
        &self,
        secret: &str,
        name: Option<&str>,
        new_password: &str,
        address: Option<&str>,
    ) -> Result<(Session, String)> {
        if let Some(why) = password::weakness(new_password) {
            return Err(AccountError::Invalid {
                field: "password",
                message: why,
            });
        }
        let link = self.link(secret)?;
        let phc = self.hashers.hash(new_password).await?;
        let user = self.catalog.use_link(secret, name, &phc)?;
        let action = match link.kind {
            LinkKind::Password { .. } => "user.set_password",
            LinkKind::Invite { .. } => "member.join",
        };
        self.catalog.audit(&AuditEvent {
            team_id: Some(&user.team_id),
            actor_id: Some(&user.id),
            actor_email: user.email.as_deref(),
            action,
            target: Some(&link.id),
            address,
            detail: Some(user.role.as_str()),
        })?;
        self.start_session(&user, &phc, address)
    }
}

fn action(kind: SecretKind, verb: &str) -> &'static str {
    match (kind, verb) {
        (SecretKind::DataKey, "create") => "key.create",
        (SecretKind::DataKey, _) => "key.revoke",
        (SecretKind::EventsToken, "create") => "token.create",
        (SecretKind::EventsToken, _) => "token.revoke",
    }
}
