//! Passwords: Argon2id hashes in PHC strings (the `argon2` crate's defaults: 19 MiB, 2 passes),
//! the strength rule, and a verification that costs the same whether or not the account exists.

use std::sync::LazyLock;

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

/// Fewest characters in a password.
pub const MIN_LEN: usize = 10;
/// Most bytes in a password (hashing cost is bounded anyway; this bounds the request).
pub const MAX_LEN: usize = 256;

/// Why a new password is refused, or `None` when it is acceptable.
pub fn weakness(password: &str) -> Option<String> {
    if password.chars().count() < MIN_LEN {
        return Some(format!("a password has at least {MIN_LEN} characters"));
    }
    if password.len() > MAX_LEN {
        return Some(format!("a password has at most {MAX_LEN} bytes"));
    }
    None
}

/// The PHC string of a new Argon2id hash with a random salt. CPU-heavy: call it off the async
/// runtime (`spawn_blocking`).
pub fn hash(password: &str) -> String {
    Argon2::default()
        .hash_password(password.as_bytes())
        .expect("Argon2 with default parameters hashes any input")
        .to_string()
}

/// A hash of a password nobody knows, verified against when the account does not exist or has
/// no password yet, so the answer takes as long either way.
static DUMMY: LazyLock<String> = LazyLock::new(|| hash("no account has this password, ever"));

/// Whether `password` matches `phc`. With `None` (no such account, or no password set) the
/// same work is done and the answer is `false`.
pub fn verify(password: &str, phc: Option<&str>) -> bool {
    let target = phc.unwrap_or(DUMMY.as_str());
    let ok = match PasswordHash::new(target) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    };
    ok && phc.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_argon2id_salted_and_verify() {
        let a = hash("correct horse battery");
        let b = hash("correct horse battery");
        assert!(a.starts_with("$argon2id$"), "{a}");
        assert_ne!(a, b, "a random salt each time");
        assert!(verify("correct horse battery", Some(&a)));
        assert!(!verify("correct horse batterz", Some(&a)));
        assert!(!verify("correct horse battery", None));
        assert!(!verify("x", Some("not a phc string")));
        assert!(weakness("short").is_some());
        assert!(weakness("long enough!").is_none());
    }
}
