//! `stowage bench ingest` (drive the ingest endpoints and print a summary, as text or with
//! `--json` as one JSON object) and `stowage bench gen` (write generated events as NDJSON).
//! The work itself is in [`crate::bench`].

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::bench::generator::Generator;
use crate::bench::mixes::Mix;
use crate::bench::{self, Auth, Mode, Plan, Stop};

/// `bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Send generated Segment-style events to /v1/event or /v1/batch and report throughput,
    /// latency percentiles and every status seen. Exit code 1 if nothing succeeded.
    Ingest(IngestArgs),
    /// Write generated events (the ones `ingest` sends) as NDJSON, one message per line.
    Gen(GenArgs),
}

/// `bench ingest` flags.
#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Base URL of the service, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    pub url: String,
    /// Events token (or env STOWAGE_EVENTS_TOKEN).
    #[arg(long, env = "STOWAGE_EVENTS_TOKEN", hide_env_values = true)]
    pub token: String,
    /// single: POST /v1/event, one event per request; batch: POST /v1/batch {"batch":[…]};
    /// ndjson: POST /v1/batch as application/x-ndjson.
    #[arg(long, value_enum, default_value = "single")]
    pub mode: Mode,
    /// Which events: the shop's tracking plan, or another mix (benches/compare_batch.sh).
    #[arg(long, value_enum, default_value = "shop")]
    pub mix: Mix,
    /// Events per request in the batch and ndjson modes.
    #[arg(long, default_value_t = 500)]
    pub batch_size: usize,
    /// Send Content-Encoding: gzip (bodies are compressed per request on the client's CPU).
    #[arg(long)]
    pub gzip: bool,
    /// Concurrent keep-alive connections, one worker each.
    #[arg(short = 'c', long, default_value_t = 64)]
    pub connections: usize,
    /// How long to send, e.g. 10s, 1m (default 10s unless --count is given).
    #[arg(short = 'd', long, value_parser = parse_duration, conflicts_with = "count")]
    pub duration: Option<Duration>,
    /// How many requests to send.
    #[arg(short = 'n', long)]
    pub count: Option<u64>,
    /// Target total requests/s on a fixed schedule (open loop); late sends are counted and timed
    /// from their due time. Without it every connection sends as fast as it is answered.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Run the second half of --duration at F × --rate.
    #[arg(long, value_name = "F", requires = "rate")]
    pub burst: Option<f64>,
    /// header: X-Auth-Token; basic: HTTP Basic with the token as user name (Segment SDKs).
    #[arg(long, value_enum, default_value = "header")]
    pub auth: Auth,
    /// Longest wait for one response; a request without one counts as a transport error.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
    /// Runtime threads of the load generator (1 leaves the most CPU to a server on the same
    /// machine; raise it when the generator is the bottleneck, e.g. with --gzip).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// No progress line on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `bench gen` flags.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// How many events.
    #[arg(long)]
    pub events: u64,
    /// Output file (default: stdout).
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,
    /// Which events (as `bench ingest --mix`).
    #[arg(long, value_enum, default_value = "shop")]
    pub mix: Mix,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (write e.g. 10s, 500ms, 1m)"))
}

/// Runs a `bench` subcommand.
pub fn run(command: BenchCommand, json: bool) -> ExitCode {
    match command {
        BenchCommand::Ingest(args) => ingest(args, json),
        BenchCommand::Gen(args) => match generate(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => super::output::fail(json, "bench_failed", &e),
        },
    }
}

fn ingest(args: IngestArgs, json: bool) -> ExitCode {
    let fail = |msg: &str| super::output::fail(json, "bench_failed", msg);
    if args.threads == 0 {
        return fail("--threads must be at least 1");
    }
    let plan = Plan {
        url: args.url,
        token: args.token,
        mode: args.mode,
        mix: args.mix,
        batch_size: args.batch_size,
        gzip: args.gzip,
        connections: args.connections,
        stop: match (args.count, args.duration) {
            (Some(n), _) => Stop::Count(n),
            (None, d) => Stop::After(d.unwrap_or(Duration::from_secs(10))),
        },
        rate: args.rate,
        burst: args.burst,
        auth: args.auth,
        timeout: args.timeout,
        threads: args.threads,
        progress: !args.quiet,
    };
    let rt = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    let summary = match rt.block_on(bench::run(&plan)) {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    // Connection tasks may still be parked on their sockets; do not wait for them.
    rt.shutdown_background();
    if json {
        match serde_json::to_string(&summary) {
            Ok(line) => println!("{line}"),
            Err(e) => return fail(&e.to_string()),
        }
    } else {
        print!("{}", summary.human());
    }
    if summary.totals.ok == 0 {
        return fail("no request succeeded");
    }
    ExitCode::SUCCESS
}

fn generate(args: &GenArgs) -> Result<(), String> {
    let out: Box<dyn Write> = match &args.out {
        Some(p) => Box::new(
            std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let run_id = bench::run_id();
    let mut generator =
        Generator::new(&run_id, bench::seed(&run_id), chrono::Utc::now()).with_mix(args.mix);
    let write_err = |e: std::io::Error| format!("cannot write the output: {e}");
    for i in 0..args.events {
        let line = generator.template(Mode::Ndjson, 1).fill(i);
        out.write_all(&line).map_err(write_err)?;
    }
    out.flush().map_err(write_err)
}
