//! [`TeamCtx`]: what every team actor shares — the flush dependencies, live tuning, budgets,
//! progress and the way back to the dispatcher. A file of its own so the dispatcher, the actors
//! and the WAL replay share it without importing each other.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::admission::Admission;
use super::control::Control;
use super::flush::FlushCtx;
use super::progress::Progress;
use super::tuning::Tuning;

/// Everything a team actor needs besides its team id.
#[derive(Debug)]
pub struct TeamCtx {
    /// Flush dependencies.
    pub flush: FlushCtx,
    /// Flush triggers and budgets per team, live.
    pub tuning: Arc<Tuning>,
    /// Budgets to give bytes back to after commits.
    pub admission: Arc<Admission>,
    /// Watermarks, oldest uncommitted records, flush locks.
    pub progress: Arc<Progress>,
    /// How long quiet teams' flushes may wait ([`super::cadence`]).
    pub cadence: super::cadence::Cadence,
    /// Stop after this long idle.
    pub idle_timeout: Duration,
    /// Where to rebuild a buffer from after a crash.
    pub wal_dir: PathBuf,
    /// To the dispatcher (idle-stop requests).
    pub control: mpsc::UnboundedSender<Control>,
}
