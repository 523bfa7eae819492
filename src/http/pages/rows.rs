//! The rows of the settings page's sections, built from what [`crate::accounts`] returns and
//! formatted for the templates: members, keys and tokens (never a secret, only its prefix),
//! canvases with their table and SQL elements' share URLs and download commands, warehouse
//! tables, audit entries, and the secret shown once.

use super::flash::{Secret, SecretKind as Shown};
use super::view::{count, size, when, when_or};
use crate::accounts::workspace::{CanvasInfo, ElementInfo, TableInfo};
use crate::catalog::{AuditEntry, InviteInfo, PatInfo, SecretInfo, User};

/// The seed's sample event, for the ready-to-paste curl.
const SAMPLE_EVENT: &str = r#"{"version":1,"type":"event","event":"Purchased an Item","properties":{"revenue":"39.95","shippingMethod":"Premium"},"timestamp":"2012-12-02T00:30:08.276Z"}"#;

/// A team member.
pub(super) struct MemberView {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) email: String,
    pub(super) role: &'static str,
    pub(super) joined: String,
    pub(super) is_me: bool,
}

impl MemberView {
    pub(super) fn of(u: User, me: &str) -> MemberView {
        MemberView {
            is_me: u.id == me,
            joined: when(u.created_at),
            email: u.email.unwrap_or_default(),
            role: u.role.as_str(),
            name: u.name,
            id: u.id,
        }
    }
}

/// A pending invite (never its link).
pub(super) struct InviteView {
    pub(super) id: String,
    pub(super) email: String,
    pub(super) role: &'static str,
    pub(super) created: String,
    pub(super) expires: String,
}

impl InviteView {
    pub(super) fn of(i: InviteInfo) -> InviteView {
        InviteView {
            id: i.id,
            email: i.email,
            role: i.role.as_str(),
            created: when(i.created_at),
            expires: when(i.expires_at),
        }
    }
}

/// A data key, events token or personal access token (never the secret).
pub(super) struct SecretView {
    pub(super) id: String,
    /// Its name, else its prefix (also the revoke button's accessible name).
    pub(super) label: String,
    pub(super) named: bool,
    pub(super) prefix: String,
    pub(super) created: String,
    pub(super) last_used: String,
}

impl SecretView {
    pub(super) fn of(s: SecretInfo) -> SecretView {
        Self::new(s.id, s.name, &s.prefix, s.created_at, s.last_used_at)
    }

    pub(super) fn of_pat(p: PatInfo) -> SecretView {
        Self::new(p.id, p.name, &p.prefix, p.created_at, p.last_used_at)
    }

    fn new(
        id: String,
        name: Option<String>,
        prefix: &str,
        created: i64,
        used: Option<i64>,
    ) -> SecretView {
        SecretView {
            id,
            named: name.is_some(),
            label: name.unwrap_or_else(|| format!("{prefix}…")),
            prefix: format!("{prefix}…"),
            created: when(created),
            last_used: when_or(used, "never"),
        }
    }
}

/// A canvas with its elements.
pub(super) struct CanvasView {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) created: String,
    pub(super) elements: Vec<ElementView>,
}

impl CanvasView {
    /// `key` goes into the download commands: a placeholder, or the key just created.
    pub(super) fn of(c: CanvasInfo, base: &str, key: &str) -> CanvasView {
        CanvasView {
            created: when(c.created_at),
            elements: c
                .elements
                .into_iter()
                .map(|e| ElementView::of(e, base, key))
                .collect(),
            id: c.id,
            name: c.name,
        }
    }
}

/// A table or SQL element with its share URL and download command.
pub(super) struct ElementView {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) source: String,
    /// An SQL element's query, cut at [`SQL_SHOWN_CHARS`].
    pub(super) sql: Option<String>,
    pub(super) share_url: String,
    pub(super) curl: String,
    /// Its columns, filters and limit in words.
    pub(super) shape: String,
}

/// Most characters of a query the canvas list shows (the API lists it whole).
pub(super) const SQL_SHOWN_CHARS: usize = 300;

impl ElementView {
    fn of(e: ElementInfo, base: &str, key: &str) -> ElementView {
        let el = e.element;
        let mut shape = Vec::new();
        if let Some(c) = &el.columns {
            shape.push(format!("columns {}", c.join(", ")));
        }
        if let Some(out) = el.schema.as_ref().and_then(|s| s.as_array()) {
            let names: Vec<&str> = out.iter().filter_map(|c| c["name"].as_str()).collect();
            shape.push(format!("columns {}", names.join(", ")));
        }
        if el
            .filters
            .as_ref()
            .and_then(|f| f.as_array())
            .is_some_and(|a| !a.is_empty())
        {
            shape.push("filtered".to_string());
        }
        if let Some(l) = el.limit {
            shape.push(format!("at most {} rows", count(l)));
        }
        let body = serde_json::json!({"canvasId": el.canvas_id, "elementId": el.id});
        let fallback = if el.sql.is_some() {
            "SQL table".to_string()
        } else {
            el.source.clone()
        };
        ElementView {
            curl: format!(
                "curl -sS -X POST {base}/api/data/table -H 'x-api-key: {key}' \
                 -H 'Content-Type: application/json' -d '{body}'"
            ),
            name: el.name.clone().unwrap_or(fallback),
            shape: if shape.is_empty() {
                "every column, every row".into()
            } else {
                shape.join(" · ")
            },
            share_url: e.share_url,
            sql: el.sql.as_deref().map(shortened),
            source: el.source,
            id: el.id,
        }
    }
}

/// `sql` cut at [`SQL_SHOWN_CHARS`] characters, with `…` when cut.
fn shortened(sql: &str) -> String {
    match sql.char_indices().nth(SQL_SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", sql[..at].trim_end()),
        None => sql.to_string(),
    }
}

/// The ready-to-paste curl of the seed's sample event with `token`.
pub(super) fn events_curl(base: &str, token: &str) -> String {
    format!(
        "curl -sS -X POST {base}/v1/event -H 'X-Auth-Token: {token}' \
         -H 'Content-Type: application/json' -d '{SAMPLE_EVENT}'"
    )
}

/// A warehouse table.
pub(super) struct TableView {
    pub(super) name: String,
    /// (name, type)
    pub(super) columns: Vec<(String, String)>,
    pub(super) rows: String,
    pub(super) files: String,
    pub(super) size: String,
    pub(super) last: String,
}

impl TableView {
    pub(super) fn of(t: TableInfo) -> TableView {
        TableView {
            columns: t.columns.into_iter().map(|c| (c.name, c.ty)).collect(),
            rows: count(t.stats.rows),
            files: count(t.stats.files),
            size: size(t.stats.bytes),
            last: when_or(t.stats.last_received_at, "—"),
            name: t.name,
        }
    }
}

/// An audit entry.
pub(super) struct AuditView {
    pub(super) when: String,
    pub(super) who: String,
    pub(super) action: String,
    pub(super) target: String,
    pub(super) from: String,
}

impl AuditView {
    pub(super) fn of(e: AuditEntry) -> AuditView {
        AuditView {
            when: when(e.at),
            who: e.actor_email.or(e.actor_id).unwrap_or_else(|| "—".into()),
            target: match (e.target, e.detail) {
                (Some(t), Some(d)) => format!("{t} ({d})"),
                (t, d) => t.or(d).unwrap_or_default(),
            },
            action: e.action,
            from: e.address.unwrap_or_else(|| "—".into()),
        }
    }
}

/// The secret shown once, in the section it belongs to.
pub(super) struct ShownView {
    pub(super) kind: Shown,
    /// The section's anchor.
    pub(super) section: &'static str,
    pub(super) heading: String,
    /// The text field's label.
    pub(super) label: &'static str,
    pub(super) value: String,
    pub(super) hint: &'static str,
}

impl ShownView {
    pub(super) fn of(s: Secret) -> ShownView {
        let named = |what: &str| match &s.label {
            Some(l) => format!("{what} “{l}”"),
            None => what.to_string(),
        };
        let (section, label, heading, hint) = match s.kind {
            Shown::DataKey => (
                "keys",
                "New data key",
                named("Your new data key"),
                "Send it as the x-api-key header; the download commands below already use it.",
            ),
            Shown::EventsToken => (
                "events",
                "New events token",
                named("Your new events token"),
                "Send it as the X-Auth-Token header; the sample command below already uses it.",
            ),
            Shown::Pat => (
                "pats",
                "New personal access token",
                named("Your new personal access token"),
                "Scripts send it as Authorization: Bearer <token> to the management API.",
            ),
            Shown::Invite => (
                "members",
                "Invite link",
                match &s.label {
                    Some(email) => format!("Invite link for {email}"),
                    None => "Invite link".into(),
                },
                "Send it to them yourself; it works once.",
            ),
        };
        ShownView {
            kind: s.kind,
            section,
            heading,
            label,
            value: s.value,
            hint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_query_is_cut_on_a_character_boundary() {
        let short = "SELECT 1";
        assert_eq!(shortened(short), short);
        let exact = "é".repeat(SQL_SHOWN_CHARS);
        assert_eq!(shortened(&exact), exact, "not cut at exactly the limit");
        let long = format!("SELECT '{}' AS s", "ü".repeat(SQL_SHOWN_CHARS));
        let cut = shortened(&long);
        assert!(cut.ends_with('…'), "{cut}");
        assert_eq!(cut.chars().count(), SQL_SHOWN_CHARS + 1);
    }
}
