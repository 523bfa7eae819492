//! One connection: hyper's HTTP/1 state machine over a socket wrapper ([`Watched`]) that enforces
//! the idle and header timeouts, with the request and response wrapped so the connection knows
//! when a request is in flight.
//!
//! A connection is always in one of three phases: *idle* (no request in flight, no byte of the
//! next one; `idle_timeout` runs), *head* (the first bytes of a request have arrived;
//! `header_timeout` runs from the first one — and a new connection starts here, its timer
//! running from the accept, so one that sends nothing is closed at the header timeout), *busy* (hyper has parsed a head and the response
//! is not fully written; no connection timer — the body has its own deadline, and responses such
//! as downloads may take as long as the client needs, as long as it keeps reading: a write that
//! finds no room for `idle_timeout` ends the connection). Hyper's own `header_read_timeout` is not
//! used: in hyper 1.12 its timer starts whenever hyper waits for a head — at accept and right
//! after every response — so it would also close idle keep-alive connections after the header
//! timeout, and an idle timeout longer than that could never take effect.

use std::convert::Infallible;
use std::io;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker, ready};

use axum::body::Body;
use bytes::Bytes;
use hyper::Request;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use super::body::TimedBody;
use super::{Limits, Responder};

/// Serves one accepted connection until the peer closes it, a timeout ends it, or shutdown is
/// asked and its request in flight is done. `_guard` (a connection slot and the "still open"
/// mark) is released when this returns.
pub async fn serve(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    responder: impl Responder,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
    _guard: super::Slot,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched::new(stream, activity.clone(), limits));
    let body_timeout = limits.body_timeout;
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let in_flight = activity.begin();
        let mut req = req.map(|b| Body::new(TimedBody::new(b, body_timeout)));
        req.extensions_mut().insert(super::ClientAddr(peer));
        let response = responder.respond(req);
        async move {
            let response = response.await;
            Ok::<_, Infallible>(response.map(|body| Tracked {
                body,
                _in_flight: in_flight,
            }))
        }
    });
    let mut builder = http1::Builder::new();
    builder.header_read_timeout(None);
    let mut conn = pin!(builder.serve_connection(io, service));
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Where a connection is between requests; see the module doc.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No request in flight since this instant, and no byte of the next one.
    Idle(Instant),
    /// The first byte of a request head arrived at this instant.
    Head(Instant),
    /// This many requests are in flight (more than one only with pipelining).
    Busy(usize),
}

/// A connection's phase, shared by the socket wrapper and the service (same task; the lock is
/// never contended).
#[derive(Debug)]
struct Activity(Mutex<Shared>);

#[derive(Debug)]
struct Shared {
    phase: Phase,
    /// The last read that found nothing while busy. Hyper may already be waiting for the next
    /// head when the response ends; it is woken then so the idle timer gets armed.
    reader: Option<Waker>,
}

impl Activity {
    /// A new connection: its first request head is due within the header timeout.
    fn new() -> Self {
        Self(Mutex::new(Shared {
            phase: Phase::Head(Instant::now()),
            reader: None,
        }))
    }

    fn update<T>(&self, f: impl FnOnce(&mut Shared) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Bytes arrived: an idle connection starts reading a head.
    fn received(&self) {
        self.update(|s| {
            if let Phase::Idle(_) = s.phase {
                s.phase = Phase::Head(Instant::now());
            }
        });
    }

    /// A head was parsed; the returned guard ends the request when the response is written.
    fn begin(self: &Arc<Self>) -> InFlight {
        self.update(|s| {
            s.phase = match s.phase {
                Phase::Busy(n) => Phase::Busy(n + 1),
                Phase::Idle(_) | Phase::Head(_) => Phase::Busy(1),
            }
        });
        InFlight(self.clone())
    }

    /// When the connection is to be closed; `None` while a request is in flight, in which case
    /// `waker` is woken when it ends.
    fn deadline(&self, limits: &Limits, waker: &Waker) -> Option<Instant> {
        self.update(|s| match s.phase {
            Phase::Idle(since) => Some(since + limits.idle_timeout),
            Phase::Head(since) => Some(since + limits.header_timeout),
            Phase::Busy(_) => {
                if !s.reader.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    s.reader = Some(waker.clone());
                }
                None
            }
        })
    }
}

/// A request in flight; dropped when hyper has written (or dropped) the response body.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let reader = self.0.update(|s| match s.phase {
            Phase::Busy(n) if n > 1 => {
                s.phase = Phase::Busy(n - 1);
                None
            }
            _ => {
                s.phase = Phase::Idle(Instant::now());
                s.reader.take()
            }
        });
        if let Some(reader) = reader {
            reader.wake();
        }
    }
}

/// The response body, carrying the request's [`InFlight`] until hyper is done with it.
struct Tracked {
    body: Body,
    /// Held for its `Drop`.
    _in_flight: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The socket, failing a read with `TimedOut` once the idle or head deadline has passed.
struct Watched<S> {
    io: S,
    activity: Arc<Activity>,
    limits: Limits,
    /// Wakes the connection at `armed`.
    timer: Pin<Box<Sleep>>,
    /// The deadline `timer` is set to.
    armed: Instant,
    /// Fails a write the client has not made room for within the idle timeout.
    write_timer: Pin<Box<Sleep>>,
    /// Whether the last write found no room (and `write_timer` runs for it).
    write_stalled: bool,
}

impl<S> Watched<S> {
    fn new(io: S, activity: Arc<Activity>, limits: Limits) -> Self {
        let armed = Instant::now() + limits.header_timeout;
        Self {
            io,
            activity,
            limits,
            timer: Box::pin(tokio::time::sleep_until(armed)),
            armed,
            write_timer: Box::pin(tokio::time::sleep_until(armed)),
            write_stalled: false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        if let Poll::Ready(result) = Pin::new(&mut this.io).poll_read(cx, buf) {
            if buf.filled().len() > before {
                this.activity.received();
            }
            return Poll::Ready(result);
        }
        // Nothing to read: hyper waits for a head (idle or mid-head) or for more body. Only the
        // first two have a deadline here; the phase may have changed since the last read.
        let Some(deadline) = this.activity.deadline(&this.limits, cx.waker()) else {
            return Poll::Pending;
        };
        if deadline != this.armed {
            this.timer.as_mut().reset(deadline);
            this.armed = deadline;
        }
        ready!(this.timer.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no complete request head in time",
        )))
    }
}

impl<S> Watched<S> {
    /// The outcome of a write: progress clears the stall; no room starts (or keeps) the write
    /// timer, and once it has run for the idle timeout the write fails. A client that sends
    /// requests but reads none of the answers (pipelining into a full socket) would otherwise
    /// hold its connection forever: hyper stops reading while it cannot write, so no read
    /// deadline ever runs. A download the client keeps reading, however slowly, never stalls.
    fn written(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if result.is_ready() {
            self.write_stalled = false;
            return result;
        }
        if !self.write_stalled {
            self.write_stalled = true;
            let deadline = Instant::now() + self.limits.idle_timeout;
            self.write_timer.as_mut().reset(deadline);
        }
        ready!(self.write_timer.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client read nothing of the response in time",
        )))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write(cx, buf);
        this.written(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.written(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    const HEAD: Duration = Duration::from_millis(100);
    const IDLE: Duration = Duration::from_secs(1);

    fn limits() -> Limits {
        Limits {
            header_timeout: HEAD,
            body_timeout: HEAD,
            idle_timeout: IDLE,
            max_connections: 1,
            max_connections_per_address: 1,
        }
    }

    /// Reads until the wrapper fails; returns how long that took.
    async fn time_out(w: &mut Watched<DuplexStream>) -> Duration {
        let start = Instant::now();
        let mut buf = [0u8; 16];
        loop {
            let read = tokio::time::timeout(Duration::from_secs(10), w.read(&mut buf));
            match read.await.expect("the wrapper times out") {
                Ok(n) => assert!(n > 0, "unexpected EOF"),
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
                    return start.elapsed();
                }
            }
        }
    }

    #[tokio::test]
    async fn a_new_connection_gets_the_header_timeout_whether_or_not_it_sends() {
        let (_client, server) = tokio::io::duplex(64);
        let mut w = Watched::new(server, Arc::new(Activity::new()), limits());
        let silent = time_out(&mut w).await;
        assert!(
            silent >= HEAD && silent < IDLE,
            "silent new connection closed after {silent:?}"
        );

        let (mut client, server) = tokio::io::duplex(64);
        let mut w = Watched::new(server, Arc::new(Activity::new()), limits());
        client.write_all(b"GET").await.unwrap();
        let head = time_out(&mut w).await;
        assert!(
            head >= HEAD && head < IDLE,
            "half-sent head closed after {head:?}"
        );
    }

    #[tokio::test]
    async fn idle_between_requests_waits_longer_than_a_head() {
        let (_client, server) = tokio::io::duplex(64);
        let activity = Arc::new(Activity::new());
        drop(activity.begin());
        let mut w = Watched::new(server, activity, limits());
        let idle = time_out(&mut w).await;
        assert!(idle >= IDLE, "idle connection closed after {idle:?}");
    }

    #[test]
    fn no_deadline_while_busy_then_idle_from_the_end() {
        let activity = Arc::new(Activity::new());
        activity.received();
        let first = activity.begin();
        let second = activity.begin();
        let waker = Waker::noop();
        assert_eq!(activity.deadline(&limits(), waker), None);
        drop(first);
        assert_eq!(activity.deadline(&limits(), waker), None, "one in flight");
        let ended = Instant::now();
        drop(second);
        let deadline = activity.deadline(&limits(), waker).unwrap();
        assert!(deadline >= ended + IDLE);
    }

    /// Hyper may wait for the next head before the response body is dropped; the end of the
    /// request must wake it so the idle timer starts.
    #[tokio::test]
    async fn the_end_of_a_request_arms_the_idle_timer() {
        let (_client, server) = tokio::io::duplex(64);
        let activity = Arc::new(Activity::new());
        let mut w = Watched::new(server, activity.clone(), limits());
        let in_flight = activity.begin();
        let ended = Instant::now() + HEAD;
        tokio::spawn(async move {
            tokio::time::sleep_until(ended).await;
            drop(in_flight);
        });
        let closed_after = time_out(&mut w).await;
        let in_time = HEAD + IDLE..HEAD + IDLE + Duration::from_secs(5);
        assert!(in_time.contains(&closed_after), "{closed_after:?}");
    }
}
