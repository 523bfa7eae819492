//! Passwords: Argon2id hashes in PHC strings (the `argon2` crate's defaults: 19 MiB, 2 passes),
//! the strength rule, a verification that costs the same whether or not the account exists, and
//! [`Hashers`]: at most a few hashes at once, so memory stays bounded (each one holds its 19 MiB
//! block) however many sign-ins arrive together.

use std::sync::LazyLock;
use std::time::Duration;

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

/// Memory one Argon2 hash or verification holds (the default parameters' block).
pub const BYTES_PER_HASH: u64 = argon2::Params::DEFAULT_M_COST as u64 * 1024;

/// No hashing slot came free in time.
#[derive(Debug, Clone, Copy)]
pub struct Busy;

/// Runs Argon2 on blocking threads, at most `slots` at a time; a caller waits at most `wait`
/// for a slot, then gets [`Busy`].
#[derive(Debug)]
pub struct Hashers {
    slots: std::sync::Arc<tokio::sync::Semaphore>,
    wait: Duration,
}

impl Hashers {
    /// At most `slots` (at least 1) hashes at once, each caller waiting at most `wait`.
    pub fn new(slots: usize, wait: Duration) -> Hashers {
        Hashers {
            slots: std::sync::Arc::new(tokio::sync::Semaphore::new(slots.max(1))),
            wait,
        }
    }

    /// Runs `work` on a blocking thread once a slot is free. The slot goes with the work, so
    /// a request dropped mid-hash (its client gone) still holds it until the hash ends.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Busy> {
        let permit = tokio::time::timeout(self.wait, self.slots.clone().acquire_owned())
            .await
            .map_err(|_| Busy)?
            .map_err(|_| Busy)?;
        tokio::task::spawn_blocking(move || {
            let _slot = permit;
            work()
        })
        .await
        .map_err(|_| Busy)
    }

    /// [`verify`] within the bound.
    pub async fn verify(&self, password: &str, phc: Option<String>) -> Result<bool, Busy> {
        let password = password.to_string();
        self.run(move || verify(&password, phc.as_deref())).await
    }

    /// [`hash`] within the bound.
    pub async fn hash(&self, password: &str) -> Result<String, Busy> {
        let password = password.to_string();
        self.run(move || hash(&password)).await
    }
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
