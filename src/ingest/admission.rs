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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;

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
}

impl TeamUse {
    fn measured(&self) -> u64 {
        self.excess.load(Ordering::Acquire) + self.encoding.load(Ordering::Acquire)
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
        let measured = usage.measured();
        reserve(&usage.reserved, measured, bytes, team_budget).map_err(|_| Refusal::Team)?;
        let measured = self.global_measured.load(Ordering::Acquire);
        if reserve(&self.global, measured, bytes, self.global_budget).is_err() {
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
}

/// Adds `bytes` to `counter` if it stays within `budget` with `measured` bytes beside it.
fn reserve(counter: &AtomicU64, measured: u64, bytes: u64, budget: u64) -> Result<u64, u64> {
    counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
        // An event larger than the whole budget is still admitted into an empty buffer,
        // so a budget smaller than one event cannot wedge a team forever.
        (cur == 0 || cur + measured + bytes <= budget).then_some(cur + bytes)
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
}
