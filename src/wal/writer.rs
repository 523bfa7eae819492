//! The group-commit writer: one OS thread owns the open segment. It takes everything queued
//! ([`super::group`]; waiting at most until `sync_interval` after the previous fsync, or until
//! `batch_bytes`), writes it with one `write` and one `fsync`, completes the commit group, and
//! hands the entries on, in sequence order and in one message, to whoever consumes the log.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tracing::{error, info};

use super::append::WalError;
use super::group::{Queue, Queued};
use super::log_file::LogFile;
use super::record::{FLAG_CLIENT_ID, FLAG_MARKER, encode};
use super::segment::SegmentIds;
use super::segment::SegmentMeta;
use crate::model::TeamId;

/// First pause before a carried write is retried with nothing else to write; it doubles.
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest such pause.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Appends in a commit group from which the log counts as busy (see [`WalOptions::group_wait`]).
pub const BUSY_GROUP: usize = 8;

/// Writer settings.
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// Segment directory.
    pub dir: PathBuf,
    /// At most one fsync per this interval (requests arriving meanwhile share it).
    pub sync_interval: Duration,
    /// A batch is written as soon as it holds this many bytes.
    pub batch_bytes: usize,
    /// After a busy group's sync, wait this long for the next group to fill (0: never).
    pub group_wait: Duration,
    /// Start a new segment once the current one reaches this size.
    pub segment_size: u64,
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
    pub queue: Arc<Queue<T>>,
    pub out: mpsc::UnboundedSender<Vec<Written<T>>>,
    pub segments: Arc<Mutex<Vec<SegmentMeta>>>,
    pub stats: Arc<WalStats>,
    pub healthy: Arc<AtomicBool>,
}

impl<T: Send + 'static> Writer<T> {
    /// Runs until the queue is closed and drained.
    ///
    /// A failed write or fsync never loses an acknowledged event: the partial batch is cut off
    /// its segment at once ([`LogFile`]), the group's waiting clients get the error (their events
    /// are not stored), and appends acknowledged already (buffered acks) are *carried*: they
    /// keep their sequence numbers and are written again, first, with the next batch — or on
    /// their own after a pause if nothing else comes — and handed on to the consumer only once
    /// they are in the log (so a rebuild from the WAL always sees them). Markers queued behind
    /// them wait with them. Until a write succeeds again the log reports itself unhealthy, which
    /// turns buffered acks into waiting ones, so nothing more is acknowledged that the log cannot
    /// hold. If the log is closed while a carry cannot be written, the carried events are handed
    /// on anyway (they are acknowledged; the shutdown flush can still commit them).
    pub fn run(self) {
        // If this thread dies, requests waiting on the queue are failed, not left hanging.
        struct Abandon<T>(Arc<Queue<T>>);
        impl<T> Drop for Abandon<T> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.abandon();
                }
            }
        }
        let _abandon = Abandon(self.queue.clone());
        let mut log = LogFile::new(
            self.opts.dir.clone(),
            self.opts.segment_size,
            self.segments.clone(),
        );
        let mut last_sync = Instant::now() - self.opts.sync_interval;
        let mut buf = Vec::with_capacity(self.opts.batch_bytes + 4096);
        let mut ids = SegmentIds::default();
        let mut ids_room = 0usize;
        let mut carry: Vec<Queued<T>> = Vec::new();
        let mut pause = RETRY_FIRST;
        let mut last_group = 0usize;
        loop {
            let idle = (!carry.is_empty()).then_some(pause);
            let gather = if !self.opts.sync_interval.is_zero() {
                Some(last_sync + self.opts.sync_interval)
            } else if !self.opts.group_wait.is_zero() && last_group >= BUSY_GROUP {
                Some(last_sync + self.opts.group_wait)
            } else {
                None
            };
            let taken = self.queue.take(idle, gather, self.opts.batch_bytes);
            last_group = taken.appends.len();
            let closed = taken.closed;
            let group = taken.group;
            let mut appends = std::mem::take(&mut carry);
            appends.extend(taken.appends);
            if appends.is_empty() {
                group.complete(Ok(()));
                if closed {
                    break;
                }
                continue;
            }
            buf.clear();
            // This group's client ids, in a buffer the size of the last group's (the segment
            // keeps each group's buffer).
            ids.chunks.clear();
            let mut group_ids = Vec::with_capacity(ids_room);
            (ids.count, ids.newest) = (0, i64::MIN);
            let (mut first_seq, mut last_seq, mut records) = (None, 0, 0);
            for q in &appends {
                let logged = q
                    .append
                    .entries
                    .iter()
                    .filter(|e| e.flags & FLAG_MARKER == 0);
                for (s, e) in (q.first..).zip(logged) {
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
                        encode(s, e.flags, e.received_at, team, &e.id, &[], &mut group_ids);
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
                group.complete(Ok(()));
                self.deliver(appends);
                if closed {
                    break;
                }
                continue;
            };
            let started = Instant::now();
            ids_room = group_ids.len();
            ids.chunks.push(group_ids);
            let result = log.append(&buf, (first_seq, last_seq), &mut ids);
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
                    group.complete(Ok(()));
                    self.deliver(appends);
                }
                Err(err) => {
                    // Unhealthy first (later appends wait for their own write from now on),
                    // then the cut, then the clients' answers: a batch they are told was not
                    // stored must not come back at recovery.
                    self.healthy.store(false, Ordering::Release);
                    error!(error = %err, appends = appends.len(), "WAL write failed");
                    log.cut_failed();
                    group.complete(Err(WalError::Io(err.to_string())));
                    // Acknowledged already (or a marker): keep. A waited append whose client
                    // got the error is never handed on (it was not stored).
                    carry.extend(appends.into_iter().filter(|q| !q.append.waited));
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
            self.deliver(carry);
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

    /// Passes written appends' entries on to the consumer, in one message, each numbered from
    /// its append's first sequence number (markers take none).
    fn deliver(&self, appends: Vec<Queued<T>>) {
        let mut out = Vec::with_capacity(appends.iter().map(|q| q.append.entries.len()).sum());
        for q in appends {
            let mut seq = q.first;
            for e in q.append.entries {
                let s = if e.flags & FLAG_MARKER != 0 {
                    0
                } else {
                    seq += 1;
                    seq - 1
                };
                out.push(Written {
                    seq: s,
                    team: e.team,
                    payload: e.payload,
                });
            }
        }
        let _ = self.out.send(out);
    }
}
