//! The acknowledgement point: [`Ingest::submit`] (one event) and [`Ingest::submit_batch`] (a
//! batch: one limits check, one budget admission, one WAL append and one acknowledgement for all
//! its events). Duplicate `messageId`s — within the batch or seen before — are acknowledged and
//! stored once.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::admission::Refusal;
use super::dedup::{Claim, Outcome, Ticket};
use super::dispatch::Payload;
use super::event::EventRows;
use super::team::AppendError;
use super::{Accepted, Ingest, IngestError, Wait};
use crate::catalog::TeamId;
use crate::config::AckMode;
use crate::wal::{self, Append, Entry, WalError};

/// One event of a submission.
pub struct Item {
    /// Its validated rows.
    pub rows: EventRows,
    /// Its WAL record body.
    pub body: Bytes,
    /// Extra record flags (`FLAG_SEGMENT` for Segment messages).
    pub flags: u8,
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
        };
        let out = self
            .submit_batch(team, vec![item], received_at, wait)
            .await
            .map_err(|e| e.error)?;
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
        if self.closing.load(Ordering::Acquire) {
            return Err(IngestError::ShuttingDown.into());
        }
        if !self.is_ready() {
            return Err(IngestError::Recovering.into());
        }
        if let Err(wait) = self
            .ctx
            .tuning
            .take(team, items.len(), std::time::Instant::now())
        {
            metrics::counter!("stowage_rate_limited_total").increment(1);
            return Err(IngestError::RateLimited(wait).into());
        }
        // Its own task: a client that disconnects must not cancel the outcome half-way (a
        // claimed id would stay pending, or an accepted event's id be forgotten).
        let (me, team) = (self.clone(), team.clone());
        tokio::spawn(async move { me.dedup_and_log(&team, items, received_at, wait).await })
            .await
            .map_err(|e| IngestError::Append(AppendError::Internal(e.to_string())))?
    }

    async fn dedup_and_log(
        &self,
        team: &TeamId,
        items: Vec<Item>,
        received_at: i64,
        wait: Wait,
    ) -> Result<Vec<Accepted>, BatchError> {
        let mut outcome = vec![Accepted::Stored; items.len()];
        let mut seen_here = HashSet::new();
        let mut fresh: Vec<(usize, Item, Option<Ticket>)> = Vec::with_capacity(items.len());
        let mut waiting = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            if !item.rows.client_id {
                fresh.push((i, item, None));
                continue;
            }
            if !seen_here.insert(item.rows.id.clone()) {
                outcome[i] = Accepted::Duplicate; // stored once, by its first occurrence
                continue;
            }
            match self.dedup.claim(team, &item.rows.id, received_at) {
                Claim::New(t) => fresh.push((i, item, Some(t))),
                Claim::Seen(rx) => waiting.push((i, item, rx)),
            }
        }
        // Never wait for another request's outcome while holding claims of our own (two
        // batches could wait for each other): log what is ours first.
        self.log_claimed(team, fresh, received_at, wait).await?;
        for (i, item, mut rx) in waiting {
            loop {
                let done = rx
                    .wait_for(|o| *o != Outcome::Pending)
                    .await
                    .map(|o| *o)
                    .ok();
                if done == Some(Outcome::Stored) {
                    metrics::counter!("stowage_events_duplicate_total").increment(1);
                    outcome[i] = Accepted::Duplicate;
                    break;
                }
                // The original failed: this one is new after all.
                match self.dedup.claim(team, &item.rows.id, received_at) {
                    Claim::New(t) => {
                        self.log_claimed(team, vec![(i, item, Some(t))], received_at, wait)
                            .await?;
                        break;
                    }
                    Claim::Seen(again) => rx = again,
                }
            }
        }
        Ok(outcome)
    }

    /// Logs claimed events as one append and resolves their claims by the outcome.
    async fn log_claimed(
        &self,
        team: &TeamId,
        items: Vec<(usize, Item, Option<Ticket>)>,
        received_at: i64,
        wait: Wait,
    ) -> Result<(), BatchError> {
        if items.is_empty() {
            return Ok(());
        }
        let mut tickets = Vec::new();
        let mut batch = Vec::with_capacity(items.len());
        for (i, item, t) in items {
            tickets.extend(t);
            batch.push((i, item));
        }
        let result = self.log(team, batch, received_at, wait).await;
        for t in tickets {
            self.dedup.resolve(t, result.is_ok());
        }
        result
    }

    /// Limits, budgets, the WAL append and the wait the client asked for.
    async fn log(
        &self,
        team: &TeamId,
        items: Vec<(usize, Item)>,
        received_at: i64,
        wait: Wait,
    ) -> Result<(), BatchError> {
        self.limits
            .admit_all(team, items.iter().map(|(i, it)| (*i, &it.rows)), true)
            .map_err(|(index, e)| BatchError {
                index: Some(index),
                error: e.into(),
            })?;
        let sizes: Vec<u64> = items.iter().map(|(_, it)| it.rows.approx_bytes()).collect();
        let total: u64 = sizes.iter().sum();
        let budget = self.ctx.tuning.get(team).budget;
        self.ctx
            .admission
            .admit(team, total, budget)
            .map_err(|r| match r {
                Refusal::Team => IngestError::TeamBufferFull,
                Refusal::Global => IngestError::Overloaded,
            })?;
        // Buffered acks only while the log can be written: once a write failed, every event
        // waits for its own write, so nothing is acknowledged that the log could not hold.
        let need_seq =
            self.ack == AckMode::Durable || wait == Wait::Committed || !self.wal.is_healthy();
        let (ack_tx, ack_rx) = if need_seq {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let entries = items
            .into_iter()
            .zip(sizes)
            .map(|((_, it), bytes)| Entry {
                team: team.clone(),
                flags: it.flags
                    | if it.rows.client_id {
                        wal::record::FLAG_CLIENT_ID
                    } else {
                        0
                    },
                received_at,
                id: it.rows.id.clone(),
                body: it.body,
                payload: Payload::Event {
                    rows: Arc::new(it.rows),
                    bytes,
                },
            })
            .collect();
        let release = || self.ctx.admission.release(team, total);
        if let Err(e) = self.wal.append(Append {
            entries,
            ack: ack_tx,
        }) {
            release();
            return Err(IngestError::from(e).into());
        }
        let Some(ack_rx) = ack_rx else {
            return Ok(());
        };
        let seq = match ack_rx.await {
            Ok(Ok(seq)) => seq,
            Ok(Err(e)) => {
                release();
                return Err(IngestError::from(e).into());
            }
            Err(_) => {
                release();
                return Err(IngestError::from(WalError::Closed).into());
            }
        };
        if wait == Wait::Committed {
            let mut rx = self.ctx.progress.committed_rx(team);
            // The sender lives as long as the progress map, so this only ends when committed.
            let _ = rx.wait_for(|w| *w >= seq).await;
        }
        Ok(())
    }
}
