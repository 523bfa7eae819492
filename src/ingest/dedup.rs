//! Duplicate suppression: a client `messageId` already accepted for the team within the window
//! is acknowledged again but not stored again. An id is *claimed* before its event is logged and
//! *settled* once the outcome is known, so a duplicate that arrives meanwhile waits for the
//! original: it is acknowledged only if the original was stored, and retried as new if the
//! original failed. Bounded: at most `capacity` ids, oldest first out.
//!
//! Laid out for the cache and for size, since with a million ids every probe of the window is a
//! miss and the window is the largest thing the process keeps: an id is a 96-bit digest of team
//! and id under two per-process random seeds, remembered in the window ([`window`]) as digest → its place in
//! the expiry queue (16 bytes a slot), and the queue holds digest and acceptance second in
//! acceptance order (16 bytes an id): ~50 MiB for the default million (the table has 2²¹ slots),
//! against ~75 MiB with 128-bit digests and microsecond times, and ~130 MiB when every slot also
//! carried its claim's state. The place in the queue, not the time, says whether a queue entry
//! is still the id's current acceptance, so expiry never forgets an id accepted again after a
//! failed claim. Claims still in flight live in a small map of their own ([`Inner::pending`], as
//! many ids as appends in flight, so it stays in cache): a claim looks the digest up in both and
//! inserts it into both where it just looked, and settling a stored append only takes its ids
//! out of that small map — the window is touched again only when an append failed. Each new id
//! costs two misses (its probe, and the expiry of the oldest), not three.

use std::collections::VecDeque;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use window::{Key, Place, Window};

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::model::TeamId;

mod window;

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

/// The right (and duty) to settle a freshly claimed id.
pub struct Ticket {
    key: Key,
}

/// Result of [`Dedup::claim`].
pub enum Claim {
    /// First sighting: log the event, then [`Dedup::settle`] the ticket.
    New(Ticket),
    /// Seen before (maybe still pending): wait for its outcome.
    Seen(watch::Receiver<Outcome>),
}

/// The claims of one append, settled exactly once: by [`Claims::settle`] with the append's
/// outcome, or as failed when dropped unsettled (a panic between the claim and the outcome), so
/// no id stays claimed — and its duplicates waiting — forever.
pub struct Claims {
    dedup: std::sync::Arc<Dedup>,
    tickets: Vec<Ticket>,
}

impl Claims {
    /// No claims yet, to be settled with `dedup`.
    pub fn new(dedup: std::sync::Arc<Dedup>) -> Self {
        Claims {
            dedup,
            tickets: Vec::new(),
        }
    }

    /// Adds a fresh claim.
    pub fn push(&mut self, ticket: Ticket) {
        self.tickets.push(ticket);
    }

    /// Settles every claim with the append's outcome.
    pub fn settle(mut self, stored: bool) {
        self.dedup.settle(std::mem::take(&mut self.tickets), stored);
    }
}

impl Drop for Claims {
    fn drop(&mut self) {
        self.dedup.settle(std::mem::take(&mut self.tickets), false);
    }
}

/// Remembered ids with their acceptance time.
pub struct Dedup {
    window_us: i64,
    capacity: usize,
    seeds: [foldhash::quality::RandomState; 2],
    inner: Mutex<Inner>,
}

/// Passes [`Key`]'s first word through as the hash.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not reached (a `Key` writes one u64); any bytes still make some hash.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type KeyMap<V> = HashMap<Key, V, BuildHasherDefault<KeyHasher>>;

/// Room the map of claims in flight keeps after a stall: appends in flight at full load hold
/// a few thousand ids.
const PENDING_KEPT: usize = 16 * 1024;

/// A claim whose append is in flight.
struct Pending {
    /// Created only when a duplicate arrives while the original is pending.
    waiters: Option<watch::Sender<Outcome>>,
}

/// An id in the expiry queue.
#[derive(Clone, Copy)]
struct Accepted {
    /// Acceptance time, whole seconds since the Unix epoch (rounded down: an id is remembered
    /// for up to a second longer than the window, never shorter).
    second: u32,
    key: Key,
}

#[derive(Default)]
struct Inner {
    /// Digest → place of its current acceptance in `order`, pending ids included.
    seen: Window,
    /// Ids in acceptance order, for expiry (also acceptances since forgotten: see `expire`).
    order: VecDeque<Accepted>,
    /// Place of `order`'s front.
    front: Place,
    /// Ids claimed and not settled yet.
    pending: KeyMap<Pending>,
}

/// Whole seconds of `at_us`, rounded down, within `u32` (Unix time fits until 2106).
fn second(at_us: i64) -> u32 {
    at_us.div_euclid(1_000_000).clamp(0, i64::from(u32::MAX)) as u32
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

    /// Claims `id` for `team` at `now_us`, or reports that it was seen within the window
    /// (one id of [`Dedup::claim_many`], for the tests).
    #[cfg(test)]
    fn claim(&self, team: &TeamId, id: &str, now_us: i64) -> Claim {
        let key = self.key(team, id);
        self.claim_key(&mut self.lock(), key, now_us)
    }

    /// [`Dedup::claim`] for the ids of one request, under one lock. `None` marks an id that
    /// appeared earlier in `ids` (the event is a duplicate of that one, which the claim is for).
    pub fn claim_many(&self, team: &TeamId, ids: &[&str], now_us: i64) -> Vec<Option<Claim>> {
        if ids.is_empty() {
            return Vec::new(); // a request without client ids never takes the lock
        }
        let keys: Vec<Key> = ids.iter().map(|id| self.key(team, id)).collect();
        let mut repeat = vec![false; keys.len()];
        if keys.len() > 1 {
            let mut firsts: KeyMap<()> = KeyMap::default();
            firsts.reserve(keys.len());
            for (key, repeat) in keys.iter().zip(&mut repeat) {
                *repeat = firsts.insert(*key, ()).is_some();
            }
        }
        let mut guard = self.lock();
        guard.warm(&keys);
        keys.into_iter()
            .zip(repeat)
            .map(|(key, repeat)| (!repeat).then(|| self.claim_key(&mut guard, key, now_us)))
            .collect()
    }

    fn claim_key(&self, inner: &mut Inner, key: Key, now_us: i64) -> Claim {
        inner.expire(now_us - self.window_us, self.capacity);
        if let Some(p) = inner.pending.get_mut(&key) {
            let tx = p
                .waiters
                .get_or_insert_with(|| watch::channel(Outcome::Pending).0);
            return Claim::Seen(tx.subscribe());
        }
        if inner.seen.contains(key) {
            return Claim::Seen(watch::channel(Outcome::Stored).1);
        }
        inner.remember(key, now_us);
        inner.pending.insert(key, Pending { waiters: None });
        Claim::New(Ticket { key })
    }

    /// Records an id whose event is known to be stored (WAL replay).
    pub fn remember_stored(&self, team: &TeamId, id: &str, at_us: i64) {
        let key = self.key(team, id);
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.expire(at_us - self.window_us, self.capacity);
        if !inner.seen.contains(key) {
            inner.remember(key, at_us);
        }
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
        Key::new(half(&self.seeds[0]), half(&self.seeds[1]))
    }

    /// Settles the claims of one append (see [`Claims`]), under one lock: `stored` keeps the ids; otherwise they
    /// are forgotten so a retry goes through. Whoever waits on one learns the outcome.
    pub fn settle(&self, tickets: Vec<Ticket>, stored: bool) {
        if tickets.is_empty() {
            return;
        }
        let outcome = if stored {
            Outcome::Stored
        } else {
            Outcome::Failed
        };
        let mut inner = self.lock();
        for ticket in tickets {
            if let Some(p) = inner.pending.remove(&ticket.key)
                && let Some(tx) = p.waiters
            {
                tx.send_replace(outcome);
            }
            if !stored {
                // No other claim of the id can have come meanwhile (it was pending, and
                // `remember_stored` only runs before ingestion opens), so the place remembered
                // is this claim's, unless the capacity pushed it out already.
                inner.seen.remove(ticket.key);
            }
        }
        // A stall (a disk that stopped syncing) can leave millions of ids in flight; the map
        // does not give that room back by itself.
        let pending = &mut inner.pending;
        if pending.capacity() > PENDING_KEPT && pending.len() < pending.capacity() / 4 {
            pending.shrink_to(PENDING_KEPT.max(pending.len() * 2));
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
    /// Remembers `key` as accepted at `at_us`, last in the expiry order.
    fn remember(&mut self, key: Key, at_us: i64) {
        let place = self.front.wrapping_add(self.order.len() as Place);
        self.seen.insert(key, place);
        self.order.push_back(Accepted {
            second: second(at_us),
            key,
        });
    }

    /// Probes the window for `keys`, and for as many of the oldest ids (the ones expiry takes
    /// out next), before any of them is needed: with a large window each probe is a cache miss,
    /// and probes that do not wait for each other overlap theirs, where one claim after another
    /// would wait for each miss in turn.
    fn warm(&self, keys: &[Key]) {
        let oldest = self.order.iter().take(keys.len()).map(|a| &a.key);
        self.seen.warm(keys.iter().chain(oldest));
    }

    /// Forgets ids accepted before the second of `older_than_us`, and the oldest beyond
    /// `capacity` (and any beyond twice the capacity in the expiry queue). A pending id pushed
    /// out stays pending: its duplicates still wait for its outcome. Ids are queued in the
    /// order their claims took the lock, which follows their receive times within the few
    /// milliseconds a request takes to get there; one queued behind a later one is forgotten
    /// with it, that much late.
    fn expire(&mut self, older_than_us: i64, capacity: usize) {
        let since = second(older_than_us);
        while let Some(oldest) = self.order.front() {
            // `order` also holds acceptances whose claim failed (forgotten in `seen`, not
            // here): it is kept within twice the capacity too, so retries of failing batches
            // cannot grow it.
            if oldest.second >= since
                && self.seen.len() < capacity
                && self.order.len() <= capacity.saturating_mul(2)
            {
                break;
            }
            let key = oldest.key;
            if self.seen.get(key) == Some(self.front) {
                self.seen.remove(key);
            }
            self.order.pop_front();
            self.front = self.front.wrapping_add(1);
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

    /// Claims `id` at `at`, then a duplicate of it at `then` while it is pending: the original's
    /// ticket and the duplicate's receiver, which must still say pending.
    fn pending_with_a_waiter(
        d: &Dedup,
        t: &TeamId,
        id: &str,
        at: i64,
        then: i64,
    ) -> (Ticket, watch::Receiver<Outcome>) {
        let original = is_new(d.claim(t, id, at)).unwrap();
        let Claim::Seen(mut rx) = d.claim(t, id, then) else {
            panic!("a duplicate while the original is pending")
        };
        assert_eq!(*rx.borrow_and_update(), Outcome::Pending);
        (original, rx)
    }

    #[test]
    fn a_request_claims_its_ids_together_and_repeats_once() {
        let d = Dedup::new(Duration::from_secs(10), 100);
        let t = TeamId::from("t");
        let old = is_new(d.claim(&t, "old", 0)).unwrap();
        d.settle(vec![old], true);
        let pending = is_new(d.claim(&t, "busy", 0)).unwrap();
        let claims = d.claim_many(&t, &["a", "old", "b", "a", "busy", "b", "c"], 1);
        let kinds: Vec<&str> = claims
            .iter()
            .map(|c| match c {
                None => "repeat",
                Some(Claim::New(_)) => "new",
                Some(Claim::Seen(rx)) if *rx.borrow() == Outcome::Stored => "stored",
                Some(Claim::Seen(_)) => "pending",
            })
            .collect();
        assert_eq!(
            kinds,
            ["new", "stored", "new", "repeat", "pending", "repeat", "new"]
        );
        let tickets: Vec<Ticket> = claims.into_iter().flatten().filter_map(is_new).collect();
        d.settle(tickets, true);
        d.settle(vec![pending], true);
        assert!(is_new(d.claim(&t, "c", 2)).is_none(), "settled as stored");
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
        d.settle(vec![first], false);
        assert_eq!(*rx.borrow(), Outcome::Failed);
        let again = is_new(d.claim(&t, "a", 1_000_001)).expect("a failed original frees the id");
        d.settle(vec![again], true);
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
        let (original, mut rx) = pending_with_a_waiter(&d, &t, "a", 0, 1);
        for i in 0..3 {
            d.claim(&t, &format!("x{i}"), 2);
        }
        assert!(d.len() <= 2, "the capacity pushed the pending claim out");
        d.settle(vec![original], true);
        assert_eq!(*rx.borrow_and_update(), Outcome::Stored);
    }

    /// An append still in flight past the window (a stalled disk) keeps its ids claimed: a
    /// duplicate waits for it instead of being logged a second time. Settling several ids at
    /// once keeps the stored ones and frees only those of a failed append.
    #[test]
    fn a_pending_claim_outlives_the_window_and_appends_settle_whole() {
        let d = Dedup::new(Duration::from_secs(1), 100);
        let t = TeamId::from("t");
        // The duplicate comes long after the window.
        let (slow, mut rx) = pending_with_a_waiter(&d, &t, "slow", 0, 5_000_000);
        d.settle(vec![slow], true);
        assert_eq!(*rx.borrow_and_update(), Outcome::Stored);

        let kept: Vec<Ticket> = ["a", "b"]
            .iter()
            .map(|id| is_new(d.claim(&t, id, 6_000_000)).unwrap())
            .collect();
        let lost: Vec<Ticket> = ["c", "d"]
            .iter()
            .map(|id| is_new(d.claim(&t, id, 6_000_000)).unwrap())
            .collect();
        d.settle(kept, true);
        d.settle(lost, false);
        for id in ["a", "b"] {
            assert!(is_new(d.claim(&t, id, 6_000_001)).is_none(), "{id} stored");
        }
        for id in ["c", "d"] {
            assert!(
                is_new(d.claim(&t, id, 6_000_001)).is_some(),
                "{id} free again"
            );
        }
    }

    /// Claims dropped without an outcome (a panic on the way to the log) are settled as
    /// failed: a duplicate waiting on one learns it, and the id can be claimed again.
    #[test]
    fn claims_dropped_unsettled_free_their_ids() {
        let d = std::sync::Arc::new(Dedup::new(Duration::from_secs(10), 100));
        let t = TeamId::from("t");
        let mut claims = Claims::new(d.clone());
        claims.push(is_new(d.claim(&t, "a", 0)).unwrap());
        let Claim::Seen(mut rx) = d.claim(&t, "a", 1) else {
            panic!("pending")
        };
        drop(claims);
        assert_eq!(*rx.borrow_and_update(), Outcome::Failed);
        assert!(is_new(d.claim(&t, "a", 2)).is_some(), "free again");
    }

    /// After a stall, the map of claims in flight gives its room back.
    #[test]
    fn the_map_of_claims_in_flight_shrinks_after_a_stall() {
        let d = Dedup::new(Duration::from_secs(10), 1_000_000);
        let t = TeamId::from("t");
        let tickets: Vec<Ticket> = (0..100_000)
            .map(|i| is_new(d.claim(&t, &format!("s{i}"), 0)).unwrap())
            .collect();
        assert!(d.lock().pending.capacity() >= 100_000);
        d.settle(tickets, true);
        assert!(d.lock().pending.capacity() <= 2 * PENDING_KEPT);
        assert_eq!(d.len(), 100_000, "the stored ids stay remembered");
    }

    /// A slot of the window and an entry of its queue are 16 bytes each: the window's memory
    /// (README, "Memory") rests on it.
    #[test]
    fn a_remembered_id_takes_32_bytes() {
        assert_eq!(window::Window::SLOT_BYTES, 16);
        assert_eq!(std::mem::size_of::<Accepted>(), 16);
    }

    /// An id accepted again, in the same microsecond, after its first claim failed: expiring
    /// the failed acceptance (the queue over twice the capacity, from other failed claims)
    /// must not forget the stored one.
    #[test]
    fn expiring_a_failed_acceptance_keeps_the_id_accepted_again() {
        let d = Dedup::new(Duration::from_secs(3600), 2);
        let t = TeamId::from("t");
        let failed = is_new(d.claim(&t, "a", 5)).unwrap();
        d.settle(vec![failed], false);
        let stored = is_new(d.claim(&t, "a", 5)).expect("free again");
        d.settle(vec![stored], true);
        for id in ["x", "y", "z"] {
            let ticket = is_new(d.claim(&t, id, 5)).unwrap();
            d.settle(vec![ticket], false);
        }
        assert!(
            is_new(d.claim(&t, "a", 5)).is_none(),
            "the stored acceptance of a is remembered"
        );
        assert_eq!(d.lock().order.len(), 4, "the failed one was expired");
    }

    /// Ids are kept for the whole window, to the second: not forgotten before it has passed.
    #[test]
    fn an_id_is_kept_until_its_window_has_passed() {
        let d = Dedup::new(Duration::from_secs(10), 100);
        let t = TeamId::from("t");
        let ticket = is_new(d.claim(&t, "a", 1_999_999)).unwrap();
        d.settle(vec![ticket], true);
        assert!(is_new(d.claim(&t, "a", 11_999_999)).is_none(), "10 s later");
        assert!(
            is_new(d.claim(&t, "a", 12_000_000)).is_some(),
            "at most a second late"
        );
    }

    #[test]
    fn failed_claims_do_not_grow_the_expiry_queue() {
        let d = Dedup::new(Duration::from_secs(3600), 10);
        let t = TeamId::from("t");
        for round in 0..100 {
            for i in 0..10 {
                let ticket = is_new(d.claim(&t, &format!("r{i}"), round)).unwrap();
                d.settle(vec![ticket], false); // a batch refused again and again
            }
        }
        // Twice the capacity, plus the claim just made.
        assert!(d.lock().order.len() <= 21, "{}", d.lock().order.len());
    }
}
