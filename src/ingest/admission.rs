//! Admission control. ractor mailboxes are unbounded, so every event reserves its bytes here
//! before it is sent to an actor, and gives them back only once its rows are committed.
//! Over the team budget → 429; over the global budget → 503.

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

/// Byte budgets per team and in total.
#[derive(Debug)]
pub struct Admission {
    team_budget: u64,
    global_budget: u64,
    global: AtomicU64,
    teams: DashMap<TeamId, Arc<AtomicU64>>,
}

impl Admission {
    /// Budgets in bytes.
    pub fn new(team_budget: u64, global_budget: u64) -> Self {
        Self {
            team_budget,
            global_budget,
            global: AtomicU64::new(0),
            teams: DashMap::new(),
        }
    }

    fn team_counter(&self, team: &TeamId) -> Arc<AtomicU64> {
        if let Some(c) = self.teams.get(team) {
            return c.clone();
        }
        self.teams.entry(team.clone()).or_default().clone()
    }

    /// Reserves `bytes` for `team` under its budget (`team_budget`: the team's own, or the
    /// default), or says which budget is full.
    pub fn admit(&self, team: &TeamId, bytes: u64, team_budget: u64) -> Result<(), Refusal> {
        let counter = self.team_counter(team);
        reserve(&counter, bytes, team_budget).map_err(|_| Refusal::Team)?;
        if reserve(&self.global, bytes, self.global_budget).is_err() {
            release(&counter, bytes);
            return Err(Refusal::Global);
        }
        Ok(())
    }

    /// Reserves `bytes` whatever the budgets say (replaying events that were acknowledged).
    pub fn force(&self, team: &TeamId, bytes: u64) {
        self.team_counter(team).fetch_add(bytes, Ordering::AcqRel);
        self.global.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Returns `bytes` reserved for `team`.
    pub fn release(&self, team: &TeamId, bytes: u64) {
        release(&self.team_counter(team), bytes);
        release(&self.global, bytes);
    }

    /// The per-team budget.
    pub fn team_budget(&self) -> u64 {
        self.team_budget
    }

    /// Bytes reserved by one team.
    pub fn team_bytes(&self, team: &TeamId) -> u64 {
        self.teams
            .get(team)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Bytes reserved in total.
    pub fn global_bytes(&self) -> u64 {
        self.global.load(Ordering::Relaxed)
    }
}

fn reserve(counter: &AtomicU64, bytes: u64, budget: u64) -> Result<u64, u64> {
    counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
        // An event larger than the whole budget is still admitted into an empty buffer,
        // so a budget smaller than one event cannot wedge a team forever.
        (cur == 0 || cur + bytes <= budget).then_some(cur + bytes)
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
}
