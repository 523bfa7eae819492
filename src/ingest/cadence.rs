//! The flush cadence of quiet teams (issue 31, BENCHMARKS.md "Object-store cost of small
//! teams"): every flush is one object PUT per table and one catalog commit, whatever it holds,
//! so a team sending a few events a minute costs as many requests as a busy one. When a team's
//! `flush.interval` deadline comes and its buffer is still small (under `flush.idle_bytes`), the
//! flush waits — up to `flush.idle_interval` after the buffer's oldest row — for more rows to
//! share the files, looking again every `flush.interval`: it flushes at the first look that finds
//! `idle_bytes` buffered, so a waiting team holds about `idle_bytes` plus one interval of rows,
//! and its files are at least `idle_bytes` unless it is quiet for the whole `idle_interval`.
//! Every other trigger (rows, bytes, an explicit flush for `X-Stowage-Wait` or a
//! fresh read, shutdown) flushes as before, so the bound on how long an acknowledged event stays
//! uncommitted becomes `max(flush.interval, flush.idle_interval)` for quiet teams and stays
//! `flush.interval` for the others. `flush.idle_interval = "0s"` (the default) turns it off.
//!
//! A pure decision, called by the team actor when its flush timer fires.

use std::time::Duration;

/// The quiet-team settings (`[flush]` `idle_interval`, `idle_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cadence {
    /// Longest a small buffer's oldest row waits for its flush; zero: never waits past
    /// `flush.interval`.
    pub idle_interval: Duration,
    /// A buffer at least this big at its deadline flushes at once.
    pub idle_bytes: u64,
}

/// What to do when the flush timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtDeadline {
    /// Flush now.
    Flush,
    /// Look again after this long (the buffer is small and young enough to wait).
    WaitFor(Duration),
}

/// The decision for a buffer of `buffered_bytes` whose oldest row is `age` old, for a team
/// whose `flush.interval` is `interval`.
pub fn at_deadline(
    cadence: Cadence,
    interval: Duration,
    buffered_bytes: u64,
    age: Duration,
) -> AtDeadline {
    if buffered_bytes >= cadence.idle_bytes || age >= cadence.idle_interval {
        AtDeadline::Flush
    } else {
        AtDeadline::WaitFor((cadence.idle_interval - age).min(interval))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUIET: Cadence = Cadence {
        idle_interval: Duration::from_secs(300),
        idle_bytes: 256 << 10,
    };

    const TEN_S: Duration = Duration::from_secs(10);

    #[test]
    fn small_buffers_wait_up_to_the_idle_interval_looking_every_interval() {
        let s = Duration::from_secs;
        let at = |bytes, age| at_deadline(QUIET, TEN_S, bytes, age);
        assert_eq!(at(1_000, s(10)), AtDeadline::WaitFor(s(10)), "look again");
        assert_eq!(
            at(1_000, s(295)),
            AtDeadline::WaitFor(s(5)),
            "not past the bound"
        );
        assert_eq!(at(1_000, s(300)), AtDeadline::Flush, "the bound");
        assert_eq!(at(1_000, s(900)), AtDeadline::Flush);
        assert_eq!(
            at(256 << 10, s(10)),
            AtDeadline::Flush,
            "big enough at once"
        );
        assert_eq!(
            at(300 << 10, s(70)),
            AtDeadline::Flush,
            "grew big while waiting"
        );
    }

    #[test]
    fn off_by_default() {
        let off = Cadence::default();
        assert_eq!(
            at_deadline(off, TEN_S, 0, Duration::ZERO),
            AtDeadline::Flush
        );
        assert_eq!(at_deadline(off, TEN_S, 1, TEN_S), AtDeadline::Flush);
    }
}
