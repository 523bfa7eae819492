//! PostgreSQL change notifications for the secret cache: one dedicated connection `LISTEN`s on
//! [`CHANNEL`]; each notification (sent inside the transaction that revokes a secret or turns
//! events off, so it arrives once that commits, on every node) bumps a generation the cache
//! compares with the one it was filled at. While the connection is down the generation is
//! unknown and the cache must not be trusted; it reconnects every half second.
//!
//! The one window: a notification sent after the listening connection broke but before this
//! process noticed is lost, and until it notices, the cache is still trusted. Noticing takes
//! the time to read the closed socket when the server restarts or ends the connection (well
//! under a millisecond; a restart itself takes far longer), and at most about 30 s when the
//! server vanishes silently (TCP keepalives and user timeout, see [`super::postgres::config`]).
//! On reconnecting, the generation moves on, so nothing cached before survives.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};

use super::postgres::{CHANNEL, runtime};

#[derive(Default)]
struct State {
    generation: AtomicU64,
    up: AtomicBool,
}

/// The listening connection; stops when dropped.
pub struct Listener {
    state: Arc<State>,
    stop: Arc<Notify>,
}

impl Listener {
    /// Starts listening (in the background; see [`Listener::generation`]).
    pub fn start(config: tokio_postgres::Config) -> Listener {
        let state = Arc::new(State::default());
        let stop = Arc::new(Notify::new());
        runtime().spawn(listen(config, state.clone(), stop.clone()));
        Listener { state, stop }
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

async fn listen(config: tokio_postgres::Config, state: Arc<State>, stop: Arc<Notify>) {
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut conn)) => {
                let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
                let sql = format!("LISTEN {CHANNEL}");
                let listen = client.batch_execute(&sql);
                tokio::pin!(listen);
                let mut listening = false;
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
                        m = messages.next() => match m {
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
