//! The request body deadline: a body must arrive whole within `server.body_timeout` of the end of
//! its head. Past it, reading fails with [`BodyTimedOut`], which [`crate::http::body`] turns into
//! 408 `body_timeout`; a body nobody reads costs nothing (hyper closes the connection after the
//! response instead of draining it).

use std::error::Error;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::BoxError;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The error a body read fails with once the deadline has passed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {}", humantime::format_duration(*.0))]
pub struct BodyTimedOut(pub Duration);

/// Whether `e`, or an error it wraps, is [`BodyTimedOut`].
pub fn is_body_timeout(e: &(dyn Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.is::<BodyTimedOut>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// A request body that fails with [`BodyTimedOut`] if it is not complete by its deadline.
pub struct TimedBody<B> {
    inner: B,
    timeout: Duration,
    deadline: Instant,
    /// Made on the first read that has to wait, so a body read at once costs no timer.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<B> TimedBody<B> {
    /// `inner`, due within `timeout` from now.
    pub fn new(inner: B, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            deadline: Instant::now() + timeout,
            timer: None,
        }
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(Some(Err(Box::new(BodyTimedOut(this.timeout)))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Full, StreamBody};

    use super::*;

    #[tokio::test]
    async fn a_stalled_body_times_out_and_a_whole_one_does_not() {
        let timeout = Duration::from_millis(100);
        let stalled = StreamBody::new(futures::stream::pending::<Result<Frame<Bytes>, BoxError>>());
        let started = Instant::now();
        let err = TimedBody::new(stalled, timeout)
            .collect()
            .await
            .expect_err("a body that never ends times out");
        assert!(started.elapsed() >= timeout);
        assert!(is_body_timeout(&*err), "{err}");
        let wrapped = axum::Error::new(err);
        assert!(is_body_timeout(&wrapped), "found through wrappers");

        let whole = Full::new(Bytes::from_static(b"hello"));
        let body = TimedBody::new(whole, timeout);
        assert_eq!(body.size_hint().exact(), Some(5));
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"hello");
    }
}
