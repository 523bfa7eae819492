//! Event ingestion after HTTP: validation ([`event`]), budgets ([`admission`]), per-team actors
//! ([`team`]) with their buffers ([`buffer`]) under one supervisor ([`supervisor`]), and
//! flushing to the warehouse ([`flush`]). [`Ingest::submit`] is the one acknowledgement point.

pub mod admission;
pub mod buffer;
pub mod event;
pub mod flush;
pub mod supervisor;
pub mod team;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dashmap::DashMap;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef};
use tracing::warn;

use crate::catalog::TeamId;
use admission::{Admission, Refusal};
use event::EventRows;
use supervisor::{Supervisor, SupervisorMsg};
use team::{AppendError, TeamActor, TeamArgs, TeamCtx, TeamMsg};

/// Why an event was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The team's buffer budget is full (429).
    #[error("team buffer full")]
    TeamBufferFull,
    /// The global buffer budget is full (503).
    #[error("overloaded")]
    Overloaded,
    /// The server is shutting down (503).
    #[error("shutting down")]
    ShuttingDown,
    /// The team actor refused the event (limits; 400) or failed (500).
    #[error(transparent)]
    Append(#[from] AppendError),
    /// The actor machinery failed (500).
    #[error("team actor unavailable: {0}")]
    Unavailable(String),
}

/// Registry of team actors: the live actor per team, shared with the supervisor.
pub type Registry = Arc<DashMap<TeamId, ActorRef<TeamMsg>>>;

/// The ingestion service the HTTP layer talks to.
pub struct Ingest {
    ctx: Arc<TeamCtx>,
    actors: Registry,
    spawn_lock: tokio::sync::Mutex<()>,
    supervisor: ActorRef<SupervisorMsg>,
    closing: AtomicBool,
}

/// How many times a submit re-resolves an actor that stopped under it.
const SUBMIT_ATTEMPTS: usize = 5;

impl Ingest {
    /// Starts the supervisor; team actors start on demand.
    pub async fn start(ctx: TeamCtx) -> Result<Ingest, ractor::SpawnErr> {
        let ctx = Arc::new(ctx);
        let actors: Registry = Arc::new(DashMap::new());
        let (supervisor, _) =
            Actor::spawn(None, Supervisor, (actors.clone(), ctx.admission.clone())).await?;
        Ok(Ingest {
            ctx,
            actors,
            spawn_lock: tokio::sync::Mutex::new(()),
            supervisor,
            closing: AtomicBool::new(false),
        })
    }

    /// The budgets (for metrics and tests).
    pub fn admission(&self) -> &Admission {
        &self.ctx.admission
    }

    /// Accepts one event for `team`. `Ok` is the acknowledgement: today it means the rows are in
    /// the team's in-memory buffer (a write-ahead log will make it mean durable).
    pub async fn submit(&self, team: &TeamId, rows: EventRows) -> Result<(), IngestError> {
        if self.closing.load(Ordering::Acquire) {
            return Err(IngestError::ShuttingDown);
        }
        let bytes = rows.approx_bytes();
        self.ctx.admission.admit(team, bytes).map_err(|r| match r {
            Refusal::Team => IngestError::TeamBufferFull,
            Refusal::Global => IngestError::Overloaded,
        })?;
        let result = self.deliver(team, Arc::new(rows), bytes).await;
        if result.is_err() {
            self.ctx.admission.release(team, bytes);
        }
        result
    }

    async fn deliver(
        &self,
        team: &TeamId,
        rows: Arc<EventRows>,
        bytes: u64,
    ) -> Result<(), IngestError> {
        let mut last_err = String::new();
        for _ in 0..SUBMIT_ATTEMPTS {
            let actor = self.actor_for(team).await?;
            let rows = rows.clone();
            match actor
                .call(|reply| TeamMsg::Append(rows, bytes, reply), None)
                .await
            {
                Ok(CallResult::Success(result)) => return result.map_err(IngestError::from),
                // The actor stopped (idle or failed) before handling the message: nothing was
                // buffered, so resolve the team's actor again and retry.
                Ok(other) => last_err = format!("{other:?}"),
                Err(e) => last_err = e.to_string(),
            }
            self.actors
                .remove_if(team, |_, a| a.get_id() == actor.get_id());
        }
        Err(IngestError::Unavailable(last_err))
    }

    /// The running actor of `team`, started if needed.
    async fn actor_for(&self, team: &TeamId) -> Result<ActorRef<TeamMsg>, IngestError> {
        if let Some(a) = self.actors.get(team) {
            return Ok(a.clone());
        }
        let _guard = self.spawn_lock.lock().await;
        if let Some(a) = self.actors.get(team) {
            return Ok(a.clone());
        }
        let args = TeamArgs {
            team: team.clone(),
            ctx: self.ctx.clone(),
        };
        let (actor, _) = Actor::spawn_linked(None, TeamActor, args, self.supervisor.get_cell())
            .await
            .map_err(|e| IngestError::Unavailable(e.to_string()))?;
        self.actors.insert(team.clone(), actor.clone());
        Ok(actor)
    }

    /// Flushes every team and waits until everything buffered before the call is committed.
    pub async fn flush_all(&self) {
        let actors: Vec<_> = self.actors.iter().map(|e| e.value().clone()).collect();
        let calls = actors.iter().map(|a| a.call(TeamMsg::Flush, None));
        for r in futures::future::join_all(calls).await {
            if let Err(e) = r {
                // An actor that stopped while idle had nothing to flush.
                warn!(error = %e, "flush request not delivered");
            }
        }
    }

    /// Stops accepting, flushes and commits every buffer, and stops every actor.
    pub async fn shutdown(&self) {
        self.closing.store(true, Ordering::Release);
        let _guard = self.spawn_lock.lock().await;
        self.flush_all().await;
        let actors: Vec<_> = self.actors.iter().map(|e| e.value().clone()).collect();
        for a in actors {
            a.stop_and_wait(Some("shutdown".into()), None).await.ok();
        }
        self.supervisor.stop_and_wait(None, None).await.ok();
    }

    /// Number of running team actors.
    pub fn active_teams(&self) -> usize {
        self.actors.len()
    }
}
