//! Slowing down password guessing: sign-in attempts are counted per key (an email, a client
//! address) in memory; past a threshold each further attempt locks the key for twice as long as
//! the previous lock, up to a maximum. An attempt is counted *before* its password is checked,
//! under one lock for all its keys ([`Throttle::attempt`]), so N guesses sent at once are held to
//! the same limit as N sent one by one; a success then clears the email's count. Unknown emails
//! are counted like known ones, so the answers reveal nothing about which accounts exist.
//!
//! Memory is bounded whatever is sent: a key is kept as a 32-byte digest of what it names (not
//! the email as typed), and the table holds at most [`MAX_KEYS`]; when full, keys that are
//! neither locked nor recently failed go first, then the unlocked ones, and if every key is
//! locked a new one is refused like a locked one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Counts are forgotten this long after a key's last failure (unless it is still locked).
const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// Beyond this many keys, forgotten ones are swept on the next failure.
const SWEEP_AT: usize = 10_000;
/// Most keys kept (each ~100 bytes with its entry: ~10 MiB).
pub const MAX_KEYS: usize = 100_000;

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

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Attempts counted and not refunded (a failure, or an attempt still being checked).
    failures: u32,
    /// The limit the last attempt was counted against.
    allowed: u32,
    last_failure: Instant,
    locked_until: Option<Instant>,
}

/// Failure counts and locks.
#[derive(Debug)]
pub struct Throttle {
    entries: Mutex<HashMap<Key, Entry>>,
    /// The table's size at which the next sweep of forgotten keys runs: twice what the last
    /// sweep left (at least [`SWEEP_AT`]), so sweeping costs O(1) per attempt on average.
    sweep_at: std::sync::atomic::AtomicUsize,
    max_lock: Duration,
}

impl Throttle {
    /// A throttle whose locks last at most `max_lock`.
    pub fn new(max_lock: Duration) -> Throttle {
        Throttle {
            entries: Mutex::new(HashMap::new()),
            sweep_at: std::sync::atomic::AtomicUsize::new(SWEEP_AT),
            max_lock,
        }
    }

    /// Counts one sign-in attempt against every `(key, allowed)` before its password is
    /// checked: `Err(wait)` (and nothing counted) while any key is locked; else each key's count
    /// goes up, and a key that reaches `allowed` attempts is locked at once, so concurrent
    /// attempts beyond the limit are refused even while the earlier ones are still being
    /// checked. A success clears the email's count with [`Throttle::succeed`].
    pub fn attempt(&self, keys: &[(Key, u32)]) -> Result<(), Duration> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let locked = keys
            .iter()
            .filter_map(|(k, _)| entries.get(k).and_then(|e| e.locked_until))
            .filter(|until| *until > now)
            .max();
        if let Some(until) = locked {
            return Err(until - now);
        }
        let locked_now = |e: &Entry| e.locked_until.is_some_and(|u| u > now);
        let sweep_at = &self.sweep_at;
        if entries.len() >= sweep_at.load(std::sync::atomic::Ordering::Relaxed) {
            entries
                .retain(|_, e| locked_now(e) || now.duration_since(e.last_failure) < FORGET_AFTER);
            sweep_at.store(
                (entries.len() * 2).max(SWEEP_AT),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        let new_keys = keys
            .iter()
            .filter(|(k, _)| !entries.contains_key(k))
            .count();
        if entries.len() + new_keys > MAX_KEYS {
            entries.retain(|_, e| locked_now(e));
            if entries.len() + new_keys > MAX_KEYS {
                return Err(Duration::from_secs(1));
            }
        }
        for &(key, allowed) in keys {
            let allowed = allowed.max(1);
            let e = entries.entry(key).or_insert(Entry {
                failures: 0,
                allowed,
                last_failure: now,
                locked_until: None,
            });
            if now.duration_since(e.last_failure) >= FORGET_AFTER {
                e.failures = 0;
            }
            e.failures = e.failures.saturating_add(1);
            e.allowed = allowed;
            e.last_failure = now;
            if e.failures >= allowed {
                let doublings = (e.failures - allowed).min(20);
                let lock = Duration::from_secs(1u64 << doublings).min(self.max_lock);
                e.locked_until = Some(now + lock);
            }
        }
        Ok(())
    }

    /// A successful sign-in: clears `key` (the email) and takes the attempt back from each of
    /// `refund` (the address), so people signing in from one address never lock it.
    pub fn succeed(&self, key: &Key, refund: &[Key]) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.remove(key);
        for k in refund {
            if let Some(e) = entries.get_mut(k) {
                e.failures = e.failures.saturating_sub(1);
                if e.failures < e.allowed {
                    e.locked_until = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_the_allowed_attempts_and_doubles() {
        let t = Throttle::new(Duration::from_secs(60));
        let (a, b, c, d, office) = (
            key("t", "a"),
            key("t", "b"),
            key("t", "c"),
            key("t", "d"),
            key("t", "office"),
        );
        for _ in 0..5 {
            assert!(t.attempt(&[(a, 5)]).is_ok());
        }
        let first = t.attempt(&[(a, 5)]).unwrap_err();
        assert!(first <= Duration::from_secs(1) && first > Duration::ZERO);
        assert!(t.attempt(&[(b, 5)]).is_ok(), "keys are independent");
        t.succeed(&a, &[]);
        assert!(t.attempt(&[(a, 5)]).is_ok());
        // Successes give the address its attempt back.
        for _ in 0..10 {
            assert!(t.attempt(&[(d, 5), (office, 2)]).is_ok());
            t.succeed(&d, &[office]);
        }
        for _ in 0..40 {
            let _ = t.attempt(&[(c, 1)]);
        }
        assert!(
            t.attempt(&[(c, 1)]).unwrap_err() <= Duration::from_secs(60),
            "capped"
        );
        assert_ne!(key("email", "x"), key("addr", "x"), "kinds are apart");
    }

    /// Attempts are counted before any password is checked: however many arrive at once, no
    /// more than `allowed` get through, and an attempt refused by a locked key counts against
    /// none of its keys.
    #[test]
    fn concurrent_attempts_are_held_to_the_limit() {
        let t = Throttle::new(Duration::from_secs(60));
        let (email, addr) = (key("email", "e"), key("addr", "a"));
        let admitted: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..40)
                .map(|_| s.spawn(|| t.attempt(&[(email, 5), (addr, 20)]).is_ok()))
                .collect();
            handles
                .into_iter()
                .map(|h| usize::from(h.join().unwrap()))
                .sum()
        });
        assert_eq!(admitted, 5);
        // "addr" holds 5 attempts: 15 more on other emails pass, the 16th is refused.
        for i in 0..15 {
            let other = key("email", &format!("other{i}"));
            assert!(t.attempt(&[(other, 5), (addr, 20)]).is_ok(), "{i}");
        }
        assert!(t.attempt(&[(key("email", "last"), 5), (addr, 20)]).is_err());
    }

    /// A flood of new keys cannot grow the table past its bound, nor push out a lock.
    #[test]
    fn the_table_is_bounded_and_keeps_its_locks() {
        let t = Throttle::new(Duration::from_secs(60));
        let victim = key("email", "victim");
        for _ in 0..2 {
            t.attempt(&[(victim, 1)]).ok();
        }
        for i in 0..MAX_KEYS + 10 {
            let _ = t.attempt(&[(key("email", &i.to_string()), 5)]);
        }
        assert!(t.entries.lock().unwrap().len() <= MAX_KEYS);
        assert!(t.attempt(&[(victim, 1)]).is_err(), "still locked");
    }
}
