//! Slowing down password guessing (SPEC §5.1, §5.2): sign-in attempts are counted per key — a
//! digest of the email tried, and of the client address — in the catalog, so every node sharing
//! it counts the same attempts ([`crate::catalog`]'s `signin_attempts`). Past a threshold each
//! further attempt locks the key for twice as long as the previous lock, up to a maximum. An
//! attempt is counted *before* its password is checked, for all its keys in one catalog
//! transaction, so guesses sent at once — to one node or to several — are held to the same limit
//! as guesses sent one by one; a success clears the email's count and gives the address its
//! attempt back. Unknown emails are counted like known ones, so the answers reveal nothing about
//! which accounts exist. A key is a 32-byte digest, never the email as typed, so what an attacker
//! sends cannot grow what is kept.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::catalog::{AttemptKey, Catalog, CatalogError};

/// What attempts are counted against: a digest of a kind (`email`, `addr`) and a value.
pub type Key = [u8; 32];

/// The key of `value` of `kind`.
pub fn key(kind: &str, value: &str) -> Key {
    Sha256::new()
        .chain_update(kind.as_bytes())
        .chain_update([0])
        .chain_update(value.as_bytes())
        .finalize()
        .into()
}

/// The throttle's rules over the catalog's counts.
#[derive(Debug, Clone, Copy)]
pub struct Throttle {
    max_lock: Duration,
}

impl Throttle {
    /// A throttle whose locks last at most `max_lock`.
    pub fn new(max_lock: Duration) -> Throttle {
        Throttle { max_lock }
    }

    /// Counts one attempt against every `(key, allowed)`: `Ok(Err(wait))` (nothing counted)
    /// while any key is locked.
    pub fn attempt(
        &self,
        catalog: &Catalog,
        keys: &[(Key, u32)],
    ) -> Result<Result<(), Duration>, CatalogError> {
        let keys: Vec<AttemptKey<'_>> = keys
            .iter()
            .map(|(key, allowed)| AttemptKey {
                key,
                allowed: *allowed,
            })
            .collect();
        let max_lock_ms = i64::try_from(self.max_lock.as_millis()).unwrap_or(i64::MAX);
        Ok(catalog
            .count_sign_in_attempt(&keys, max_lock_ms)?
            .map_err(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }

    /// A successful sign-in: clears `key` (the email), refunds each of `refund` (the address).
    pub fn succeed(
        &self,
        catalog: &Catalog,
        key: &Key,
        refund: &[Key],
    ) -> Result<(), CatalogError> {
        let refund: Vec<&[u8]> = refund.iter().map(|k| &k[..]).collect();
        catalog.sign_in_succeeded(key, &refund)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_digests_apart_by_kind() {
        assert_ne!(key("email", "x"), key("addr", "x"));
        assert_eq!(key("email", "x"), key("email", "x"));
    }

    /// However many attempts arrive at once, on two handles of one catalog (two nodes), no more
    /// than `allowed` get through, and an attempt refused by a locked key counts against none of
    /// its keys.
    #[test]
    fn concurrent_attempts_on_two_nodes_are_held_to_the_limit() {
        for db in crate::catalog::testdb::each() {
            let nodes = [db.open(), db.open()];
            let t = Throttle::new(Duration::from_secs(60));
            let (email, addr) = (key("email", "e"), key("addr", "a"));
            let admitted: usize = std::thread::scope(|s| {
                let handles: Vec<_> = (0..40)
                    .map(|i| {
                        let node = &nodes[i % 2];
                        s.spawn(move || t.attempt(node, &[(email, 5), (addr, 20)]).unwrap().is_ok())
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| usize::from(h.join().unwrap()))
                    .sum()
            });
            assert_eq!(admitted, 5);
            // "addr" holds 5 attempts: 15 more on other emails pass, the next is refused.
            for i in 0..15 {
                let other = key("email", &format!("other{i}"));
                assert!(
                    t.attempt(&nodes[i % 2], &[(other, 5), (addr, 20)])
                        .unwrap()
                        .is_ok()
                );
            }
            let last = key("email", "last");
            assert!(
                t.attempt(&nodes[0], &[(last, 5), (addr, 20)])
                    .unwrap()
                    .is_err()
            );
            // Successes give the address its attempts back.
            let (d, office) = (key("email", "d"), key("addr", "office"));
            for _ in 0..10 {
                assert!(
                    t.attempt(&nodes[1], &[(d, 5), (office, 2)])
                        .unwrap()
                        .is_ok()
                );
                t.succeed(&nodes[0], &d, &[office]).unwrap();
            }
        }
    }
}
