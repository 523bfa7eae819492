//! Event ingestion after HTTP: validation ([`event`], its top-level [`fields`] and time columns
//! [`event_time`], the Segment calls [`segment`]; a refusal is a [`crate::model::Invalid`]),
//! limits ([`limits`]), duplicate suppression ([`dedup`]), budgets ([`admission`]), the
//! write-ahead log ([`crate::wal`]), the [`dispatch`]er that hands logged events to per-team actors ([`team`],
//! buffering in [`crate::warehouse::buffer`]) under a [`supervisor`], and flushing to the
//! warehouse ([`flush`]). What the actors share is in [`ctx`], what they ask of the dispatcher in
//! [`control`], so the dispatcher, the actors, the supervisor and the replay never import each
//! other in a loop. [`Ingest::submit`] is the one acknowledgement point. [`direct`] builds a
//! batch's messages straight into a batch per table, without cells ([`Ingest::submit_prebuilt`]).

pub mod admission;
pub mod buffered;
pub mod bulk;
pub mod cadence;
pub mod control;
pub mod ctx;
pub mod dedup;
pub mod direct;
pub mod dispatch;
pub mod event;
pub mod event_time;
pub mod fields;
pub mod flush;
mod gather;
pub use gather::GatherCounts;
mod flush_encode;
mod key_paths;
pub mod limits;
pub mod logged;
pub mod progress;
pub mod replay;
pub mod segment;
pub mod submit;
pub mod supervisor;
pub mod team;
pub mod top_fields;
pub mod tuning;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tracing::{error, info};

use crate::catalog::Catalog;
use crate::config::{AckMode, Config};
use crate::model::TeamId;
use crate::model::fresh::{Buffers, FreshError, Lent};
use crate::wal::{self, Append, Entry, Recovered, Wal, WalError, WalOptions, Written};
use admission::Admission;
use control::Control;
use ctx::TeamCtx;
use dedup::Dedup;
use dispatch::{Dispatcher, Payload};
use limits::Limits;
use progress::Progress;
use team::AppendError;

/// Why an event was not accepted.
#[derive(Debug, Clone, thiserror::Error)]
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
    /// The team's rate limit is reached (429); retry after this long.
    #[error("rate limited")]
    RateLimited(std::time::Duration),
    /// WAL recovery is still running (503).
    #[error("recovering")]
    Recovering,
    /// The event would pass a limit (400) or something internal failed (500).
    #[error(transparent)]
    Append(#[from] AppendError),
    /// The WAL could not make the event durable (503).
    #[error(transparent)]
    Wal(#[from] WalError),
    /// A batch built directly ([`direct`]) would pass a limit: to be built the usual way,
    /// which names the event at fault. Never a client's answer.
    #[error("to be built again")]
    Rebuild,
}

/// What the client asked to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The configured acknowledgement (`ingest.ack`).
    Ack,
    /// `X-Stowage-Wait: committed`: until the event is in a committed Parquet file.
    Committed,
}

/// How an accepted event was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Logged (and, per `ingest.ack`, fsync'd).
    Stored,
    /// Its `messageId` was already accepted within the dedup window: not stored again.
    Duplicate,
}

/// The ingestion service the HTTP layer talks to.
pub struct Ingest {
    ctx: Arc<TeamCtx>,
    wal: Arc<Wal<Payload>>,
    ack: AckMode,
    dedup: Arc<Dedup>,
    limits: Limits,
    control: mpsc::UnboundedSender<Control>,
    closing: AtomicBool,
    recovering: Arc<AtomicBool>,
    ready: tokio::sync::watch::Sender<bool>,
    active_teams: Arc<AtomicUsize>,
    dispatcher: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Longest a fresh read waits for a team's rows (`read.fresh_timeout`).
    fresh_timeout: std::time::Duration,
    /// Longest a request waits for room in the budgets (`ingest.admission_wait`).
    admission_wait: std::time::Duration,
    /// Whether single events are gathered (`ingest.gather_single`).
    gather_single: bool,
    /// Single events waiting to be logged together, by team.
    gathering: gather::Gathering,
}

impl Ingest {
    /// Recovers the WAL (refusing mid-log corruption), starts the writer, the dispatcher and the
    /// supervisor, and replays un-committed records in the background (see [`Ingest::is_ready`]).
    pub async fn start(
        config: &Config,
        catalog: Arc<Catalog>,
        flush: flush::FlushCtx,
    ) -> Result<Arc<Ingest>, Box<dyn std::error::Error + Send + Sync>> {
        let dir = config.wal_dir();
        let policy = config.wal.recovery;
        let d = dir.clone();
        let recovered: Recovered =
            tokio::task::spawn_blocking(move || wal::recover(&d, policy)).await??;
        for line in &recovered.dropped {
            info!("WAL recovery: {line}");
        }
        // This WAL's watermarks: each node's WAL has its own numbering (SPEC §7).
        let wal_id = wal::identity::identity(&dir)?;
        catalog.set_wal(&wal_id);
        let c = catalog.clone();
        let watermarks = tokio::task::spawn_blocking(move || c.watermarks()).await??;
        let floor = watermarks.values().copied().max().unwrap_or(0);

        let (data_tx, data_rx) = mpsc::unbounded_channel::<Vec<Written<Payload>>>();
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let opts = WalOptions {
            dir: dir.clone(),
            sync_interval: config.wal.sync_interval.0,
            batch_bytes: config.wal.batch_bytes.0 as usize,
            group_wait: config.wal.group_wait.0,
            segment_size: config.wal.segment_size.0,
        };
        let archive = wal::IdArchive::new(&dir, config.dedup.window.0, config.dedup.capacity);
        let dedup = Arc::new(Dedup::new(config.dedup.window.0, config.dedup.capacity));
        let (a, d) = (archive.clone(), dedup.clone());
        let remembered = tokio::task::spawn_blocking(move || {
            let now = chrono::Utc::now().timestamp_micros();
            a.load(now, |r| d.remember_stored(&r.team, &r.id, r.received_at))
        })
        .await??;
        if remembered > 0 {
            info!(
                ids = remembered,
                "dedup window restored from the id archive"
            );
        }
        let wal = Arc::new(Wal::start(
            opts,
            &recovered,
            floor,
            Some(archive),
            data_tx.clone(),
        ));
        let mut admission =
            Admission::new(config.ingest.team_budget.0, config.ingest.global_budget.0);
        let allowance = config.ingest.resident_allowance.0;
        if allowance > 0 && crate::resident::watch() {
            admission = admission.with_resident(admission::Resident {
                allowance,
                read: Arc::new(crate::resident::sampled),
            });
        }
        let admission = Arc::new(admission);
        let tuning = Arc::new(tuning::Tuning::new(config));
        let c = catalog.clone();
        let settings = tokio::task::spawn_blocking(move || {
            c.settings_generation()
                .and_then(|g| Ok((g, c.all_team_settings()?)))
        })
        .await??;
        tuning.load(settings.0, &settings.1);
        let ctx = Arc::new(TeamCtx {
            flush,
            tuning: tuning.clone(),
            admission,
            progress: Arc::new(Progress::default()),
            cadence: cadence::Cadence {
                idle_interval: config.flush.idle_interval.0,
                idle_bytes: config.flush.idle_bytes.0,
            },
            idle_timeout: config.ingest.idle_timeout.0,
            wal_dir: dir,
            control: control_tx.clone(),
        });
        let supervisor = Dispatcher::supervisor(control_tx.clone()).await?;
        let active_teams = Arc::new(AtomicUsize::new(0));
        let dispatcher = Dispatcher {
            ctx: ctx.clone(),
            wal: wal.clone(),
            data: data_rx,
            control: control_rx,
            supervisor,
            actors: HashMap::new(),
            last_dispatched: HashMap::new(),
            needs_rebuild: Default::default(),
            // Nothing counts as dispatched until replay hands records over, so no segment
            // holding an unreplayed record can be deleted meanwhile.
            dispatched_through: 0,
            metrics_teams: active_teams.clone(),
            gc_task: None,
        };
        let handle = tokio::spawn(dispatcher.run());
        tokio::spawn(poll_tuning(catalog.clone(), tuning, control_tx.downgrade()));
        let ingest = Arc::new(Ingest {
            ctx,
            wal,
            ack: config.ingest.ack,
            dedup,
            limits: Limits::new(config.limits.clone(), catalog.clone()),
            control: control_tx,
            closing: AtomicBool::new(false),
            recovering: Arc::new(AtomicBool::new(true)),
            ready: tokio::sync::watch::channel(false).0,
            active_teams,
            dispatcher: std::sync::Mutex::new(Some(handle)),
            fresh_timeout: config.read.fresh_timeout.0,
            admission_wait: config.ingest.admission_wait.0,
            gather_single: config.ingest.gather_single,
            gathering: gather::Gathering::default(),
        });
        let me = ingest.clone();
        tokio::task::spawn_blocking(move || me.replay(recovered, watermarks, data_tx));
        Ok(ingest)
    }

    /// Hands every record above its team's watermark to the dispatcher, in order, then opens
    /// ingestion. Ids of every record still in the WAL go into the dedup window.
    fn replay(
        &self,
        recovered: Recovered,
        watermarks: HashMap<TeamId, u64>,
        data: mpsc::UnboundedSender<Vec<Written<Payload>>>,
    ) {
        let mut replayed = 0usize;
        let min_seq = recovered.records.first().map(|r| r.seq);
        for record in recovered.records {
            if record.flags & wal::record::FLAG_CLIENT_ID != 0 {
                self.dedup
                    .remember_stored(&record.team, &record.id, record.received_at);
            }
            if record.seq <= watermarks.get(&record.team).copied().unwrap_or(0) {
                continue;
            }
            let rows = match replay::rows_of(&record) {
                Ok(rows) => rows,
                Err(e) => {
                    error!(seq = record.seq, team = %record.team, error = %e, "WAL record no longer parses; skipped");
                    continue;
                }
            };
            let _ = self.limits.admit(&record.team, &rows, false);
            let bytes = rows.approx_bytes();
            self.ctx.admission.force(&record.team, bytes);
            let payload = Payload::Event {
                rows: Arc::new(rows),
                bytes,
            };
            let _ = data.send(vec![Written {
                seq: record.seq,
                team: record.team,
                payload,
            }]);
            replayed += 1;
        }
        drop(data);
        self.recovering.store(false, Ordering::Release);
        self.ready.send_replace(true);
        info!(replayed, first_seq = ?min_seq, "WAL recovery done; accepting events");
    }

    /// Whether recovery is done (the `/readyz` condition for ingestion).
    pub fn is_ready(&self) -> bool {
        !self.recovering.load(Ordering::Acquire)
    }

    /// Resolves once recovery is done.
    pub async fn wait_ready(&self) {
        let _ = self.ready.subscribe().wait_for(|r| *r).await;
    }

    /// The budgets (for metrics and tests).
    pub fn admission(&self) -> &Admission {
        &self.ctx.admission
    }

    /// Waits (up to `ingest.admission_wait`) until `team`'s budget and the global one have
    /// room for a request whose body holds up to `body_bytes`, before the body is read; the
    /// request is then admitted or refused as usual, holding the turn it may get until then.
    pub async fn wait_for_room(&self, team: &TeamId, body_bytes: u64) -> Option<admission::Turn> {
        let budget = self.ctx.tuning.get(team).budget;
        // Rows hold about 1.5x their text (shop: ~1 KB admitted for 660 bytes of NDJSON). A
        // body of unknown size counts as the largest allowed, but never as more than a quarter
        // of the budget: a small budget would otherwise wait for an empty buffer.
        let bytes = body_bytes.saturating_mul(2).min(budget / 4);
        self.ctx
            .admission
            .wait_for_room(team, bytes, budget, self.admission_wait)
            .await
    }

    /// The WAL (for metrics).
    pub fn wal(&self) -> &Wal<Payload> {
        &self.wal
    }

    /// Commit progress (for metrics).
    pub fn progress(&self) -> &Progress {
        &self.ctx.progress
    }

    /// Queues a marker carrying `payload` for `team` in the WAL queue: the dispatcher acts on
    /// it after every event queued before it, so events acknowledged but still queued there
    /// (buffered acks) count as before it.
    fn append_marker(&self, team: TeamId, payload: Payload) -> Result<(), WalError> {
        let marker = Entry {
            team,
            flags: wal::record::FLAG_MARKER,
            received_at: 0,
            id: String::new(),
            body: Bytes::new(),
            payload,
        };
        self.wal.append(Append::one(marker, false)).map(|_| ())
    }

    /// Flushes every team and waits until every event acknowledged before the call is
    /// committed.
    pub async fn flush_all(&self) {
        let (tx, rx) = oneshot::channel();
        if let Err(e) = self.append_marker(TeamId::from(""), Payload::FlushBarrier(tx)) {
            tracing::debug!(error = %e, "WAL closed; flushing directly");
            let (tx, rx) = oneshot::channel();
            if self.control.send(Control::FlushAll(tx)).is_ok() {
                let _ = rx.await;
            }
            return;
        }
        let _ = rx.await;
    }

    /// Every row of `tables` of `team` acknowledged before the call and maybe not committed
    /// (SPEC §3.5).
    pub async fn lend(&self, team: &TeamId, tables: &[String]) -> Result<Lent, FreshError> {
        self.ready_for_fresh().await?;
        let (tx, rx) = oneshot::channel();
        let request = team::LendRequest {
            tables: tables.to_vec(),
            reply: tx,
        };
        self.append_marker(team.clone(), Payload::Lend(request))
            .map_err(|e| FreshError::Unavailable(e.to_string()))?;
        self.within_timeout(rx).await?.map_err(|_| {
            FreshError::Unavailable(
                "the team's buffer could not be read (its writer restarted); retry".into(),
            )
        })
    }

    /// Flushes `team` and waits until every event of it acknowledged before the call is
    /// committed (another node's fresh read asks for this). Errors if the log is closed or the
    /// team's writer failed meanwhile.
    pub async fn flush_team(&self, team: &TeamId) -> Result<(), FreshError> {
        self.ready_for_fresh().await?;
        let (tx, rx) = oneshot::channel();
        self.append_marker(team.clone(), Payload::FlushTeam(tx))
            .map_err(|e| FreshError::Unavailable(e.to_string()))?;
        self.within_timeout(rx).await?.map_err(|_| {
            FreshError::Unavailable(
                "the team's flush did not complete (its writer restarted); retry".into(),
            )
        })
    }

    /// Waits (at most `read.fresh_timeout`) until the WAL's replay is dispatched: a marker
    /// queued before that would overtake replayed records and miss them.
    async fn ready_for_fresh(&self) -> Result<(), FreshError> {
        tokio::time::timeout(self.fresh_timeout, self.wait_ready())
            .await
            .map_err(|_| {
                FreshError::Unavailable(
                    "the event writer is still recovering its log; retry shortly".into(),
                )
            })
    }

    /// `rx`, or a timeout error after `read.fresh_timeout` (a team's writer stuck rebuilding
    /// behind a failing store, a log that cannot be written).
    async fn within_timeout<T>(
        &self,
        rx: oneshot::Receiver<T>,
    ) -> Result<Result<T, oneshot::error::RecvError>, FreshError> {
        tokio::time::timeout(self.fresh_timeout, rx)
            .await
            .map_err(|_| {
                FreshError::Timeout(format!(
                    "the team's writer did not answer within read.fresh_timeout ({:?})",
                    self.fresh_timeout
                ))
            })
    }

    /// Fault injection for tests of supervision: makes `team`'s actor panic.
    #[doc(hidden)]
    pub fn crash_team_actor(&self, team: &TeamId) {
        let _ = self.control.send(Control::Crash(team.clone()));
    }

    /// Stops accepting, writes out the WAL queue, flushes and commits every buffer, and stops
    /// every actor.
    pub async fn shutdown(&self) {
        self.closing.store(true, Ordering::Release);
        let wal = self.wal.clone();
        let _ = tokio::task::spawn_blocking(move || wal.close()).await;
        let (tx, rx) = oneshot::channel();
        if self.control.send(Control::Shutdown(tx)).is_ok() {
            let _ = rx.await;
        }
        let handle = self.dispatcher.lock().expect("dispatcher lock").take();
        if let Some(h) = handle {
            let _ = h.await;
        }
    }

    /// Number of running team actors.
    pub fn active_teams(&self) -> usize {
        self.active_teams.load(Ordering::Relaxed)
    }
}

impl Buffers for Ingest {
    fn lend<'a>(
        &'a self,
        team: &'a TeamId,
        tables: &'a [String],
    ) -> BoxFuture<'a, Result<Lent, FreshError>> {
        Box::pin(Ingest::lend(self, team, tables))
    }
}

/// Reloads per-team tuning when the catalog's settings generation changes (an operator ran
/// `admin team set`, maybe in another process), and tells the affected actors. Ends with the
/// dispatcher.
async fn poll_tuning(
    catalog: Arc<Catalog>,
    tuning: Arc<tuning::Tuning>,
    control: mpsc::WeakUnboundedSender<Control>,
) {
    let mut every = tokio::time::interval(tuning::POLL_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(control) = control.upgrade() else {
            return;
        };
        let c = catalog.clone();
        let t = tuning.clone();
        let changed =
            tokio::task::spawn_blocking(move || -> crate::catalog::Result<Vec<TeamId>> {
                let generation = c.settings_generation()?;
                if generation == t.generation() {
                    return Ok(Vec::new());
                }
                let all = c.all_team_settings()?;
                Ok(t.load(generation, &all))
            })
            .await;
        match changed {
            Ok(Ok(teams)) => {
                for team in teams {
                    info!(team = %team, "team tuning changed; applying it");
                    let _ = control.send(Control::Retune(team));
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot read team settings; keeping the current ones")
            }
            Err(_) => return,
        }
    }
}
