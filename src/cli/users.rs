//! `stowage admin user …` and `admin events requests` (SPEC §5.1): the operator creates a team's
//! first owner — who gets a one-time set-password link — resets a forgotten password with a new
//! link, and lists the owners' requests to enable events.

use clap::Subcommand;
use serde_json::json;

use super::output::{AdminError, Output};
use crate::catalog::{AuditEvent, Catalog, LinkKind, Role, User};
use crate::config::Config;

/// `user …`
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user in a team; prints a one-time link to set the password.
    Create {
        /// Team id or name.
        #[arg(long)]
        team: String,
        /// Sign-in email (unique across teams).
        #[arg(long)]
        email: String,
        /// Display name.
        #[arg(long)]
        name: String,
        /// owner or member.
        #[arg(long, value_enum)]
        role: Role,
    },
    /// Print a new one-time set-password link for a user (earlier unused ones stop working).
    Reset {
        /// The user's email.
        #[arg(long)]
        email: String,
    },
    /// List a team's users.
    List {
        /// Team id or name.
        #[arg(long)]
        team: String,
    },
}

fn link_url(config: &Config, secret: &str) -> String {
    let base = if config.server.public_url.is_empty() {
        format!("http://{}", config.server.listen)
    } else {
        config.server.public_url.trim_end_matches('/').to_string()
    };
    format!("{base}/invite/{secret}")
}

/// A new set-password link for `user`, audited as the operator's `action`; returns (link id, URL).
fn password_link(
    config: &Config,
    catalog: &Catalog,
    user: &User,
    action: &str,
    detail: Option<&str>,
) -> Result<(String, String), AdminError> {
    let (link_id, secret) = catalog.create_link(
        &user.team_id,
        &LinkKind::Password {
            user_id: user.id.clone(),
        },
        None,
        config.accounts.link_ttl.0.as_millis() as i64,
    )?;
    catalog.audit(&AuditEvent {
        team_id: Some(&user.team_id),
        action,
        target: Some(&user.id),
        detail,
        address: Some("operator"),
        ..Default::default()
    })?;
    Ok((link_id, link_url(config, &secret)))
}

/// Runs a `user` command.
pub fn run(config: &Config, catalog: &Catalog, command: UserCommand) -> Result<Output, AdminError> {
    match command {
        UserCommand::Create {
            team,
            email,
            name,
            role,
        } => {
            let user = catalog.create_user(&team, Some(&email), &name, role)?;
            let (link_id, url) =
                password_link(config, catalog, &user, "member.create", Some(role.as_str()))?;
            let human = format!(
                "created user {} <{}> ({}) as {}\nset-password link (valid {}, shown once):\n  {url}",
                user.name,
                user.email.as_deref().unwrap_or_default(),
                user.id,
                role.as_str(),
                humantime::format_duration(config.accounts.link_ttl.0),
            );
            Ok(Output {
                json: json!({"id": user.id, "email": user.email, "link_id": link_id, "set_password_url": url}),
                human,
            })
        }
        UserCommand::Reset { email } => {
            let (user, _) = catalog.user_for_sign_in(&email)?.ok_or_else(|| {
                crate::catalog::CatalogError::NotFound(format!("no user with email {email:?}"))
            })?;
            // A reset answers a lost or stolen password: the old one stops working and whatever
            // it opened ends now (using the link ends any session opened since, too).
            catalog.reset_access(&user.id)?;
            let (link_id, url) = password_link(config, catalog, &user, "user.reset_link", None)?;
            Ok(Output {
                json: json!({"id": user.id, "link_id": link_id, "set_password_url": url}),
                human: format!(
                    "{email}'s password no longer works; signed out everywhere, personal access tokens revoked\nset-password link for {email} (shown once):\n  {url}"
                ),
            })
        }
        UserCommand::List { team } => {
            let team = catalog.find_team(&team)?;
            let users = catalog.list_members(&team.id)?;
            let human = users
                .iter()
                .map(|u| {
                    format!(
                        "{}\t{}\t{}\t{}",
                        u.id,
                        u.role.as_str(),
                        u.email.as_deref().unwrap_or("-"),
                        u.name
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            Ok(Output {
                json: json!(users
                    .iter()
                    .map(|u| json!({"id": u.id, "email": u.email, "name": u.name, "role": u.role}))
                    .collect::<Vec<_>>()),
                human,
            })
        }
    }
}

/// `admin events requests`: open requests to enable events, oldest first.
pub fn events_requests(catalog: &Catalog) -> Result<Output, AdminError> {
    let requests = catalog.events_requests()?;
    let human = if requests.is_empty() {
        "no open requests".to_string()
    } else {
        requests
            .iter()
            .map(|r| {
                format!(
                    "{}\t{}\t{}\t{}\trun: stowage admin events enable --team {}",
                    r.id,
                    r.team_id,
                    r.team_name,
                    r.requested_by_email.as_deref().unwrap_or(&r.requested_by),
                    r.team_id
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(Output {
        json: json!(requests),
        human,
    })
}
