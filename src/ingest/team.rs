//! The team actor: owns one team's buffers (per table) and decides when to flush — on the age
//! of the oldest row (a timer that fires without new traffic), on rows per table, on bytes per
//! team, or when asked. One flush is in flight at a time, so files commit in WAL order and the
//! team's watermark only moves forward; the actor keeps accepting while a flush runs. A
//! restarted actor first rebuilds its buffer from the WAL.

use foldhash::{HashMap, HashMapExt};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::task::JoinHandle;
use tracing::{debug, error, info};

use super::buffered::BufferedTable;
use super::bulk::{TableBatch, TableBatches, TableLogged};
use super::cadence::{self, AtDeadline};
use super::control::Control;
use super::ctx::TeamCtx;
use super::event::EventRows;
use super::flush::{self, FlushJob};
use super::flush_encode::TableRows;
use super::replay;
use super::tuning::Effective;
use crate::model::TeamId;
use crate::model::fresh::{Lent, LentChunk, LentRows};

/// Why an event was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// The team already has the most tables it may.
    #[error("the team already has {0} tables, the most allowed; this event would create another")]
    TooManyTables(usize),
    /// The table would pass the column limit.
    #[error("table {table} would have more than {limit} columns")]
    TooManyColumns {
        /// The table.
        table: String,
        /// The limit.
        limit: usize,
    },
    /// Something internal failed (reported as 500).
    #[error("internal error: {0}")]
    Internal(String),
}

/// What a logged entry brings to the buffer.
pub enum Rows {
    /// One event's rows, appended cell by cell.
    Event(Arc<EventRows>),
    /// A whole request's rows, a batch per table ([`bulk`](super::bulk)).
    Tables(Arc<TableBatches>),
}

/// One logged event, or a request's events, on its way to the buffer.
pub struct Logged {
    /// The rows.
    pub rows: Rows,
    /// Sequence number of its first WAL record (a request's events have consecutive ones).
    pub first_seq: u64,
    /// Sequence number of its last WAL record.
    pub seq: u64,
    /// Bytes admitted for it, released when its flush commits.
    pub bytes: u64,
}

/// Messages a team actor handles.
pub enum TeamMsg {
    /// Buffer events, in WAL order: each with its sequence number and admitted bytes.
    Append(Vec<Logged>),
    /// Reply once everything buffered now is committed.
    Flush(RpcReplyPort<()>),
    /// The flush timer of a given generation fired.
    Timer(u64),
    /// Flush number N committed up to this watermark.
    FlushDone(u64, u64),
    /// Stop if idle long enough.
    IdleCheck,
    /// The team's tuning changed: re-read it and apply it now.
    Retune,
    /// Fault injection: panic (tests of supervision).
    Crash,
    /// The WAL records to rebuild the buffer from (after a restart), or why they could not be read.
    Rebuilt(Result<Vec<(u64, EventRows)>, String>),
    /// Lend the rows of these tables not yet committed (a fresh read, SPEC §3.5).
    Lend(LendRequest),
}

/// A fresh read's request for a team's uncommitted rows.
pub struct LendRequest {
    /// The tables the read needs.
    pub tables: Vec<String>,
    /// Where the lent rows go.
    pub reply: tokio::sync::oneshot::Sender<Lent>,
}

/// The running flush's rows, kept for fresh reads until it commits.
struct InFlight {
    tables: HashMap<String, Vec<arrow::record_batch::RecordBatch>>,
    watermark: u64,
}

/// The actor (state lives in [`TeamState`]).
pub struct TeamActor;

/// Start-up arguments.
pub struct TeamArgs {
    /// Which team.
    pub team: TeamId,
    /// Shared context.
    pub ctx: Arc<TeamCtx>,
    /// After a crash: rebuild the buffer from WAL records up to this sequence number.
    pub rebuild_through: Option<u64>,
}

/// A team actor's state.
pub struct TeamState {
    team: TeamId,
    ctx: Arc<TeamCtx>,
    /// This team's flush triggers and budget (re-read on [`TeamMsg::Retune`]).
    tuning: Effective,
    /// Buffered rows per table.
    tables: HashMap<String, BufferedTable>,
    /// The running flush's rows (lent to fresh reads until it commits).
    inflight: Option<InFlight>,
    /// Admitted bytes of the rows now buffered (released by the flush that commits them).
    buffered_bytes: u64,
    /// What the buffers hold in memory (builders' capacity, frozen batches), as last measured.
    buffer_held: u64,
    /// Admitted bytes of the running flush's rows, and what its batches hold.
    inflight_bytes: u64,
    inflight_held: u64,
    /// WAL range of the buffered rows.
    buffer_first_seq: Option<u64>,
    buffer_last_seq: u64,
    /// First WAL record of the running flush.
    inflight_first_seq: Option<u64>,
    /// Arrival of the oldest buffered row, and of the running flush's oldest row.
    buffer_first_at: Option<Instant>,
    inflight_first_at: Option<Instant>,
    /// Highest record received.
    last_seen_seq: u64,
    /// Bumped on every flush so a stale timer is ignored.
    timer_gen: u64,
    /// Flushes started and completed (numbers).
    started: u64,
    completed: u64,
    /// Another flush is due as soon as the running one finishes.
    pending: bool,
    /// Flush requests waiting for flush number N to complete.
    waiters: Vec<(u64, RpcReplyPort<()>)>,
    last_activity: Instant,
    idle_task: Option<JoinHandle<()>>,
    /// Waiting for the WAL records of a restart; appends and flush requests are stashed.
    rebuilding: bool,
    stash: Vec<Logged>,
    stashed_flushes: Vec<RpcReplyPort<()>>,
    stashed_lends: Vec<LendRequest>,
}

impl Actor for TeamActor {
    type Msg = TeamMsg;
    type State = TeamState;
    type Arguments = TeamArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<TeamMsg>,
        args: TeamArgs,
    ) -> Result<TeamState, ActorProcessingErr> {
        let check_every = (args.ctx.idle_timeout / 2).max(Duration::from_millis(50));
        let mut state = TeamState {
            tuning: args.ctx.tuning.get(&args.team),
            team: args.team,
            ctx: args.ctx,
            tables: HashMap::new(),
            inflight: None,
            buffered_bytes: 0,
            buffer_held: 0,
            inflight_bytes: 0,
            inflight_held: 0,
            buffer_first_seq: None,
            buffer_last_seq: 0,
            inflight_first_seq: None,
            buffer_first_at: None,
            inflight_first_at: None,
            last_seen_seq: 0,
            timer_gen: 0,
            started: 0,
            completed: 0,
            pending: false,
            waiters: Vec::new(),
            last_activity: Instant::now(),
            idle_task: Some(myself.send_interval(check_every, || TeamMsg::IdleCheck)),
            rebuilding: false,
            stash: Vec::new(),
            stashed_flushes: Vec::new(),
            stashed_lends: Vec::new(),
        };
        if let Some(through) = args.rebuild_through {
            // Read the WAL off the actor's start-up: waiting for a dead actor's flush (maybe
            // retrying against a failing store) must not hold up the dispatcher. Appends that
            // arrive meanwhile are stashed and applied after the rebuilt records.
            state.rebuilding = true;
            let (ctx, team, me) = (state.ctx.clone(), state.team.clone(), myself.clone());
            tokio::spawn(async move {
                let records = replay::team_records_after_flushes(&ctx, &team, through)
                    .await
                    .map_err(|e| e.to_string());
                let _ = me.cast(TeamMsg::Rebuilt(records));
            });
        }
        debug!(team = %state.team, "team actor started");
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<TeamMsg>,
        state: &mut TeamState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.idle_task.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<TeamMsg>,
        msg: TeamMsg,
        state: &mut TeamState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TeamMsg::Append(events) if state.rebuilding => state.stash.extend(events),
            TeamMsg::Flush(reply) if state.rebuilding => state.stashed_flushes.push(reply),
            TeamMsg::Lend(req) if state.rebuilding => state.stashed_lends.push(req),
            TeamMsg::Timer(_) | TeamMsg::IdleCheck if state.rebuilding => {}
            TeamMsg::Rebuilt(Err(e)) => {
                return Err(format!("rebuilding team {} from the WAL: {e}", state.team).into());
            }
            TeamMsg::Rebuilt(Ok(records)) => {
                info!(team = %state.team, records = records.len(), "team actor restarted; buffer rebuilt from the WAL");
                state.rebuilding = false;
                for (seq, rows) in records {
                    let bytes = rows.approx_bytes();
                    state.append_rows(&rows, |_| true);
                    state.note_appended(&myself, seq, seq, bytes);
                }
                for logged in std::mem::take(&mut state.stash) {
                    state.append(&myself, logged);
                }
                state.report_memory();
                let committed = *state.ctx.progress.committed_rx(&state.team).borrow();
                state.report_oldest(committed);
                for reply in std::mem::take(&mut state.stashed_flushes) {
                    state.request_flush(&myself, reply);
                }
                for req in std::mem::take(&mut state.stashed_lends) {
                    state.lend(req);
                }
                if state.over_size_trigger() {
                    state.start_flush(&myself);
                }
            }
            TeamMsg::Append(events) => {
                for logged in events {
                    state.append(&myself, logged);
                }
                state.report_memory();
                if state.over_size_trigger() {
                    state.start_flush(&myself);
                }
            }
            TeamMsg::Flush(reply) => state.request_flush(&myself, reply),
            TeamMsg::Lend(req) => state.lend(req),
            TeamMsg::Retune => state.retune(&myself),
            TeamMsg::Timer(generation) if generation == state.timer_gen => {
                // A quiet team's small buffer may wait for company (`cadence`).
                let age = state
                    .buffer_first_at
                    .map_or(Duration::ZERO, |t| t.elapsed());
                let (cadence, interval) = (state.ctx.cadence, state.tuning.flush_interval);
                match cadence::at_deadline(cadence, interval, state.buffered_bytes, age) {
                    AtDeadline::Flush => state.start_flush(&myself),
                    AtDeadline::WaitFor(left) => {
                        myself.send_after(left, move || TeamMsg::Timer(generation));
                    }
                }
            }
            TeamMsg::Timer(_) => {}
            TeamMsg::FlushDone(number, watermark) => {
                state.completed = number;
                state.inflight = None;
                state.inflight_bytes = 0;
                state.inflight_held = 0;
                state.report_memory();
                state.inflight_first_seq = None;
                state.inflight_first_at = None;
                let (ready, waiting): (Vec<_>, Vec<_>) =
                    state.waiters.drain(..).partition(|(n, _)| *n <= number);
                state.waiters = waiting;
                ready.into_iter().for_each(|(_, r)| {
                    let _ = r.send(());
                });
                if state.pending {
                    state.pending = false;
                    state.start_flush(&myself);
                }
                state.report_oldest(watermark);
            }
            TeamMsg::IdleCheck => {
                if state.is_idle() && state.last_activity.elapsed() >= state.ctx.idle_timeout {
                    let _ = state.ctx.control.send(Control::IdleStop {
                        team: state.team.clone(),
                        actor: myself.get_id(),
                        last_seen: state.last_seen_seq,
                    });
                }
            }
            TeamMsg::Crash => panic!("injected crash of team {}", state.team),
        }
        Ok(())
    }
}

impl TeamState {
    fn in_flight(&self) -> bool {
        self.started > self.completed
    }

    fn is_idle(&self) -> bool {
        self.tables.is_empty() && !self.in_flight() && self.waiters.is_empty()
    }

    fn append(&mut self, myself: &ActorRef<TeamMsg>, logged: Logged) {
        match &logged.rows {
            Rows::Event(ev) => self.append_rows(ev, |_| true),
            Rows::Tables(built) => {
                for ev in &built.rest {
                    self.append_rows(ev, |table| !built.built(table));
                }
                for TableBatch { table, batch } in &built.tables {
                    self.table(table).push(batch.clone());
                }
                for TableLogged { table, rows } in &built.logged {
                    self.table(table).push_logged(rows);
                }
            }
        }
        self.note_appended(myself, logged.first_seq, logged.seq, logged.bytes);
    }

    /// The buffer of `table`, made when missing.
    fn table(&mut self, table: &str) -> &mut BufferedTable {
        if !self.tables.contains_key(table) {
            self.tables
                .insert(table.to_string(), BufferedTable::default());
        }
        self.tables.get_mut(table).expect("just made")
    }

    /// Appends one event's rows to the buffers, cell by cell: those in the tables `wanted`.
    fn append_rows(&mut self, ev: &EventRows, wanted: impl Fn(&str) -> bool) {
        let mut result = Ok(());
        for (table, cells) in ev.rows().filter(|(table, _)| wanted(table)) {
            result = match self.tables.get_mut(table) {
                Some(b) => b.append(cells),
                None => self
                    .tables
                    .entry(table.to_string())
                    .or_default()
                    .append(cells),
            };
            if result.is_err() {
                break;
            }
        }
        if let Err(e) = result {
            // The record stays in the WAL; it is rebuilt if this actor restarts.
            error!(team = %self.team, id = %ev.id, error = %e, "could not buffer an event");
        }
    }

    /// Accounts for records `first_seq..=seq` just buffered, holding `bytes` of the budget.
    fn note_appended(&mut self, myself: &ActorRef<TeamMsg>, first_seq: u64, seq: u64, bytes: u64) {
        self.last_activity = Instant::now();
        self.last_seen_seq = seq;
        self.buffered_bytes += bytes;
        self.buffer_last_seq = seq;
        if self.buffer_first_seq.is_none() {
            self.buffer_first_seq = Some(first_seq);
            self.buffer_first_at = Some(Instant::now());
            if self.inflight_first_at.is_none() {
                self.ctx
                    .progress
                    .set_oldest_at(&self.team, self.buffer_first_at);
            }
            let generation = self.timer_gen;
            myself.send_after(self.tuning.flush_interval, move || {
                TeamMsg::Timer(generation)
            });
        }
    }

    /// Lends the rows of the asked tables: the running flush's (until it commits) and the
    /// buffer's, frozen into batches the reader shares.
    fn lend(&mut self, req: LendRequest) {
        let mut lent = Lent::default();
        for table in &req.tables {
            let mut rows = LentRows::default();
            if let Some(flight) = &self.inflight
                && let Some(batches) = flight.tables.get(table)
            {
                rows.chunks.push(LentChunk {
                    batches: batches.clone(),
                    through_seq: flight.watermark,
                });
            }
            if let Some(buffered) = self.tables.get_mut(table) {
                rows.chunks.push(LentChunk {
                    batches: buffered.lend(),
                    through_seq: self.buffer_last_seq,
                });
            }
            if !rows.chunks.is_empty() {
                lent.tables.insert(table.clone(), rows);
            }
        }
        let _ = req.reply.send(lent);
    }

    /// Measures what the buffers hold and tells the budgets how much that and the running
    /// flush's batches exceed their admitted bytes.
    fn report_memory(&mut self) {
        self.buffer_held = self
            .tables
            .values()
            .map(|t| t.allocated_bytes() as u64)
            .sum();
        let held = self.buffer_held + self.inflight_held;
        let admitted = self.buffered_bytes + self.inflight_bytes;
        self.ctx
            .admission
            .set_excess(&self.team, held.saturating_sub(admitted));
    }

    fn over_size_trigger(&self) -> bool {
        // Flush before the team's admission budget fills, whatever `flush.max_bytes` says, so
        // a burst meets a flush rather than a wall of 429s. Bytes are the larger of the rows'
        // admitted estimate and what the buffers were measured to hold.
        let max_bytes = self.tuning.flush_max_bytes.min(self.tuning.budget / 2);
        self.buffered_bytes.max(self.buffer_held) >= max_bytes
            || self
                .tables
                .values()
                .any(|t| t.rows() >= self.tuning.flush_max_rows)
    }

    /// Applies changed tuning at once: a shorter interval that has already passed, or a lower
    /// size trigger that is already reached, flushes now; otherwise the timer is re-armed for
    /// what is left of the new interval.
    fn retune(&mut self, myself: &ActorRef<TeamMsg>) {
        self.tuning = self.ctx.tuning.get(&self.team);
        let Some(first_at) = self.buffer_first_at else {
            return;
        };
        let left = self
            .tuning
            .flush_interval
            .saturating_sub(first_at.elapsed());
        if left.is_zero() || self.over_size_trigger() {
            self.start_flush(myself);
        } else {
            let generation = self.timer_gen;
            myself.send_after(left, move || TeamMsg::Timer(generation));
        }
    }

    fn request_flush(&mut self, myself: &ActorRef<TeamMsg>, reply: RpcReplyPort<()>) {
        if !self.tables.is_empty() {
            self.start_flush(myself);
            // Either it started now (number `started`) or is queued behind the running one.
            let target = if self.pending {
                self.started + 1
            } else {
                self.started
            };
            self.waiters.push((target, reply));
        } else if self.in_flight() {
            self.waiters.push((self.started, reply));
        } else {
            let _ = reply.send(());
        }
    }

    /// Tells [`Progress`] the oldest record this actor has not committed.
    fn report_oldest(&self, committed: u64) {
        let oldest = self.inflight_first_seq.or(self.buffer_first_seq);
        self.ctx.progress.set_oldest(&self.team, oldest, committed);
        self.ctx
            .progress
            .set_oldest_at(&self.team, self.inflight_first_at.or(self.buffer_first_at));
    }

    /// Hands the buffers to a flush task, or queues one if a flush is running.
    fn start_flush(&mut self, myself: &ActorRef<TeamMsg>) {
        if self.tables.is_empty() {
            return;
        }
        if self.in_flight() {
            self.pending = true;
            return;
        }
        let tables: Vec<_> = self
            .tables
            .drain()
            .map(|(table, mut buf)| TableRows {
                table,
                batches: buf.take(),
            })
            .collect();
        let bytes = std::mem::take(&mut self.buffered_bytes);
        self.inflight_bytes = bytes;
        // The batches are the buffers' builders finished in place: the same bytes, measured
        // after the last append.
        self.inflight_held = std::mem::take(&mut self.buffer_held);
        self.report_memory();
        let watermark = self.buffer_last_seq;
        self.inflight = Some(InFlight {
            tables: tables
                .iter()
                .map(|t| (t.table.clone(), t.batches.clone()))
                .collect(),
            watermark,
        });
        self.inflight_first_seq = self.buffer_first_seq.take();
        self.inflight_first_at = self.buffer_first_at.take();
        self.timer_gen += 1;
        self.started += 1;
        let number = self.started;
        let (ctx, team, me) = (self.ctx.clone(), self.team.clone(), myself.clone());
        // Taken here, in the actor, not in the task: if the actor dies right after this, its
        // successor's rebuild must still wait for this flush.
        let lock = ctx.progress.flush_lock(&team);
        let guard = lock.clone().try_lock_owned();
        tokio::spawn(async move {
            let _held = match guard {
                Ok(g) => g,
                Err(_) => lock.lock_owned().await,
            };
            let job = FlushJob {
                team: team.clone(),
                tables,
                watermark,
                encoding: ctx.admission.encoding_gauge(&team),
            };
            match flush::run(&ctx.flush, job).await {
                Ok(_) => {
                    ctx.progress.set_committed(&team, watermark);
                    ctx.admission.release(&team, bytes);
                    if me.cast(TeamMsg::FlushDone(number, watermark)).is_err() {
                        debug!(team = %team, "flush finished after its team actor stopped");
                    }
                }
                Err(e) => {
                    // Nothing was committed: restart the actor so it rebuilds from the WAL.
                    error!(team = %team, error = %e, "flush failed; restarting the team actor from the WAL");
                    let _ = me.cast(TeamMsg::Crash);
                }
            }
        });
    }
}
