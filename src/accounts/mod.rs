//! Owners and members serving themselves (SPEC §5.1): signing in and out, who a request is
//! (session cookie or personal access token), the CSRF rule, and — in [`manage`] — every team
//! action with its permission check and audit entry. The HTTP API and the settings page are thin
//! layers over this module; neither checks a permission itself.

pub mod manage;
pub mod password;
pub mod sql_elements;
pub mod throttle;
pub mod workspace;

use std::sync::Arc;
use std::time::Duration;

use crate::catalog::{AuditEvent, Catalog, CatalogError, Role, Session, SessionLimits, Team, User};
use crate::config::AccountsConfig;

/// Why an account action was refused. Each maps to one status and code of the API.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// No valid session or token (401 `not_signed_in`).
    #[error("sign in first")]
    NotSignedIn,
    /// Wrong email or password (401 `invalid_credentials`), the same for unknown emails.
    #[error("wrong email or password")]
    InvalidCredentials,
    /// Too many failed sign-ins (429 `too_many_attempts`).
    #[error("too many failed sign-ins; try again later")]
    TooManyAttempts(Duration),
    /// Every password-hashing slot stayed busy (503 `overloaded`, `Retry-After`).
    #[error("too many sign-ins at once; try again in a moment")]
    Busy,
    /// A per-team (or per-user) count would pass its configured limit (409 `limit_reached`).
    #[error("{0}")]
    LimitReached(String),
    /// Missing or wrong CSRF token, or a cross-site `Origin` (403 `csrf`).
    #[error("missing or invalid CSRF token")]
    Csrf,
    /// The caller's role may not do this (403 `forbidden`).
    #[error("{0}")]
    Forbidden(&'static str),
    /// Events are not enabled for the team (403 `events_disabled`).
    #[error(
        "events are not enabled for this team; ask the operator (request access on the settings page)"
    )]
    EventsDisabled,
    /// Events are already enabled: there is nothing to request (409 `events_enabled`).
    #[error("events are already enabled for this team")]
    EventsEnabled,
    /// Missing, or another team's (404 `not_found`).
    #[error("{0}")]
    NotFound(String),
    /// Would leave the team without an owner (409 `last_owner`).
    #[error("a team must keep at least one owner")]
    LastOwner,
    /// The email already has an account (409 `email_taken`).
    #[error("{0}")]
    Taken(String),
    /// A link was used or expired (410 `link_expired`).
    #[error("{0}")]
    Gone(String),
    /// A value is not acceptable (400 `invalid_request`, with the field).
    #[error("{message}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// The catalog failed (503).
    #[error("catalog: {0}")]
    Catalog(CatalogError),
    /// An SQL element's query was refused (400 `invalid_sql`, …).
    #[error(transparent)]
    Sql(#[from] crate::sql::SqlError),
}

impl From<password::Busy> for AccountError {
    fn from(_: password::Busy) -> Self {
        AccountError::Busy
    }
}

impl From<CatalogError> for AccountError {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::NotFound(m) => AccountError::NotFound(m),
            CatalogError::LastOwner => AccountError::LastOwner,
            CatalogError::Taken(m) => AccountError::Taken(m),
            CatalogError::Gone(m) => AccountError::Gone(m),
            CatalogError::Invalid { field, message } => AccountError::Invalid { field, message },
            CatalogError::Refused(m) => AccountError::Invalid {
                field: "",
                message: m,
            },
            CatalogError::LimitReached(m) => AccountError::LimitReached(m),
            other => AccountError::Catalog(other),
        }
    }
}

/// Result alias.
pub type Result<T> = std::result::Result<T, AccountError>;

/// Most bytes in an email address (RFC 5321's path limit, as `normalize_email` enforces).
const MAX_EMAIL_BYTES: usize = 254;

/// How a caller proved who it is.
#[derive(Debug, Clone)]
pub enum Via {
    /// A session cookie; changes need its CSRF token.
    Session {
        /// `se_…`
        id: String,
        /// The session's CSRF token.
        csrf: String,
        /// What the session's shown-once messages are sealed under.
        flash_key: crate::catalog::secrets::FlashKey,
    },
    /// A personal access token (no CSRF: it is never sent by a browser on its own).
    Pat {
        /// `pat_…`
        id: String,
    },
}

/// A signed-in user making a request.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The user.
    pub user: User,
    /// The user's team.
    pub team: Team,
    /// Session or token.
    pub via: Via,
    /// Client address, for the audit log.
    pub address: Option<String>,
}

impl Caller {
    /// Refuses members.
    pub fn require_owner(&self) -> Result<()> {
        if self.user.role == Role::Owner {
            Ok(())
        } else {
            Err(AccountError::Forbidden(
                "only an owner of the team may do this",
            ))
        }
    }

    /// The session's CSRF token, when signed in with a cookie.
    pub fn csrf(&self) -> Option<&str> {
        match &self.via {
            Via::Session { csrf, .. } => Some(csrf),
            Via::Pat { .. } => None,
        }
    }

    /// For a cookie-authenticated change: `token` must be the session's CSRF token (compared in
    /// constant time). Token callers pass.
    pub fn check_csrf(&self, token: Option<&str>) -> Result<()> {
        match self.csrf() {
            None => Ok(()),
            Some(expected) => match token {
                Some(t) if constant_time_eq(t.as_bytes(), expected.as_bytes()) => Ok(()),
                _ => Err(AccountError::Csrf),
            },
        }
    }

    /// An audit entry by this caller.
    pub fn event<'a>(&'a self, action: &'a str, target: Option<&'a str>) -> AuditEvent<'a> {
        AuditEvent {
            team_id: Some(&self.team.id),
            actor_id: Some(&self.user.id),
            actor_email: self.user.email.as_deref(),
            action,
            target,
            address: self.address.as_deref(),
            detail: None,
        }
    }
}

/// Compares without an early exit.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The accounts service: the catalog, the expiry rules, the sign-in throttle and the bounded
/// password hashers.
pub struct Accounts {
    /// The catalog.
    pub catalog: Arc<Catalog>,
    config: AccountsConfig,
    throttle: throttle::Throttle,
    hashers: password::Hashers,
    /// `{public_url}`, for links.
    public_url: String,
    /// `{app_url}`, for share URLs.
    app_url: String,
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounts").finish_non_exhaustive()
    }
}

impl Accounts {
    /// The service over `catalog`; links are built on `public_url`, share URLs on `app_url`
    /// (`public_url` when empty).
    pub fn new(
        catalog: Arc<Catalog>,
        config: AccountsConfig,
        public_url: &str,
        app_url: &str,
    ) -> Accounts {
        let public_url = public_url.trim_end_matches('/').to_string();
        let app_url = match app_url.trim_end_matches('/') {
            "" => public_url.clone(),
            a => a.to_string(),
        };
        Accounts {
            catalog,
            throttle: throttle::Throttle::new(config.lockout_max.0),
            hashers: password::Hashers::new(config.hash_concurrency, config.hash_wait.0),
            config,
            public_url,
            app_url,
        }
    }

    /// The base URL clients reach this service at.
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    /// Session expiry rules.
    pub fn limits(&self) -> SessionLimits {
        SessionLimits {
            idle_ms: self.config.session_idle.0.as_millis() as i64,
            absolute_ms: self.config.session_max.0.as_millis() as i64,
        }
    }

    /// `Max-Age` of the session cookie, in seconds.
    pub fn cookie_max_age(&self) -> u64 {
        self.config.session_max.0.as_secs()
    }

    /// The URL of a one-time link.
    pub fn link_url(&self, secret: &str) -> String {
        format!("{}/invite/{secret}", self.public_url)
    }

    /// Link lifetime in ms.
    pub fn link_ttl_ms(&self) -> i64 {
        self.config.link_ttl.0.as_millis() as i64
    }

    /// Signs in: throttled per email and per address (the attempt counted before the password
    /// is checked), hashed within the hashers' bound, answered alike for unknown emails and wrong
    /// passwords, audited either way. The session starts only if the password is still the one
    /// checked (a reset committed meanwhile wins). `replaces` is the session cookie the request
    /// came with, if any: a successful sign-in ends it (the session id rotates). Returns the new
    /// session and its cookie value.
    pub async fn sign_in(
        &self,
        email: &str,
        password: &str,
        address: Option<&str>,
        replaces: Option<&str>,
    ) -> Result<(Session, String)> {
        // No account has an email longer than an email can be, nor a password longer than one
        // may be set: such an attempt is answered at once, before it is counted or waits for a
        // hashing slot holding its body.
        let email = email.trim();
        if email.len() > MAX_EMAIL_BYTES || password.len() > password::MAX_LEN {
            return Err(AccountError::InvalidCredentials);
        }
        let email_key = throttle::key("email", &email.to_lowercase());
        let addr_key = address.map(|a| throttle::key("addr", a));
        let mut keys = vec![(email_key, self.config.max_failures_per_account)];
        if let Some(k) = addr_key {
            keys.push((k, self.config.max_failures_per_address));
        }
        if let Err(wait) = self.throttle.attempt(&self.catalog, &keys)? {
            return Err(AccountError::TooManyAttempts(
                wait.max(Duration::from_secs(1)),
            ));
        }
        let found = self.catalog.user_for_sign_in(email)?;
        let phc = found.as_ref().and_then(|(_, h)| h.clone());
        let ok = self.hashers.verify(password, phc.clone()).await?;
        let started = match (&found, &phc) {
            (Some((user, _)), Some(phc)) if ok => self
                .catalog
                .create_session_for_password(&user.id, phc, address)?
                .map(|s| (user.clone(), s)),
            _ => None,
        };
        let Some((user, (session, secret))) = started else {
            let user = found.map(|(u, _)| u);
            self.catalog.audit(&AuditEvent {
                team_id: user.as_ref().map(|u| u.team_id.as_str()),
                actor_id: user.as_ref().map(|u| u.id.as_str()),
                actor_email: Some(email),
                action: "session.sign_in_failed",
                address,
                ..Default::default()
            })?;
            return Err(AccountError::InvalidCredentials);
        };
        self.throttle
            .succeed(&self.catalog, &email_key, addr_key.as_slice())?;
        if let Some(old) = replaces {
            self.catalog.revoke_session_by_secret(old)?;
        }
        self.audit_sign_in(&user, &session, address)?;
        Ok((session, secret))
    }

    /// Starts a session for `user`, whose password is now `password_hash` (a link just set
    /// it), and audits the sign-in; returns it and its cookie value.
    fn start_session(
        &self,
        user: &User,
        password_hash: &str,
        address: Option<&str>,
    ) -> Result<(Session, String)> {
        let (session, secret) = self
            .catalog
            .create_session_for_password(&user.id, password_hash, address)?
            .ok_or(AccountError::NotSignedIn)?;
        self.audit_sign_in(user, &session, address)?;
        Ok((session, secret))
    }

    fn audit_sign_in(&self, user: &User, session: &Session, address: Option<&str>) -> Result<()> {
        self.catalog.audit(&AuditEvent {
            team_id: Some(&user.team_id),
            actor_id: Some(&user.id),
            actor_email: user.email.as_deref(),
            action: "session.sign_in",
            target: Some(&session.id),
            address,
            detail: None,
        })?;
        Ok(())
    }

    /// The caller behind a session cookie value.
    pub fn from_session(&self, cookie: &str, address: Option<String>) -> Result<Caller> {
        let s = self
            .catalog
            .session(cookie, self.limits())?
            .ok_or(AccountError::NotSignedIn)?;
        Ok(Caller {
            user: s.user,
            team: s.team,
            via: Via::Session {
                id: s.id,
                csrf: s.csrf,
                flash_key: s.flash_key,
            },
            address,
        })
    }

    /// The caller behind a personal access token.
    pub fn from_pat(&self, token: &str, address: Option<String>) -> Result<Caller> {
        let p = self.catalog.pat(token)?.ok_or(AccountError::NotSignedIn)?;
        Ok(Caller {
            user: p.user,
            team: p.team,
            via: Via::Pat { id: p.id },
            address,
        })
    }

    /// Ends the caller's session (a token caller has none to end).
    pub fn sign_out(&self, caller: &Caller) -> Result<()> {
        if let Via::Session { id, .. } = &caller.via {
            self.catalog.revoke_session(id)?;
            self.catalog
                .audit(&caller.event("session.sign_out", Some(id)))?;
        }
        Ok(())
    }
}
