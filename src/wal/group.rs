//! The queue between the request tasks and the log's writer, and the commit groups it forms.
//! A request appends under one short lock — its records get their sequence numbers there, in
//! queue order — and joins the group being gathered; the writer takes the whole queue at once,
//! writes and syncs it, and completes the group: one wake-up of every waiter per `fdatasync`,
//! not a channel and a reply per event (PostgreSQL's group commit, where the backends that
//! queued behind one `XLogFlush` find themselves covered by it).

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use super::append::{Append, WalError};

/// One commit group: the appends the writer takes in one go share its outcome.
#[derive(Default)]
pub struct Group {
    outcome: OnceLock<Result<(), WalError>>,
    done: tokio::sync::Notify,
}

impl Group {
    /// Waits until the group is written and synced (or failed).
    pub async fn wait(&self) -> Result<(), WalError> {
        loop {
            let notified = self.done.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(outcome) = self.outcome.get() {
                return outcome.clone();
            }
            notified.await;
        }
    }

    /// Whether the group's outcome is known.
    pub fn is_complete(&self) -> bool {
        self.outcome.get().is_some()
    }

    pub(super) fn complete(&self, outcome: Result<(), WalError>) {
        let _ = self.outcome.set(outcome);
        self.done.notify_waiters();
    }
}

/// What an append that waits for its sync gets back.
pub struct Receipt {
    /// The group it joined.
    pub group: Arc<Group>,
    /// Sequence number of its last record.
    pub last_seq: u64,
}

/// An append with the sequence number of its first record.
pub(super) struct Queued<T> {
    pub append: Append<T>,
    pub first: u64,
}

/// What the writer takes in one go.
pub(super) struct Taken<T> {
    pub appends: Vec<Queued<T>>,
    pub group: Arc<Group>,
    pub closed: bool,
}

struct State<T> {
    appends: Vec<Queued<T>>,
    bytes: usize,
    next_seq: u64,
    group: Arc<Group>,
    /// The group the writer took last (being written, or done).
    taken: Option<Arc<Group>>,
    closed: bool,
    writer_waiting: bool,
}

/// The append queue, shared by the request tasks and the writer.
pub(super) struct Queue<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
}

impl<T> Queue<T> {
    pub fn new(next_seq: u64) -> Queue<T> {
        Queue {
            state: Mutex::new(State {
                appends: Vec::new(),
                bytes: 0,
                next_seq,
                group: Arc::default(),
                taken: None,
                closed: false,
                writer_waiting: false,
            }),
            wake: Condvar::new(),
        }
    }

    /// Queues an append, numbering its records; the group to wait on when `wait`.
    pub fn push(&self, append: Append<T>, wait: bool) -> Result<Option<Receipt>, WalError> {
        let logged = append.logged() as u64;
        let bytes = append.body_bytes();
        let mut s = self.state.lock().expect("wal queue lock");
        if s.closed {
            return Err(WalError::Closed);
        }
        let first = s.next_seq;
        s.next_seq += logged;
        s.bytes += bytes;
        s.appends.push(Queued { append, first });
        let receipt = wait.then(|| Receipt {
            group: s.group.clone(),
            last_seq: (first + logged).saturating_sub(1),
        });
        if s.writer_waiting {
            s.writer_waiting = false;
            self.wake.notify_one();
        }
        Ok(receipt)
    }

    /// The group the writer took last, while it is not complete.
    pub fn writing(&self) -> Option<Arc<Group>> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.taken.clone().filter(|g| !g.is_complete())
    }

    /// The next sequence number to be assigned.
    pub fn next_seq(&self) -> u64 {
        self.state.lock().expect("wal queue lock").next_seq
    }

    /// Stops accepting appends; the writer drains what is queued.
    pub fn close(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.closed = true;
        self.wake.notify_one();
    }

    /// When the writer is gone for good (it panicked): closes the queue and fails whatever
    /// waits in it, so no request waits forever and none is acknowledged.
    pub fn abandon(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.closed = true;
        s.appends.clear();
        let group = std::mem::take(&mut s.group);
        let taken = s.taken.take();
        drop(s);
        // A group the writer completed already keeps its outcome (a `OnceLock`).
        for g in taken.into_iter().chain([group]) {
            g.complete(Err(WalError::Closed));
        }
    }

    /// Waits for appends — at most `idle` when given (a carried write to retry) — then, while
    /// fewer than `batch_bytes` are queued, until `gather_until`; takes everything queued.
    pub fn take(
        &self,
        idle: Option<Duration>,
        gather_until: Option<std::time::Instant>,
        batch_bytes: usize,
    ) -> Taken<T> {
        let mut s = self.state.lock().expect("wal queue lock");
        let started = std::time::Instant::now();
        while s.appends.is_empty() && !s.closed {
            s.writer_waiting = true;
            match idle {
                None => s = self.wake.wait(s).expect("wal queue lock"),
                Some(idle) => {
                    let left = idle.saturating_sub(started.elapsed());
                    if left.is_zero() {
                        break;
                    }
                    s = self.wake.wait_timeout(s, left).expect("wal queue lock").0;
                }
            }
        }
        if let Some(until) = gather_until {
            while !s.closed && s.bytes < batch_bytes {
                let now = std::time::Instant::now();
                if now >= until {
                    break;
                }
                s.writer_waiting = true;
                s = self
                    .wake
                    .wait_timeout(s, until - now)
                    .expect("wal queue lock")
                    .0;
            }
        }
        s.writer_waiting = false;
        s.bytes = 0;
        let group = std::mem::take(&mut s.group);
        s.taken = Some(group.clone());
        Taken {
            appends: std::mem::take(&mut s.appends),
            group,
            closed: s.closed,
        }
    }
}
