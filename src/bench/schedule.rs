//! The run's fixed schedule: when each numbered ticket is due (open loop, `--rate`, with the
//! second half of a `--burst` run at the higher rate), or that it is due now (closed loop), and
//! when the tickets run out.

use std::time::Duration;

use super::Stop;

/// When ticket *k* is due.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Slot {
    /// The run is over.
    Stop,
    /// Closed loop: now (the duration is checked by the worker).
    Now,
    /// Open loop: this long after the start, in this phase.
    At(Duration, usize),
}

/// The run's fixed schedule.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// Count or duration.
    pub stop: Stop,
    /// Requests/s of the first (or only) phase; `None` for closed loop.
    pub rate: Option<f64>,
    /// Rate factor of the second half.
    pub burst: Option<f64>,
}

impl Schedule {
    /// Tickets of the first half of a `--burst` run.
    fn first_half(&self, rate: f64) -> u64 {
        match self.stop {
            Stop::After(d) => (rate * d.as_secs_f64() / 2.0).ceil() as u64,
            Stop::Count(n) => n,
        }
    }

    /// When ticket `k` is due.
    pub fn slot(&self, k: u64) -> Slot {
        if let Stop::Count(n) = self.stop
            && k >= n
        {
            return Slot::Stop;
        }
        let Some(rate) = self.rate else {
            return Slot::Now;
        };
        let (secs, phase) = match self.burst {
            None => (k as f64 / rate, 0),
            Some(f) => {
                let n1 = self.first_half(rate);
                if k < n1 {
                    (k as f64 / rate, 0)
                } else {
                    let half = match self.stop {
                        Stop::After(d) => d.as_secs_f64() / 2.0,
                        Stop::Count(_) => 0.0,
                    };
                    (half + (k - n1) as f64 / (f * rate), 1)
                }
            }
        };
        match self.stop {
            Stop::After(d) if secs >= d.as_secs_f64() => Slot::Stop,
            _ => Slot::At(Duration::from_secs_f64(secs), phase),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(stop: Stop, rate: Option<f64>, burst: Option<f64>) -> Schedule {
        Schedule { stop, rate, burst }
    }

    #[test]
    fn closed_loop_slots() {
        let s = schedule(Stop::Count(3), None, None);
        assert_eq!(s.slot(2), Slot::Now);
        assert_eq!(s.slot(3), Slot::Stop);
        let s = schedule(Stop::After(Duration::from_secs(1)), None, None);
        assert_eq!(s.slot(1_000_000), Slot::Now);
    }

    /// The due time of ticket `k` in seconds, and its phase.
    fn due(s: &Schedule, k: u64) -> Option<(f64, usize)> {
        match s.slot(k) {
            Slot::At(d, phase) => Some(((d.as_secs_f64() * 1e6).round() / 1e6, phase)),
            _ => None,
        }
    }

    #[test]
    fn open_loop_slots_and_burst() {
        let s = schedule(Stop::After(Duration::from_secs(10)), Some(100.0), None);
        assert_eq!(due(&s, 150), Some((1.5, 0)));
        assert_eq!(due(&s, 999), Some((9.99, 0)));
        assert_eq!(s.slot(1000), Slot::Stop);
        // 5 s at 100/s, then 5 s at 1000/s.
        let s = schedule(
            Stop::After(Duration::from_secs(10)),
            Some(100.0),
            Some(10.0),
        );
        assert_eq!(due(&s, 499), Some((4.99, 0)));
        assert_eq!(due(&s, 500), Some((5.0, 1)));
        assert_eq!(due(&s, 1500), Some((6.0, 1)));
        assert_eq!(due(&s, 5499), Some((9.999, 1)));
        assert_eq!(s.slot(5500), Slot::Stop);
        let s = schedule(Stop::Count(10), Some(2.0), None);
        assert_eq!(due(&s, 9), Some((4.5, 0)));
        assert_eq!(s.slot(10), Slot::Stop);
    }
}
