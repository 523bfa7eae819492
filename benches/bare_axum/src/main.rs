//! The baseline of SPEC §6: a bare axum handler that reads the body, parses it with serde_json
//! and answers 200 `{"success":true}` (400 when it is not a JSON object), on a normal
//! multi-thread tokio runtime. `/v1/event` and `/v1/batch` (a `{"batch":[…]}` object, or NDJSON
//! parsed line by line) do the same work stowage's parse does, and nothing else: no auth, no
//! validation, no WAL. `benches/compare_ingest.sh` builds and runs it.
//!
//! With `--wal DIR` it is the floor of a durable ack instead: each accepted body is also
//! appended to a log file, and answered only after an `fdatasync` covers it — a group commit by
//! one writer thread, as stowage's WAL does, on a file pre-zeroed at start so that a sync writes
//! data, not the file's size (stowage's spare segments). Nothing else: no ids, no dedup, no
//! rows. What it reaches against the plain handler bounds what any design with fsync'd acks can
//! reach on the machine (BENCHMARKS.md, twenty-first session). Two other shapes of the same log,
//! measured there and not better: `--wal2 DIR` (two writer threads and files, a second group
//! syncing while the first one's sync runs) and `--wal-lead DIR` (no writer thread: the request
//! that finds no write under way writes and syncs the queue itself, PostgreSQL's `XLogFlush`).
//!
//! With `--per-core N`, the same handlers run on N single-threaded runtimes, one thread each,
//! the accepted connections handed to them round robin: the thread-per-core shape, where a
//! connection and its requests never move between threads (BENCHMARKS.md, thirty-third
//! session: the floor's idle cores fall from ~20 % to ~5 %; at 6 µs of spin an event it reached
//! 0.78–0.81 of bare in 5 rounds of 6, against 0.69–0.76).
//!
//! With `--store DIR` as well (built with `--features store`), it is the stored floor: NDJSON
//! batches are also decoded into Arrow columns and written to `DIR` as Parquet ([`store`]).
//!
//! ```sh
//! cargo build --release --manifest-path benches/bare_axum/Cargo.toml
//! benches/bare_axum/target/release/bare_axum --listen 127.0.0.1:0   # prints "listening on ADDR"
//! benches/bare_axum/target/release/bare_axum --listen 127.0.0.1:0 --wal /tmp/bare-wal
//! benches/bare_axum/target/release/bare_axum --listen 127.0.0.1:0 --wal /tmp/bare-wal --per-core 2
//! cargo build --release --features store --target-dir benches/bare_axum/target/store \
//!     --manifest-path benches/bare_axum/Cargo.toml
//! benches/bare_axum/target/store/release/bare_axum --listen 127.0.0.1:0 --wal /tmp/w --store /tmp/s
//! ```

#[cfg(feature = "store")]
mod store;
mod wal;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

use wal::{Mode, Wal};

fn answer(ok: bool) -> Response {
    let json = [(header::CONTENT_TYPE, "application/json")];
    if ok {
        (StatusCode::OK, json, r#"{"success":true}"#).into_response()
    } else {
        let body = r#"{"error":{"code":"invalid_json","message":"not a JSON object"}}"#;
        (StatusCode::BAD_REQUEST, json, body).into_response()
    }
}

/// The log, when the server runs with `--wal`.
static WAL: std::sync::OnceLock<Wal> = std::sync::OnceLock::new();

/// `answer(ok)`, once `body` is fsync'd when the server keeps a log.
async fn durable(ok: bool, body: Bytes) -> Response {
    if let (true, Some(wal)) = (ok, WAL.get())
        && wal.append(body).await.is_err()
    {
        return (StatusCode::SERVICE_UNAVAILABLE, "log write failed").into_response();
    }
    answer(ok)
}

/// `--spin-us N`: CPU an event spends beyond the parse, spinning on its request's thread, to
/// model a server's own work of N µs an event (what a ratio to bare allows a server to spend).
static SPIN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

async fn event(body: Bytes) -> Response {
    let ok = serde_json::from_slice::<Value>(&body).is_ok_and(|v| v.is_object());
    let spin = SPIN.load(std::sync::atomic::Ordering::Relaxed);
    if spin > 0 {
        let until = std::time::Instant::now() + std::time::Duration::from_nanos(spin);
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }
    durable(ok, body).await
}

/// The table `--store` keeps.
#[cfg(feature = "store")]
static STORE: std::sync::OnceLock<std::sync::Arc<store::Store>> = std::sync::OnceLock::new();

/// `--store`: an NDJSON batch decoded, logged, answered, and its rows queued for the file.
#[cfg(feature = "store")]
async fn stored(store: &store::Store, ndjson: bool, body: Bytes) -> Response {
    let rows = if ndjson {
        store.decode(&body)
    } else {
        Err("--store takes NDJSON batches".into())
    };
    match rows {
        Ok(rows) => {
            let answer = durable(true, body).await;
            if answer.status().is_success() {
                store.keep(rows).await;
            }
            answer
        }
        Err(e) => {
            eprintln!("bare_axum: a batch not stored: {e}");
            answer(false)
        }
    }
}

async fn batch(headers: HeaderMap, body: Bytes) -> Response {
    let ndjson = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-ndjson"));
    #[cfg(feature = "store")]
    if let Some(store) = STORE.get() {
        return stored(store, ndjson, body).await;
    }
    let ok = if ndjson {
        body.split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .all(|line| serde_json::from_slice::<Value>(line).is_ok_and(|v| v.is_object()))
    } else {
        serde_json::from_slice::<Value>(&body).is_ok_and(|v| v["batch"].is_array())
    };
    durable(ok, body).await
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut listen = "127.0.0.1:8090".to_string();
    // `--per-core N`: N single-threaded runtimes instead of one work-stealing runtime.
    let mut per_core = 0usize;
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--listen", Some(addr)) => listen = addr,
            ("--per-core", Some(n)) => match n.parse::<usize>() {
                Ok(n) if n > 0 => per_core = n,
                _ => {
                    eprintln!("bare_axum: --per-core takes a number of threads");
                    std::process::exit(2);
                }
            },
            ("--spin-us", Some(us)) => match us.parse::<f64>() {
                Ok(us) if us >= 0.0 => {
                    SPIN.store((us * 1000.0) as u64, std::sync::atomic::Ordering::Relaxed)
                }
                _ => {
                    eprintln!("bare_axum: --spin-us takes a number of microseconds");
                    std::process::exit(2);
                }
            },
            ("--wal" | "--wal2" | "--wal-lead", Some(dir)) => match Wal::open(
                std::path::Path::new(&dir),
                match a.as_str() {
                    "--wal" => Mode::Threads(1),
                    "--wal2" => Mode::Threads(2),
                    _ => Mode::Leader,
                },
            ) {
                Ok(wal) => {
                    let _ = WAL.set(wal);
                }
                Err(e) => {
                    eprintln!("bare_axum: cannot open a log in {dir}: {e}");
                    std::process::exit(1);
                }
            },
            #[cfg(feature = "store")]
            ("--store", Some(dir)) => match store::Store::open(std::path::Path::new(&dir)) {
                Ok(store) => {
                    let _ = STORE.set(store);
                }
                Err(e) => {
                    eprintln!("bare_axum: cannot store in {dir}: {e}");
                    std::process::exit(1);
                }
            },
            _ => {
                eprintln!(
                    "usage: bare_axum [--listen ADDR] [--wal DIR | --wal2 DIR | --wal-lead DIR] \
                     [--spin-us MICROSECONDS] [--per-core THREADS] [--store DIR (feature store)]"
                );
                std::process::exit(2);
            }
        }
    }
    if per_core > 0 {
        serve_per_core(&listen, per_core);
        return;
    }
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bare_axum: cannot listen on {listen}: {e}");
            std::process::exit(1);
        }
    };
    let app = router();
    match listener.local_addr() {
        Ok(addr) => println!("listening on {addr}"),
        Err(e) => eprintln!("bare_axum: {e}"),
    }
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("bare_axum: {e}");
        std::process::exit(1);
    }
}

fn router() -> Router {
    Router::new()
        .route("/v1/event", post(event))
        .route("/v1/batch", post(batch))
        .layer(DefaultBodyLimit::max(4 << 20))
}

/// Connections handed to one thread's runtime, and the address they were accepted on.
struct Handed {
    connections: tokio::sync::mpsc::UnboundedReceiver<(std::net::TcpStream, std::net::SocketAddr)>,
    local: std::net::SocketAddr,
}

impl axum::serve::Listener for Handed {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Some((stream, peer)) = self.connections.recv().await else {
                return std::future::pending().await;
            };
            if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
                return (stream, peer);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// `--per-core`: this thread accepts on `listen` and hands the connections round robin to
/// `threads` threads, each a single-threaded runtime serving the router. Never returns; it
/// blocks the `main` runtime's thread, whose workers then have nothing to do.
fn serve_per_core(listen: &str, threads: usize) {
    let listener = std::net::TcpListener::bind(listen).unwrap_or_else(|e| {
        eprintln!("bare_axum: cannot listen on {listen}: {e}");
        std::process::exit(1);
    });
    let addr = listener
        .local_addr()
        .expect("a bound socket has an address");
    println!("listening on {addr}");
    let senders: Vec<_> = (0..threads)
        .map(|_| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                let handed = Handed {
                    connections: rx,
                    local: addr,
                };
                rt.block_on(async move {
                    let _ = axum::serve(handed, router()).await;
                });
            });
            tx
        })
        .collect();
    let mut next = 0;
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        let _ = stream.set_nonblocking(true);
        let peer = stream.peer_addr().unwrap_or(addr);
        let _ = senders[next % threads].send((stream, peer));
        next += 1;
    }
}
