//! The team actor: owns one team's buffers (per table), enforces the table and column limits,
//! and decides when to flush — on the age of the oldest row (a timer that fires without new
//! traffic), on rows per table, on bytes per team, or when asked. One flush is in flight at a
//! time, so files commit in ingestion order; the actor keeps accepting while it runs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::task::JoinHandle;
use tracing::{debug, error};

use super::admission::Admission;
use super::buffer::TableBuffer;
use super::event::EventRows;
use super::flush::{self, FlushCtx, FlushJob};
use crate::catalog::TeamId;
use crate::config::{FlushConfig, LimitsConfig};

/// Everything a team actor needs besides its team id.
#[derive(Debug)]
pub struct TeamCtx {
    /// Flush dependencies.
    pub flush: FlushCtx,
    /// Flush triggers.
    pub flush_cfg: FlushConfig,
    /// Warehouse limits.
    pub limits: LimitsConfig,
    /// Budgets to give bytes back to after commits.
    pub admission: Arc<Admission>,
    /// Stop after this long idle.
    pub idle_timeout: Duration,
}

/// Why an event was refused by its team actor.
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
    /// A buffer could not take the row (a bug, reported as 500).
    #[error("buffer error: {0}")]
    Internal(String),
}

/// Messages a team actor handles.
pub enum TeamMsg {
    /// Buffer one event whose `bytes` were admitted; reply once it is in the buffer.
    Append(Arc<EventRows>, u64, RpcReplyPort<Result<(), AppendError>>),
    /// Reply once everything buffered now is committed.
    Flush(RpcReplyPort<()>),
    /// The flush timer of a given generation fired.
    Timer(u64),
    /// Flush number `seq` committed these table schemas.
    FlushDone(u64, Vec<(String, crate::warehouse::schema::TableSchema)>),
    /// Stop if idle long enough.
    IdleCheck,
}

/// The actor (state lives in [`TeamState`]).
pub struct TeamActor;

/// Start-up arguments.
pub struct TeamArgs {
    /// Which team.
    pub team: TeamId,
    /// Shared context.
    pub ctx: Arc<TeamCtx>,
}

/// A team actor's state.
pub struct TeamState {
    team: TeamId,
    ctx: Arc<TeamCtx>,
    /// Buffered rows per table.
    tables: HashMap<String, TableBuffer>,
    /// Admitted bytes of the rows now buffered (released by the flush that commits them).
    buffered_bytes: u64,
    /// When the oldest buffered row arrived.
    oldest: Option<Instant>,
    /// Bumped on every flush so a stale timer is ignored.
    timer_gen: u64,
    /// Flushes started and completed (sequence numbers).
    started: u64,
    completed: u64,
    /// Another flush is due as soon as the running one finishes.
    pending: bool,
    /// Flush requests waiting for flush number N to complete.
    waiters: Vec<(u64, RpcReplyPort<()>)>,
    /// Committed columns per table, for the limits.
    known: HashMap<String, HashSet<String>>,
    last_activity: Instant,
    idle_task: Option<JoinHandle<()>>,
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
        let catalog = args.ctx.flush.catalog.clone();
        let team = args.team.clone();
        let schemas = tokio::task::spawn_blocking(move || catalog.team_schemas(&team)).await??;
        let known = schemas
            .into_iter()
            .map(|(t, s)| (t, s.columns.into_iter().map(|c| c.name).collect()))
            .collect();
        let check_every = (args.ctx.idle_timeout / 2).max(Duration::from_millis(50));
        let idle_task = Some(myself.send_interval(check_every, || TeamMsg::IdleCheck));
        debug!(team = %args.team, "team actor started");
        Ok(TeamState {
            team: args.team,
            ctx: args.ctx,
            tables: HashMap::new(),
            buffered_bytes: 0,
            oldest: None,
            timer_gen: 0,
            started: 0,
            completed: 0,
            pending: false,
            waiters: Vec::new(),
            known,
            last_activity: Instant::now(),
            idle_task,
        })
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
            TeamMsg::Append(rows, bytes, reply) => {
                let result = state.append(&myself, &rows, bytes);
                let _ = reply.send(result);
                if state.over_size_trigger() {
                    state.start_flush(&myself);
                }
            }
            TeamMsg::Flush(reply) => state.request_flush(&myself, reply),
            TeamMsg::Timer(generation) => {
                if generation == state.timer_gen {
                    state.start_flush(&myself);
                }
            }
            TeamMsg::FlushDone(seq, schemas) => {
                state.completed = seq;
                for (table, schema) in schemas {
                    state
                        .known
                        .entry(table)
                        .or_default()
                        .extend(schema.columns.into_iter().map(|c| c.name));
                }
                let done = state.completed;
                let (ready, waiting): (Vec<_>, Vec<_>) =
                    state.waiters.drain(..).partition(|(n, _)| *n <= done);
                state.waiters = waiting;
                ready.into_iter().for_each(|(_, r)| {
                    let _ = r.send(());
                });
                if state.pending {
                    state.pending = false;
                    state.start_flush(&myself);
                }
            }
            TeamMsg::IdleCheck => {
                if state.is_idle() && state.last_activity.elapsed() >= state.ctx.idle_timeout {
                    debug!(team = %state.team, "team actor idle; stopping");
                    myself.stop(Some("idle".into()));
                }
            }
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

    fn append(
        &mut self,
        myself: &ActorRef<TeamMsg>,
        ev: &EventRows,
        bytes: u64,
    ) -> Result<(), AppendError> {
        self.last_activity = Instant::now();
        self.check_limits(ev)?;
        let internal = |e: arrow::error::ArrowError| AppendError::Internal(e.to_string());
        self.tables
            .entry("tracks".into())
            .or_default()
            .append(&ev.standard)
            .map_err(internal)?;
        self.tables
            .entry(ev.table.clone())
            .or_default()
            .append(ev.standard.iter().chain(&ev.properties))
            .map_err(internal)?;
        self.buffered_bytes += bytes;
        if self.oldest.is_none() {
            self.oldest = Some(Instant::now());
            let generation = self.timer_gen;
            myself.send_after(self.ctx.flush_cfg.interval.0, move || {
                TeamMsg::Timer(generation)
            });
        }
        Ok(())
    }

    /// Refuses an event that would create a table or columns past the limits.
    fn check_limits(&self, ev: &EventRows) -> Result<(), AppendError> {
        let limits = &self.ctx.limits;
        let exists = |t: &str| self.known.contains_key(t) || self.tables.contains_key(t);
        let new_tables = [("tracks"), ev.table.as_str()]
            .iter()
            .filter(|t| !exists(t))
            .count();
        if new_tables > 0 {
            let current = self.known.len()
                + self
                    .tables
                    .keys()
                    .filter(|t| !self.known.contains_key(*t))
                    .count();
            if current + new_tables > limits.tables_per_team {
                return Err(AppendError::TooManyTables(limits.tables_per_team));
            }
        }
        let known = self.known.get(&ev.table);
        let buffer = self.tables.get(&ev.table);
        let has = |c: &str| {
            known.is_some_and(|k| k.contains(c)) || buffer.is_some_and(|b| b.has_column(c))
        };
        let new_cols = ev
            .standard
            .iter()
            .chain(&ev.properties)
            .filter(|(c, _)| !has(c))
            .count();
        if new_cols > 0 {
            let buffered_only = buffer.map_or(0, |b| {
                b.column_names()
                    .filter(|c| !known.is_some_and(|k| k.contains(*c)))
                    .count()
            });
            let current = known.map_or(0, HashSet::len) + buffered_only;
            if current + new_cols > limits.columns_per_table {
                return Err(AppendError::TooManyColumns {
                    table: ev.table.clone(),
                    limit: limits.columns_per_table,
                });
            }
        }
        Ok(())
    }

    fn over_size_trigger(&self) -> bool {
        self.buffered_bytes >= self.ctx.flush_cfg.max_bytes.0
            || self
                .tables
                .values()
                .any(|t| t.rows() >= self.ctx.flush_cfg.max_rows)
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
            .map(|(name, mut buf)| (name, buf.take_batch()))
            .collect();
        let bytes = std::mem::take(&mut self.buffered_bytes);
        self.oldest = None;
        self.timer_gen += 1;
        self.started += 1;
        let seq = self.started;
        let (ctx, team, me) = (self.ctx.clone(), self.team.clone(), myself.clone());
        tokio::spawn(async move {
            let outcome = flush::run(
                &ctx.flush,
                FlushJob {
                    team: team.clone(),
                    tables,
                },
            )
            .await;
            ctx.admission.release(&team, bytes);
            if me.cast(TeamMsg::FlushDone(seq, outcome.schemas)).is_err() {
                error!(team = %team, "flush finished after its team actor stopped");
            }
        });
    }
}
