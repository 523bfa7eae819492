//! The write-ahead log: every accepted event is framed ([`record`]) into segment files
//! ([`segment`], pre-allocated by [`spare`]) by one group-commit writer ([`writer`]), which
//! takes the request tasks' appends in commit groups ([`group`]), before it is acknowledged. On start,
//! [`recover`] reads the segments back (cutting a torn tail, refusing mid-file corruption);
//! segments are deleted once every record in them is committed to Parquet, after their client
//! ids are archived for the dedup window ([`ids`]).

mod append;
pub mod group;
pub mod identity;
pub mod ids;
mod log_file;
pub mod record;
pub mod segment;
mod spare;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::config::RecoveryPolicy;
pub use append::{Append, Entry, WalError};
use group::Queue;
pub use group::{Group, Receipt};
pub use ids::IdArchive;
pub use record::Record;
use segment::{End, SegmentMeta};
pub use writer::{WalOptions, WalStats, Written};

/// A recovery that cannot go on by itself.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// Reading the directory or a file failed.
    #[error("cannot read the write-ahead log in {dir}: {source}")]
    Io {
        /// The WAL directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A record in the middle of the log is damaged.
    #[error(
        "write-ahead log corrupt: {file} at byte offset {offset} ({reason}); {bytes_after} bytes follow it. \
         Records there may include acknowledged events, so start-up stops. To drop everything from that \
         record to the end of that segment and continue, restart with wal.recovery = \"truncate\" \
         (env STOWAGE_WAL__RECOVERY=truncate); keep a copy of the file first"
    )]
    Corrupt {
        /// The segment.
        file: PathBuf,
        /// Where.
        offset: u64,
        /// Why.
        reason: String,
        /// Bytes from there to the end of the file.
        bytes_after: u64,
    },
}

/// The log as found at start-up.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Every valid record, in sequence order.
    pub records: Vec<Record>,
    /// Existing segments (to delete once committed).
    pub segments: Vec<SegmentMeta>,
    /// Highest sequence number seen.
    pub max_seq: u64,
    /// What was cut off, one line each (torn tails, truncated corruption).
    pub dropped: Vec<String>,
}

/// Reads every segment in `dir` (created if missing).
pub fn recover(dir: &Path, policy: RecoveryPolicy) -> Result<Recovered, RecoverError> {
    let io = |source| RecoverError::Io {
        dir: dir.into(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut segments = segment::list(dir).map_err(io)?;
    let mut out = Recovered::default();
    let count = segments.len();
    for (i, seg) in segments.iter_mut().enumerate() {
        let (records, end) = segment::read(&seg.path).map_err(io)?;
        let last_segment = i + 1 == count;
        seg.last_seq = records.last().map(|r| r.seq);
        out.max_seq = out.max_seq.max(seg.last_seq.unwrap_or(0));
        out.records.extend(records);
        let (offset, bytes, what) = match end {
            End::Clean => continue,
            End::Torn { offset, bytes } if last_segment => {
                (offset, bytes, "torn tail (crash mid-write)")
            }
            End::Torn { offset, bytes } => {
                (offset, bytes, "incomplete record before a newer segment")
            }
            End::Corrupt { offset, reason } => {
                let len = std::fs::metadata(&seg.path).map_err(io)?.len();
                if policy == RecoveryPolicy::Strict {
                    return Err(RecoverError::Corrupt {
                        file: seg.path.clone(),
                        offset,
                        reason,
                        bytes_after: len - offset,
                    });
                }
                (
                    offset,
                    len - offset,
                    "corrupt record (wal.recovery = truncate)",
                )
            }
        };
        if !last_segment && what.starts_with("incomplete") && policy == RecoveryPolicy::Strict {
            return Err(RecoverError::Corrupt {
                file: seg.path.clone(),
                offset,
                reason: "incomplete record in a segment that is not the newest".into(),
                bytes_after: bytes,
            });
        }
        let line = format!(
            "{}: dropped {bytes} bytes at offset {offset}: {what}",
            seg.path.display()
        );
        warn!("{line}");
        segment::truncate(&seg.path, offset).map_err(io)?;
        out.dropped.push(line);
    }
    // A segment with no records left (an idle run, or a tail cut to nothing) is deleted now, so
    // the writer's new segment can never reuse its name.
    let mut kept = Vec::with_capacity(segments.len());
    for seg in segments {
        if seg.last_seq.is_none() {
            std::fs::remove_file(&seg.path).map_err(io)?;
        } else {
            kept.push(seg);
        }
    }
    segment::sync_dir(dir).map_err(io)?;
    out.records.sort_by_key(|r| r.seq);
    out.segments = kept;
    Ok(out)
}

/// The running log: appends queue for the writer thread; the consumer receives them in order,
/// a commit group per message.
pub struct Wal<T> {
    queue: Arc<Queue<T>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    segments: Arc<Mutex<Vec<SegmentMeta>>>,
    /// Whether the last write succeeded.
    healthy: Arc<AtomicBool>,
    /// Where client ids of deleted segments go (none: they are forgotten with the segment).
    archive: Option<IdArchive>,
    /// Writer counters.
    pub stats: Arc<WalStats>,
}

impl<T: Send + 'static> Wal<T> {
    /// Starts the writer after `recovered`; numbering continues above `floor` too (the highest
    /// watermark the catalog knows), so a lost WAL directory can never reuse committed numbers.
    pub fn start(
        opts: WalOptions,
        recovered: &Recovered,
        floor: u64,
        archive: Option<IdArchive>,
        out: mpsc::UnboundedSender<Vec<Written<T>>>,
    ) -> Wal<T> {
        let next = recovered.max_seq.max(floor) + 1;
        let stats = Arc::new(WalStats::default());
        let on_disk: u64 = recovered
            .segments
            .iter()
            .filter_map(|s| std::fs::metadata(&s.path).ok())
            .map(|m| m.len())
            .sum();
        stats.bytes_on_disk.store(on_disk, Ordering::Relaxed);
        let segments = Arc::new(Mutex::new(recovered.segments.clone()));
        let queue = Arc::new(Queue::new(next));
        let healthy = Arc::new(AtomicBool::new(true));
        let writer = writer::Writer {
            healthy: healthy.clone(),
            opts,
            queue: queue.clone(),
            out,
            segments: segments.clone(),
            stats: stats.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("stowage-wal".into())
            .spawn(move || writer.run())
            .expect("spawn WAL thread");
        Wal {
            queue,
            thread: Mutex::new(Some(thread)),
            segments,
            healthy,
            archive,
            stats,
        }
    }

    /// Whether the last write (and fsync) succeeded. While it did not, appends should wait for
    /// their outcome instead of being acknowledged up front.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// Queues an append, numbering its records. When it is `waited`, the receipt's group
    /// completes once it is written and synced.
    pub fn append(&self, append: Append<T>) -> Result<Option<Receipt>, WalError> {
        let waited = append.waited;
        self.queue.push(append, waited)
    }

    /// The next sequence number to be assigned.
    pub fn next_seq(&self) -> u64 {
        self.queue.next_seq()
    }

    /// The commit group the writer is writing now, if any: appends queued before it completes
    /// wait for the write after it anyway.
    pub fn writing(&self) -> Option<Arc<Group>> {
        self.queue.writing()
    }

    /// Deletes closed segments whose records are all below `min_uncommitted`, archiving their
    /// client ids first. Blocking file I/O: call it off the async loop. The segment list is locked
    /// only to pick the segments, never during I/O, so the writer is not held up.
    pub fn release_below(&self, min_uncommitted: u64) {
        let done: Vec<SegmentMeta> = {
            let mut segs = self.segments.lock().expect("segments lock");
            let open = segs.len().saturating_sub(1); // never the segment being written
            let mut n = 0;
            while n < open && segs[n].last_seq.is_some_and(|last| last < min_uncommitted) {
                n += 1;
            }
            segs.drain(..n).collect()
        };
        let now_us = chrono::Utc::now().timestamp_micros();
        let mut removed = 0;
        let mut kept = Vec::new();
        for s in done {
            let len = std::fs::metadata(&s.path).map(|m| m.len()).unwrap_or(0);
            let archived = match &self.archive {
                Some(a) => match a.archive(&s, now_us) {
                    // A full disk must not keep the log from freeing its own space: the segment
                    // goes, and its ids leave the window early (logged).
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::StorageFull | std::io::ErrorKind::FileTooLarge
                        ) =>
                    {
                        warn!(segment = %s.path.display(), error = %e, "cannot archive the dedup ids of a committed WAL segment (disk full); deleting it anyway — retries of its events after a restart will not be recognised as duplicates");
                        Ok(())
                    }
                    r => r.map(|_| ()),
                },
                None => Ok(()),
            };
            match archived.and_then(|_| std::fs::remove_file(&s.path)) {
                Ok(()) => {
                    let _ = self.stats.bytes_on_disk.fetch_update(
                        Ordering::AcqRel,
                        Ordering::Acquire,
                        |b| Some(b.saturating_sub(len)),
                    );
                    removed += 1;
                }
                Err(e) => {
                    warn!(segment = %s.path.display(), error = %e, "cannot archive ids of or delete a committed WAL segment; will retry");
                    kept.push(s);
                }
            }
        }
        if !kept.is_empty() {
            let mut segs = self.segments.lock().expect("segments lock");
            let rest = std::mem::take(&mut *segs);
            *segs = kept.into_iter().chain(rest).collect();
        }
        if removed > 0 {
            info!(segments = removed, "WAL segments committed and deleted");
        }
    }

    /// Stops accepting appends, lets the writer drain its queue, and waits for it.
    pub fn close(&self) {
        self.queue.close();
        if let Some(t) = self.thread.lock().expect("wal thread lock").take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests;
