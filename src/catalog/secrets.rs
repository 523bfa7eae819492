//! Random identifiers and secrets: ≥ 256-bit secrets with a readable prefix, stored as SHA-256.

use base64::Engine;
use sha2::{Digest, Sha256};

/// Prefix of data API keys.
pub const DATA_KEY_PREFIX: &str = "stw_data_";
/// Prefix of events tokens.
pub const EVENTS_TOKEN_PREFIX: &str = "stw_evt_";

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("the OS random source is available");
    buf
}

/// An opaque URL-safe id such as `tm_3kq9…` (80 random bits, lowercase base32).
pub fn new_id(prefix: &str) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijkmnpqrstuvwxyz23456789";
    let bytes = random_bytes::<16>();
    let mut s = String::with_capacity(prefix.len() + 17);
    s.push_str(prefix);
    s.push('_');
    for b in bytes {
        s.push(ALPHABET[(b & 31) as usize] as char);
    }
    s
}

/// A new secret: the prefix followed by 256 random bits in URL-safe base64.
pub fn new_secret(prefix: &str) -> String {
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes::<32>());
    format!("{prefix}{body}")
}

/// The stored form of a secret.
pub fn hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// The CSRF token of a session, derived from its cookie secret (SHA-256 of a domain-separated
/// copy, URL-safe base64). Nothing replayable is stored: the catalog keeps only the cookie's own
/// hash, from which this cannot be computed.
pub fn csrf_token(session_secret: &str) -> String {
    let digest = Sha256::new()
        .chain_update(b"stowage csrf v1\0")
        .chain_update(session_secret.as_bytes())
        .finalize();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
}

/// The key a session's shown-once messages are sealed under in the catalog
/// ([`flash_key`]). Like the CSRF token it is derived from the cookie secret and never stored, so
/// only a request carrying the cookie can open them.
#[derive(Clone, PartialEq, Eq)]
pub struct FlashKey(pub [u8; 32]);

impl std::fmt::Debug for FlashKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FlashKey(<redacted>)")
    }
}

/// The flash key of a session: SHA-256 of a domain-separated copy of its cookie secret (256
/// random bits, so a hash is as good a key derivation as HKDF), apart from its CSRF token.
pub fn flash_key(session_secret: &str) -> FlashKey {
    let digest = Sha256::new()
        .chain_update(b"stowage flash v1\0")
        .chain_update(session_secret.as_bytes())
        .finalize();
    FlashKey(digest.into())
}

/// The part of a secret shown in listings: its type prefix and four characters.
pub fn display_prefix(secret: &str) -> String {
    let cut = secret
        .find('_')
        .and_then(|i| secret[i + 1..].find('_').map(|j| i + j + 2));
    let end = cut.unwrap_or(0) + 4;
    secret.chars().take(end).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_long_random_and_prefixed() {
        let a = new_secret(DATA_KEY_PREFIX);
        let b = new_secret(DATA_KEY_PREFIX);
        assert_ne!(a, b);
        assert!(a.starts_with("stw_data_"));
        assert_eq!(a.len(), DATA_KEY_PREFIX.len() + 43);
        assert_eq!(display_prefix(&a).len(), "stw_data_".len() + 4);
        assert_eq!(hash(&a).len(), 32);
        assert!(new_id("tm").starts_with("tm_"));
        let csrf = csrf_token(&a);
        assert_eq!(csrf, csrf_token(&a), "derived, so stable for a session");
        assert_ne!(csrf, csrf_token(&b));
        assert_ne!(csrf.as_bytes(), &hash(&a)[..], "not the stored hash");
        let key = flash_key(&a);
        assert_eq!(key, flash_key(&a));
        assert_ne!(key, flash_key(&b));
        assert_ne!(&key.0[..], &hash(&a)[..], "not the stored hash");
        assert_eq!(format!("{key:?}"), "FlashKey(<redacted>)");
    }
}
