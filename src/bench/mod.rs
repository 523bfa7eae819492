//! `stowage bench`: a load generator for the ingest endpoints, light enough to share a machine
//! with the server it measures.
//!
//! A run pre-generates a pool of request bodies ([`generator`]), opens one keep-alive connection per
//! worker ([`client`]), and has the workers take numbered tickets from one counter until the
//! count or the duration is used up. Closed loop (no `--rate`), each worker sends its next request
//! as soon as the previous one is answered; open loop (`--rate`), ticket *k* is due at a fixed
//! time on one schedule for the whole run, and a request sent more than 1 ms after its due time
//! is counted as late and timed from its due time, so a server that falls behind shows it in
//! the percentiles rather than hiding it by slowing the generator (no coordinated omission).
//! Latencies go into a log-bucket histogram ([`hist`]); [`report`] merges the workers' counts.

pub mod client;
pub mod generator;
pub mod hist;
pub mod mixes;
pub mod report;
pub mod rng;
pub mod schedule;
pub mod worker;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use client::{Conn, RequestHead, Target};
use generator::{Generator, Template};
use report::{Figures, Live, Progress, Stats, Summary};
use schedule::Schedule;
use worker::{Shared, worker};

/// How events are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// `POST /v1/event`, one JSON event per request.
    Single,
    /// `POST /v1/batch` with `{"batch": [...]}`.
    Batch,
    /// `POST /v1/batch` with `Content-Type: application/x-ndjson`, one message per line.
    Ndjson,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Batch => "batch",
            Mode::Ndjson => "ndjson",
        }
    }

    /// The endpoint, under the URL's path.
    pub fn path(self) -> &'static str {
        match self {
            Mode::Single => "/v1/event",
            Mode::Batch | Mode::Ndjson => "/v1/batch",
        }
    }
}

/// How the events token is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Auth {
    /// `X-Auth-Token: <token>`.
    Header,
    /// HTTP Basic with the token as the user name, as Segment SDKs send it.
    Basic,
}

/// When a run ends.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// Stop sending after this long (answers still in flight are awaited).
    After(Duration),
    /// Send this many requests.
    Count(u64),
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Base URL of the service, `http://host:port`.
    pub url: String,
    /// Events token.
    pub token: String,
    pub mode: Mode,
    /// Which events.
    pub mix: mixes::Mix,
    /// Events per request in the batch modes.
    pub batch_size: usize,
    /// Send bodies with `Content-Encoding: gzip` (compressed per request, on the client's CPU).
    pub gzip: bool,
    /// Concurrent connections, one worker each.
    pub connections: usize,
    pub stop: Stop,
    /// Target total requests/s (open loop); `None` for closed loop.
    pub rate: Option<f64>,
    /// The second half of the duration runs at `burst × rate`.
    pub burst: Option<f64>,
    pub auth: Auth,
    /// Longest wait for one response.
    pub timeout: Duration,
    /// Runtime worker threads the caller gave the run (reported only).
    pub threads: usize,
    /// Show the progress line on stderr.
    pub progress: bool,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("invalid URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("the {0} cannot be sent in an HTTP header")]
    Header(String),
    #[error("cannot connect to {url}: {source}")]
    Connect { url: String, source: std::io::Error },
    #[error("{0}")]
    Options(String),
}

impl Plan {
    fn check(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Options(m.into()));
        let positive = |x: Option<f64>| x.is_none_or(|x| x.is_finite() && x > 0.0);
        if self.connections == 0 || self.batch_size == 0 {
            return bad("--connections and --batch-size must be at least 1");
        }
        if self.batch_size > 100_000 {
            return bad("--batch-size is at most 100000");
        }
        if !positive(self.rate) || !positive(self.burst) {
            return bad("--rate and --burst must be positive numbers");
        }
        match self.stop {
            Stop::After(d) if d.is_zero() => bad("--duration must be positive"),
            Stop::Count(0) => bad("--count must be at least 1"),
            Stop::Count(_) if self.burst.is_some() => bad("--burst needs --duration"),
            _ if self.burst.is_some() && self.rate.is_none() => bad("--burst needs --rate"),
            _ => Ok(()),
        }
    }

    fn events_per_request(&self) -> usize {
        if self.mode == Mode::Single {
            1
        } else {
            self.batch_size
        }
    }
}

/// Runs the plan; the summary, or why it could not start.
pub async fn run(plan: &Plan) -> Result<Summary, BenchError> {
    plan.check()?;
    let target = Target::resolve(&plan.url).await?;
    let head = RequestHead::new(&target, plan.mode, &plan.token, plan.auth, plan.gzip)?;
    let run_id = run_id();
    let per_body = plan.events_per_request();
    let mut generator =
        Generator::new(&run_id, seed(&run_id), chrono::Utc::now()).with_mix(plan.mix);
    let bodies = 1024usize.div_ceil(per_body).max(8);
    let pool: Vec<Template> = (0..bodies)
        .map(|_| generator.template(plan.mode, per_body))
        .collect();
    let mut conns = Vec::with_capacity(plan.connections);
    for _ in 0..plan.connections {
        conns.push(
            Conn::connect(target.addr)
                .await
                .map_err(|source| BenchError::Connect {
                    url: plan.url.clone(),
                    source,
                })?,
        );
    }
    let start = Instant::now();
    let phases = if plan.burst.is_some() { 2 } else { 1 };
    let shared = Arc::new(Shared {
        schedule: Schedule {
            stop: plan.stop,
            rate: plan.rate,
            burst: plan.burst,
        },
        start,
        end: match plan.stop {
            Stop::After(d) if plan.rate.is_none() => Some(start + d),
            _ => None,
        },
        tickets: AtomicU64::new(0),
        ids: AtomicU64::new(0),
        pool,
        head,
        gzip: plan.gzip,
        timeout: plan.timeout,
        live: Live::default(),
        phases,
    });
    let workers: Vec<_> = conns
        .into_iter()
        .map(|conn| tokio::spawn(worker(shared.clone(), conn)))
        .collect();
    let progress = plan.progress.then(|| {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut p = Progress::new(shared.start);
            loop {
                tokio::time::sleep(p.every()).await;
                p.tick(&shared.live);
            }
        })
    });
    let mut per_phase = vec![Stats::default(); phases];
    for w in workers {
        // A worker cannot panic on server behaviour; if one did, its counts are lost, not the run.
        if let Ok(stats) = w.await {
            for (total, s) in per_phase.iter_mut().zip(&stats) {
                total.merge(s);
            }
        }
    }
    let elapsed = start.elapsed();
    if let Some(p) = progress {
        p.abort();
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            let _ = writeln!(std::io::stderr());
        }
    }
    Ok(summarize(plan, run_id, &per_phase, elapsed))
}

/// The summary of a finished run: the totals, and each half of a `--burst` run.
fn summarize(plan: &Plan, run_id: String, per_phase: &[Stats], elapsed: Duration) -> Summary {
    let mut all = Stats::default();
    for s in per_phase {
        all.merge(s);
    }
    let phases = match (plan.rate, plan.burst, plan.stop, per_phase) {
        (Some(rate), Some(f), Stop::After(d), [first, second]) => {
            let half = d / 2;
            let rest = elapsed.saturating_sub(half).max(Duration::from_millis(1));
            let mut a = Figures::new(first, half, Some(rate));
            let mut b = Figures::new(second, rest, Some(rate * f));
            a.phase = Some("sustained");
            b.phase = Some("burst");
            vec![a, b]
        }
        _ => Vec::new(),
    };
    let mut totals = Figures::new(&all, elapsed, plan.rate.filter(|_| plan.burst.is_none()));
    if plan.rate.is_some() {
        totals.late = Some(all.late);
    }
    Summary {
        run_id,
        mode: plan.mode.name(),
        url: format!("{}{}", plan.url.trim_end_matches('/'), plan.mode.path()),
        connections: plan.connections,
        threads: plan.threads,
        batch_size: plan.events_per_request(),
        gzip: plan.gzip,
        auth: match plan.auth {
            Auth::Header => "header",
            Auth::Basic => "basic",
        },
        totals,
        phases,
    }
}

/// 16 random hex digits: part of every `messageId`, so two runs never collide.
pub fn run_id() -> String {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: the clock still separates runs.
        b = (chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default() as u64).to_be_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A data seed derived from the run id (different data per run, reproducible from the id).
pub fn seed(run_id: &str) -> u64 {
    u64::from_str_radix(run_id.get(..16).unwrap_or(run_id), 16).unwrap_or(0x5EED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_plans_are_refused() {
        let plan = Plan {
            url: "http://127.0.0.1:1".into(),
            token: "t".into(),
            mode: Mode::Single,
            mix: mixes::Mix::Shop,
            batch_size: 500,
            gzip: false,
            connections: 1,
            stop: Stop::Count(1),
            rate: None,
            burst: None,
            auth: Auth::Header,
            timeout: Duration::from_secs(1),
            threads: 1,
            progress: false,
        };
        assert!(plan.check().is_ok());
        let with = |f: fn(&mut Plan)| {
            let mut p = plan.clone();
            f(&mut p);
            p.check().unwrap_err().to_string()
        };
        assert!(with(|p| p.connections = 0).contains("--connections"));
        assert!(with(|p| p.rate = Some(f64::NAN)).contains("--rate"));
        assert!(with(|p| p.burst = Some(2.0)).contains("--burst"));
        assert!(with(|p| p.stop = Stop::After(Duration::ZERO)).contains("--duration"));
        assert!(
            with(|p| {
                p.stop = Stop::After(Duration::from_secs(1));
                p.burst = Some(2.0);
            })
            .contains("--rate")
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_clear_error() {
        // Port 1 on loopback: nothing listens there.
        let plan = Plan {
            url: "http://127.0.0.1:1".into(),
            token: "t".into(),
            mode: Mode::Single,
            mix: mixes::Mix::Shop,
            batch_size: 1,
            gzip: false,
            connections: 1,
            stop: Stop::Count(1),
            rate: None,
            burst: None,
            auth: Auth::Header,
            timeout: Duration::from_secs(1),
            threads: 1,
            progress: false,
        };
        let err = run(&plan).await.unwrap_err().to_string();
        assert!(
            err.starts_with("cannot connect to http://127.0.0.1:1"),
            "{err}"
        );
    }
}
