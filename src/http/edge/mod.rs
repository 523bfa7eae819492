//! The public edge: the accept loop that puts the router (or what answers in front of it,
//! [`Responder`]) on the internet. It owns what a plain
//! `axum::serve` leaves open to half-sent requests and idle clients: a cap on open connections
//! (`server.max_connections`; beyond it new connections wait in the listen backlog and cost
//! nothing), a cap per client address (`server.max_connections_per_address`; beyond it a new
//! connection is answered 429 and closed, so one client cannot hold every slot; trusted proxies
//! are exempt), the header and idle timeouts of each connection (`conn.rs`; a connection that
//! sends nothing is closed at the header timeout), the deadline on request bodies
//! ([`TimedBody`]), and graceful shutdown: stop accepting, let requests in flight finish, close
//! idle connections, return once every connection is gone.

mod body;
mod conn;

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use hyper::Request;
use hyper::service::Service as _;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::config::ServerConfig;

pub use body::{BodyTimedOut, TimedBody, is_body_timeout};

/// What answers a connection's requests: a [`Router`], or a service in front of one.
pub trait Responder: Clone + Send + Sync + 'static {
    /// The response to `req`.
    fn respond(
        &self,
        req: Request<Body>,
    ) -> impl Future<Output = Response> + Send + 'static + use<Self>;
}

impl Responder for Router {
    fn respond(
        &self,
        req: Request<Body>,
    ) -> impl Future<Output = Response> + Send + 'static + use<> {
        let routed = TowerToHyperService::new(self.clone()).call(req);
        async move {
            match routed.await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }
}

/// The edge's timeouts and connection cap, from `[server]`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From the first byte of a request head to its end.
    pub header_timeout: Duration,
    /// From the end of a request head to the end of its body.
    pub body_timeout: Duration,
    /// A connection with no request in flight and no byte of the next one.
    pub idle_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
    /// Open connections per client address at most.
    pub max_connections_per_address: usize,
}

impl From<&ServerConfig> for Limits {
    fn from(c: &ServerConfig) -> Self {
        Self {
            header_timeout: c.header_timeout.0,
            body_timeout: c.body_timeout.0,
            idle_timeout: c.idle_timeout.0,
            max_connections: c.max_connections,
            max_connections_per_address: c.max_connections_per_address,
        }
    }
}

/// Serves `responder` on `listener` until `shutdown` resolves, then waits until every connection
/// has closed (requests in flight finish; idle connections close at once). Peers for which
/// `uncapped` is true (trusted proxies, carrying many clients) have no per-address cap.
pub async fn serve(
    listener: TcpListener,
    responder: impl Responder,
    limits: Limits,
    uncapped: impl Fn(IpAddr) -> bool,
    shutdown: impl Future<Output = ()> + Send,
) {
    let per_address = Arc::new(PerAddress {
        open: Mutex::new(HashMap::new()),
        max: limits.max_connections_per_address,
    });
    // A connection holds a permit for its whole life; the loop takes one *before* accepting, so
    // at the cap the next connection stays in the kernel's backlog instead of costing a task.
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Tells connections to finish their request in flight and close.
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection holds a receiver; `closed()` resolves when the last one has gone.
    let (open_tx, open_rx) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_closed) => break,
            },
        };
        let accepted = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok((stream, peer)) => {
                // A response goes out as several writes (headers, then body chunks): with
                // Nagle's algorithm on, each small one after the first waits for the client's
                // delayed ACK, 40 ms per small download.
                let _ = stream.set_nodelay(true);
                (stream, peer)
            }
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Most likely out of file descriptors: wait for some to close rather than spin.
                tracing::error!(error = %e, "accept failed; retrying in 1s");
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        let address = if uncapped(peer.ip()) {
            None
        } else {
            match per_address.take(peer.ip()) {
                Some(slot) => Some(slot),
                None => {
                    refuse(stream);
                    continue;
                }
            }
        };
        let guard = Slot {
            _permit: permit,
            _open: open_rx.clone(),
            _address: address,
        };
        tokio::spawn(conn::serve(
            stream,
            peer,
            responder.clone(),
            limits,
            stop_rx.clone(),
            guard,
        ));
    }
    drop(listener);
    stop_tx.send_replace(true);
    drop(open_rx);
    tracing::debug!(
        connections = open_tx.receiver_count(),
        "stopped accepting; waiting for open connections"
    );
    open_tx.closed().await;
}

/// What an open connection holds until it closes: its place under the connection cap, the
/// "still open" mark shutdown waits on, and its place under its address's cap.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    _open: watch::Receiver<()>,
    _address: Option<AddressSlot>,
}

/// Open connections by client address.
struct PerAddress {
    open: Mutex<HashMap<IpAddr, usize>>,
    max: usize,
}

impl PerAddress {
    /// A place for one more connection from `ip`, or `None` at the cap.
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<AddressSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let n = open.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            table: self.clone(),
            ip,
        })
    }
}

/// One connection's place under its address's cap, given back on drop.
struct AddressSlot {
    table: Arc<PerAddress>,
    ip: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self
            .table
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The body of the answer to a connection over its address's cap.
const TOO_MANY: &str = r#"{"error":{"code":"too_many_connections","message":"too many open connections from this address"}}"#;

/// Answers a connection over its address's cap with 429, written once without waiting (a new
/// socket's send buffer is empty), and closes it.
fn refuse(stream: tokio::net::TcpStream) {
    let response = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         x-content-type-options: nosniff\r\nconnection: close\r\ncontent-length: {}\r\n\r\n\
         {TOO_MANY}",
        TOO_MANY.len()
    );
    let _ = stream.try_write(response.as_bytes());
}

/// The peer address of the connection a request came on (a request extension set by the edge;
/// absent when a router is driven without it, as in some tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::SocketAddr);

/// An error about one connection (the peer went away before it was accepted), not the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}
