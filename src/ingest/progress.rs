//! Per-team commit progress shared by the dispatcher, the actors and their flushes: the committed
//! WAL watermark (watched by `X-Stowage-Wait: committed`), the oldest sequence number not yet
//! committed (bounds WAL segment deletion), and a flush lock (one flush of a team at a time,
//! even across an actor restart).

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::watch;

use crate::model::TeamId;

/// Shared progress of every team.
#[derive(Debug, Default)]
pub struct Progress {
    committed: DashMap<TeamId, watch::Sender<u64>>,
    /// Per team: oldest uncommitted record (if known) and the last record dispatched to it.
    uncommitted: DashMap<TeamId, (Option<u64>, u64)>,
    oldest_at: DashMap<TeamId, std::time::Instant>,
    flush_locks: DashMap<TeamId, Arc<tokio::sync::Mutex<()>>>,
}

impl Progress {
    fn committed_tx(&self, team: &TeamId) -> watch::Sender<u64> {
        self.committed
            .entry(team.clone())
            .or_insert_with(|| watch::channel(0).0)
            .clone()
    }

    /// Watches the team's committed watermark.
    pub fn committed_rx(&self, team: &TeamId) -> watch::Receiver<u64> {
        self.committed_tx(team).subscribe()
    }

    /// Raises the team's committed watermark.
    pub fn set_committed(&self, team: &TeamId, watermark: u64) {
        self.committed_tx(team).send_if_modified(|w| {
            let raise = watermark > *w;
            if raise {
                *w = watermark;
            }
            raise
        });
    }

    /// Records `first..=last` were handed to the team's actor: they are uncommitted from now on.
    pub fn note_dispatched(&self, team: &TeamId, first: u64, last: u64) {
        let mut e = self
            .uncommitted
            .entry(team.clone())
            .or_insert((Some(first), last));
        e.1 = last;
        if e.0.is_none() {
            e.0 = Some(first);
        }
    }

    /// The actor reports its oldest uncommitted record (`None`: nothing it has seen is
    /// uncommitted beyond `committed`). Records dispatched after what it has seen keep the
    /// entry alive, bounded below by `committed + 1`.
    pub fn set_oldest(&self, team: &TeamId, oldest: Option<u64>, committed: u64) {
        match oldest {
            Some(o) => {
                self.uncommitted
                    .entry(team.clone())
                    .and_modify(|e| e.0 = Some(o))
                    .or_insert((Some(o), o));
            }
            None => {
                let remove = match self.uncommitted.get_mut(team) {
                    Some(mut e) if e.1 > committed => {
                        e.0 = Some(committed + 1);
                        false
                    }
                    Some(_) => true,
                    None => false,
                };
                if remove {
                    self.uncommitted.remove_if(team, |_, e| e.1 <= committed);
                }
            }
        }
    }

    /// When the team's oldest uncommitted row arrived (`None`: nothing uncommitted).
    pub fn set_oldest_at(&self, team: &TeamId, at: Option<std::time::Instant>) {
        match at {
            Some(t) => {
                self.oldest_at.insert(team.clone(), t);
            }
            None => {
                self.oldest_at.remove(team);
            }
        }
    }

    /// Arrival time of each team's oldest uncommitted row (metrics).
    pub fn oldest_unflushed(&self) -> Vec<(TeamId, std::time::Instant)> {
        self.oldest_at
            .iter()
            .map(|e| (e.key().clone(), *e.value()))
            .collect()
    }

    /// The oldest uncommitted sequence number of any team.
    pub fn min_uncommitted(&self) -> Option<u64> {
        self.uncommitted.iter().filter_map(|e| e.value().0).min()
    }

    /// The lock a team's flush holds from encoding to commit.
    pub fn flush_lock(&self, team: &TeamId) -> Arc<tokio::sync::Mutex<()>> {
        self.flush_locks.entry(team.clone()).or_default().clone()
    }

    /// Oldest uncommitted sequence number per team (metrics).
    pub fn uncommitted_by_team(&self) -> Vec<(TeamId, u64)> {
        self.uncommitted
            .iter()
            .filter_map(|e| e.value().0.map(|o| (e.key().clone(), o)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_queued_behind_a_flush_keeps_the_team_uncommitted() {
        let p = Progress::default();
        let t = TeamId::from("t");
        p.note_dispatched(&t, 5, 5);
        p.note_dispatched(&t, 9, 9); // queued behind FlushDone(5)
        p.set_oldest(&t, None, 5); // the actor has nothing buffered yet
        assert_eq!(p.min_uncommitted(), Some(6), "9 is still uncommitted");
        p.set_oldest(&t, Some(9), 5);
        assert_eq!(p.min_uncommitted(), Some(9));
        p.set_oldest(&t, None, 9);
        assert_eq!(p.min_uncommitted(), None);
    }
}
