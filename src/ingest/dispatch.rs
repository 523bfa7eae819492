//! The dispatcher: one task that receives WAL-written events in sequence order and hands each to
//! its team's actor, and the only place actors are started and stopped. Because every event
//! reaches an actor through here, in order, a team's buffer always holds a contiguous tail of
//! its WAL records — which is what makes one watermark per team enough. An actor that died is
//! restarted with its buffer rebuilt from the WAL; an idle one is stopped only when nothing was
//! sent to it since it said it was idle.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorId, ActorRef};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, error, warn};

use super::bulk::TableBatches;
use super::control::Control;
use super::ctx::TeamCtx;
use super::event::EventRows;
use super::supervisor::{Supervisor, SupervisorMsg};
use super::team::{LendRequest, Logged, Rows, TeamActor, TeamArgs, TeamMsg};
use crate::model::TeamId;
use crate::wal::{Wal, Written};

/// What travels through the WAL with each event.
pub enum Payload {
    /// An event.
    Event {
        /// The validated rows.
        rows: Arc<EventRows>,
        /// Admitted bytes.
        bytes: u64,
    },
    /// A request's events, built into a batch per table ([`bulk`](super::bulk)): carried by
    /// the last entry of the request's append, the others are [`Payload::Covered`].
    Tables {
        /// The rows.
        tables: Arc<TableBatches>,
        /// Admitted bytes, of every event.
        bytes: u64,
        /// Records of the append (this one and the [`Payload::Covered`] ones before it).
        records: u64,
    },
    /// An event whose rows come with a later entry of the same append ([`Payload::Tables`]).
    Covered,
    /// A marker: flush every team once everything queued before it is dispatched, then reply.
    FlushBarrier(oneshot::Sender<()>),
    /// A marker: once everything queued before it is dispatched, the entry's team lends its
    /// uncommitted rows to a fresh read.
    Lend(LendRequest),
    /// A marker: flush the entry's team once everything queued before it is dispatched, and
    /// reply when that is committed (another node's fresh read).
    FlushTeam(oneshot::Sender<()>),
}

/// Most logged events handed on in one go (one actor message per team among them).
const DRAIN_MAX: usize = 4096;

/// How often segments are checked for deletion.
const WAL_GC_EVERY: Duration = Duration::from_millis(500);

pub(super) struct Dispatcher {
    pub ctx: Arc<TeamCtx>,
    pub wal: Arc<Wal<Payload>>,
    pub data: mpsc::UnboundedReceiver<Vec<Written<Payload>>>,
    pub control: mpsc::UnboundedReceiver<Control>,
    pub supervisor: ActorRef<SupervisorMsg>,
    pub actors: HashMap<TeamId, ActorRef<TeamMsg>>,
    pub last_dispatched: HashMap<TeamId, u64>,
    /// Teams whose actor died and whose buffer must be rebuilt from the WAL by the next actor.
    pub needs_rebuild: std::collections::HashSet<TeamId>,
    /// Every record up to here has been handed to an actor.
    pub dispatched_through: u64,
    pub metrics_teams: Arc<std::sync::atomic::AtomicUsize>,
    /// The segment collection running on a blocking thread, if any.
    pub gc_task: Option<tokio::task::JoinHandle<()>>,
}

impl Dispatcher {
    /// Starts the supervisor; the caller spawns [`Dispatcher::run`].
    pub async fn supervisor(
        control: mpsc::UnboundedSender<Control>,
    ) -> Result<ActorRef<SupervisorMsg>, ractor::SpawnErr> {
        Ok(Actor::spawn(None, Supervisor, control).await?.0)
    }

    pub async fn run(mut self) {
        let mut gc = tokio::time::interval(WAL_GC_EVERY);
        loop {
            tokio::select! {
                Some(w) = self.data.recv() => self.dispatch(w).await,
                Some(c) = self.control.recv() => {
                    if let Control::Shutdown(reply) = c {
                        self.shutdown().await;
                        let _ = reply.send(());
                        return;
                    }
                    self.control(c).await;
                }
                _ = gc.tick() => {
                    self.collect_wal();
                }
                else => return,
            }
        }
    }

    /// Deletes committed segments (archiving their ids) on a blocking thread; a run still
    /// going when the next tick comes is not doubled.
    fn collect_wal(&mut self) {
        if self.gc_task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let bound = self.dispatched_through + 1;
        let min = self
            .ctx
            .progress
            .min_uncommitted()
            .map_or(bound, |m| m.min(bound));
        let wal = self.wal.clone();
        metrics::counter!("stowage_wal_gc_runs_total").increment(1);
        self.gc_task = Some(tokio::task::spawn_blocking(move || wal.release_below(min)));
    }

    /// Dispatches `first` (a commit group) and whatever else is already queued (up to
    /// [`DRAIN_MAX`] entries), one actor message per team for the lot, in log order.
    async fn dispatch(&mut self, first: Vec<Written<Payload>>) {
        let mut pending: Vec<(TeamId, Vec<Logged>)> = Vec::new();
        let mut next = Some(first);
        let mut taken = 0;
        while let Some(group) = next.take() {
            taken += group.len();
            for w in group {
                self.dispatch_one(w, &mut pending).await;
            }
            if taken < DRAIN_MAX {
                next = self.data.try_recv().ok();
            }
        }
        self.send(pending).await;
    }

    /// Adds one written entry to `pending` (a barrier first sends what is pending).
    async fn dispatch_one(
        &mut self,
        w: Written<Payload>,
        pending: &mut Vec<(TeamId, Vec<Logged>)>,
    ) {
        {
            match w.payload {
                Payload::FlushBarrier(reply) => {
                    // Everything before the barrier reaches its actor first.
                    self.send(std::mem::take(pending)).await;
                    self.control(Control::FlushAll(reply)).await;
                }
                Payload::Lend(req) => {
                    self.send(std::mem::take(pending)).await;
                    self.lend(w.team, req).await;
                }
                Payload::FlushTeam(reply) => {
                    self.send(std::mem::take(pending)).await;
                    self.flush_team(w.team, reply).await;
                }
                // Its rows come with the append's last record.
                Payload::Covered => {}
                Payload::Event { rows, bytes } => {
                    let logged = (Rows::Event(rows), w.seq, w.seq);
                    self.pend(w.team, logged, bytes, pending).await;
                }
                Payload::Tables {
                    tables,
                    bytes,
                    records,
                } => {
                    // An append's records are numbered consecutively.
                    let first = w.seq + 1 - records.max(1);
                    let logged = (Rows::Tables(tables), first, w.seq);
                    self.pend(w.team, logged, bytes, pending).await;
                }
            }
        }
    }

    /// Adds `rows` of records `first_seq..=seq` to the team's pending events, or has a new actor
    /// rebuild them from the WAL.
    async fn pend(
        &mut self,
        team: TeamId,
        (rows, first_seq, seq): (Rows, u64, u64),
        bytes: u64,
        pending: &mut Vec<(TeamId, Vec<Logged>)>,
    ) {
        self.last_dispatched.insert(team.clone(), seq);
        self.dispatched_through = self.dispatched_through.max(seq);
        self.ctx.progress.note_dispatched(&team, first_seq, seq);
        if self.needs_rebuild.contains(&team) {
            // A new actor rebuilds everything up to and including this record from the WAL,
            // the team's records pending here included.
            pending.retain(|(t, _)| *t != team);
            self.actors.remove(&team);
            self.spawn(&team, Some(seq)).await;
            return;
        }
        let logged = Logged {
            rows,
            first_seq,
            seq,
            bytes,
        };
        match pending.iter_mut().find(|(t, _)| *t == team) {
            Some((_, events)) => events.push(logged),
            None => pending.push((team, vec![logged])),
        }
    }

    /// Hands each team its events (starting its actor if needed).
    async fn send(&mut self, pending: Vec<(TeamId, Vec<Logged>)>) {
        for (team, events) in pending {
            let Some(last) = events.last().map(|logged| logged.seq) else {
                continue;
            };
            let msg = TeamMsg::Append(events);
            let sent = match self.actors.get(&team) {
                Some(actor) => actor.cast(msg).is_ok(),
                None => match self.spawn(&team, None).await {
                    Some(actor) => actor.cast(msg).is_ok(),
                    None => false,
                },
            };
            if !sent {
                warn!(team = %team, seq = last, "team actor gone; restarting it from the WAL");
                self.actors.remove(&team);
                self.needs_rebuild.insert(team.clone());
                self.spawn(&team, Some(last)).await;
            }
        }
    }

    /// Hands a fresh read's request to the team's actor, after every event dispatched before
    /// it. No actor and nothing to rebuild: nothing is buffered. A dead actor is restarted
    /// from the WAL first (it answers once rebuilt); if that fails the reply is dropped and the
    /// read fails rather than miss rows.
    async fn lend(&mut self, team: TeamId, mut req: LendRequest) {
        if let Some(actor) = self.actors.get(&team) {
            match actor.cast(TeamMsg::Lend(req)) {
                Ok(()) => return,
                Err(ractor::MessagingErr::SendErr(TeamMsg::Lend(back))) => req = back,
                Err(_) => return,
            }
            self.actors.remove(&team);
            self.needs_rebuild.insert(team.clone());
        }
        if self.needs_rebuild.contains(&team) {
            let through = self.last_dispatched.get(&team).copied();
            if let Some(actor) = self.spawn(&team, through).await {
                let _ = actor.cast(TeamMsg::Lend(req));
            }
            return;
        }
        let _ = req.reply.send(Default::default());
    }

    /// Flushes one team (restarting a dead actor from the WAL first) and replies once its
    /// buffer is committed; a team with no actor and nothing to rebuild has nothing buffered.
    async fn flush_team(&mut self, team: TeamId, reply: oneshot::Sender<()>) {
        let actor = match self.actors.get(&team) {
            Some(a) => Some(a.clone()),
            None if self.needs_rebuild.contains(&team) => {
                let through = self.last_dispatched.get(&team).copied();
                self.spawn(&team, through).await
            }
            None => None,
        };
        let Some(actor) = actor else {
            let _ = reply.send(());
            return;
        };
        tokio::spawn(async move {
            // A failed call drops `reply`: the asking read fails instead of missing rows.
            if actor.call(TeamMsg::Flush, None).await.is_ok() {
                let _ = reply.send(());
            }
        });
    }

    async fn spawn(
        &mut self,
        team: &TeamId,
        rebuild_through: Option<u64>,
    ) -> Option<ActorRef<TeamMsg>> {
        let args = TeamArgs {
            team: team.clone(),
            ctx: self.ctx.clone(),
            rebuild_through,
        };
        match Actor::spawn_linked(None, TeamActor, args, self.supervisor.get_cell()).await {
            Ok((actor, _)) => {
                if rebuild_through.is_some() {
                    self.needs_rebuild.remove(team);
                }
                self.actors.insert(team.clone(), actor.clone());
                self.metrics_teams
                    .store(self.actors.len(), std::sync::atomic::Ordering::Relaxed);
                Some(actor)
            }
            Err(e) => {
                // Its records stay in the WAL; the next event for the team retries, rebuilding
                // everything the team has not committed.
                error!(team = %team, error = %e, "cannot start team actor");
                if self.last_dispatched.contains_key(team) {
                    self.needs_rebuild.insert(team.clone());
                }
                None
            }
        }
    }

    fn team_of(&self, actor: ActorId) -> Option<TeamId> {
        self.actors
            .iter()
            .find(|(_, a)| a.get_id() == actor)
            .map(|(t, _)| t.clone())
    }

    fn control(&mut self, c: Control) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.control_inner(c))
    }

    async fn control_inner(&mut self, c: Control) {
        match c {
            Control::ActorDown { actor, failed } => {
                let Some(team) = self.team_of(actor) else {
                    return;
                };
                self.actors.remove(&team);
                // The dead actor's measured bytes went with it; a successor reports its own.
                self.ctx.admission.set_excess(&team, 0);
                if failed {
                    let through = self.last_dispatched.get(&team).copied();
                    error!(team = %team, "team actor failed; restarting it from the WAL");
                    if through.is_some() {
                        self.needs_rebuild.insert(team.clone());
                        self.spawn(&team, through).await;
                    }
                }
                self.metrics_teams
                    .store(self.actors.len(), std::sync::atomic::Ordering::Relaxed);
            }
            Control::IdleStop {
                team,
                actor,
                last_seen,
            } => {
                let current = self.actors.get(&team).is_some_and(|a| a.get_id() == actor);
                let nothing_new = self
                    .last_dispatched
                    .get(&team)
                    .is_none_or(|s| *s == last_seen);
                if current && nothing_new {
                    debug!(team = %team, "stopping idle team actor");
                    if let Some(a) = self.actors.remove(&team) {
                        a.stop(Some("idle".into()));
                    }
                    self.last_dispatched.remove(&team);
                    self.metrics_teams
                        .store(self.actors.len(), std::sync::atomic::Ordering::Relaxed);
                }
            }
            Control::FlushAll(reply) => {
                let actors: Vec<_> = self.actors.values().cloned().collect();
                tokio::spawn(async move {
                    flush_all(&actors).await;
                    let _ = reply.send(());
                });
            }
            Control::Crash(team) => {
                if let Some(a) = self.actors.get(&team) {
                    let _ = a.cast(TeamMsg::Crash);
                }
            }
            Control::Retune(team) => {
                if let Some(a) = self.actors.get(&team) {
                    let _ = a.cast(TeamMsg::Retune);
                }
            }
            Control::Shutdown(_) => unreachable!("handled in run"),
        }
    }

    async fn shutdown(&mut self) {
        while let Some(w) = self.data.recv().await {
            self.dispatch(w).await;
        }
        let actors: Vec<_> = self.actors.values().cloned().collect();
        flush_all(&actors).await;
        for a in actors {
            a.stop_and_wait(Some("shutdown".into()), None).await.ok();
        }
        // Let a run in progress finish, then do a last one.
        if let Some(run) = self.gc_task.take() {
            let _ = run.await;
        }
        self.collect_wal();
        if let Some(run) = self.gc_task.take() {
            let _ = run.await;
        }
        self.supervisor.stop_and_wait(None, None).await.ok();
    }
}

async fn flush_all(actors: &[ActorRef<TeamMsg>]) {
    let calls = actors.iter().map(|a| a.call(TeamMsg::Flush, None));
    for r in futures::future::join_all(calls).await {
        if let Err(e) = r {
            debug!(error = %e, "flush request not delivered (actor stopped)");
        }
    }
}
