//! The acknowledgement point: [`Ingest::submit`] (one event) and [`Ingest::submit_batch`] (a
//! batch: one limits check, one budget admission, one WAL append and one acknowledgement for all
//! its events). Duplicate `messageId`s — within the batch or seen before — are acknowledged and
//! stored once.

use std::mem::take;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::admission::Refusal;
use super::bulk;
use super::dedup::{Claim, Claims, Outcome, Ticket};
use super::direct::{self, DirectTable};
use super::dispatch::Payload;
use super::event::EventRows;
use super::team::AppendError;
use super::{Accepted, Ingest, IngestError, Wait};
use crate::config::AckMode;
use crate::model::TeamId;
use crate::wal::{self, Append, Entry, Receipt, WalError};

/// One event of a submission.
pub struct Item {
    /// Its validated rows.
    pub rows: EventRows,
    /// Its WAL record body.
    pub body: Bytes,
    /// Extra record flags (`FLAG_SEGMENT` for Segment messages).
    pub flags: u8,
    /// When it was received, if not when its submission was: an event gathered with others
    /// (`ingest::gather`) keeps its own time in its WAL record.
    pub received_at: Option<i64>,
}

/// A refusal, with the events it left unlogged when it came before the WAL append (each with
/// its index in the submission) and those found to be duplicates of stored events: a gathered
/// submission answers them one by one ([`super::gather`]).
pub(super) struct Refused {
    pub error: BatchError,
    pub items: Vec<(usize, Item)>,
    pub duplicates: Vec<usize>,
}

impl Refused {
    fn all(error: IngestError, items: Vec<Item>) -> Refused {
        Refused {
            error: error.into(),
            items: items.into_iter().enumerate().collect(),
            duplicates: Vec::new(),
        }
    }
}

/// Whether a submission takes its events from the team's rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rate {
    /// All of them, at once.
    Take,
    /// Taken already, one by one (gathered events).
    Taken,
}

/// A batch's rows built on the request's task ([`super::direct`]): its items carry their ids
/// and log records, and rows without cells.
pub struct Prebuilt {
    /// The request's tables, each row marked with its event.
    pub tables: Vec<DirectTable>,
    /// Each event's estimate for the budgets: its share of the tables' memory.
    pub sizes: Vec<u64>,
}

/// Why a batch was refused, with the index of the event at fault when there is one.
#[derive(Debug)]
pub struct BatchError {
    /// Index in the batch of the event that passed a limit.
    pub index: Option<usize>,
    /// The error.
    pub error: IngestError,
}

impl From<IngestError> for BatchError {
    fn from(error: IngestError) -> Self {
        BatchError { index: None, error }
    }
}

impl Ingest {
    /// Accepts one event for `team`; `Ok` is the acknowledgement. With `ingest.ack = durable`
    /// the event is in the WAL and fsync'd; with `buffered` it is queued in memory;
    /// with [`Wait::Committed`] it is in a committed Parquet file.
    pub async fn submit(
        self: &Arc<Self>,
        team: &TeamId,
        rows: EventRows,
        body: Bytes,
        received_at: i64,
        wait: Wait,
    ) -> Result<Accepted, IngestError> {
        let item = Item {
            rows,
            body,
            flags: 0,
            received_at: None,
        };
        self.submit_one(team, item, received_at, wait)
            .await
            .map_err(|e| e.error)
    }

    /// Accepts one event of a single-event endpoint: gathered with the team's others
    /// ([`super::gather`]) when it waits for the configured acknowledgement.
    pub async fn submit_one(
        self: &Arc<Self>,
        team: &TeamId,
        item: Item,
        received_at: i64,
        wait: Wait,
    ) -> Result<Accepted, BatchError> {
        if wait == Wait::Ack && self.gather_single {
            return self.gathered(team, item, received_at).await;
        }
        self.submit_single(team, item, received_at, wait, Rate::Take)
            .await
    }

    /// Submits one event on its own (not gathered); its outcome.
    pub(super) async fn submit_single(
        self: &Arc<Self>,
        team: &TeamId,
        item: Item,
        received_at: i64,
        wait: Wait,
        rate: Rate,
    ) -> Result<Accepted, BatchError> {
        let out = (self.submit_items(team, vec![item], None, received_at, wait, rate))
            .await
            .map_err(|refused| refused.error)?;
        Ok(out.into_iter().next().unwrap_or(Accepted::Stored))
    }

    /// Accepts every event of a batch, or none: `Ok` (one outcome per event, in order) is the
    /// acknowledgement of all of them.
    pub async fn submit_batch(
        self: &Arc<Self>,
        team: &TeamId,
        items: Vec<Item>,
        received_at: i64,
        wait: Wait,
    ) -> Result<Vec<Accepted>, BatchError> {
        self.submit_built(team, items, None, received_at, wait)
            .await
    }

    /// [`Ingest::submit_batch`] of a batch whose rows are `prebuilt`. Refused with
    /// [`IngestError::Rebuild`] when they would pass a limit: the caller then builds the
    /// batch the usual way, which names the event at fault.
    pub async fn submit_prebuilt(
        self: &Arc<Self>,
        team: &TeamId,
        items: Vec<Item>,
        prebuilt: Prebuilt,
        received_at: i64,
        wait: Wait,
    ) -> Result<Vec<Accepted>, BatchError> {
        self.submit_built(team, items, Some(prebuilt), received_at, wait)
            .await
    }

    async fn submit_built(
        self: &Arc<Self>,
        team: &TeamId,
        items: Vec<Item>,
        prebuilt: Option<Prebuilt>,
        received_at: i64,
        wait: Wait,
    ) -> Result<Vec<Accepted>, BatchError> {
        self.submit_items(team, items, prebuilt, received_at, wait, Rate::Take)
            .await
            .map_err(|r| r.error)
    }

    /// [`Ingest::submit_built`], giving back the events a refusal left unlogged.
    pub(super) async fn submit_items(
        self: &Arc<Self>,
        team: &TeamId,
        items: Vec<Item>,
        prebuilt: Option<Prebuilt>,
        received_at: i64,
        wait: Wait,
        rate: Rate,
    ) -> Result<Vec<Accepted>, Refused> {
        if self.closing.load(Ordering::Acquire) {
            return Err(Refused::all(IngestError::ShuttingDown, items));
        }
        if !self.is_ready() {
            return Err(Refused::all(IngestError::Recovering, items));
        }
        if rate == Rate::Take {
            let now = std::time::Instant::now();
            if let Err(wait) = self.ctx.tuning.take(team, items.len(), now) {
                metrics::counter!("stowage_rate_limited_total").increment(1);
                return Err(Refused::all(IngestError::RateLimited(wait), items));
            }
        }
        // Claim every client id. If another request is logging one of them right now, give
        // ours back, wait for its outcome, and claim again: a batch never waits while it holds
        // claims (two batches could wait for each other), and what it logs is always one
        // append — all of it or none of it.
        let mut outcome = vec![Accepted::Stored; items.len()];
        let mut items: Vec<Option<Item>> = items.into_iter().map(Some).collect();
        let fresh = loop {
            let (fresh, waiting) = self.claim_all(team, &mut items, &mut outcome, received_at);
            if waiting.is_empty() {
                break fresh;
            }
            let mut unlogged = Vec::new();
            for (i, item, ticket) in fresh {
                unlogged.extend(ticket);
                items[i] = Some(item);
            }
            self.dedup.settle(unlogged, false); // not logged: free for whoever waits
            for (i, item, mut rx) in waiting {
                // Holding no claim here, so a caller that goes away leaves nothing pending.
                let done = rx.wait_for(|o| *o != Outcome::Pending).await.map(|o| *o);
                if done.ok() == Some(Outcome::Stored) {
                    metrics::counter!("stowage_events_duplicate_total").increment(1);
                    outcome[i] = Accepted::Duplicate;
                } else {
                    items[i] = Some(item); // the original failed: this one is new after all
                }
            }
        };
        // Everything up to the WAL append is synchronous, on the request's own task, and the
        // wait for the fsync is guarded — dropped early (the client went away), the guard
        // settles the claims and the budget in a task of its own.
        let duplicates = || {
            (outcome.iter().enumerate())
                .filter(|(_, o)| **o == Accepted::Duplicate)
                .map(|(i, _)| i)
                .collect()
        };
        let inflight = match self.begin(team, fresh, prebuilt, received_at, wait) {
            Ok(inflight) => inflight,
            Err((error, items)) => {
                let duplicates = duplicates();
                return Err(Refused {
                    error,
                    items,
                    duplicates,
                });
            }
        };
        if let Some(inflight) = inflight
            && let Err(error) = inflight.finish().await
        {
            let duplicates = duplicates();
            return Err(Refused {
                error,
                items: Vec::new(),
                duplicates,
            });
        }
        Ok(outcome)
    }

    /// Claims the client ids of the events still in `items` (taking them out): the events to
    /// log with their claims, and those whose id another request is logging right now.
    /// Duplicates within the batch are marked in `outcome` (stored once, by the first).
    #[allow(clippy::type_complexity)]
    fn claim_all(
        &self,
        team: &TeamId,
        items: &mut [Option<Item>],
        outcome: &mut [Accepted],
        received_at: i64,
    ) -> (Vec<(usize, Item, Option<Ticket>)>, Vec<Waiting>) {
        // Every client id still to claim, claimed together; a repeat of an id within the
        // request is a duplicate of its first event.
        let ids: Vec<&str> = items
            .iter()
            .flatten()
            .filter(|it| it.rows.client_id)
            .map(|it| it.rows.id.as_str())
            .collect();
        let mut claims = self.dedup.claim_many(team, &ids, received_at).into_iter();
        let mut fresh: Vec<(usize, Item, Option<Ticket>)> = Vec::with_capacity(items.len());
        let mut waiting = Vec::new();
        for (i, slot) in items.iter_mut().enumerate() {
            let Some(item) = slot.take() else { continue };
            if !item.rows.client_id {
                fresh.push((i, item, None));
                continue;
            }
            match claims.next().expect("a claim per client id") {
                None => outcome[i] = Accepted::Duplicate,
                Some(Claim::New(t)) => fresh.push((i, item, Some(t))),
                Some(Claim::Seen(rx)) => waiting.push((i, item, rx)),
            }
        }
        (fresh, waiting)
    }

    /// Limits, budgets and the WAL append of claimed events (all synchronous). `None` when
    /// there is nothing to wait for (nothing to log, or a buffered acknowledgement: the claims
    /// are settled already); otherwise the append in flight, to [`Inflight::finish`]. Refused,
    /// with the events when none was logged.
    fn begin(
        self: &Arc<Self>,
        team: &TeamId,
        items: Vec<(usize, Item, Option<Ticket>)>,
        prebuilt: Option<Prebuilt>,
        received_at: i64,
        wait: Wait,
    ) -> Result<Option<Inflight>, Unlogged> {
        if items.is_empty() {
            return Ok(None);
        }
        // Settled as failed if anything below panics.
        let mut claims = Claims::new(self.dedup.clone());
        let mut batch = Vec::with_capacity(items.len());
        for (i, item, t) in items {
            if let Some(t) = t {
                claims.push(t);
            }
            batch.push((i, item));
        }
        let (total, ack) = match self.append(team, batch, prebuilt, received_at, wait) {
            Ok(x) => x,
            Err(unlogged) => {
                claims.settle(false);
                return Err(unlogged);
            }
        };
        let Some(ack) = ack else {
            claims.settle(true);
            return Ok(None);
        };
        Ok(Some(Inflight {
            ingest: self.clone(),
            team: team.clone(),
            claims: Some(claims),
            total,
            wait,
            ack: Some(ack),
        }))
    }

    /// Limits, budgets and the WAL append; the admitted bytes and the acknowledgement to wait
    /// for (none for a buffered acknowledgement). Refused before the append, with the events.
    #[allow(clippy::type_complexity)]
    fn append(
        &self,
        team: &TeamId,
        items: Vec<(usize, Item)>,
        prebuilt: Option<Prebuilt>,
        received_at: i64,
        wait: Wait,
    ) -> Result<(u64, Option<Receipt>), Unlogged> {
        // The budget first: a batch refused for want of room (429/503) must leave no trace
        // in the table and column limits.
        let sizes: Vec<u64> = match &prebuilt {
            Some(p) => items.iter().map(|(i, _)| p.sizes[*i]).collect(),
            None => items.iter().map(|(_, it)| it.rows.approx_bytes()).collect(),
        };
        let total: u64 = sizes.iter().sum();
        let budget = self.ctx.tuning.get(team).budget;
        if let Err(r) = self.ctx.admission.admit(team, total, budget) {
            let e = match r {
                Refusal::Team => IngestError::TeamBufferFull,
                Refusal::Global => IngestError::Overloaded,
            };
            return Err((e.into(), items));
        }
        let direct = prebuilt.is_some();
        let rebuild = |e: IngestError| {
            self.ctx.admission.release(team, total);
            BatchError::from(e)
        };
        // A large request's rows are built here, a batch per table, and ride on its last
        // entry; the actor takes them whole. Prebuilt rows lose those of the events not
        // logged (duplicates).
        let mut plan = if let Some(p) = prebuilt {
            let mut logged = vec![false; p.sizes.len()];
            items.iter().for_each(|(i, _)| logged[*i] = true);
            match direct::rows_of(p.tables, &logged, items.len()) {
                Ok(plan) => Some(plan),
                Err(_) => return Err((rebuild(IngestError::Rebuild), items)),
            }
        } else {
            (items.len() >= bulk::MIN_EVENTS)
                .then(|| {
                    let rows: Vec<&EventRows> = items.iter().map(|(_, it)| &it.rows).collect();
                    // The budget is taken and nothing releases it before the append: a panic in
                    // the builders must not escape here. The actor appends the events instead.
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bulk::build(&rows)))
                        .ok()
                        .flatten()
                })
                .flatten()
        };
        // The limits: by the built batches' columns when there are some, else (and to name
        // the event at fault when the request passes one) event by event.
        let gathered = match plan.as_ref() {
            Some(p) => {
                let rows = items
                    .iter()
                    .zip(&p.rest)
                    .filter(|(_, rest)| **rest)
                    .flat_map(|((_, it), _)| it.rows.rows().filter(|(t, _)| !p.built(t)));
                self.limits.admit_gathered(team, p.columns(), rows)
            }
            None => Ok(false),
        };
        let limited = match gathered {
            Ok(true) => Ok(()),
            // Prebuilt rows' events have no cells to find the one at fault.
            Ok(false) if direct => return Err((rebuild(IngestError::Rebuild), items)),
            Ok(false) => {
                self.limits
                    .admit_all(team, items.iter().map(|(i, it)| (*i, &it.rows)), true)
            }
            Err(e) => Err((0, e)),
        };
        if let Err((index, e)) = limited {
            self.ctx.admission.release(team, total);
            let error = BatchError {
                // Only a limit is the fault of one event; an internal failure is not.
                index: (!matches!(e, AppendError::Internal(_))).then_some(index),
                error: e.into(),
            };
            return Err((error, items));
        }
        // Buffered acks only while the log can be written: once a write failed, every event
        // waits for its own write, so nothing is acknowledged that the log could not hold.
        let waited =
            self.ack == AckMode::Durable || wait == Wait::Committed || !self.wal.is_healthy();
        let mut rest = Vec::new();
        let last = items.len().saturating_sub(1);
        let entries = items
            .into_iter()
            .zip(sizes)
            .enumerate()
            .map(|(n, ((_, it), bytes))| {
                let flags = it.flags
                    | if it.rows.client_id {
                        wal::record::FLAG_CLIENT_ID
                    } else {
                        0
                    };
                // The rows built into batches are freed here, by the thread that made them.
                let (id, payload) = match plan.as_ref() {
                    Some(p) => {
                        let id = if p.rest[n] {
                            let id = it.rows.id.clone();
                            rest.push(it.rows);
                            id
                        } else {
                            it.rows.id
                        };
                        if n < last {
                            (id, Payload::Covered)
                        } else {
                            let built = plan.take().expect("checked").finish(take(&mut rest));
                            let tables = Arc::new(built);
                            (
                                id,
                                Payload::Tables {
                                    tables,
                                    bytes: total,
                                    records: last as u64 + 1,
                                },
                            )
                        }
                    }
                    None => (
                        it.rows.id.clone(),
                        Payload::Event {
                            rows: Arc::new(it.rows),
                            bytes,
                        },
                    ),
                };
                Entry {
                    team: team.clone(),
                    flags,
                    received_at: it.received_at.unwrap_or(received_at),
                    id,
                    body: it.body,
                    payload,
                }
            })
            .collect();
        match self.wal.append(Append { entries, waited }) {
            Ok(receipt) => Ok((total, receipt)),
            Err(e) => {
                self.ctx.admission.release(team, total);
                Err((IngestError::from(e).into(), Vec::new()))
            }
        }
    }
}

/// A refusal before the WAL append, with the events it left unlogged (none when the append
/// itself failed).
type Unlogged = (BatchError, Vec<(usize, Item)>);

/// Events a duplicate of which another request is logging right now.
type Waiting = (usize, Item, tokio::sync::watch::Receiver<Outcome>);

/// An append whose fsync is awaited. Dropped before [`Inflight::finish`] completes (the
/// client disconnected), it hands the wait to a task of its own, so claims are always settled
/// by the real outcome and a failed append's bytes always go back to the budget.
struct Inflight {
    ingest: Arc<Ingest>,
    team: TeamId,
    claims: Option<Claims>,
    total: u64,
    wait: Wait,
    ack: Option<Receipt>,
}

impl Inflight {
    async fn finish(mut self) -> Result<(), BatchError> {
        // Awaited in place: if this future is dropped meanwhile, `Drop` still has the receiver.
        let ack = match self.ack.as_ref() {
            Some(receipt) => receipt.group.wait().await.map(|_| receipt.last_seq),
            None => return Ok(()),
        };
        self.ack = None;
        let claims = self.claims.take();
        let seq = self.ingest.settle(&self.team, ack, self.total, claims)?;
        if self.wait == Wait::Committed {
            let mut rx = self.ingest.ctx.progress.committed_rx(&self.team);
            // The sender lives as long as the progress map, so this only ends when committed.
            let _ = rx.wait_for(|w| *w >= seq).await;
        }
        Ok(())
    }
}

impl Drop for Inflight {
    fn drop(&mut self) {
        let Some(ack) = self.ack.take() else {
            return;
        };
        let (ingest, team, total) = (self.ingest.clone(), self.team.clone(), self.total);
        let claims = self.claims.take();
        // Outside a runtime (the process is going away) there is nothing left to settle for.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let outcome = ack.group.wait().await.map(|_| ack.last_seq);
                let _ = ingest.settle(&team, outcome, total, claims);
            });
        }
    }
}

impl Ingest {
    /// The outcome of an append: claims settled by it, the bytes released if it failed.
    fn settle(
        &self,
        team: &TeamId,
        ack: Result<u64, WalError>,
        total: u64,
        claims: Option<Claims>,
    ) -> Result<u64, BatchError> {
        let result = ack.map_err(IngestError::from);
        if result.is_err() {
            self.ctx.admission.release(team, total);
        }
        if let Some(claims) = claims {
            claims.settle(result.is_ok());
        }
        result.map_err(BatchError::from)
    }
}
