//! One-time messages between a settings form's POST and the page it redirects to
//! (Post/Redirect/Get). A form that creates a secret — data key, events token, personal access
//! token, invite link — puts the secret here, keyed by the session's id (`se_…`, not the cookie
//! value), and answers 303; the next `GET /settings` of that session takes it out and shows it
//! once. A reload finds nothing; the secret is not logged and not in a URL.
//!
//! The message is kept in the catalog ([`Catalog::put_flash`]), so the GET may reach any node of
//! a cluster (SPEC §7) or a node restarted in between. It is stored sealed: XChaCha20-Poly1305
//! under the session's flash key ([`FlashKey`], derived from the cookie secret, which the catalog
//! never holds), a random nonce, and the session id as associated data (a row moved to another
//! session does not open). The read that finds it deletes it, whichever node makes it.
//!
//! Entries expire after [`TTL`]. A message that is lost (expired, or the catalog unreachable at
//! the POST) is only inconvenient: the secret was never shown, so its owner revokes it and makes
//! another.

use std::sync::Arc;
use std::time::Duration;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::catalog::secrets::FlashKey;

/// How long a message waits for its GET.
pub const TTL: Duration = Duration::from_secs(5 * 60);

/// Bytes of the random nonce that starts a sealed message.
const NONCE_LEN: usize = 24;

/// What kind of secret a message shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Message {
    /// "Key revoked." and the like.
    pub notice: Option<String>,
    /// A secret shown this once.
    pub secret: Option<Secret>,
}

/// The messages of every session, in the shared catalog.
#[derive(Debug)]
pub struct Flash {
    catalog: Arc<Catalog>,
}

impl Flash {
    /// Messages kept in `catalog`.
    pub fn new(catalog: Arc<Catalog>) -> Flash {
        Flash { catalog }
    }

    /// Leaves `message` for the session's next page, replacing an earlier one. A catalog
    /// failure loses the message (logged without it).
    pub fn put(&self, session_id: &str, key: &FlashKey, message: &Message) {
        let sealed = seal(key, session_id, message);
        let expires_at = crate::catalog::now_ms() + TTL.as_millis() as i64;
        if let Err(e) = self.catalog.put_flash(session_id, &sealed, expires_at) {
            tracing::warn!(error = %e, "could not keep a shown-once message for the next page");
        }
    }

    /// Takes the session's message, if one is there, fresh, and sealed under `key`.
    pub fn take(&self, session_id: &str, key: &FlashKey) -> Option<Message> {
        match self.catalog.take_flash(session_id) {
            Ok(sealed) => open(key, session_id, &sealed?),
            Err(e) => {
                tracing::warn!(error = %e, "could not read a shown-once message");
                None
            }
        }
    }
}

/// `nonce ‖ ciphertext+tag` of the message's JSON, bound to the session id.
fn seal(key: &FlashKey, session_id: &str, message: &Message) -> Vec<u8> {
    let mut nonce = [0u8; NONCE_LEN];
    getrandom::fill(&mut nonce).expect("the OS random source is available");
    let plain = serde_json::to_vec(message).expect("a message serialises");
    let sealed = XChaCha20Poly1305::new((&key.0).into())
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: &plain,
                aad: session_id.as_bytes(),
            },
        )
        .expect("sealing a short message cannot fail");
    [&nonce[..], &sealed].concat()
}

/// The message sealed by [`seal`] with the same key and session id; `None` otherwise.
fn open(key: &FlashKey, session_id: &str, sealed: &[u8]) -> Option<Message> {
    if sealed.len() < NONCE_LEN {
        return None;
    }
    let (nonce, body) = sealed.split_at(NONCE_LEN);
    let plain = XChaCha20Poly1305::new((&key.0).into())
        .decrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: body,
                aad: session_id.as_bytes(),
            },
        )
        .ok()?;
    serde_json::from_slice(&plain).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::secrets::flash_key;

    fn shown(value: &str) -> Message {
        Message {
            notice: Some("Key created.".into()),
            secret: Some(Secret {
                kind: SecretKind::DataKey,
                value: value.into(),
                label: Some("ci".into()),
            }),
        }
    }

    #[test]
    fn a_sealed_message_opens_only_with_its_session_key_and_id() {
        let key = flash_key("stw_sess_a");
        let sealed = seal(&key, "se_a", &shown("stw_data_secret"));
        assert!(
            !sealed
                .windows(b"stw_data_secret".len())
                .any(|w| w == b"stw_data_secret"),
            "not the plaintext"
        );
        let opened = open(&key, "se_a", &sealed).unwrap();
        assert_eq!(opened.secret.unwrap().value, "stw_data_secret");
        assert!(
            open(&flash_key("stw_sess_b"), "se_a", &sealed).is_none(),
            "another key"
        );
        assert!(
            open(&key, "se_b", &sealed).is_none(),
            "another session's row"
        );
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(open(&key, "se_a", &tampered).is_none(), "tampered");
        assert!(open(&key, "se_a", &sealed[..10]).is_none(), "truncated");
        assert_ne!(
            seal(&key, "se_a", &shown("x")),
            seal(&key, "se_a", &shown("x")),
            "fresh nonces"
        );
    }

    #[test]
    fn a_message_is_taken_once_through_any_process() {
        for db in crate::catalog::testdb::each() {
            let (a, b) = (
                Flash::new(Arc::new(db.open())),
                Flash::new(Arc::new(db.open())),
            );
            let key = flash_key("stw_sess_a");
            a.put("se_a", &key, &shown("stw_data_1"));
            assert!(b.take("se_b", &key).is_none(), "another session");
            let got = b.take("se_a", &key).unwrap();
            assert_eq!(got.secret.unwrap().value, "stw_data_1");
            assert!(a.take("se_a", &key).is_none(), "shown once");
            a.put("se_a", &key, &shown("stw_data_2"));
            assert!(
                b.take("se_a", &flash_key("stw_sess_other")).is_none(),
                "wrong key"
            );
            assert!(
                a.take("se_a", &key).is_none(),
                "a failed open still took it"
            );
        }
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
