//! The group-commit writer: one OS thread owns the open segment. It takes every queued append
//! (waiting at most until `sync_interval` after the previous fsync, or until `batch_bytes`),
//! numbers them, writes them with one `write` and one `fsync`, then acknowledges them all and
//! hands them on, in sequence order, to whoever consumes the log.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tracing::{error, info};

use super::record::{FLAG_MARKER, encode};
use super::segment::{SegmentMeta, file_name, sync_dir};
use crate::catalog::TeamId;

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

/// One append request.
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
    /// Answered after fsync with the sequence number; `None` for fire-and-forget.
    pub ack: Option<oneshot::Sender<Result<u64, WalError>>>,
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
    pub rx: Receiver<Entry<T>>,
    pub out: mpsc::UnboundedSender<Written<T>>,
    pub segments: Arc<Mutex<Vec<SegmentMeta>>>,
    pub next_seq: Arc<AtomicU64>,
    pub stats: Arc<WalStats>,
    pub healthy: Arc<AtomicBool>,
}

fn open_segment(opts: &WalOptions, first_seq: u64) -> std::io::Result<(File, SegmentMeta)> {
    let path = opts.dir.join(file_name(first_seq));
    // Never append to an existing file with records: its name says where its numbering starts.
    // An empty one is left by an open whose directory sync failed; it is taken over.
    let file = match OpenOptions::new().create_new(true).append(true).open(&path) {
        Err(e)
            if e.kind() == std::io::ErrorKind::AlreadyExists
                && std::fs::metadata(&path)?.len() == 0 =>
        {
            OpenOptions::new().append(true).open(&path)?
        }
        r => r?,
    };
    sync_dir(&opts.dir)?;
    Ok((
        file,
        SegmentMeta {
            path,
            first_seq,
            last_seq: None,
        },
    ))
}

impl<T: Send + 'static> Writer<T> {
    /// Runs until every sender is gone and the queue is drained.
    ///
    /// A failed write or fsync never loses an acknowledged event: the partial batch is cut off
    /// the segment, entries whose client is waiting get the error (their event is not stored),
    /// and entries acknowledged already (buffered acks) keep their sequence numbers, are handed
    /// on to the consumer anyway (they are still in memory) and are written again at the head of
    /// the next batch, in a fresh segment. Until a write succeeds again the log reports itself
    /// unhealthy, which turns buffered acks into waiting ones (so nothing more is acknowledged
    /// that the log cannot hold); it recovers by itself when the cause goes away.
    pub fn run(self) {
        let mut seq = self.next_seq.load(Ordering::Acquire);
        let mut file: Option<File> = None;
        let mut file_len = 0u64;
        // The segment holds a partial batch past `file_len` that could not be cut off yet.
        let mut needs_cut = false;
        let mut last_sync = Instant::now() - self.opts.sync_interval;
        let mut buf = Vec::with_capacity(self.opts.batch_bytes + 4096);
        // Records acknowledged but not yet in the log, written first by the next batch.
        let mut carry: Vec<u8> = Vec::new();
        let mut carry_first: Option<u64> = None;
        let mut batch: Vec<Entry<T>> = Vec::new();
        while let Some(first) = self.next_batch(&mut batch, last_sync) {
            batch.insert(0, first);
            buf.clear();
            buf.extend_from_slice(&carry);
            let mut seqs = Vec::with_capacity(batch.len());
            for e in &batch {
                if e.flags & FLAG_MARKER != 0 {
                    seqs.push(0);
                    continue;
                }
                encode(
                    seq,
                    e.flags,
                    e.received_at,
                    e.team.as_str(),
                    &e.id,
                    &e.body,
                    &mut buf,
                );
                seqs.push(seq);
                seq += 1;
            }
            self.next_seq.store(seq, Ordering::Release);
            let result = if buf.is_empty() {
                Ok(()) // only markers
            } else {
                let first_seq = carry_first
                    .or_else(|| seqs.iter().copied().find(|s| *s != 0))
                    .unwrap_or(seq);
                self.prepare(&mut file, &mut file_len, &mut needs_cut, first_seq)
                    .and_then(|f| {
                        let started = Instant::now();
                        let r = f.write_all(&buf).and_then(|_| f.sync_data());
                        last_sync = Instant::now();
                        self.record_sync(started.elapsed(), &seqs);
                        if r.is_err() {
                            needs_cut = true;
                        }
                        r
                    })
            };
            match result {
                Ok(()) => {
                    if !buf.is_empty() {
                        file_len += buf.len() as u64;
                        self.stats
                            .bytes_on_disk
                            .fetch_add(buf.len() as u64, Ordering::Relaxed);
                        if let Some(cur) = self.segments.lock().expect("segments lock").last_mut() {
                            cur.last_seq = Some(seq - 1);
                        }
                    }
                    if !self.healthy.swap(true, Ordering::AcqRel) {
                        info!("WAL writes succeed again");
                    }
                    carry.clear();
                    carry_first = None;
                    for (e, s) in batch.drain(..).zip(seqs) {
                        self.deliver(e, s, Ok(()));
                    }
                    if file_len >= self.opts.segment_size {
                        file = None; // the next batch opens a new segment
                    }
                }
                Err(err) => {
                    error!(error = %err, entries = batch.len(), "WAL write failed");
                    self.healthy.store(false, Ordering::Release);
                    let msg = err.to_string();
                    for (e, s) in batch.drain(..).zip(seqs) {
                        if e.flags & FLAG_MARKER != 0 {
                            self.deliver(e, 0, Ok(()));
                        } else if e.ack.is_none() {
                            // Acknowledged already: keep it.
                            encode(
                                s,
                                e.flags,
                                e.received_at,
                                e.team.as_str(),
                                &e.id,
                                &e.body,
                                &mut carry,
                            );
                            carry_first.get_or_insert(s);
                            self.deliver(e, s, Ok(()));
                        } else {
                            self.deliver(e, 0, Err(WalError::Io(msg.clone())));
                        }
                    }
                    if !carry.is_empty() {
                        error!(
                            bytes = carry.len(),
                            "acknowledged events kept in memory until the WAL can be written"
                        );
                    }
                }
            }
        }
        if let Some(f) = file {
            let _ = f.sync_all();
        }
    }

    /// The segment to write the next batch to: cuts off a failed batch first, and opens a new
    /// segment (named by `first_seq`) when there is none or the current one failed.
    fn prepare<'f>(
        &self,
        file: &'f mut Option<File>,
        file_len: &mut u64,
        needs_cut: &mut bool,
        first_seq: u64,
    ) -> std::io::Result<&'f mut File> {
        if *needs_cut {
            if let Some(f) = file.as_ref() {
                f.set_len(*file_len).and_then(|_| f.sync_data())?;
            }
            *needs_cut = false;
            // Start afresh after a failure (a file-size limit or a bad region stays with the file).
            if *file_len > 0 {
                *file = None;
            }
        }
        if file.is_none() {
            let (f, meta) = open_segment(&self.opts, first_seq)?;
            info!(segment = %meta.path.display(), "WAL segment opened");
            self.segments.lock().expect("segments lock").push(meta);
            *file_len = 0;
            *file = Some(f);
        }
        Ok(file.as_mut().expect("opened above"))
    }

    fn record_sync(&self, took: Duration, seqs: &[u64]) {
        let records = seqs.iter().filter(|s| **s != 0).count();
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

    /// Waits for the first entry, then gathers more until the batch is full or the sync
    /// interval since `last_sync` has passed. `None` once every sender is gone.
    fn next_batch(&self, batch: &mut Vec<Entry<T>>, last_sync: Instant) -> Option<Entry<T>> {
        let first = self.rx.recv().ok()?;
        let mut bytes = first.body.len();
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
            bytes += next.body.len();
            batch.push(next);
        }
        Some(first)
    }

    /// Answers one entry and, unless it failed, passes it on to the consumer. An entry whose
    /// client got an error is never handed on (it was not stored).
    fn deliver(&self, e: Entry<T>, seq: u64, result: Result<(), WalError>) {
        let pass_on = result.is_ok();
        if let Some(ack) = e.ack {
            let _ = ack.send(result.map(|_| seq));
        }
        if pass_on {
            let _ = self.out.send(Written {
                seq,
                team: e.team,
                payload: e.payload,
            });
        }
    }
}
