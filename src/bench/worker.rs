//! One worker: a connection that takes tickets from the shared counter, waits for each one's due
//! time (open loop), fills a pooled body with fresh messageIds, sends it and counts the outcome.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::client::{Conn, RequestHead, SendError};
use super::generator::Template;
use super::report::{Live, Stats};
use super::schedule::{Schedule, Slot};

/// A sent request counts as late when it leaves this long after its due time.
const LATE: Duration = Duration::from_millis(1);

/// What every worker shares.
pub struct Shared {
    /// When each ticket is due.
    pub schedule: Schedule,
    /// The run's clock origin.
    pub start: Instant,
    /// Closed-loop end of a `--duration` run.
    pub end: Option<Instant>,
    /// The next ticket.
    pub tickets: AtomicU64,
    /// The next `messageId` counter.
    pub ids: AtomicU64,
    /// Pre-generated bodies, used round robin.
    pub pool: Vec<Template>,
    /// URI and headers of every request.
    pub head: RequestHead,
    /// Compress each body before sending.
    pub gzip: bool,
    /// Longest wait for a response.
    pub timeout: Duration,
    /// Counters for the progress line.
    pub live: Live,
    /// 2 with `--burst`, else 1.
    pub phases: usize,
}

/// Gzips a body (fast level: SDKs favour speed, and this costs the generator's CPU).
fn gzip(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(body);
    enc.finish().unwrap_or_default()
}

/// Sends until the tickets run out; the counts per phase.
pub async fn worker(shared: Arc<Shared>, mut conn: Conn) -> Vec<Stats> {
    let s = &*shared;
    let mut stats = vec![Stats::default(); s.phases];
    loop {
        let k = s.tickets.fetch_add(1, Ordering::Relaxed);
        let (origin, phase) = match s.schedule.slot(k) {
            Slot::Stop => break,
            Slot::Now => {
                if s.end.is_some_and(|end| Instant::now() >= end) {
                    break;
                }
                (None, 0)
            }
            Slot::At(offset, phase) => {
                let due = s.start + offset;
                if Instant::now() > due + LATE {
                    stats[phase].late += 1;
                    (Some(due), phase)
                } else {
                    tokio::time::sleep_until(due.into()).await;
                    (None, phase)
                }
            }
        };
        let template = &s.pool[(k % s.pool.len() as u64) as usize];
        let n = template.messages() as u64;
        let mut body = template.fill(s.ids.fetch_add(n, Ordering::Relaxed));
        if s.gzip {
            body = gzip(&body);
        }
        let st = &mut stats[phase];
        st.bytes += body.len() as u64;
        let t0 = origin.unwrap_or_else(Instant::now);
        let result = conn.send(&s.head, Bytes::from(body), s.timeout).await;
        st.requests += 1;
        s.live.requests.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(code) => {
                *st.status.entry(code).or_default() += 1;
                if (200..300).contains(&code) {
                    st.ok += 1;
                    st.events += n;
                    st.latency.record(t0.elapsed().as_micros() as u64);
                    s.live.events.fetch_add(n, Ordering::Relaxed);
                } else {
                    s.live.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                st.transport_errors += 1;
                st.timeouts += matches!(e, SendError::Timeout) as u64;
                s.live.errors.fetch_add(1, Ordering::Relaxed);
                if s.schedule.rate.is_none() {
                    // Closed loop against a dead server: do not spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
    stats
}
