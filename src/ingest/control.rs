//! [`Control`]: what the team actors, their supervisor and the ingest service ask of the
//! dispatcher, which owns the actors. A file of its own so the actors and the supervisor can
//! reach the dispatcher without importing it.

use ractor::ActorId;
use tokio::sync::oneshot;

use crate::model::TeamId;

/// Requests to the dispatcher.
pub enum Control {
    /// An actor stopped (`failed`: it panicked).
    ActorDown {
        /// The actor that stopped.
        actor: ActorId,
        /// Whether it panicked (then it is restarted from the WAL).
        failed: bool,
    },
    /// An actor found itself idle having seen up to `last_seen`.
    IdleStop {
        /// The actor's team.
        team: TeamId,
        /// The actor, so a newer one of the same team is not stopped by mistake.
        actor: ActorId,
        /// Highest record it received.
        last_seen: u64,
    },
    /// Flush every team; reply when committed.
    FlushAll(oneshot::Sender<()>),
    /// Fault injection: make a team's actor panic.
    Crash(TeamId),
    /// A team's tuning changed.
    Retune(TeamId),
    /// The WAL is closed: dispatch what is left, flush, stop every actor, reply.
    Shutdown(oneshot::Sender<()>),
}
