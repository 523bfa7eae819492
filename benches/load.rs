//! End-to-end load generator for `POST /v1/event` (no criterion: `harness = false`).
//!
//! It drives the real release binary (`target/release/stowage`, build it first with
//! `cargo build --release`) in a fresh temporary data dir, or with `--baseline` a bare in-process
//! axum server, and prints one JSON line per phase on stdout plus a human line on stderr.
//!
//! ```sh
//! cargo build --release
//! cargo bench --bench load -- --connections 16 --duration 5
//! cargo bench --bench load -- --env STOWAGE_INGEST__ACK=buffered --label buffered
//! cargo bench --bench load -- --rate 2000 --burst-factor 5 --duration 20
//! cargo bench --bench load -- --baseline --connections 16 --duration 5
//! ```
//!
//! Flags (cargo bench also passes `--bench`; without it, as under `cargo test --all-targets`, the
//! binary exits at once, like criterion's test mode):
//! - `--connections N`: concurrent workers, each with its own keep-alive connection (default 32).
//! - `--duration SECS`: length of the run in seconds, fractions allowed (default 10).
//! - `--rate R`: total target requests/s, paced open-loop across the workers (each worker sends
//!   on its own fixed schedule; a worker that falls behind sends at once and the request counts
//!   as `late`). Without it the workers are closed-loop, each sending as fast as it can.
//! - `--burst-factor F` (needs `--rate`): the first half of the duration runs at R, the second
//!   half at F×R; each half is reported as its own JSON line (`"phase":"sustained"|"burst"`).
//! - `--env KEY=VALUE` (repeatable): extra environment for the server, e.g.
//!   `STOWAGE_INGEST__ACK=buffered` or `STOWAGE_FLUSH__INTERVAL=1s`. The value of
//!   `STOWAGE_INGEST__ACK` becomes the `mode` field (else `"default"`).
//! - `--label TEXT`: copied to the `label` field (default null; `"baseline"` with `--baseline`).
//! - `--bin PATH`: the stowage binary to drive instead of `target/release/stowage` (compare two
//!   builds in one run).
//! - `--baseline`: instead of stowage, a bare axum 0.8 server on its own 1-thread runtime in this
//!   process (reads the body, parses it with serde_json, checks it is an object, answers 200
//!   `{"success":true}`). `mode` is `"baseline"`; RSS and exit code are `null`.
//!
//! Output fields: `mode, phase?, connections, duration_s, target_rps?, requests, ok, late?,
//! errors` (transport failures and timeouts), `status_counts` (`200`, `429`, `503` always present,
//! others as seen), `rps_ok, p50_ms, p99_ms, max_ms` (wall time of the 200 responses only),
//! `peak_rss_mib` (max of `VmHWM` and `VmRSS` sampled every 100 ms), `server_exit` (exit code after
//! SIGTERM, or `"signal:N"`), `label`. 429/503 are expected under overload and only counted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(about = "Load generator for POST /v1/event (see the doc comment of benches/load.rs)")]
struct Args {
    /// Concurrent workers (connections).
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Run length in seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Total target requests/s (open loop); closed loop when absent.
    #[arg(long)]
    rate: Option<f64>,
    /// Second half of the run at F × rate.
    #[arg(long, requires = "rate")]
    burst_factor: Option<f64>,
    /// Extra server environment, KEY=VALUE (repeatable).
    #[arg(long = "env", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// Free-form label copied to the output.
    #[arg(long)]
    label: Option<String>,
    /// Drive a bare in-process axum server instead of stowage.
    #[arg(long)]
    baseline: bool,
    /// The stowage binary to drive (default: target/release/stowage), e.g. an older build to
    /// compare against in the same run.
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Passed by `cargo bench`; without it (`cargo test --all-targets`) nothing runs.
    #[arg(long, hide = true)]
    bench: bool,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once('=').ok_or("expected KEY=VALUE")?;
    Ok((k.to_string(), v.to_string()))
}

type Res<T> = Result<T, String>;

fn main() {
    let args = Args::parse();
    if !args.bench {
        eprintln!("load: not run by `cargo bench` (no --bench flag); skipping the load run");
        return;
    }
    if let Err(e) = run(args) {
        eprintln!("load: error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Res<()> {
    if args.connections == 0 || args.duration <= 0.0 || args.rate.is_some_and(|r| r <= 0.0) {
        return Err("--connections, --duration and --rate must be positive".into());
    }
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let (target, mode) = if args.baseline {
        if !args.env.is_empty() {
            eprintln!("load: --env is ignored with --baseline");
        }
        (Target::Baseline(baseline::start()?), "baseline".to_string())
    } else {
        let mode = args.env.iter().find(|(k, _)| k == "STOWAGE_INGEST__ACK");
        let mode = mode.map_or("default".to_string(), |(_, v)| v.clone());
        (
            Target::Server(rt.block_on(Server::start(&args.env, args.bin.as_deref()))?),
            mode,
        )
    };
    let label = args
        .label
        .clone()
        .or(args.baseline.then(|| "baseline".into()));
    let total = Duration::from_secs_f64(args.duration);
    let phases: Vec<(Option<&str>, Option<f64>, Duration)> = match (args.rate, args.burst_factor) {
        (Some(r), Some(f)) => vec![
            (Some("sustained"), Some(r), total / 2),
            (Some("burst"), Some(r * f), total / 2),
        ],
        (rate, _) => vec![(None, rate, total)],
    };

    let pid = target.pid();
    let result = rt.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(args.connections)
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for (name, rate, duration) in &phases {
            let sampler = pid.map(rss::Sampler::start);
            let stats = load::run(
                &client,
                &target.url(),
                &target.token(),
                args.connections,
                *rate,
                *duration,
            )
            .await;
            let sampled = match sampler {
                Some(s) => s.stop().await,
                None => None,
            };
            let hwm = pid.and_then(|p| rss::read_kib(p, "VmHWM:"));
            let peak = sampled.max(hwm).map(|kib| kib as f64 / 1024.0);
            out.push((*name, *rate, stats, peak));
        }
        if let Target::Server(server) = &target {
            wal_report(&client, &format!("http://{}", server.metrics_addr), &label).await;
        }
        Ok::<_, String>(out)
    });
    // Stop the server whatever happened, then report.
    let exit = match target {
        Target::Server(s) => Some(s.stop()?),
        Target::Baseline(b) => {
            b.shutdown_background();
            None
        }
    };
    for (phase, rate, stats, peak) in result? {
        let ctx = Report {
            mode: &mode,
            phase,
            connections: args.connections,
            rate,
            label: &label,
        };
        report(&ctx, &stats, peak, exit.as_ref());
    }
    Ok(())
}

enum Target {
    Server(Server),
    Baseline(baseline::Baseline),
}

impl Target {
    fn url(&self) -> String {
        let addr = match self {
            Target::Server(s) => s.addr.clone(),
            Target::Baseline(b) => b.addr.to_string(),
        };
        format!("http://{addr}")
    }
    fn token(&self) -> String {
        match self {
            Target::Server(s) => s.token.clone(),
            Target::Baseline(_) => String::new(),
        }
    }
    fn pid(&self) -> Option<u32> {
        match self {
            Target::Server(s) => Some(s.child.id()),
            Target::Baseline(_) => None,
        }
    }
}

/// The stowage child process, seeded and listening; killed on drop if not stopped.
struct Server {
    child: Child,
    addr: String,
    /// Where its `/metrics` is served (`server.metrics_listen`).
    metrics_addr: String,
    log: PathBuf,
    token: String,
    _dir: tempfile::TempDir,
}

fn binary(given: Option<&Path>) -> Res<PathBuf> {
    if let Some(bin) = given {
        return Ok(bin.to_path_buf());
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    let bin = target.join("release").join("stowage");
    if !bin.is_file() {
        return Err(format!(
            "{} not found: run `cargo build --release` first",
            bin.display()
        ));
    }
    let built = bin.metadata().and_then(|m| m.modified()).ok();
    let src = newest(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    if let (Some(b), Some(s)) = (built, src)
        && s > b
    {
        eprintln!(
            "load: warning: {} is older than src/; rebuild for current code",
            bin.display()
        );
    }
    Ok(bin)
}

/// Newest modification time of any file under `dir`.
fn newest(dir: &Path) -> Option<SystemTime> {
    let mut max = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let p = entry.path();
        let t = if p.is_dir() {
            newest(&p)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        max = max.max(t);
    }
    max
}

fn admin(bin: &Path, dir: &Path, args: &[&str]) -> Res<Value> {
    let out = Command::new(bin)
        .args(["--json", "--data-dir"])
        .arg(dir)
        .arg("admin")
        .args(args)
        .output()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "`stowage admin {}` failed: {}",
            args.join(" "),
            err.trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("admin {}: bad JSON: {e}", args[0]))
}

impl Server {
    async fn start(env: &[(String, String)], bin: Option<&Path>) -> Res<Server> {
        let bin = binary(bin)?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let data = dir.path().join("data");
        admin(&bin, &data, &["team", "create", "--name", "bench"])?;
        admin(
            &bin,
            &data,
            &[
                "user", "create", "--team", "bench", "--name", "owner", "--role", "owner",
            ],
        )?;
        admin(&bin, &data, &["events", "enable", "--team", "bench"])?;
        let tok = admin(
            &bin,
            &data,
            &["token", "create", "--team", "bench", "--user", "owner"],
        )?;
        let token = tok["token"]
            .as_str()
            .ok_or("token create: no token in output")?
            .to_string();

        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.to_string())
                .map_err(|e| e.to_string())
        };
        let (addr, metrics_addr) = (free()?, free()?);
        let log = dir.path().join("server.log");
        let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = Command::new(&bin)
            .args(["serve", "--listen", &addr, "--data-dir"])
            .arg(&data)
            .env("STOWAGE_SERVER__METRICS_LISTEN", &metrics_addr)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file)
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", bin.display()))?;
        let mut server = Server {
            child,
            addr,
            metrics_addr,
            log,
            token,
            _dir: dir,
        };
        server.wait_healthy().await?;
        Ok(server)
    }

    async fn wait_healthy(&mut self) -> Res<()> {
        let url = format!("http://{}/healthz", self.addr);
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "server exited at start-up ({status}):\n{}",
                    self.log_text()
                ));
            }
            let ok = client
                .get(&url)
                .timeout(Duration::from_secs(1))
                .send()
                .await;
            if ok.is_ok_and(|r| r.status() == reqwest::StatusCode::OK) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!(
            "server not healthy after 30 s:\n{}",
            self.log_text()
        ))
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then wait (up to 60 s, then SIGKILL); the exit code, or `"signal:N"`.
    fn stop(mut self) -> Res<Value> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            match self.child.try_wait().map_err(|e| e.to_string())? {
                Some(s) => break s,
                None if Instant::now() > deadline => {
                    eprintln!("load: server ignored SIGTERM for 60 s; killing it");
                    let _ = self.child.kill();
                    break self.child.wait().map_err(|e| e.to_string())?;
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        use std::os::unix::process::ExitStatusExt;
        Ok(match (status.code(), status.signal()) {
            (Some(c), _) => json!(c),
            (None, s) => json!(format!("signal:{}", s.unwrap_or(0))),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The load itself: workers sharing one pooled client.
mod load {
    use super::*;

    #[derive(Default)]
    pub struct Stats {
        pub requests: u64,
        pub late: u64,
        pub errors: u64,
        pub status: BTreeMap<u16, u64>,
        /// Wall time of each 200, in microseconds.
        pub ok_us: Vec<u32>,
        pub elapsed: Duration,
    }

    pub async fn run(
        client: &reqwest::Client,
        base: &str,
        token: &str,
        workers: usize,
        rate: Option<f64>,
        duration: Duration,
    ) -> Stats {
        let url = format!("{base}/v1/event");
        let start = Instant::now();
        let end = start + duration;
        let nonce = SystemTime::UNIX_EPOCH
            .elapsed()
            .unwrap_or_default()
            .as_nanos();
        let tasks: Vec<_> = (0..workers)
            .map(|w| {
                // Worker w sends at start + (w + k·workers) / rate: evenly spaced in aggregate.
                let pace = rate.map(|r| {
                    let step = Duration::from_secs_f64(workers as f64 / r);
                    (start + Duration::from_secs_f64(w as f64 / r), step)
                });
                let (client, url, token) = (client.clone(), url.clone(), token.to_string());
                tokio::spawn(worker(
                    client,
                    url,
                    token,
                    format!("{nonce:x}-{w}"),
                    pace,
                    end,
                ))
            })
            .collect();
        let mut total = Stats::default();
        for t in tasks {
            let s = t.await.expect("load worker panicked");
            total.requests += s.requests;
            total.late += s.late;
            total.errors += s.errors;
            for (k, v) in s.status {
                *total.status.entry(k).or_default() += v;
            }
            total.ok_us.extend(s.ok_us);
        }
        total.elapsed = start.elapsed();
        total.ok_us.sort_unstable();
        total
    }

    static COUNTER: AtomicU64 = AtomicU64::new(0);

    async fn worker(
        client: reqwest::Client,
        url: String,
        token: String,
        id_prefix: String,
        mut pace: Option<(Instant, Duration)>,
        end: Instant,
    ) -> Stats {
        let mut s = Stats::default();
        loop {
            if let Some((next, step)) = pace.as_mut() {
                if *next >= end {
                    break;
                }
                let now = Instant::now();
                if now > *next + *step {
                    s.late += 1;
                }
                tokio::time::sleep_until((*next).into()).await;
                *next += *step;
            } else if Instant::now() >= end {
                break;
            }
            let i = COUNTER.fetch_add(1, Ordering::Relaxed);
            let body = format!(
                r#"{{"version":1,"type":"event","event":"Purchased an Item","messageId":"{id_prefix}-{i}","properties":{{"revenue":"39.95","shippingMethod":"Premium","i":{i}}},"timestamp":"2012-12-02T00:30:08.276Z"}}"#
            );
            let t0 = Instant::now();
            let sent = client
                .post(&url)
                .header("X-Auth-Token", &token)
                .header("Content-Type", "application/json")
                .body(body)
                .send()
                .await;
            s.requests += 1;
            match sent {
                Ok(resp) => {
                    let code = resp.status().as_u16();
                    // Read the body so the connection goes back to the pool.
                    if resp.bytes().await.is_err() {
                        s.errors += 1;
                        continue;
                    }
                    *s.status.entry(code).or_default() += 1;
                    if code == 200 {
                        s.ok_us
                            .push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
                    }
                }
                Err(_) => s.errors += 1,
            }
        }
        s
    }
}

/// Server memory from `/proc/<pid>/status`.
mod rss {
    use super::*;

    /// A field such as `VmRSS:` or `VmHWM:` in KiB.
    pub fn read_kib(pid: u32, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line[field.len()..].split_whitespace().next()?.parse().ok()
    }

    /// Samples `VmRSS` every 100 ms and keeps the max.
    pub struct Sampler {
        max: Arc<AtomicU64>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Sampler {
        pub fn start(pid: u32) -> Sampler {
            let max = Arc::new(AtomicU64::new(0));
            let m = max.clone();
            let task = tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                loop {
                    tick.tick().await;
                    if let Some(kib) = read_kib(pid, "VmRSS:") {
                        m.fetch_max(kib, Ordering::Relaxed);
                    }
                }
            });
            Sampler { max, task }
        }

        pub async fn stop(self) -> Option<u64> {
            self.task.abort();
            let _ = self.task.await;
            Some(self.max.load(Ordering::Relaxed)).filter(|&k| k > 0)
        }
    }
}

/// The bare axum server of `--baseline`, on its own 1-worker runtime.
mod baseline {
    use axum::Router;
    use axum::body::Bytes;
    use axum::http::{StatusCode, header};
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;

    pub struct Baseline {
        pub addr: std::net::SocketAddr,
        rt: tokio::runtime::Runtime,
    }

    impl Baseline {
        pub fn shutdown_background(self) {
            self.rt.shutdown_background();
        }
    }

    async fn event(body: Bytes) -> Response {
        let json = [(header::CONTENT_TYPE, "application/json")];
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(v) if v.is_object() => (StatusCode::OK, json, r#"{"success":true}"#).into_response(),
            _ => (
                StatusCode::BAD_REQUEST,
                json,
                r#"{"error":{"code":"invalid_json"}}"#,
            )
                .into_response(),
        }
    }

    pub fn start() -> Result<Baseline, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("baseline-server")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let app = Router::new().route("/v1/event", post(event));
        rt.spawn(async move { axum::serve(listener, app).await });
        Ok(Baseline { addr, rt })
    }
}

struct Report<'a> {
    mode: &'a str,
    phase: Option<&'a str>,
    connections: usize,
    rate: Option<f64>,
    label: &'a Option<String>,
}

fn report(ctx: &Report, s: &load::Stats, peak_rss_mib: Option<f64>, exit: Option<&Value>) {
    let secs = s.elapsed.as_secs_f64();
    // Nearest-rank percentile of the 200s in ms (p = 1 is the max); None when there were none.
    let pct = |p: f64| -> Option<f64> {
        let n = s.ok_us.len();
        let idx = ((p * n as f64).ceil() as usize).clamp(1, n.max(1)) - 1;
        s.ok_us.get(idx).map(|&us| us as f64 / 1000.0)
    };
    let (p50, p99, max) = (pct(0.50), pct(0.99), pct(1.0));
    let ok = s.status.get(&200).copied().unwrap_or(0);
    let mut counts: BTreeMap<String, u64> = [200, 429, 503].map(|c| (c.to_string(), 0)).into();
    for (code, n) in &s.status {
        counts.insert(code.to_string(), *n);
    }
    let round = |x: f64, d: i32| (x * 10f64.powi(d)).round() / 10f64.powi(d);
    let mut fields: Vec<(&str, Value)> = vec![("mode", json!(ctx.mode))];
    if let Some(p) = ctx.phase {
        fields.push(("phase", json!(p)));
    }
    fields.extend([
        ("connections", json!(ctx.connections)),
        ("duration_s", json!(round(secs, 3))),
    ]);
    if let Some(r) = ctx.rate {
        fields.extend([("target_rps", json!(r)), ("late", json!(s.late))]);
    }
    fields.extend([
        ("requests", json!(s.requests)),
        ("ok", json!(ok)),
        ("errors", json!(s.errors)),
        ("status_counts", json!(counts)),
        ("rps_ok", json!(round(ok as f64 / secs, 1))),
        ("p50_ms", json!(p50.map(|x| round(x, 3)))),
        ("p99_ms", json!(p99.map(|x| round(x, 3)))),
        ("max_ms", json!(max.map(|x| round(x, 3)))),
        ("peak_rss_mib", json!(peak_rss_mib.map(|m| round(m, 1)))),
        ("server_exit", exit.cloned().unwrap_or(Value::Null)),
        ("label", json!(ctx.label)),
    ]);
    // serde_json sorts object keys here (no preserve_order), so write the line in this order.
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", json!(k)))
        .collect();
    println!("{{{}}}", body.join(","));
    eprintln!(
        "load[{}] mode={} {}conns={} {:.1}s: {} req, {} ok ({:.0}/s), {} errors, statuses {}, \
         p50 {} ms, p99 {} ms, max {} ms, peak RSS {}, server exit {}",
        ctx.label.as_deref().unwrap_or("-"),
        ctx.mode,
        ctx.phase.map(|p| format!("phase={p} ")).unwrap_or_default(),
        ctx.connections,
        secs,
        s.requests,
        ok,
        ok as f64 / secs,
        s.errors,
        json!(counts),
        ms(p50),
        ms(p99),
        ms(max),
        peak_rss_mib.map_or("n/a".into(), |m| format!("{m:.1} MiB")),
        exit.map_or("n/a".into(), |e| e.to_string()),
    );
}

/// Prints the server's WAL group-commit and flush figures from `/metrics` as one JSON line:
/// fsync latency quantiles, events per fsync, flush count and duration, rows flushed.
async fn wal_report(client: &reqwest::Client, url: &str, label: &Option<String>) {
    let Ok(resp) = client.get(format!("{url}/metrics")).send().await else {
        return;
    };
    let Ok(text) = resp.text().await else { return };
    let value = |series: &str| -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    let q = |name: &str, q: &str| value(&format!("{name}{{quantile=\"{q}\"}}"));
    let fsyncs = value("stowage_wal_fsync_seconds_count");
    let entries = value("stowage_wal_batch_entries_sum");
    let flushes = value("stowage_flush_seconds_count");
    let flush_secs = value("stowage_flush_seconds_sum");
    let out = serde_json::json!({
        "label": label,
        "wal_fsyncs": fsyncs,
        "fsync_p50_ms": q("stowage_wal_fsync_seconds", "0.5").map(|s| s * 1e3),
        "fsync_p99_ms": q("stowage_wal_fsync_seconds", "0.99").map(|s| s * 1e3),
        "events_per_fsync_mean": entries.zip(fsyncs).map(|(e, f)| e / f.max(1.0)),
        "events_per_fsync_p99": q("stowage_wal_batch_entries", "0.99"),
        "flushes": flushes,
        "flush_mean_ms": flush_secs.zip(flushes).map(|(s, n)| s * 1e3 / n.max(1.0)),
        "flush_p99_ms": q("stowage_flush_seconds", "0.99").map(|s| s * 1e3),
        "rows_flushed": value("stowage_flush_rows_total"),
    });
    println!("{out}");
}

fn ms(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |x| format!("{x:.2}"))
}
