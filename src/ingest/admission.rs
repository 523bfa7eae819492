//! Admission control. ractor mailboxes are unbounded, so every event reserves its bytes here
//! before it is sent to an actor, and gives them back only once its rows are committed.
//! Over the team budget → 429; over the global budget → 503.
//!
//! A reservation is an estimate made before the rows exist (`EventRows::approx_bytes`). What
//! the rows then really hold is measured where they live and counted too: the team actor
//! reports its buffers' and running flush's bytes beyond their reservations ([`Admission::
//! set_excess`]), and the flush its Parquet encoder's ([`EncodingGauge`]). A team is admitted
//! while reserved + excess + encoding fits its budget, so events whose columns cost more than
//! their estimate (long strings in a builder's doubled capacity) cannot take the process past
//! it.
//!
//! What no count sees — the allocator's pages between live blocks, memory freed but not yet
//! given back, request bodies, the dedup window — is read off the process's resident size
//! ([`Resident`]): beyond an allowance left to the process itself (`ingest.resident_allowance`),
//! resident bytes that neither reservations nor measurements account for are charged to the
//! teams buffering, each by its share of what is counted, and to the global budget whole. So
//! one team at full speed keeps the process within its budget + the allowance, and all teams
//! within the global budget + the allowance, whatever the allocator does.
//!
//! A request that finds no room need not be refused at once: [`Admission::wait_for_room`] lets
//! it wait (before its body is read, so waiting holds little memory: its head and the
//! connection's read buffer) until a commit or a lower reading makes room, as a broker throttles
//! a producer by delaying its answers. A request whose token is in its body (`writeKey`) is not
//! known to be a team's until the body is read, and does not wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::Notify;

use crate::model::TeamId;

/// Which budget refused an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The team's own budget is full.
    Team,
    /// All teams together are at the global budget.
    Global,
}

/// One team's bytes.
#[derive(Debug, Default)]
struct TeamUse {
    /// Reserved by admitted events until their flush commits.
    reserved: AtomicU64,
    /// Measured in the actor's buffers and running flush beyond their reservations.
    excess: AtomicU64,
    /// Held by the running flush's Parquet encoder.
    encoding: AtomicU64,
    /// Taken by the team's requests that wait for room, one at a time ([`Turn`]).
    door: Arc<tokio::sync::Mutex<()>>,
}

impl TeamUse {
    fn measured(&self) -> u64 {
        self.excess.load(Ordering::Acquire) + self.encoding.load(Ordering::Acquire)
    }
}

/// How the budgets count the process's resident size.
#[derive(Clone)]
pub struct Resident {
    /// Resident bytes left to the process itself (runtime, catalog, dedup window, allocator
    /// slack): only what is resident beyond them is charged to the budgets.
    pub allowance: u64,
    /// The resident size now, in bytes (the process's: [`crate::resident::sampled`]).
    pub read: Arc<dyn Fn() -> u64 + Send + Sync>,
}

impl std::fmt::Debug for Resident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resident")
            .field("allowance", &self.allowance)
            .finish_non_exhaustive()
    }
}

/// Resident bytes beyond the allowance that the counts do not account for, and the counts.
#[derive(Debug, Clone, Copy, Default)]
struct Uncounted {
    bytes: u64,
    /// All reservations and measurements together.
    counted: u64,
}

impl Uncounted {
    /// The part charged to a team whose reservations and measurements are `own` bytes.
    fn share(&self, own: u64) -> u64 {
        if self.bytes == 0 || self.counted == 0 {
            return 0;
        }
        (u128::from(self.bytes) * u128::from(own.min(self.counted)) / u128::from(self.counted))
            as u64
    }
}

/// Byte budgets per team and in total.
#[derive(Debug)]
pub struct Admission {
    team_budget: u64,
    global_budget: u64,
    global: AtomicU64,
    /// Every team's excess and encoding bytes together.
    global_measured: Arc<AtomicU64>,
    teams: DashMap<TeamId, Arc<TeamUse>>,
    /// None: the budgets count reservations and measurements only.
    resident: Option<Resident>,
    /// Woken when reservations are given back.
    released: Notify,
    /// Requests in [`Admission::wait_for_room`].
    waiting: AtomicU64,
}

/// Where a flush reports what its encoder holds (see [`Admission::encoding_gauge`]).
#[derive(Debug, Clone)]
pub struct EncodingGauge {
    team: Arc<TeamUse>,
    global: Arc<AtomicU64>,
}

impl EncodingGauge {
    /// The encoder now holds `bytes`.
    pub fn set(&self, bytes: u64) {
        swap_into(&self.team.encoding, &self.global, bytes);
    }
}

/// Stores `bytes` in `slot` and moves `total` by the difference. Each slot has one writer at a
/// time (a team's actor its excess — and the dispatcher once that actor is gone — and the flush
/// holding the team's flush lock its encoding), so `total` never dips below a slot's share.
fn swap_into(slot: &AtomicU64, total: &AtomicU64, bytes: u64) {
    let old = slot.swap(bytes, Ordering::AcqRel);
    if bytes >= old {
        total.fetch_add(bytes - old, Ordering::AcqRel);
    } else {
        let before = total.fetch_sub(old - bytes, Ordering::AcqRel);
        debug_assert!(
            before >= old - bytes,
            "measured total below one of its parts"
        );
    }
}

impl Admission {
    /// Budgets in bytes.
    pub fn new(team_budget: u64, global_budget: u64) -> Self {
        Self {
            team_budget,
            global_budget,
            global: AtomicU64::new(0),
            global_measured: Arc::default(),
            teams: DashMap::new(),
            resident: None,
            released: Notify::new(),
            waiting: AtomicU64::new(0),
        }
    }

    /// Budgets that also count the resident size beyond `resident.allowance`.
    pub fn with_resident(mut self, resident: Resident) -> Self {
        self.resident = Some(resident);
        self
    }

    fn uncounted(&self) -> Uncounted {
        let Some(resident) = &self.resident else {
            return Uncounted::default();
        };
        let counted =
            self.global.load(Ordering::Acquire) + self.global_measured.load(Ordering::Acquire);
        Uncounted {
            bytes: (resident.read)()
                .saturating_sub(resident.allowance)
                .saturating_sub(counted),
            counted,
        }
    }

    /// Bytes charged to `usage` beyond its reservations: its measurements and its share of the
    /// uncounted resident bytes.
    fn charged_beyond_reserved(usage: &TeamUse, uncounted: &Uncounted) -> u64 {
        let measured = usage.measured();
        measured + uncounted.share(usage.reserved.load(Ordering::Acquire) + measured)
    }

    /// Bytes charged to the global budget beyond its reservations: every team's measurements and
    /// the uncounted resident bytes.
    fn global_beyond_reserved(&self, uncounted: &Uncounted) -> u64 {
        self.global_measured.load(Ordering::Acquire) + uncounted.bytes
    }

    /// Whether `bytes` more would be admitted for `team` now (nothing is reserved).
    pub fn fits(&self, team: &TeamId, bytes: u64, team_budget: u64) -> Result<(), Refusal> {
        let usage = self.team_use(team);
        let uncounted = self.uncounted();
        let cur = usage.reserved.load(Ordering::Acquire);
        let beyond = Self::charged_beyond_reserved(&usage, &uncounted);
        if !room(cur, beyond, bytes, team_budget) {
            return Err(Refusal::Team);
        }
        let cur = self.global.load(Ordering::Acquire);
        let beyond = self.global_beyond_reserved(&uncounted);
        if !room(cur, beyond, bytes, self.global_budget) {
            return Err(Refusal::Global);
        }
        Ok(())
    }

    /// Waits up to `within` until `bytes` more would fit `team`'s budget and the global one,
    /// waking when reservations are given back and at every reading of the resident size.
    /// Nothing is reserved: the caller admits as usual. A request that had to wait gets its
    /// team's [`Turn`]: the team's waiters go one at a time, each holding the turn until it
    /// asks to be admitted, so the room one commit makes is not claimed by every waiter at
    /// once. None when there was room at once.
    pub async fn wait_for_room(
        &self,
        team: &TeamId,
        bytes: u64,
        team_budget: u64,
        within: Duration,
    ) -> Option<Turn> {
        if within.is_zero() || self.fits(team, bytes, team_budget).is_ok() {
            return None;
        }
        let deadline = tokio::time::Instant::now() + within;
        metrics::counter!("stowage_admission_waits_total").increment(1);
        let _waiting = Waiting::count(&self.waiting);
        let door = self.team_use(team).door.clone();
        let turn = Turn {
            _door: tokio::time::timeout_at(deadline, door.lock_owned())
                .await
                .ok()?,
        };
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if self.fits(team, bytes, team_budget).is_ok() {
                return Some(turn);
            }
            let next = deadline.min(tokio::time::Instant::now() + crate::resident::EVERY);
            tokio::select! {
                _ = released => {}
                _ = tokio::time::sleep_until(next) => {
                    if next == deadline {
                        return Some(turn);
                    }
                }
            }
        }
    }

    fn team_use(&self, team: &TeamId) -> Arc<TeamUse> {
        if let Some(c) = self.teams.get(team) {
            return c.clone();
        }
        self.teams.entry(team.clone()).or_default().clone()
    }

    /// Reserves `bytes` for `team` under its budget (`team_budget`: the team's own, or the
    /// default), counting what its rows are measured to hold beyond their reservations, or
    /// says which budget is full.
    pub fn admit(&self, team: &TeamId, bytes: u64, team_budget: u64) -> Result<(), Refusal> {
        let usage = self.team_use(team);
        let uncounted = self.uncounted();
        let beyond = Self::charged_beyond_reserved(&usage, &uncounted);
        reserve(&usage.reserved, beyond, bytes, team_budget).map_err(|_| Refusal::Team)?;
        let beyond = self.global_beyond_reserved(&uncounted);
        if reserve(&self.global, beyond, bytes, self.global_budget).is_err() {
            release(&usage.reserved, bytes);
            return Err(Refusal::Global);
        }
        Ok(())
    }

    /// Reserves `bytes` whatever the budgets say (replaying events that were acknowledged).
    pub fn force(&self, team: &TeamId, bytes: u64) {
        self.team_use(team)
            .reserved
            .fetch_add(bytes, Ordering::AcqRel);
        self.global.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Returns `bytes` reserved for `team`.
    pub fn release(&self, team: &TeamId, bytes: u64) {
        release(&self.team_use(team).reserved, bytes);
        release(&self.global, bytes);
        self.released.notify_waiters();
    }

    /// What `team`'s buffered and flushing rows are measured to hold beyond their reservations
    /// (the team actor's report; replaces the last one).
    pub fn set_excess(&self, team: &TeamId, bytes: u64) {
        swap_into(&self.team_use(team).excess, &self.global_measured, bytes);
    }

    /// Where `team`'s flush reports its encoder's bytes (set back to 0 when it is done).
    pub fn encoding_gauge(&self, team: &TeamId) -> EncodingGauge {
        EncodingGauge {
            team: self.team_use(team),
            global: self.global_measured.clone(),
        }
    }

    /// The per-team budget.
    pub fn team_budget(&self) -> u64 {
        self.team_budget
    }

    /// Bytes reserved by one team.
    pub fn team_bytes(&self, team: &TeamId) -> u64 {
        self.teams
            .get(team)
            .map_or(0, |c| c.reserved.load(Ordering::Relaxed))
    }

    /// Bytes one team holds beyond its reservations: its rows' measured excess and its
    /// encoder's bytes.
    pub fn team_measured_bytes(&self, team: &TeamId) -> u64 {
        self.teams.get(team).map_or(0, |c| c.measured())
    }

    /// Bytes reserved in total.
    pub fn global_bytes(&self) -> u64 {
        self.global.load(Ordering::Relaxed)
    }

    /// Bytes held beyond the reservations, all teams together.
    pub fn global_measured_bytes(&self) -> u64 {
        self.global_measured.load(Ordering::Relaxed)
    }

    /// Requests waiting for room now.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Resident bytes beyond the allowance that neither reservations nor measurements account
    /// for (0 when the resident size is not counted).
    pub fn uncounted_bytes(&self) -> u64 {
        self.uncounted().bytes
    }
}

/// A waiting request's turn among its team's waiters: held until it asks to be admitted.
#[derive(Debug)]
pub struct Turn {
    _door: tokio::sync::OwnedMutexGuard<()>,
}

/// One request counted in [`Admission::waiting`] while it lives (also when its task is
/// dropped mid-wait).
struct Waiting<'a>(&'a AtomicU64);

impl<'a> Waiting<'a> {
    fn count(waiting: &'a AtomicU64) -> Self {
        waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(waiting)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether `bytes` more fit `budget` beside `cur` reserved and `beyond` charged. An event larger
/// than the whole budget is still admitted into an empty buffer, so a budget smaller than one
/// event (or a process resident beyond its allowance with nothing buffered) cannot wedge a team
/// forever.
fn room(cur: u64, beyond: u64, bytes: u64, budget: u64) -> bool {
    cur == 0 || cur.saturating_add(beyond).saturating_add(bytes) <= budget
}

/// Adds `bytes` to `counter` if it stays within `budget` with `beyond` bytes beside it.
fn reserve(counter: &AtomicU64, beyond: u64, bytes: u64, budget: u64) -> Result<u64, u64> {
    counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
        room(cur, beyond, bytes, budget).then_some(cur + bytes)
    })
}

fn release(counter: &AtomicU64, bytes: u64) {
    let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
        Some(cur.saturating_sub(bytes))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn team_then_global_budget() {
        let a = Admission::new(100, 150);
        let (t1, t2) = (TeamId::from("t1"), TeamId::from("t2"));
        assert_eq!(a.admit(&t1, 60, a.team_budget()), Ok(()));
        assert_eq!(a.admit(&t1, 60, a.team_budget()), Err(Refusal::Team));
        assert_eq!(a.admit(&t2, 60, a.team_budget()), Ok(()));
        assert_eq!(a.admit(&t2, 40, a.team_budget()), Err(Refusal::Global));
        assert_eq!(
            a.team_bytes(&t2),
            60,
            "a global refusal gives the team bytes back"
        );
        a.release(&t1, 60);
        assert_eq!(a.admit(&t2, 40, a.team_budget()), Ok(()));
        assert_eq!(a.global_bytes(), 100);
    }

    #[test]
    fn measured_bytes_count_against_both_budgets() {
        let a = Admission::new(100, 150);
        let (t1, t2) = (TeamId::from("t1"), TeamId::from("t2"));
        assert_eq!(a.admit(&t1, 30, a.team_budget()), Ok(()));
        // Its rows hold 50 more than reserved, its encoder 15: 95 of 100 used.
        a.set_excess(&t1, 50);
        let gauge = a.encoding_gauge(&t1);
        gauge.set(15);
        assert_eq!(a.team_measured_bytes(&t1), 65);
        assert_eq!(a.admit(&t1, 10, a.team_budget()), Err(Refusal::Team));
        assert_eq!(a.admit(&t1, 5, a.team_budget()), Ok(()));
        // Globally 35 reserved + 65 measured: another team finds 50 of 150 left.
        assert_eq!(a.admit(&t2, 60, a.team_budget()), Err(Refusal::Global));
        assert_eq!(a.admit(&t2, 50, a.team_budget()), Ok(()));
        a.release(&t2, 50);
        // A new report replaces the old; the encoder done, both fall back.
        a.set_excess(&t1, 10);
        gauge.set(0);
        assert_eq!(a.global_measured_bytes(), 10);
        assert_eq!(a.admit(&t1, 55, a.team_budget()), Ok(()));
        a.set_excess(&t1, 0);
        assert_eq!(a.global_measured_bytes(), 0);
        assert_eq!(a.team_bytes(&t1), 90, "measured bytes are never reserved");
    }

    /// An Admission counting a resident size the test sets, beyond `allowance`.
    fn with_reading(team: u64, global: u64, allowance: u64) -> (Admission, Arc<AtomicU64>) {
        let reading = Arc::new(AtomicU64::new(0));
        let r = reading.clone();
        let a = Admission::new(team, global).with_resident(Resident {
            allowance,
            read: Arc::new(move || r.load(Ordering::Relaxed)),
        });
        (a, reading)
    }

    #[test]
    fn resident_bytes_beyond_the_allowance_are_charged_to_the_team() {
        let (a, reading) = with_reading(120, 1000, 100);
        let t = TeamId::from("t");
        reading.store(50, Ordering::Relaxed);
        assert_eq!(a.admit(&t, 60, 120), Ok(()));
        assert_eq!(
            a.admit(&t, 50, 120),
            Ok(()),
            "under the allowance: reservations only"
        );
        assert_eq!(a.uncounted_bytes(), 0);
        // Resident 250: 150 beyond the allowance, of which 110 reserved and 40 uncounted.
        reading.store(250, Ordering::Relaxed);
        assert_eq!(a.uncounted_bytes(), 40);
        assert_eq!(a.fits(&t, 1, 120), Err(Refusal::Team));
        assert_eq!(a.admit(&t, 1, 120), Err(Refusal::Team));
        // Resident 200: 100 beyond, fewer than the 110 reserved (admitted, not yet resident).
        reading.store(200, Ordering::Relaxed);
        assert_eq!(a.admit(&t, 10, 120), Ok(()));
        assert_eq!(a.admit(&t, 1, 120), Err(Refusal::Team));
        // Committed: an empty buffer admits even while the process is over.
        a.release(&t, 120);
        reading.store(10_000, Ordering::Relaxed);
        assert_eq!(a.admit(&t, 5, 120), Ok(()));
        assert_eq!(a.admit(&t, 5, 120), Err(Refusal::Team));
    }

    #[test]
    fn uncounted_bytes_are_shared_by_what_each_team_holds_and_count_globally_whole() {
        let (a, reading) = with_reading(100, 200, 1000);
        let (t1, t2) = (TeamId::from("t1"), TeamId::from("t2"));
        assert_eq!(a.admit(&t1, 60, 100), Ok(()));
        assert_eq!(a.admit(&t2, 15, 100), Ok(()));
        a.set_excess(&t2, 5);
        // 80 counted, resident 1120: 40 uncounted, 30 to t1 (60 of 80), 10 to t2 (20 of 80).
        reading.store(1120, Ordering::Relaxed);
        assert_eq!(a.uncounted_bytes(), 40);
        assert_eq!(a.fits(&t1, 10, 100), Ok(()));
        assert_eq!(a.fits(&t1, 11, 100), Err(Refusal::Team));
        assert_eq!(a.fits(&t2, 70, 100), Ok(()));
        assert_eq!(a.fits(&t2, 71, 100), Err(Refusal::Team));
        // Globally 75 reserved + 5 measured + 40 uncounted = 120 of 200.
        let t3 = TeamId::from("t3");
        assert_eq!(a.fits(&t3, 81, 100), Err(Refusal::Global));
        assert_eq!(a.admit(&t3, 80, 100), Ok(()));
        // Admitted bytes are not resident yet: 160 counted cover the 120 resident beyond the
        // allowance, and nothing is uncounted.
        assert_eq!(a.uncounted_bytes(), 0);
        assert_eq!(a.admit(&t2, 41, 100), Err(Refusal::Global));
        assert_eq!(a.admit(&t2, 40, 100), Ok(()));
    }

    /// A request waiting for room for 10 bytes under a budget of 100: whether it got a turn,
    /// and whether the bytes fit when it stopped waiting.
    fn spawn_waiter(
        a: &Arc<Admission>,
        t: &TeamId,
    ) -> tokio::task::JoinHandle<(bool, Result<(), Refusal>)> {
        let (a, t) = (a.clone(), t.clone());
        tokio::spawn(async move {
            let turn = a.wait_for_room(&t, 10, 100, Duration::from_secs(600)).await;
            (turn.is_some(), a.fits(&t, 10, 100))
        })
    }

    #[tokio::test]
    async fn a_waiting_request_finds_room_when_a_flush_gives_it_back() {
        let a = Arc::new(Admission::new(100, 1000));
        let t = TeamId::from("t");
        assert_eq!(a.admit(&t, 95, 100), Ok(()));
        // Nothing changes: no room within the wait (the caller is then refused).
        assert!(
            a.wait_for_room(&t, 10, 100, Duration::from_millis(30))
                .await
                .is_some()
        );
        assert_eq!(a.fits(&t, 10, 100), Err(Refusal::Team));
        let waiter = spawn_waiter(&a, &t);
        while a.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished());
        a.release(&t, 95);
        assert_eq!(waiter.await.unwrap(), (true, Ok(())));
        assert_eq!(a.team_bytes(&t), 0, "waiting reserves nothing");
    }

    #[tokio::test]
    async fn a_waiting_request_finds_room_when_the_resident_size_falls() {
        let (a, reading) = with_reading(100, 1000, 100);
        let a = Arc::new(a);
        let t = TeamId::from("t");
        assert_eq!(a.admit(&t, 10, 100), Ok(()));
        reading.store(300, Ordering::Relaxed);
        let waiter = spawn_waiter(&a, &t);
        while a.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        reading.store(150, Ordering::Relaxed);
        assert_eq!(waiter.await.unwrap(), (true, Ok(())));
    }

    /// The room one commit makes goes to one waiter; the next waits for more instead of being
    /// let through and refused.
    #[tokio::test]
    async fn waiters_take_the_room_one_at_a_time() {
        let a = Arc::new(Admission::new(100, 1000));
        let t = TeamId::from("t");
        assert_eq!(a.admit(&t, 95, 100), Ok(()));
        let waiter = || {
            let (a, t) = (a.clone(), t.clone());
            async move {
                let turn = a.wait_for_room(&t, 60, 100, Duration::from_secs(600)).await;
                assert!(turn.is_some(), "it waited");
                a.admit(&t, 60, 100)
            }
        };
        let mut waiters = tokio::task::JoinSet::new();
        waiters.spawn(waiter());
        waiters.spawn(waiter());
        while a.waiting() < 2 {
            tokio::task::yield_now().await;
        }
        a.release(&t, 95);
        let first = waiters.join_next().await.unwrap().unwrap();
        assert_eq!(first, Ok(()));
        assert_eq!(a.team_bytes(&t), 60);
        assert_eq!(a.waiting(), 1, "the other still waits");
        a.release(&t, 60);
        let second = waiters.join_next().await.unwrap().unwrap();
        assert_eq!(second, Ok(()), "admitted, not let through and refused");
        assert_eq!(a.team_bytes(&t), 60);
    }
}
