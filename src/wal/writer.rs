//! The group-commit writer: one OS thread owns the open segment. It takes every queued append
//! (waiting at most until `sync_interval` after the previous fsync, or until `batch_bytes`),
//! numbers them, writes them with one `write` and one `fsync`, then acknowledges them all and
//! hands them on, in sequence order, to whoever consumes the log.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
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
}

fn open_segment(opts: &WalOptions, first_seq: u64) -> std::io::Result<(File, SegmentMeta)> {
    let path = opts.dir.join(file_name(first_seq));
    // Never append to an existing file: its name says where its numbering starts.
    let file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)?;
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
    pub fn run(self) {
        let mut seq = self.next_seq.load(Ordering::Acquire);
        let (mut file, meta) = match open_segment(&self.opts, seq) {
            Ok(x) => x,
            Err(e) => {
                error!(error = %e, dir = %self.opts.dir.display(), "cannot open a WAL segment; appends will fail");
                return self.fail_all(&e.to_string());
            }
        };
        self.segments.lock().expect("segments lock").push(meta);
        let mut file_len = 0u64;
        let mut last_sync = Instant::now() - self.opts.sync_interval;
        let mut buf = Vec::with_capacity(self.opts.batch_bytes + 4096);
        let mut batch: Vec<Entry<T>> = Vec::new();
        while let Some(first) = self.next_batch(&mut batch, last_sync) {
            batch.insert(0, first);
            buf.clear();
            let first_seq = seq;
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
            let result = if buf.is_empty() {
                Ok(()) // only markers
            } else {
                let started = Instant::now();
                let result = file.write_all(&buf).and_then(|_| file.sync_data());
                let took = started.elapsed();
                last_sync = Instant::now();
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
                result
            };
            match result {
                Ok(()) => {
                    file_len += buf.len() as u64;
                    self.stats
                        .bytes_on_disk
                        .fetch_add(buf.len() as u64, Ordering::Relaxed);
                    if let Some(cur) = self.segments.lock().expect("segments lock").last_mut() {
                        cur.last_seq = Some(seq - 1);
                    }
                    self.next_seq.store(seq, Ordering::Release);
                    for (e, s) in batch.drain(..).zip(seqs) {
                        self.deliver(e, s, Ok(()));
                    }
                    if file_len >= self.opts.segment_size {
                        match open_segment(&self.opts, seq) {
                            Ok((f, meta)) => {
                                info!(segment = %meta.path.display(), "WAL segment rotated");
                                file = f;
                                file_len = 0;
                                self.segments.lock().expect("segments lock").push(meta);
                            }
                            Err(e) => {
                                error!(error = %e, "WAL rotation failed; continuing in the current segment")
                            }
                        }
                    }
                }
                Err(e) => {
                    error!(error = %e, entries = batch.len(), "WAL write failed");
                    // Never leave a partial batch behind a later good one; if even that fails the
                    // log can no longer be trusted, so every later append fails too.
                    let truncated = file.set_len(file_len).and_then(|_| file.sync_data());
                    seq = first_seq;
                    let msg = e.to_string();
                    for e in batch.drain(..) {
                        let result = if e.flags & FLAG_MARKER != 0 {
                            Ok(())
                        } else {
                            Err(WalError::Io(msg.clone()))
                        };
                        self.deliver(e, 0, result);
                    }
                    if let Err(t) = truncated {
                        error!(error = %t, "cannot cut a failed WAL write; refusing all further appends");
                        return self.fail_all(&format!("WAL unusable after a failed write: {t}"));
                    }
                }
            }
        }
        let _ = file.sync_all();
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

    /// Acknowledges one entry and, when it is durable (or nobody waits on it), passes it on.
    fn deliver(&self, e: Entry<T>, seq: u64, result: Result<(), WalError>) {
        // A record that is not in the log is never handed on: its sequence number would be a
        // lie. (With buffered acks the client already had its 200; the error is logged.)
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

    fn fail_all(self, msg: &str) {
        while let Ok(e) = self.rx.recv() {
            self.deliver(e, 0, Err(WalError::Io(msg.to_string())));
        }
    }
}
