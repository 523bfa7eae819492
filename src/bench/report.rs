//! What a run measured: per-worker [`Stats`] merged into a [`Summary`] (printed as text or as one
//! JSON object), and the live progress line on stderr.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::hist::Histogram;

/// Counts of one worker (or, merged, of a run) in one phase.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Requests that got a status or failed in transport.
    pub requests: u64,
    /// Requests answered 2xx.
    pub ok: u64,
    /// Events in the 2xx requests.
    pub events: u64,
    /// Every status seen, with its count.
    pub status: BTreeMap<u16, u64>,
    /// Requests with no status: connection refused or broken, or timed out.
    pub transport_errors: u64,
    /// Of those, the timeouts.
    pub timeouts: u64,
    /// Requests sent more than 1 ms after their scheduled time (`--rate` only).
    pub late: u64,
    /// Body bytes sent (after gzip).
    pub bytes: u64,
    /// Latency of the 2xx responses, in microseconds.
    pub latency: Histogram,
}

impl Stats {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Stats) {
        self.requests += other.requests;
        self.ok += other.ok;
        self.events += other.events;
        for (code, n) in &other.status {
            *self.status.entry(*code).or_default() += n;
        }
        self.transport_errors += other.transport_errors;
        self.timeouts += other.timeouts;
        self.late += other.late;
        self.bytes += other.bytes;
        self.latency.merge(&other.latency);
    }
}

/// Latency percentiles of the 2xx responses, in milliseconds (`null` when there were none).
#[derive(Debug, Serialize)]
pub struct Latency {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
}

/// The figures of a run or of one of its phases. Field order is the JSON order.
#[derive(Debug, Serialize)]
pub struct Figures {
    /// `sustained` or `burst` for a phase of `--burst`; absent for the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<&'static str>,
    /// Target requests/s (`--rate`, times `--burst` in the burst phase).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    pub duration_s: f64,
    pub requests: u64,
    pub ok: u64,
    pub events: u64,
    pub requests_per_s: f64,
    pub ok_per_s: f64,
    pub events_per_s: f64,
    pub latency_ms: Latency,
    /// Status code → count, every code seen.
    pub status: BTreeMap<String, u64>,
    pub transport_errors: u64,
    pub timeouts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late: Option<u64>,
    pub mean_body_bytes: Option<f64>,
}

fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

impl Figures {
    /// The figures of `s` over `elapsed`.
    pub fn new(s: &Stats, elapsed: Duration, target_rate: Option<f64>) -> Self {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let ms = |us: Option<u64>| us.map(|u| round(u as f64 / 1000.0, 3));
        Figures {
            phase: None,
            target_rate,
            duration_s: round(secs, 3),
            requests: s.requests,
            ok: s.ok,
            events: s.events,
            requests_per_s: round(s.requests as f64 / secs, 1),
            ok_per_s: round(s.ok as f64 / secs, 1),
            events_per_s: round(s.events as f64 / secs, 1),
            latency_ms: Latency {
                p50: ms(s.latency.quantile(0.5)),
                p99: ms(s.latency.quantile(0.99)),
                p999: ms(s.latency.quantile(0.999)),
                max: ms(s.latency.max()),
                mean: s.latency.mean().map(|m| round(m / 1000.0, 3)),
            },
            status: s.status.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            transport_errors: s.transport_errors,
            timeouts: s.timeouts,
            late: target_rate.map(|_| s.late),
            mean_body_bytes: (s.requests > 0).then(|| round(s.bytes as f64 / s.requests as f64, 1)),
        }
    }

    /// The human lines of these figures, indented.
    fn human(&self, out: &mut String) {
        use std::fmt::Write as _;
        let ms = |x: Option<f64>| x.map_or("n/a".into(), |x| format!("{x:.2} ms"));
        let l = &self.latency_ms;
        let _ = writeln!(
            out,
            "  requests  {} in {:.2} s: {:.1}/s, 2xx {} ({:.1}/s)",
            self.requests, self.duration_s, self.requests_per_s, self.ok, self.ok_per_s
        );
        let _ = writeln!(
            out,
            "  events    {} acknowledged: {:.1}/s",
            self.events, self.events_per_s
        );
        let _ = writeln!(
            out,
            "  latency   p50 {}, p99 {}, p99.9 {}, max {} (2xx)",
            ms(l.p50),
            ms(l.p99),
            ms(l.p999),
            ms(l.max)
        );
        let codes: Vec<String> = self
            .status
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = write!(
            out,
            "  status    {}; transport errors: {} ({} timeouts)",
            if codes.is_empty() {
                "none".into()
            } else {
                codes.join(", ")
            },
            self.transport_errors,
            self.timeouts
        );
        match (self.target_rate, self.late) {
            (Some(rate), Some(late)) => {
                let _ = write!(
                    out,
                    "\n  schedule  {rate:.1} req/s target, {late} sent late"
                );
            }
            (None, Some(late)) => {
                let _ = write!(out, "\n  schedule  {late} sent late");
            }
            _ => {}
        }
        out.push('\n');
    }
}

/// A run's summary: what was run, the totals, and with `--burst` each phase.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub run_id: String,
    pub mode: &'static str,
    pub url: String,
    pub connections: usize,
    pub threads: usize,
    pub batch_size: usize,
    pub gzip: bool,
    pub auth: &'static str,
    #[serde(flatten)]
    pub totals: Figures,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Figures>,
}

impl Summary {
    /// The summary as text.
    pub fn human(&self) -> String {
        let mut out = format!(
            "stowage bench ingest: {} mode, {} events/request{}, {} connections, {} → {}\n",
            self.mode,
            self.batch_size,
            if self.gzip { ", gzip" } else { "" },
            self.connections,
            self.run_id,
            self.url
        );
        self.totals.human(&mut out);
        for p in &self.phases {
            out.push_str(&format!("phase {}:\n", p.phase.unwrap_or("")));
            p.human(&mut out);
        }
        out
    }
}

/// Counters the workers bump and the progress line reads.
#[derive(Debug, Default)]
pub struct Live {
    pub requests: AtomicU64,
    pub events: AtomicU64,
    /// Non-2xx statuses and transport errors.
    pub errors: AtomicU64,
}

/// The progress line: every second, overwritten, on a terminal; a plain line every 5 s otherwise.
pub struct Progress {
    started: Instant,
    tty: bool,
    /// Values at the previous line, for the rates of the last interval.
    last: (Instant, u64, u64),
}

impl Progress {
    /// Starts the clock.
    pub fn new(started: Instant) -> Self {
        Progress {
            started,
            tty: std::io::stderr().is_terminal(),
            last: (started, 0, 0),
        }
    }

    /// How often [`Progress::tick`] should be called.
    pub fn every(&self) -> Duration {
        Duration::from_secs(if self.tty { 1 } else { 5 })
    }

    /// Prints one line with the totals so far and the rates since the previous line.
    pub fn tick(&mut self, live: &Live) {
        let now = Instant::now();
        let requests = live.requests.load(Ordering::Relaxed);
        let events = live.events.load(Ordering::Relaxed);
        let errors = live.errors.load(Ordering::Relaxed);
        let (t0, r0, e0) = self.last;
        let dt = now.duration_since(t0).as_secs_f64().max(1e-3);
        let line = format!(
            "{:6.1}s  {requests} requests  {:.0} req/s  {:.0} events/s  {errors} errors",
            now.duration_since(self.started).as_secs_f64(),
            (requests - r0) as f64 / dt,
            (events - e0) as f64 / dt,
        );
        self.last = (now, requests, events);
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(err, "\r\x1b[2K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_and_json_shape() {
        let hit = |s: &mut Stats, code: u16| {
            s.requests += 1;
            s.bytes += 100;
            *s.status.entry(code).or_default() += 1;
            if code == 200 {
                s.ok += 1;
                s.events += 500;
                s.latency.record(1500);
            }
        };
        let mut a = Stats::default();
        let mut b = Stats::default();
        hit(&mut a, 200);
        hit(&mut b, 200);
        hit(&mut b, 503);
        b.transport_errors += 1;
        b.requests += 1;
        a.merge(&b);
        let f = Figures::new(&a, Duration::from_secs(2), None);
        assert_eq!((f.requests, f.ok, f.events), (4, 2, 1000));
        assert_eq!(
            (f.ok_per_s, f.events_per_s, f.requests_per_s),
            (1.0, 500.0, 2.0)
        );
        assert_eq!(f.latency_ms.p50, Some(1.5));
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["status"], serde_json::json!({"200": 2, "503": 1}));
        assert_eq!(json["transport_errors"], 1);
        assert!(json.get("late").is_none() && json.get("phase").is_none());
        let mut text = String::new();
        f.human(&mut text);
        assert!(text.contains("200: 2, 503: 1"), "{text}");
    }
}
