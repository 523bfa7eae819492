//! The group-commit writer: one OS thread owns the open segment. It takes every queued append
//! (waiting at most until `sync_interval` after the previous fsync, or until `batch_bytes`),
//! numbers them, writes them with one `write` and one `fsync`, then acknowledges them all and
//! hands them on, in sequence order, to whoever consumes the log.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tracing::{error, info};

use super::log_file::LogFile;
use super::record::{FLAG_CLIENT_ID, FLAG_MARKER, encode};
use super::segment::SegmentIds;
use super::segment::SegmentMeta;
use crate::model::TeamId;

/// First pause before a carried write is retried with nothing else to write; it doubles.
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest such pause.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Writer settings.
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// Segment directory.
    pub dir: PathBuf,
    /// At most one fsync per this interval (requests arriving meanwhile share it).
    pub sync_interval: Duration,
    /// A batch is written as soon as it holds this many bytes.
    pub batch_bytes: usize,
    /// Start a new segment once the current one reaches this size.
    pub segment_size: u64,
}

/// Why an append was not made durable.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WalError {
    /// Writing or syncing the segment failed.
    #[error("write-ahead log I/O failed: {0}")]
    Io(String),
    /// The writer has stopped (shutdown).
    #[error("write-ahead log is closed")]
    Closed,
}

/// One record to append (part of an [`Append`]).
pub struct Entry<T> {
    /// Owning team.
    pub team: TeamId,
    /// Record flags.
    pub flags: u8,
    /// µs since the epoch.
    pub received_at: i64,
    /// Event id.
    pub id: String,
    /// Request body.
    pub body: Bytes,
    /// Passed through to the consumer with the sequence number.
    pub payload: T,
}

/// One append request: its entries are numbered consecutively, written in the same write and
/// fsync, and succeed or fail together (a batch of events is one append and one acknowledgement).
pub struct Append<T> {
    /// The records, in order (a marker is an append of one entry flagged [`FLAG_MARKER`]).
    pub entries: Vec<Entry<T>>,
    /// Answered after fsync with the sequence number of the last entry; `None` for
    /// fire-and-forget (buffered acknowledgements).
    pub ack: Option<oneshot::Sender<Result<u64, WalError>>>,
}

impl<T> Append<T> {
    /// An append of one entry.
    pub fn one(entry: Entry<T>, ack: Option<oneshot::Sender<Result<u64, WalError>>>) -> Self {
        Append {
            entries: vec![entry],
            ack,
        }
    }

    fn body_bytes(&self) -> usize {
        self.entries.iter().map(|e| e.body.len()).sum()
    }
}

/// An appended entry, in sequence order, for the consumer.
pub struct Written<T> {
    /// Its sequence number.
    pub seq: u64,
    /// Owning team.
    pub team: TeamId,
    /// The entry's payload.
    pub payload: T,
}

/// Counters the metrics endpoint reads.
#[derive(Debug, Default)]
pub struct WalStats {
    /// fsyncs done.
    pub fsyncs: AtomicU64,
    /// Sum of fsync latency, ns.
    pub fsync_nanos: AtomicU64,
    /// Entries written (sum of batch sizes).
    pub entries: AtomicU64,
    /// Bytes in live segment files.
    pub bytes_on_disk: AtomicU64,
}

pub(super) struct Writer<T> {
    pub opts: WalOptions,
    pub rx: Receiver<Append<T>>,
    pub out: mpsc::UnboundedSender<Written<T>>,
    pub segments: Arc<Mutex<Vec<SegmentMeta>>>,
    pub next_seq: Arc<AtomicU64>,
    pub stats: Arc<WalStats>,
    pub healthy: Arc<AtomicBool>,
}

impl<T: Send + 'static> Writer<T> {
    /// Runs until every sender is gone and the queue is drained.
    ///
    /// A failed write or fsync never loses an acknowledged event: the partial batch is cut off
    /// its segment at once ([`LogFile`]), entries whose client is waiting get the error (their
    /// event is not stored), and entries acknowledged already (buffered acks) are *carried*: they
    /// keep their sequence numbers and are written again, first, with the next batch — or on
    /// their own after a pause if nothing else comes — and handed on to the consumer only once
    /// they are in the log (so a rebuild from the WAL always sees them). Markers queued behind
    /// them wait with them. Until a write succeeds again the log reports itself unhealthy, which
    /// turns buffered acks into waiting ones, so nothing more is acknowledged that the log cannot
    /// hold. If the log is closed while a carry cannot be written, the carried events are handed
    /// on anyway (they are acknowledged; the shutdown flush can still commit them).
    pub fn run(self) {
        let mut seq = self.next_seq.load(Ordering::Acquire);
        let mut log = LogFile::new(
            self.opts.dir.clone(),
            self.opts.segment_size,
            self.segments.clone(),
        );
        let mut last_sync = Instant::now() - self.opts.sync_interval;
        let mut buf = Vec::with_capacity(self.opts.batch_bytes + 4096);
        let mut ids = SegmentIds::default();
        let mut carry: Vec<(Append<T>, u64)> = Vec::new();
        let mut pause = RETRY_FIRST;
        let mut batch: Vec<Append<T>> = Vec::new();
        loop {
            let closed = if carry.is_empty() {
                match self.rx.recv() {
                    Ok(first) => {
                        batch.push(first);
                        false
                    }
                    Err(_) => break,
                }
            } else {
                match self.rx.recv_timeout(pause) {
                    Ok(first) => {
                        batch.push(first);
                        false
                    }
                    Err(RecvTimeoutError::Timeout) => false,
                    Err(RecvTimeoutError::Disconnected) => true,
                }
            };
            if !batch.is_empty() {
                self.gather(&mut batch, last_sync);
            }
            // Each append with the sequence number of its first entry (markers take none).
            let mut appends: Vec<(Append<T>, u64)> = std::mem::take(&mut carry);
            for a in batch.drain(..) {
                let logged = a
                    .entries
                    .iter()
                    .filter(|e| e.flags & FLAG_MARKER == 0)
                    .count() as u64;
                appends.push((a, seq));
                seq += logged;
            }
            self.next_seq.store(seq, Ordering::Release);
            buf.clear();
            ids.records.clear();
            (ids.count, ids.newest) = (0, i64::MIN);
            let (mut first_seq, mut last_seq, mut records) = (None, 0, 0);
            for (a, first) in &appends {
                let logged = a.entries.iter().filter(|e| e.flags & FLAG_MARKER == 0);
                for (s, e) in (*first..).zip(logged) {
                    encode(
                        s,
                        e.flags,
                        e.received_at,
                        e.team.as_str(),
                        &e.id,
                        &e.body,
                        &mut buf,
                    );
                    if e.flags & FLAG_CLIENT_ID != 0 {
                        let team = e.team.as_str();
                        encode(
                            s,
                            e.flags,
                            e.received_at,
                            team,
                            &e.id,
                            &[],
                            &mut ids.records,
                        );
                        ids.count += 1;
                        ids.newest = ids.newest.max(e.received_at);
                    }
                    first_seq.get_or_insert(s);
                    last_seq = last_seq.max(s);
                    records += 1;
                }
            }
            let Some(first_seq) = first_seq else {
                // Only markers.
                appends
                    .into_iter()
                    .for_each(|(a, s)| self.deliver(a, s, Ok(())));
                continue;
            };
            let started = Instant::now();
            let result = log.append(&buf, (first_seq, last_seq), &ids);
            last_sync = Instant::now();
            self.record_sync(started.elapsed(), records);
            match result {
                Ok(()) => {
                    self.stats
                        .bytes_on_disk
                        .fetch_add(buf.len() as u64, Ordering::Relaxed);
                    if !self.healthy.swap(true, Ordering::AcqRel) {
                        info!("WAL writes succeed again");
                    }
                    pause = RETRY_FIRST;
                    appends
                        .into_iter()
                        .for_each(|(a, s)| self.deliver(a, s, Ok(())));
                }
                Err(err) => {
                    error!(error = %err, appends = appends.len(), "WAL write failed");
                    self.healthy.store(false, Ordering::Release);
                    let msg = err.to_string();
                    for (a, s) in appends {
                        if a.ack.is_none() {
                            carry.push((a, s)); // acknowledged already (or a marker): keep
                        } else {
                            self.deliver(a, 0, Err(WalError::Io(msg.clone())));
                        }
                    }
                    if !carry.is_empty() {
                        error!(
                            appends = carry.len(),
                            retry_in_ms = pause.as_millis() as u64,
                            "acknowledged events held in memory until the WAL can be written"
                        );
                    }
                    pause = (pause * 2).min(RETRY_MAX);
                }
            }
            if closed {
                break;
            }
        }
        if !carry.is_empty() {
            error!(
                appends = carry.len(),
                "WAL closed while acknowledged events could not be written; handing them on unlogged"
            );
            carry
                .into_iter()
                .for_each(|(e, s)| self.deliver(e, s, Ok(())));
        }
        log.close();
    }

    fn record_sync(&self, took: Duration, records: usize) {
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.stats
            .fsync_nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        self.stats
            .entries
            .fetch_add(records as u64, Ordering::Relaxed);
        metrics::histogram!("stowage_wal_fsync_seconds").record(took.as_secs_f64());
        metrics::histogram!("stowage_wal_batch_entries").record(records as f64);
    }

    /// Adds to `batch` (which holds the first entry) until it is full or the sync interval
    /// since `last_sync` has passed.
    fn gather(&self, batch: &mut Vec<Append<T>>, last_sync: Instant) {
        let mut bytes: usize = batch.iter().map(Append::body_bytes).sum();
        let deadline = last_sync + self.opts.sync_interval;
        while bytes < self.opts.batch_bytes {
            let next = match self.rx.try_recv() {
                Ok(e) => e,
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    match self.rx.recv_timeout(deadline - now) {
                        Ok(e) => e,
                        Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                    }
                }
            };
            bytes += next.body_bytes();
            batch.push(next);
        }
    }

    /// Answers one append (with the sequence number of its last record) and, unless it failed,
    /// passes its entries on to the consumer, numbered from `first`. An append whose client got
    /// an error is never handed on (it was not stored).
    fn deliver(&self, a: Append<T>, first: u64, result: Result<(), WalError>) {
        let logged = a
            .entries
            .iter()
            .filter(|e| e.flags & FLAG_MARKER == 0)
            .count() as u64;
        let last = (first + logged).saturating_sub(1);
        let pass_on = result.is_ok();
        if let Some(ack) = a.ack {
            let _ = ack.send(result.map(|_| last));
        }
        if !pass_on {
            return;
        }
        let mut seq = first;
        for e in a.entries {
            let s = if e.flags & FLAG_MARKER != 0 {
                0
            } else {
                seq += 1;
                seq - 1
            };
            let _ = self.out.send(Written {
                seq: s,
                team: e.team,
                payload: e.payload,
            });
        }
    }
}
