//! The cluster's fresh-read channel (SPEC §3.5 on several nodes) over PostgreSQL
//! `LISTEN`/`NOTIFY`: a node that starts a fresh read asks every other node to commit a team's
//! acknowledged events ([`ASK_CHANNEL`], payload `<id> <team> <asking WAL>`), and each answers
//! once its commit is done ([`DONE_CHANNEL`], payload `<id> <answering WAL>`). One dedicated
//! connection listens on both; it reconnects every half second while down, and a read started
//! while it is down fails rather than wait for answers it could not hear. Requests are handed to
//! the node's ingest through a channel; answers go to the read that registered their id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{Notify, mpsc};
use tokio_postgres::{AsyncMessage, NoTls};

use super::postgres::runtime;
use crate::model::TeamId;

/// Where fresh reads ask other nodes to commit a team's events.
pub const ASK_CHANNEL: &str = "stowage_fresh_ask";
/// Where nodes say a commit asked for is done.
pub const DONE_CHANNEL: &str = "stowage_fresh_done";

/// Another node's request: commit `team`'s acknowledged events, then answer `id`.
#[derive(Debug, Clone)]
pub struct CommitAsk {
    /// The request, echoed in the answer.
    pub id: String,
    /// Whose events.
    pub team: TeamId,
    /// The asking node's WAL id.
    pub from: String,
}

impl CommitAsk {
    /// Parses `<id> <team> <from>`.
    fn parse(payload: &str) -> Option<CommitAsk> {
        let mut parts = payload.split(' ');
        let (id, team, from) = (parts.next()?, parts.next()?, parts.next()?);
        Some(CommitAsk {
            id: id.to_string(),
            team: TeamId::from(team),
            from: from.to_string(),
        })
    }

    /// The payload asking for `team` with request `id` from WAL `from`.
    pub fn payload(id: &str, team: &TeamId, from: &str) -> String {
        format!("{id} {} {from}", team.as_str())
    }
}

#[derive(Default)]
struct Shared {
    up: AtomicBool,
    /// Reads waiting for answers: request id → the WAL ids that answered.
    waiting: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
}

/// The listening connection; stops when dropped.
pub struct Bus {
    shared: Arc<Shared>,
    stop: Arc<Notify>,
}

impl Bus {
    /// Starts listening; requests from other nodes arrive on the returned receiver.
    pub fn start(config: tokio_postgres::Config) -> (Bus, mpsc::UnboundedReceiver<CommitAsk>) {
        let shared = Arc::new(Shared::default());
        let stop = Arc::new(Notify::new());
        let (asks, rx) = mpsc::unbounded_channel();
        runtime().spawn(listen(config, shared.clone(), stop.clone(), asks));
        (Bus { shared, stop }, rx)
    }

    /// Whether both channels are being listened to.
    pub fn is_up(&self) -> bool {
        self.shared.up.load(Ordering::Acquire)
    }

    /// Waits until listening, at most `timeout`.
    pub async fn wait_up(&self, timeout: Duration) -> bool {
        let until = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < until {
            if self.is_up() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }

    /// Registers request `id` before it is sent: the WAL ids of the nodes that answer it arrive
    /// on the receiver until [`Bus::forget`].
    pub fn expect(&self, id: &str) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.waiting().insert(id.to_string(), tx);
        rx
    }

    /// Stops routing answers to request `id`.
    pub fn forget(&self, id: &str) {
        self.waiting().remove(id);
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<String>>> {
        self.shared
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

async fn listen(
    config: tokio_postgres::Config,
    shared: Arc<Shared>,
    stop: Arc<Notify>,
    asks: mpsc::UnboundedSender<CommitAsk>,
) {
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut conn)) => {
                let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
                let sql = format!("LISTEN {ASK_CHANNEL}; LISTEN {DONE_CHANNEL}");
                let listen = client.batch_execute(&sql);
                tokio::pin!(listen);
                let mut listening = false;
                loop {
                    tokio::select! {
                        r = &mut listen, if !listening => match r {
                            Ok(()) => {
                                listening = true;
                                shared.up.store(true, Ordering::Release);
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "fresh-read LISTEN failed");
                                break;
                            }
                        },
                        m = messages.next() => match m {
                            Some(Ok(AsyncMessage::Notification(n))) => {
                                route(&shared, &asks, n.channel(), n.payload());
                            }
                            Some(Ok(_)) => {}
                            Some(Err(e)) => {
                                tracing::warn!(error = %e, "fresh-read notification connection broke");
                                break;
                            }
                            None => break,
                        },
                        _ = stop.notified() => return,
                    }
                }
                shared.up.store(false, Ordering::Release);
            }
            Err(e) => tracing::warn!(error = %e, "fresh-read notification connection failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stop.notified() => return,
        }
    }
}

/// Hands a notification to the ingest (a request) or to the read waiting for it (an answer).
fn route(shared: &Shared, asks: &mpsc::UnboundedSender<CommitAsk>, channel: &str, payload: &str) {
    if channel == ASK_CHANNEL {
        match CommitAsk::parse(payload) {
            Some(ask) => {
                let _ = asks.send(ask);
            }
            None => tracing::warn!(payload, "malformed fresh-read request"),
        }
    } else if channel == DONE_CHANNEL
        && let Some((id, wal)) = payload.split_once(' ')
    {
        let waiting = shared.waiting.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = waiting.get(id) {
            let _ = tx.send(wal.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_round_trip_and_malformed_ones_are_refused() {
        let team = TeamId::from("tm_1");
        let ask = CommitAsk::parse(&CommitAsk::payload("r1", &team, "wal_a")).unwrap();
        assert_eq!(
            (ask.id.as_str(), ask.team.as_str(), ask.from.as_str()),
            ("r1", "tm_1", "wal_a")
        );
        assert!(CommitAsk::parse("r1 tm_1").is_none());
    }
}
