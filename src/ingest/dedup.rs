//! Duplicate suppression: a client `messageId` already accepted for the team within the window
//! is acknowledged again but not stored again. An id is *claimed* before its event is logged and
//! *resolved* once the outcome is known, so a duplicate that arrives meanwhile waits for the
//! original: it is acknowledged only if the original was stored, and retried as new if the
//! original failed. Bounded: at most `capacity` ids, oldest first out. An id is remembered as a
//! 128-bit digest of team and id under two per-process random seeds (~90 bytes per id with the
//! expiry queue, against ~190 for the strings): a window of a million ids is ~85 MiB.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};

use foldhash::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::model::TeamId;

/// What became of a claimed id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its event is being logged.
    Pending,
    /// Its event was accepted.
    Stored,
    /// Its event was refused or failed; the id is free again.
    Failed,
}

/// The right (and duty) to resolve a freshly claimed id.
pub struct Ticket {
    key: Key,
    /// Which claim of the id this is (an id can be claimed again after a failure).
    claim: u64,
}

/// Result of [`Dedup::claim`].
pub enum Claim {
    /// First sighting: log the event, then [`Dedup::resolve`] the ticket.
    New(Ticket),
    /// Seen before (maybe still pending): wait for its outcome.
    Seen(watch::Receiver<Outcome>),
}

/// Remembered ids with their acceptance time.
pub struct Dedup {
    window_us: i64,
    capacity: usize,
    seeds: [foldhash::quality::RandomState; 2],
    inner: Mutex<Inner>,
}

/// A team's id, as a 128-bit digest (two 64-bit hashes under per-process random seeds that
/// differ in their per-hasher part): a collision would take a new event for a duplicate; by
/// chance it is negligible in a window of a million ids, and it cannot be aimed at without the
/// seeds.
type Key = u128;

struct Entry {
    at: i64,
    claim: u64,
    outcome: Outcome,
    /// Created only when a duplicate arrives while the original is pending.
    waiters: Option<watch::Sender<Outcome>>,
}

#[derive(Default)]
struct Inner {
    seen: HashMap<Key, Entry>,
    order: VecDeque<(i64, Key)>,
    claims: u64,
    /// Waiters of pending claims pushed out by the capacity: they still get the outcome.
    evicted: HashMap<u64, watch::Sender<Outcome>>,
}

impl Dedup {
    /// Remembers ids for `window`, at most `capacity` of them.
    pub fn new(window: std::time::Duration, capacity: usize) -> Self {
        Self {
            window_us: window.as_micros() as i64,
            capacity,
            seeds: Default::default(),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims `id` for `team` at `now_us`, or reports that it was seen within the window.
    pub fn claim(&self, team: &TeamId, id: &str, now_us: i64) -> Claim {
        self.insert_with(team, id, now_us, Outcome::Pending)
    }

    /// Records an id whose event is known to be stored (WAL replay).
    pub fn remember_stored(&self, team: &TeamId, id: &str, at_us: i64) {
        let _ = self.insert_with(team, id, at_us, Outcome::Stored);
    }

    fn key(&self, team: &TeamId, id: &str) -> Key {
        let half = |seed: &foldhash::quality::RandomState| {
            let mut h = seed.build_hasher();
            // The team's length first: "ab"+"c" and "a"+"bc" hash apart.
            h.write_usize(team.as_str().len());
            h.write(team.as_str().as_bytes());
            h.write(id.as_bytes());
            h.finish()
        };
        (u128::from(half(&self.seeds[0])) << 64) | u128::from(half(&self.seeds[1]))
    }

    fn insert_with(&self, team: &TeamId, id: &str, now_us: i64, outcome: Outcome) -> Claim {
        let key = self.key(team, id);
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.expire(now_us - self.window_us, self.capacity);
        if let Some(e) = inner.seen.get_mut(&key)
            && e.at >= now_us - self.window_us
        {
            let rx = match &e.waiters {
                Some(tx) => tx.subscribe(),
                None => {
                    let (tx, rx) = watch::channel(e.outcome);
                    if e.outcome == Outcome::Pending {
                        e.waiters = Some(tx);
                    }
                    rx
                }
            };
            return Claim::Seen(rx);
        }
        inner.claims += 1;
        let claim = inner.claims;
        inner.seen.insert(
            key,
            Entry {
                at: now_us,
                claim,
                outcome,
                waiters: None,
            },
        );
        inner.order.push_back((now_us, key));
        Claim::New(Ticket { key, claim })
    }

    /// Settles a claim: `stored` keeps the id; otherwise it is forgotten so a retry goes through.
    pub fn resolve(&self, ticket: Ticket, stored: bool) {
        let outcome = if stored {
            Outcome::Stored
        } else {
            Outcome::Failed
        };
        let mut inner = self.lock();
        if let Some(tx) = inner.evicted.remove(&ticket.claim) {
            tx.send_replace(outcome);
        }
        let Some(e) = inner.seen.get_mut(&ticket.key) else {
            return;
        };
        if e.claim != ticket.claim {
            return; // expired and claimed again since
        }
        e.outcome = outcome;
        if let Some(tx) = e.waiters.take() {
            tx.send_replace(outcome);
        }
        if !stored {
            inner.seen.remove(&ticket.key);
        }
    }

    /// Ids remembered.
    pub fn len(&self) -> usize {
        self.lock().seen.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// Forgets ids older than the window, and the oldest beyond `capacity` (and any beyond
    /// twice the capacity in the expiry queue). A pending id's
    /// waiters are kept aside so they still learn its outcome.
    fn expire(&mut self, older_than: i64, capacity: usize) {
        while let Some((at, _)) = self.order.front() {
            // `order` also holds ids whose claim failed (forgotten in `seen`, not here): it is
            // kept within twice the capacity too, so retries of failing batches cannot grow it.
            if *at >= older_than
                && self.seen.len() < capacity
                && self.order.len() <= capacity.saturating_mul(2)
            {
                break;
            }
            let (at, key) = self.order.pop_front().expect("front exists");
            if self.seen.get(&key).is_some_and(|e| e.at == at)
                && let Some(e) = self.seen.remove(&key)
                && let Some(tx) = e.waiters
            {
                self.evicted.insert(e.claim, tx);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn is_new(c: Claim) -> Option<Ticket> {
        match c {
            Claim::New(t) => Some(t),
            Claim::Seen(_) => None,
        }
    }

    #[test]
    fn window_capacity_and_failed_originals() {
        let d = Dedup::new(Duration::from_secs(10), 3);
        let t = TeamId::from("t");
        let first = is_new(d.claim(&t, "a", 0)).unwrap();
        let Claim::Seen(rx) = d.claim(&t, "a", 1_000_000) else {
            panic!("duplicate within the window")
        };
        assert_eq!(
            *rx.borrow(),
            Outcome::Pending,
            "the original is still being logged"
        );
        d.resolve(first, false);
        assert_eq!(*rx.borrow(), Outcome::Failed);
        let again = is_new(d.claim(&t, "a", 1_000_001)).expect("a failed original frees the id");
        d.resolve(again, true);
        let Claim::Seen(rx) = d.claim(&t, "a", 2_000_000) else {
            panic!()
        };
        assert_eq!(*rx.borrow(), Outcome::Stored);
        assert!(
            is_new(d.claim(&TeamId::from("u"), "a", 2_000_000)).is_some(),
            "ids are per team"
        );
        assert!(
            is_new(d.claim(&t, "a", 12_000_002)).is_some(),
            "the window passed"
        );
        for i in 0..10 {
            d.claim(&t, &format!("x{i}"), 12_000_003);
        }
        assert!(d.len() <= 3, "capacity bounds memory: {}", d.len());
    }

    #[test]
    fn waiters_of_an_evicted_pending_claim_still_learn_its_outcome() {
        let d = Dedup::new(Duration::from_secs(10), 2);
        let t = TeamId::from("t");
        let original = is_new(d.claim(&t, "a", 0)).unwrap();
        let Claim::Seen(mut rx) = d.claim(&t, "a", 1) else {
            panic!("a duplicate while the original is pending")
        };
        assert_eq!(*rx.borrow_and_update(), Outcome::Pending);
        for i in 0..3 {
            d.claim(&t, &format!("x{i}"), 2);
        }
        assert!(d.len() <= 2, "the capacity pushed the pending claim out");
        d.resolve(original, true);
        assert_eq!(*rx.borrow_and_update(), Outcome::Stored);
    }

    #[test]
    fn failed_claims_do_not_grow_the_expiry_queue() {
        let d = Dedup::new(Duration::from_secs(3600), 10);
        let t = TeamId::from("t");
        for round in 0..100 {
            for i in 0..10 {
                let ticket = is_new(d.claim(&t, &format!("r{i}"), round)).unwrap();
                d.resolve(ticket, false); // a batch refused again and again
            }
        }
        // Twice the capacity, plus the claim just made.
        assert!(d.lock().order.len() <= 21, "{}", d.lock().order.len());
    }
}
