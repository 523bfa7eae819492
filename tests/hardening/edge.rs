//! The lower-severity findings (SPEC §5.2): `Origin` compared with its scheme, `no-store` and
//! `nosniff`, `/metrics` off the public port, no node name unless asked, private files, a CSRF
//! token that is never stored, silent connections closed at the header timeout, and a cap on
//! connections per client address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::Demo;
use super::client::Who;

#[tokio::test(flavor = "multi_thread")]
async fn origins_headers_metrics_and_files() {
    let demo = Demo::start(&[]).await;
    let base = demo.api.base.clone();
    let host = base.strip_prefix("http://").unwrap();

    // The same host and port under another scheme is another origin.
    let https = Who {
        origin: Some(format!("https://{host}")),
        ..demo.owner.clone()
    };
    let r = demo
        .api
        .post(&https, "/api/v1/canvases", serde_json::json!({"name": "x"}))
        .await;
    r.expect(403, Some("csrf"), "https origin on an http server");
    let signin = demo
        .api
        .call(
            &Who {
                origin: Some(format!("https://{host}")),
                ..Who::anonymous()
            },
            "POST",
            "/api/v1/session",
            Some(r#"{"email":"a@b.example","password":"whatever long"}"#),
        )
        .await;
    signin.expect(403, Some("csrf"), "sign-in from another scheme");
    demo.api
        .post(
            &demo.owner,
            "/api/v1/canvases",
            serde_json::json!({"name": "x"}),
        )
        .await
        .ok(201, "same origin");

    // The CSRF token is never cached, nothing is sniffed, the node is not named by default.
    let me = demo.api.get(&demo.owner, "/api/v1/me").await;
    assert_eq!(me.status, 200);
    assert_eq!(me.headers["cache-control"], "no-store");
    for r in [&me, &demo.api.get(&Who::anonymous(), "/healthz").await] {
        assert_eq!(r.headers["x-content-type-options"], "nosniff");
        assert!(!r.headers.contains_key("x-stowage-node"));
    }

    // /metrics is on its own (loopback) listener, not the public port.
    let public = demo
        .api
        .http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
    let metrics = demo
        .api
        .http
        .get(demo.proc.metrics_url())
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    assert_eq!(metrics.headers()["x-content-type-options"], "nosniff");
    assert!(metrics.text().await.unwrap().contains("stowage_"));

    // Files holding secrets are the owner's alone.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = demo.data_dir();
    assert_eq!(mode(&dir.join("demo.json")), 0o600);
    assert_eq!(mode(&dir.join("catalog.sqlite")), 0o600);
    assert_eq!(mode(dir), 0o700);
    assert_eq!(mode(&dir.join("wal")), 0o700);

    // The session's CSRF token is nowhere in the catalog (only what cannot be replayed is).
    let csrf = demo.owner.csrf.clone().unwrap();
    for name in ["catalog.sqlite", "catalog.sqlite-wal"] {
        let bytes = std::fs::read(dir.join(name)).unwrap_or_default();
        assert!(
            !bytes.windows(csrf.len()).any(|w| w == csrf.as_bytes()),
            "{name} holds the CSRF token"
        );
    }
}

/// Reads until the server closes the connection (or `limit` passes); what it sent, and when.
async fn until_closed(mut s: TcpStream, limit: Duration) -> (String, Option<Instant>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (String::from_utf8_lossy(&got).into(), Some(Instant::now()));
            }
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&got).into(), None),
        }
    }
}

async fn connect_from(n: u8, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)), 0))
        .unwrap();
    socket.connect(to).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn silent_connections_close_early_and_one_address_cannot_take_every_slot() {
    let demo = Demo::start(&[
        ("STOWAGE_SERVER__HEADER_TIMEOUT", "1s"),
        ("STOWAGE_SERVER__IDLE_TIMEOUT", "60s"),
        ("STOWAGE_SERVER__MAX_CONNECTIONS_PER_ADDRESS", "4"),
    ])
    .await;
    let addr = demo.addr();

    // A connection that sends nothing is closed at the header timeout, not the idle one.
    let opened = Instant::now();
    let silent = connect_from(9, addr).await;
    let (_, closed) = until_closed(silent, Duration::from_secs(20)).await;
    let after = closed.expect("closed").duration_since(opened);
    assert!(
        after >= Duration::from_millis(900) && after < Duration::from_secs(10),
        "a silent connection closed after {after:?}"
    );

    // Four connections from one address are served; a fifth is refused at once with 429.
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut s = connect_from(10, addr).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        held.push(s);
    }
    let fifth = connect_from(10, addr).await;
    let (answer, closed) = until_closed(fifth, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer:?}");
    assert!(answer.contains("too_many_connections"), "{answer:?}");
    assert!(
        answer.contains("x-content-type-options: nosniff"),
        "{answer:?}"
    );
    assert!(closed.is_some(), "and closed");
    // Another address is still served.
    let mut other = connect_from(11, addr).await;
    other
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let (answer, _) = until_closed(other, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    // A slot given back is free again.
    drop(held.pop());
    let got_in = super::common::wait_for(Duration::from_secs(5), || async {
        let mut s = connect_from(10, addr).await;
        let _ = s
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await;
        until_closed(s, Duration::from_secs(2))
            .await
            .0
            .starts_with("HTTP/1.1 200")
    })
    .await;
    assert!(got_in, "the freed slot is usable");
}

/// The kernel's view of a socket: `TCP_ESTABLISHED` (1) while the peer has not closed it.
fn tcp_state(s: &TcpStream) -> u8 {
    use std::os::fd::AsRawFd;
    // SAFETY: `info` is a plain C struct the kernel fills; `len` says how much room it has.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        assert_eq!(rc, 0, "getsockopt(TCP_INFO)");
        info.tcpi_state
    }
}

/// A client that pipelines requests and reads none of the answers fills the server's socket;
/// hyper then stops reading, so no read deadline runs. The write that finds no room fails after
/// the idle timeout and the connection ends, where before it was held forever.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_reads_nothing_is_cut_off() {
    let demo = Demo::start(&[
        ("STOWAGE_SERVER__IDLE_TIMEOUT", "2s"),
        ("STOWAGE_SERVER__HEADER_TIMEOUT", "2s"),
    ])
    .await;
    let addr = demo.addr();
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let s = socket.connect(addr).await.unwrap();
    // Pipeline requests until the socket takes no more (the server stopped reading).
    let request = b"GET /login HTTP/1.1\r\nHost: x\r\n\r\n".repeat(100);
    let mut sent = 0usize;
    let mut stuck_since = None;
    let started = Instant::now();
    while stuck_since.is_none_or(|t: Instant| t.elapsed() < Duration::from_millis(500)) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the socket never filled: {sent} bytes taken in 30 s"
        );
        match s.try_write(&request) {
            Ok(n) => {
                sent += n;
                stuck_since = None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                stuck_since.get_or_insert_with(Instant::now);
                tokio::time::timeout(Duration::from_millis(50), s.writable())
                    .await
                    .ok();
            }
            Err(e) => panic!("the server closed before it stalled: {e} after {sent} bytes"),
        }
    }
    assert!(sent > 100_000, "pipelined {sent} bytes");
    let closed =
        super::common::wait_for(Duration::from_secs(20), || async { tcp_state(&s) != 1 }).await;
    assert!(
        closed,
        "a connection whose client reads nothing is never closed"
    );
    // The server still serves everyone else.
    let health = demo
        .api
        .http
        .get(format!("{}/healthz", demo.api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}
