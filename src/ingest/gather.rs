//! Single events of one team logged together. An event arriving while one of its team's
//! submissions is in flight would wait for that WAL write anyway: its request takes it from the
//! team's rate limit, queues it here and waits for its own answer, and one task — once the
//! write under way is done (durable acks) or after one turn of the scheduler — takes every
//! event queued so far and submits them as one batch ([`Ingest::submit_items`]: one dedup
//! claim, one budget admission, one limits check, one WAL append, and, from
//! [`bulk::MIN_EVENTS`] events, the rows of a table with [`bulk::MIN_TABLE_ROWS`] of them built
//! into one batch that the team's actor takes whole; fewer rows are appended by the actor, which
//! costs less than a small batch: `batch_stages`' `gathered_*`). An event of a team with
//! nothing in flight goes on its own at once, and so do a team's events while its gathered
//! submissions held fewer than [`WORTH`] on average (a moving mean over the last several,
//! [`mean16_after`]; tried again after [`RETRY_AFTER`]): a submission of one or two costs more
//! than it saves. With buffered acks a submission is in flight only for the moment of its
//! append, so events go on their own.
//!
//! Each event keeps its own answer. A refusal before the WAL append (a limit, the budget) sends
//! the events it left unlogged through the usual way one by one, so each gets the answer it
//! would have had on its own; a failed WAL write fails them all, as it fails every event of its
//! commit group, but a duplicate of a stored event is still answered as one. An event whose
//! client went away before it was taken is not logged. Two events with the same `messageId`
//! are never in one submission: a later one is submitted once the first's outcome is known, and
//! dedup answers it. Each event's WAL record keeps the time its own request was received.
//!
//! [`bulk::MIN_EVENTS`]: super::bulk::MIN_EVENTS
//! [`bulk::MIN_TABLE_ROWS`]: super::bulk::MIN_TABLE_ROWS

use foldhash::{HashSet, HashSetExt};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use tokio::sync::oneshot;

use super::submit::{BatchError, Item, Rate, Refused};
use super::team::AppendError;
use super::{Accepted, Ingest, IngestError, Wait};
use crate::config::AckMode;
use crate::model::TeamId;

/// Most events one submission takes; the rest go in the next, started at once.
const MOST: usize = 512;

/// Events a team's gathered submissions must hold on average ([`Queue::mean16`]) for its next
/// event to be gathered while one of its submissions is in flight: a submission of one or two
/// costs a task, a wait and an answer channel more than the event submitted on its own
/// (BENCHMARKS.md, thirty-first session: sixteen teams of two connections each, 3–14 % more
/// CPU an event). A mean, not the last submission's size: one small submission among large
/// ones (one that started as a write ended) sent the next [`RETRY_AFTER`] events on their own,
/// ~45 % of one busy team's events (thirty-second session).
const WORTH: usize = 4;

/// Weight of the newest submission in the moving mean of their sizes: 1/`MEAN_WEIGHT`.
const MEAN_WEIGHT: usize = 8;

/// Most events a submission counts for in the mean: one large submission (a burst) would
/// otherwise keep a team whose submissions then hold one or two gathering for dozens of them;
/// capped so, seven small ones bring the mean under [`WORTH`].
const MEAN_MOST: usize = 2 * WORTH;

/// Events submitted on their own, while gathering did not pay, between two that try it again.
const RETRY_AFTER: u32 = 64;

/// An event waiting for its submission.
struct Waiter {
    /// The event, with the time its request was received.
    item: Item,
    reply: oneshot::Sender<Result<Accepted, IngestError>>,
}

/// One team's queue.
struct Queue {
    waiters: Vec<Waiter>,
    /// A task is started that will take the queue.
    led: bool,
    /// Moving mean of the events the team's gathered submissions took, in sixteenths of an
    /// event (at first [`WORTH`]: gathering is tried).
    mean16: usize,
    /// Events submitted on their own since gathering was last tried.
    skipped: u32,
}

impl Default for Queue {
    fn default() -> Self {
        Queue {
            waiters: Vec::new(),
            led: false,
            mean16: WORTH * 16,
            skipped: 0,
        }
    }
}

/// One team's queue, and its submissions of single events in flight.
#[derive(Default)]
struct Team {
    queue: Mutex<Queue>,
    in_flight: AtomicUsize,
}

/// Counts one submission of single events in flight while it lives.
struct InFlight(Arc<Team>);

impl InFlight {
    fn new(team: Arc<Team>) -> InFlight {
        team.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(team)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The queues of every team that sent single events since start (a few dozen bytes a team).
#[derive(Default)]
pub(super) struct Gathering {
    teams: DashMap<TeamId, Arc<Team>>,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    submissions: AtomicU64,
    events: AtomicU64,
    alone: AtomicU64,
    direct: AtomicU64,
}

/// What gathering did since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatherCounts {
    /// Submissions of gathered events.
    pub submissions: u64,
    /// Events in them.
    pub events: u64,
    /// Events submitted again on their own after their submission was refused, and repeats of
    /// a client id.
    pub alone: u64,
    /// Events submitted on their own because gathering them would not pay.
    pub direct: u64,
}

impl Gathering {
    fn team(&self, team: &TeamId) -> Arc<Team> {
        if let Some(t) = self.teams.get(team) {
            return t.clone();
        }
        self.teams.entry(team.clone()).or_default().clone()
    }

    /// Whether an event of `team` is to be gathered: when a submission is gathering already,
    /// or when one of the team's is in flight (an event now would wait for its write) and the
    /// team's gathered submissions held [`WORTH`] events on average — or [`RETRY_AFTER`] events
    /// went on their own since gathering was last tried.
    fn wanted(team: &Team) -> bool {
        let mut q = team.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.led {
            return true;
        }
        if team.in_flight.load(Ordering::Acquire) == 0 {
            return false;
        }
        if q.mean16 >= WORTH * 16 {
            return true;
        }
        q.skipped += 1;
        if q.skipped >= RETRY_AFTER {
            q.skipped = 0;
            return true;
        }
        false
    }

    /// Queues `waiter`; `true` when no task is started to take the queue yet.
    fn join(team: &Team, waiter: Waiter) -> bool {
        let mut q = team.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.waiters.push(waiter);
        !std::mem::replace(&mut q.led, true)
    }

    /// The events to submit now, and whether more wait (another task is to take them).
    fn take(team: &Team) -> (Vec<Waiter>, bool) {
        let mut q = team.queue.lock().unwrap_or_else(|p| p.into_inner());
        let taken = if q.waiters.len() <= MOST {
            std::mem::take(&mut q.waiters)
        } else {
            q.waiters.drain(..MOST).collect()
        };
        q.mean16 = mean16_after(q.mean16, taken.len());
        q.led = !q.waiters.is_empty();
        (taken, q.led)
    }
}

/// The moving mean ([`Queue::mean16`]) after a submission of `n` events. A submission that
/// pays brings the mean to [`WORTH`] at least: gathering, tried again and paying, goes on at once.
fn mean16_after(mean16: usize, n: usize) -> usize {
    let moved = mean16 - mean16 / MEAN_WEIGHT + n.min(MEAN_MOST) * 16 / MEAN_WEIGHT;
    if n >= WORTH {
        moved.max(WORTH * 16)
    } else {
        moved
    }
}

impl Ingest {
    /// What gathering single events did since start.
    pub fn gather_counts(&self) -> GatherCounts {
        let c = &self.gathering.counts;
        GatherCounts {
            submissions: c.submissions.load(Ordering::Relaxed),
            events: c.events.load(Ordering::Relaxed),
            alone: c.alone.load(Ordering::Relaxed),
            direct: c.direct.load(Ordering::Relaxed),
        }
    }

    /// Submits one event with the others of its team queued meanwhile; its own answer.
    pub(super) async fn gathered(
        self: &Arc<Self>,
        team: &TeamId,
        mut item: Item,
        received_at: i64,
    ) -> Result<Accepted, BatchError> {
        let gathering = self.gathering.team(team);
        if !Gathering::wanted(&gathering) {
            self.gathering.counts.direct.fetch_add(1, Ordering::Relaxed);
            let _in_flight = InFlight::new(gathering);
            return (self.submit_single(team, item, received_at, Wait::Ack, Rate::Take)).await;
        }
        item.received_at.get_or_insert(received_at);
        // The rate limit counts events, so each takes its own from it, as on its own.
        if let Err(wait) = (self.ctx.tuning).take(team, 1, std::time::Instant::now()) {
            metrics::counter!("stowage_rate_limited_total").increment(1);
            return Err(IngestError::RateLimited(wait).into());
        }
        let (reply, answer) = oneshot::channel();
        if Gathering::join(&gathering, Waiter { item, reply }) {
            self.lead(team, gathering);
        }
        match answer.await {
            Ok(result) => result.map_err(BatchError::from),
            // The submitting task panicked: the events it took were not acknowledged.
            Err(_) => Err(IngestError::from(AppendError::Internal(
                "the submission of this event failed".into(),
            ))
            .into()),
        }
    }

    /// Starts the task that takes `team`'s queue.
    fn lead(self: &Arc<Self>, team: &TeamId, gathering: Arc<Team>) {
        let (me, team) = (self.clone(), team.clone());
        tokio::spawn(async move {
            // Durable acks: events queued while the log writes its current group wait for
            // the next one anyway, so they are taken together once it is written. With no
            // write under way (or acks that do not wait for it), the requests ready now queue
            // theirs first.
            let writing = (me.ack == AckMode::Durable).then(|| me.wal.writing());
            match writing.flatten() {
                Some(group) => {
                    let _ = group.wait().await;
                }
                None => tokio::task::yield_now().await,
            }
            let (waiters, more) = Gathering::take(&gathering);
            if more {
                me.lead(&team, gathering.clone());
            }
            let _in_flight = InFlight::new(gathering);
            me.submit_gathered(&team, waiters).await;
        });
    }

    /// Submits `waiters`' events as one batch and answers each.
    async fn submit_gathered(self: &Arc<Self>, team: &TeamId, waiters: Vec<Waiter>) {
        // A client id met again waits for the first's outcome. An event whose client went
        // away before it was taken is not logged (it was never acknowledged).
        let waiters: Vec<Waiter> = waiters
            .into_iter()
            .filter(|w| !w.reply.is_closed())
            .collect();
        let mut ids = HashSet::with_capacity(waiters.len());
        let repeated: Vec<bool> = (waiters.iter())
            .map(|w| w.item.rows.client_id && !ids.insert(w.item.rows.id.as_str()))
            .collect();
        drop(ids);
        let (mut firsts, mut repeats) = (Vec::with_capacity(waiters.len()), Vec::new());
        for (w, repeat) in waiters.into_iter().zip(repeated) {
            if repeat { &mut repeats } else { &mut firsts }.push(w);
        }
        let waiters = firsts;
        if !waiters.is_empty() {
            self.submit_together(team, waiters).await;
        }
        for w in repeats {
            self.submit_alone(team, w);
        }
    }

    async fn submit_together(self: &Arc<Self>, team: &TeamId, waiters: Vec<Waiter>) {
        let received_at = waiters
            .iter()
            .filter_map(|w| w.item.received_at)
            .max()
            .unwrap_or_default();
        let (items, mut replies): (Vec<Item>, Vec<_>) =
            waiters.into_iter().map(|w| (w.item, Some(w.reply))).unzip();
        let alone = items.len() == 1;
        let counts = &self.gathering.counts;
        counts.submissions.fetch_add(1, Ordering::Relaxed);
        counts
            .events
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        metrics::histogram!("stowage_gathered_events").record(items.len() as f64);
        let submitted = self
            .submit_items(team, items, None, received_at, Wait::Ack, Rate::Taken)
            .await;
        let Refused {
            error,
            items,
            duplicates,
        } = match submitted {
            Ok(outcomes) => {
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    if let Some(reply) = reply {
                        let _ = reply.send(Ok(outcome));
                    }
                }
                return;
            }
            Err(refused) => refused,
        };
        // Duplicates of stored events are that, whatever happened to the others.
        for i in duplicates {
            if let Some(reply) = replies[i].take() {
                let _ = reply.send(Ok(Accepted::Duplicate));
            }
        }
        // Refused before the append: each event not logged goes on its own, to get its own
        // answer (one event alone has it already).
        if !alone {
            for (i, item) in items {
                if let Some(reply) = replies[i].take() {
                    self.submit_alone(team, Waiter { item, reply });
                }
            }
        }
        // A failed append fails every event in it.
        for reply in replies.into_iter().flatten() {
            let _ = reply.send(Err(error.error.clone()));
        }
    }

    /// Submits one event the usual way, in a task of its own, and answers it.
    fn submit_alone(self: &Arc<Self>, team: &TeamId, waiter: Waiter) {
        self.gathering.counts.alone.fetch_add(1, Ordering::Relaxed);
        let (me, team) = (self.clone(), team.clone());
        tokio::spawn(async move {
            let Waiter { item, reply } = waiter;
            let received_at = item.received_at.unwrap_or_default();
            let result = (me.submit_single(&team, item, received_at, Wait::Ack, Rate::Taken))
                .await
                .map_err(|e| e.error);
            let _ = reply.send(result);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_follows_submissions_and_a_paying_one_resumes_at_once() {
        let start = WORTH * 16;
        // Two is too few: under the mark after one.
        assert!(mean16_after(start, 2) < WORTH * 16);
        // A burst counts for MEAN_MOST: seven submissions of one bring the mean under.
        let mut m = mean16_after(start, MOST);
        assert!(m >= WORTH * 16);
        for _ in 0..7 {
            m = mean16_after(m, 1);
        }
        assert!(m < WORTH * 16, "{m}");
        // Long at one event a submission, a retry that holds WORTH resumes gathering.
        let mut low = start;
        for _ in 0..100 {
            low = mean16_after(low, 1);
        }
        // The mean of ones, to within the rounding (at most 7/16 of an event over).
        assert!((16..16 + 8).contains(&low), "{low}");
        assert_eq!(mean16_after(low, WORTH), WORTH * 16);
        assert!(mean16_after(low, WORTH - 1) < WORTH * 16);
    }
}
