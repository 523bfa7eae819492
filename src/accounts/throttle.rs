//! Slowing down password guessing: failed sign-ins are counted per key (an email, a client
//! address) in memory; past a threshold each further failure locks the key for twice as long as
//! the previous lock, up to a maximum. A success clears the email's count. Unknown emails are
//! counted like known ones, so the answers reveal nothing about which accounts exist.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Counts are forgotten this long after a key's last failure (unless it is still locked).
const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// Beyond this many keys, forgotten ones are swept on the next failure.
const SWEEP_AT: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    last_failure: Instant,
    locked_until: Option<Instant>,
}

/// Failure counts and locks.
#[derive(Debug)]
pub struct Throttle {
    entries: Mutex<HashMap<String, Entry>>,
    max_lock: Duration,
}

impl Throttle {
    /// A throttle whose locks last at most `max_lock`.
    pub fn new(max_lock: Duration) -> Throttle {
        Throttle {
            entries: Mutex::new(HashMap::new()),
            max_lock,
        }
    }

    /// `Err(wait)` while `key` is locked.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match entries.get(key).and_then(|e| e.locked_until) {
            Some(until) if until > now => Err(until - now),
            _ => Ok(()),
        }
    }

    /// Counts a failure for `key`; past `allowed` failures the key is locked.
    pub fn fail(&self, key: &str, allowed: u32) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if entries.len() >= SWEEP_AT {
            entries.retain(|_, e| {
                e.locked_until.is_some_and(|u| u > now)
                    || now.duration_since(e.last_failure) < FORGET_AFTER
            });
        }
        let e = entries.entry(key.to_string()).or_insert(Entry {
            failures: 0,
            last_failure: now,
            locked_until: None,
        });
        if now.duration_since(e.last_failure) >= FORGET_AFTER {
            e.failures = 0;
        }
        e.failures = e.failures.saturating_add(1);
        e.last_failure = now;
        if e.failures >= allowed {
            let doublings = (e.failures - allowed).min(20);
            let lock = Duration::from_secs(1u64 << doublings).min(self.max_lock);
            e.locked_until = Some(now + lock);
        }
    }

    /// Clears `key` (a successful sign-in).
    pub fn succeed(&self, key: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_the_allowed_failures_and_doubles() {
        let t = Throttle::new(Duration::from_secs(60));
        for _ in 0..4 {
            t.fail("a", 5);
            assert!(t.check("a").is_ok());
        }
        t.fail("a", 5);
        let first = t.check("a").unwrap_err();
        assert!(first <= Duration::from_secs(1) && first > Duration::ZERO);
        t.fail("a", 5);
        let second = t.check("a").unwrap_err();
        assert!(second > Duration::from_secs(1), "{second:?}");
        assert!(t.check("b").is_ok(), "keys are independent");
        t.succeed("a");
        assert!(t.check("a").is_ok());
        for _ in 0..40 {
            t.fail("c", 1);
        }
        assert!(
            t.check("c").unwrap_err() <= Duration::from_secs(60),
            "capped"
        );
    }
}
