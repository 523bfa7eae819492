//! PostgreSQL change notifications for the secret cache: one dedicated connection `LISTEN`s on
//! [`CHANNEL`]; each notification (sent inside the transaction that revokes a secret or turns
//! events off, so it arrives once that commits, on every node) bumps a generation the cache
//! compares with the one it was filled at. While the connection is down the generation is
//! unknown and the cache must not be trusted; it reconnects every half second.
//!
//! No window (SPEC §7 "revocation takes effect on every node at once"): a notification arrives
//! some time after its commit, so a revoker cannot know when every node has seen it. A lease
//! closes that gap without a query per request. The listening connection also `NOTIFY`s a
//! channel of its own every [`Lease::heartbeat`]; PostgreSQL delivers a session's notifications
//! in commit order across channels, so once a heartbeat sent at instant `s` has arrived, every
//! revocation committed before `s` has arrived too (and emptied the cache). The cache is trusted
//! only while the last heartbeat that came back was sent within the lease; a revoker waits one
//! lease after its commit before answering. Any request a node serves after that is covered by
//! a heartbeat sent after the revocation, hence by the revocation. Only monotonic time on one
//! machine is compared, never two clocks. A connection that broke or went silent stops
//! heartbeats, so the cache stops being trusted within a lease; on reconnecting, the generation
//! moves on, so nothing cached before survives.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};

use super::postgres::{CHANNEL, runtime};

/// How long a heartbeat keeps the cache trusted, and how often one is sent.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    /// A revoker waits this long after its commit; a node trusts its cache only while its last
    /// returned heartbeat was sent within this.
    pub length: Duration,
    /// How often the listener sends a heartbeat (a quarter of the lease).
    pub heartbeat: Duration,
}

impl Lease {
    /// A lease of `length`, heartbeats four times in it.
    pub fn new(length: Duration) -> Lease {
        Lease {
            length,
            heartbeat: length / 4,
        }
    }
}

#[derive(Default)]
struct State {
    generation: AtomicU64,
    up: AtomicBool,
    /// When the last heartbeat that came back was sent.
    heard: std::sync::Mutex<Option<Instant>>,
}

/// The listening connection; stops when dropped.
pub struct Listener {
    state: Arc<State>,
    stop: Arc<Notify>,
}

impl Listener {
    /// Starts listening (in the background; see [`Listener::generation`]), with heartbeats
    /// for `lease`.
    pub fn start(config: tokio_postgres::Config, lease: Lease) -> Listener {
        let state = Arc::new(State::default());
        let stop = Arc::new(Notify::new());
        runtime().spawn(listen(config, state.clone(), stop.clone(), lease));
        Listener { state, stop }
    }

    /// Whether a heartbeat sent within `lease` of now has come back: every change committed
    /// before then has been seen.
    pub fn heard_within(&self, lease: Duration) -> bool {
        let heard = *self.state.heard.lock().unwrap_or_else(|p| p.into_inner());
        heard.is_some_and(|sent| sent.elapsed() < lease)
    }

    /// The number of changes seen so far, or `None` while not listening (changes may be
    /// missed: trust nothing cached).
    pub fn generation(&self) -> Option<u64> {
        if self.state.up.load(Ordering::Acquire) {
            Some(self.state.generation.load(Ordering::Acquire))
        } else {
            None
        }
    }

    /// Waits until listening (tests, and open: the first requests may use the cache).
    pub fn wait_up(&self, timeout: Duration) -> bool {
        let until = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < until {
            if self.generation().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

fn bump(state: &State) {
    state.generation.fetch_add(1, Ordering::AcqRel);
}

/// A heartbeat's `NOTIFY` in flight on the listening connection.
type Beat<'c> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send + 'c>,
>;

async fn listen(
    config: tokio_postgres::Config,
    state: Arc<State>,
    stop: Arc<Notify>,
    lease: Lease,
) {
    // A channel only this listener uses, for its heartbeats.
    let own = format!("{CHANNEL}_hb_{}", uuid::Uuid::now_v7().simple());
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut conn)) => {
                let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
                let sql = format!("LISTEN {CHANNEL}; LISTEN {own}");
                let listen = client.batch_execute(&sql);
                tokio::pin!(listen);
                let mut listening = false;
                let mut tick = tokio::time::interval(lease.heartbeat);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                // The heartbeat in flight (its number, when it was sent) and its NOTIFY call.
                let mut sent: Option<(u64, Instant)> = None;
                let mut next_beat = 0u64;
                let mut notify: Option<Beat<'_>> = None;
                loop {
                    tokio::select! {
                        r = &mut listen, if !listening => match r {
                            Ok(()) => {
                                listening = true;
                                bump(&state);
                                state.up.store(true, Ordering::Release);
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "catalog LISTEN failed");
                                break;
                            }
                        },
                        // One heartbeat at a time; one lost for four leases is sent again.
                        _ = tick.tick(), if listening
                            && notify.is_none()
                            && sent.is_none_or(|(_, at)| at.elapsed() > lease.length * 4) =>
                        {
                            next_beat += 1;
                            sent = Some((next_beat, Instant::now()));
                            let sql = format!("NOTIFY {own}, '{next_beat}'");
                            let client = &client;
                            notify = Some(Box::pin(async move { client.batch_execute(&sql).await }));
                        },
                        r = async { notify.as_mut().expect("guarded").await }, if notify.is_some() => {
                            notify = None;
                            if let Err(e) = r {
                                tracing::warn!(error = %e, "catalog heartbeat failed");
                                break;
                            }
                        },
                        m = messages.next() => match m {
                            Some(Ok(AsyncMessage::Notification(n))) if n.channel() == own => {
                                if let Some((beat, at)) = sent
                                    && n.payload() == beat.to_string()
                                {
                                    *state.heard.lock().unwrap_or_else(|p| p.into_inner()) =
                                        Some(at);
                                    sent = None;
                                }
                            }
                            Some(Ok(AsyncMessage::Notification(_))) => bump(&state),
                            Some(Ok(_)) => {}
                            Some(Err(e)) => {
                                tracing::warn!(error = %e, "catalog notification connection broke");
                                break;
                            }
                            None => break,
                        },
                        _ = stop.notified() => return,
                    }
                }
                state.up.store(false, Ordering::Release);
                *state.heard.lock().unwrap_or_else(|p| p.into_inner()) = None;
                bump(&state);
            }
            Err(e) => tracing::warn!(error = %e, "catalog notification connection failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stop.notified() => return,
        }
    }
}
