//! One-time messages between a settings form's POST and the page it redirects to
//! (Post/Redirect/Get). A form that creates a secret — data key, events token, personal access
//! token, invite link — puts the secret here, keyed by the session's id (`se_…`, not the cookie
//! value), and answers 303; the next `GET /settings` of that session takes it out and shows it
//! once. A reload finds nothing, and the secret never leaves this process's memory except in that
//! one response: it is not logged, not in a URL, and the catalog keeps only its hash.
//!
//! Entries expire after [`TTL`] and the store holds at most [`CAPACITY`] sessions' messages (the
//! oldest are dropped first), so an abandoned redirect costs a few hundred bytes for a few
//! minutes. A message that is lost (expired, evicted) is only inconvenient: the secret was never
//! shown, so its owner revokes it and makes another.
//!
//! One-node limitation: the store lives in this process. With several nodes (SPEC §7) any node
//! may serve the pages, so the redirected GET can reach a node that never saw the POST, and a
//! restart between the two loses the message as well; the page then shows no secret (never
//! another session's). Until the message is shared — an encrypted, expiring catalog row per
//! session — a multi-node deployment routes the pages by the `stowage_session` cookie (sticky
//! sessions).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a message waits for its GET.
pub const TTL: Duration = Duration::from_secs(5 * 60);

/// Most sessions with a pending message.
pub const CAPACITY: usize = 4096;

/// What kind of secret a message shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// A data API key (`x-api-key`).
    DataKey,
    /// An events token (`X-Auth-Token`).
    EventsToken,
    /// A personal access token (`Authorization: Bearer`).
    Pat,
    /// An invite link.
    Invite,
}

/// A secret to show once.
#[derive(Clone)]
pub struct Secret {
    /// What it is.
    pub kind: SecretKind,
    /// The secret itself (or the invite URL).
    pub value: String,
    /// Its label or, for an invite, the invited email.
    pub label: Option<String>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("kind", &self.kind)
            .field("value", &"<redacted>")
            .field("label", &self.label)
            .finish()
    }
}

/// A message for the next page of a session.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// "Key revoked." and the like.
    pub notice: Option<String>,
    /// A secret shown this once.
    pub secret: Option<Secret>,
}

/// The store: session id → (when put, message).
#[derive(Debug, Default)]
pub struct Flash {
    entries: Mutex<HashMap<String, (Instant, Message)>>,
}

impl Flash {
    /// An empty store.
    pub fn new() -> Flash {
        Flash::default()
    }

    /// Leaves `message` for the session's next page, replacing an earlier one.
    pub fn put(&self, session_id: &str, message: Message) {
        self.put_at(session_id, message, Instant::now());
    }

    /// Takes the session's message, if one is there and fresh.
    pub fn take(&self, session_id: &str) -> Option<Message> {
        self.take_at(session_id, Instant::now())
    }

    fn put_at(&self, session_id: &str, message: Message, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CAPACITY && !entries.contains_key(session_id) {
            entries.retain(|_, (at, _)| now.duration_since(*at) < TTL);
            while entries.len() >= CAPACITY {
                let Some(oldest) = entries
                    .iter()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                entries.remove(&oldest);
            }
        }
        entries.insert(session_id.to_string(), (now, message));
    }

    fn take_at(&self, session_id: &str, now: Instant) -> Option<Message> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (at, message) = entries.remove(session_id)?;
        (now.duration_since(at) < TTL).then_some(message)
    }

    /// Sessions with a pending message (for tests).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no message is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(text: &str) -> Message {
        Message {
            notice: Some(text.into()),
            secret: None,
        }
    }

    #[test]
    fn a_message_is_taken_once_by_its_own_session() {
        let f = Flash::new();
        f.put("se_a", notice("a"));
        assert!(f.take("se_b").is_none());
        assert_eq!(f.take("se_a").unwrap().notice.as_deref(), Some("a"));
        assert!(f.take("se_a").is_none());
    }

    #[test]
    fn a_message_expires() {
        let f = Flash::new();
        let t0 = Instant::now();
        f.put_at("se_a", notice("a"), t0);
        assert!(f.take_at("se_a", t0 + TTL).is_none());
        assert!(f.is_empty());
    }

    #[test]
    fn the_store_is_bounded_and_drops_the_oldest() {
        let f = Flash::new();
        let t0 = Instant::now();
        for i in 0..CAPACITY {
            f.put_at(
                &format!("se_{i}"),
                notice("x"),
                t0 + Duration::from_millis(i as u64),
            );
        }
        f.put_at("se_new", notice("new"), t0 + Duration::from_secs(10));
        assert_eq!(f.len(), CAPACITY);
        assert!(f.take("se_0").is_none(), "the oldest went");
        assert!(f.take("se_1").is_some());
        assert!(f.take("se_new").is_some());
    }

    #[test]
    fn a_secret_is_not_in_debug_output() {
        let s = Secret {
            kind: SecretKind::DataKey,
            value: "stw_data_secret".into(),
            label: None,
        };
        assert!(!format!("{s:?}").contains("stw_data_secret"));
    }
}
