//! The durable floor's log: one file, pre-zeroed, written in groups by one thread that answers
//! every body of a group after the group's `fdatasync`.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use axum::body::Bytes;
use tokio::sync::oneshot;

/// Bytes the file is zeroed to at start; the writer wraps around at its end (a floor, not a
/// log anyone reads back).
const FILE_BYTES: u64 = 512 << 20;

/// A body waiting for its group's sync.
struct Waiting {
    body: Bytes,
    done: oneshot::Sender<io::Result<()>>,
}

#[derive(Default)]
struct Queue {
    waiting: Mutex<Vec<Waiting>>,
    ready: Condvar,
    /// Writer threads asleep on `ready` (so a request wakes one only when one sleeps, as
    /// stowage's WAL queue does: no futex call for a body that a busy writer will find).
    asleep: std::sync::atomic::AtomicUsize,
}

/// Who writes a group.
#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    /// Writer threads, each with a file of its own, taking whatever is queued when free (one
    /// thread: stowage's WAL; two: a second group syncs while the first one's sync runs);
    /// a request waits for its answer.
    Threads(usize),
    /// The request that finds no write under way writes and syncs everything queued itself, on
    /// its own runtime thread (PostgreSQL's `XLogFlush`), then the next group if one formed.
    Leader,
}

/// The handle requests append through.
pub struct Wal {
    queue: Arc<Queue>,
    /// `Mode::Leader`'s file and write position (`None`: writer threads write).
    lead: Option<Mutex<Lead>>,
    /// Whether a leader is at work.
    leading: std::sync::atomic::AtomicBool,
}

struct Lead {
    file: File,
    at: u64,
    buf: Vec<u8>,
}

impl Wal {
    /// Creates `dir/bare.wal`, zeroed and synced, and starts its writer threads (`Mode::Threads`).
    pub fn open(dir: &Path, mode: Mode) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let queue = Arc::new(Queue::default());
        let mut lead = None;
        match mode {
            Mode::Threads(n) => {
                for i in 0..n {
                    let file = zeroed(&dir.join(format!("bare-{i}.wal")))?;
                    let writer = Arc::clone(&queue);
                    std::thread::Builder::new()
                        .name(format!("bare-wal-{i}"))
                        .spawn(move || write_groups(&file, &writer))?;
                }
            }
            Mode::Leader => {
                lead = Some(Mutex::new(Lead {
                    file: zeroed(&dir.join("bare.wal"))?,
                    at: 0,
                    buf: Vec::new(),
                }))
            }
        }
        Ok(Self {
            queue,
            lead,
            leading: Default::default(),
        })
    }

    /// `Mode::Leader`: while nobody else leads, write what is queued, group after group.
    fn lead(&self) {
        use std::sync::atomic::Ordering;
        let Some(lead) = &self.lead else { return };
        while !self.leading.swap(true, Ordering::AcqRel) {
            let group = std::mem::take(&mut *self.queue.waiting.lock().expect("queue lock"));
            if !group.is_empty() {
                let mut l = lead.lock().expect("lead lock");
                let Lead { file, at, buf } = &mut *l;
                write_group(file, at, buf, group);
            }
            self.leading.store(false, Ordering::Release);
            if self.queue.waiting.lock().expect("queue lock").is_empty() {
                break;
            }
        }
    }

    /// Returns once `body` is written and synced.
    pub async fn append(&self, body: Bytes) -> io::Result<()> {
        let (done, synced) = oneshot::channel();
        self.queue
            .waiting
            .lock()
            .expect("queue lock")
            .push(Waiting { body, done });
        if self.lead.is_some() {
            self.lead();
        } else if self.queue.asleep.load(std::sync::atomic::Ordering::Acquire) > 0 {
            self.queue.ready.notify_one();
        }
        synced
            .await
            .unwrap_or_else(|_| Err(io::Error::other("writer gone")))
    }
}

/// A file of [`FILE_BYTES`] zeros, synced.
fn zeroed(path: &Path) -> io::Result<File> {
    let file = File::create(path)?;
    let zeros = vec![0u8; 1 << 20];
    for i in 0..FILE_BYTES / zeros.len() as u64 {
        file.write_all_at(&zeros, i * zeros.len() as u64)?;
    }
    file.sync_all()?;
    Ok(file)
}

/// A writer thread: takes everything queued, writes it as one buffer, syncs, answers.
fn write_groups(file: &File, queue: &Queue) {
    let mut at = 0u64;
    let mut buf = Vec::new();
    loop {
        let group = {
            let mut waiting = queue.waiting.lock().expect("queue lock");
            while waiting.is_empty() {
                // Counted under the queue's lock, which every push holds: a push either sees
                // the count or is seen by the writer's check of the queue.
                queue
                    .asleep
                    .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                waiting = queue.ready.wait(waiting).expect("queue lock");
                queue
                    .asleep
                    .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            }
            std::mem::take(&mut *waiting)
        };
        write_group(file, &mut at, &mut buf, group);
    }
}

/// Writes `group` at `at` as one buffer, syncs, and answers each of its bodies.
fn write_group(file: &File, at: &mut u64, buf: &mut Vec<u8>, group: Vec<Waiting>) {
    buf.clear();
    for w in &group {
        buf.extend_from_slice(&(w.body.len() as u32).to_le_bytes());
        buf.extend_from_slice(&w.body);
    }
    if *at + buf.len() as u64 > FILE_BYTES {
        *at = 0;
    }
    let result = file.write_all_at(buf, *at).and_then(|()| file.sync_data());
    *at += buf.len() as u64;
    for w in group {
        let answer = match &result {
            Ok(()) => Ok(()),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        };
        let _ = w.done.send(answer);
    }
}
