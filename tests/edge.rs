//! The public edge over real sockets (SPEC §2.2.2): half-sent requests are cut off by the header
//! and body timeouts while normal requests keep being served, idle keep-alive connections close,
//! connections beyond `server.max_connections` wait until one closes, and every response carries
//! an `X-Request-Id`.

use crate::common;

use std::time::{Duration, Instant};

use common::TestServer;
use futures::StreamExt;
use serde_json::json;
use stowage::config::{Config, HumanDuration};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HEADER: Duration = Duration::from_secs(1);
const BODY: Duration = Duration::from_secs(1);
const IDLE: Duration = Duration::from_secs(2);
/// How late after its timeout the server may close a connection before the test fails.
const MARGIN: Duration = Duration::from_secs(5);

fn short_timeouts(c: &mut Config) {
    c.server.header_timeout = HumanDuration(HEADER);
    c.server.body_timeout = HumanDuration(BODY);
    c.server.idle_timeout = HumanDuration(IDLE);
}

/// Raises this process's soft open-file limit to `want` (within the hard limit): each test
/// connection costs two descriptors here, the client's and the server's.
fn raise_fd_limit(want: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        if lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
    }
    assert!(
        lim.rlim_cur >= want,
        "this test needs `ulimit -n` of at least {want} (hard limit {})",
        lim.rlim_max
    );
}

/// Reads until the server closes the connection (EOF or reset) or `deadline` passes. Returns
/// what was received and when the connection closed, or an error if it is still open.
async fn wait_closed(mut s: TcpStream, deadline: Instant) -> Result<(String, Instant), String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline.into(), s.read(&mut buf)).await {
            Err(_) => {
                let got = String::from_utf8_lossy(&got);
                return Err(format!("still open at the deadline; received {got:?}"));
            }
            Ok(Ok(0)) | Ok(Err(_)) => {
                return Ok((String::from_utf8_lossy(&got).into_owned(), Instant::now()));
            }
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one response (head and `Content-Length` body) from a keep-alive connection.
async fn read_response(s: &mut TcpStream, within: Duration) -> Result<String, String> {
    let deadline = tokio::time::Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                return Ok(text);
            }
        }
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return Err(format!("no complete response in {within:?}; got {text:?}")),
            Ok(Ok(0)) => return Err(format!("closed mid-response; got {text:?}")),
            Ok(Err(e)) => return Err(format!("read failed: {e}")),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Connects and sends `bytes`; returns the stream and the instant just before sending.
/// Connects and sends `bytes`; returns the stream and the instant just before connecting (a
/// new connection's header timeout runs from its accept, so every deadline is measured from
/// a moment no later than that).
async fn open(addr: std::net::SocketAddr, bytes: Vec<u8>) -> (TcpStream, Instant) {
    let sent = Instant::now();
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&bytes).await.unwrap();
    (s, sent)
}

const GET_HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_are_cut_off_while_others_are_served() {
    raise_fd_limit(4096);
    // Every connection comes from 127.0.0.1: lift the per-address cap so the timeouts are what
    // this test sees (the cap has its own test in tests/hardening).
    let t = TestServer::start(|c| {
        short_timeouts(c);
        c.server.max_connections_per_address = 10_000;
    })
    .await;
    let addr = t.srv().addr;
    let started = Instant::now();

    // 1,200 request heads that never end, 200 bodies that stop after 10 of 100 bytes.
    let partial_head = b"POST /v1/event HTTP/1.1\r\nHost: x\r\n".to_vec();
    let partial_body = format!(
        "POST /v1/event HTTP/1.1\r\nHost: x\r\nX-Auth-Token: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"event\":",
        t.seeded.token
    )
    .into_bytes();
    let mut opened = Vec::new();
    for batch in 0..14 {
        let requests = (batch * 100..(batch + 1) * 100).map(|i| {
            let bytes = if i < 1200 {
                partial_head.clone()
            } else {
                partial_body.clone()
            };
            open(addr, bytes)
        });
        let streams: Vec<_> = futures::stream::iter(requests).buffered(64).collect().await;
        opened.extend(streams);
        // A fresh connection is accepted after the batch (the backlog is FIFO), so its answer
        // shows the server took them all in. Pacing the client this way keeps the listen backlog
        // (128 with tokio's `bind`) from overflowing while the server is busy, which would make
        // the kernel drop SYNs and the client retry a second later.
        let (mut s, _) = open(addr, GET_HEALTHZ.to_vec()).await;
        let resp = read_response(&mut s, MARGIN).await.unwrap();
        assert!(resp.starts_with("HTTP/1.1 200 "), "{resp}");
    }
    let opened_in = started.elapsed();
    let waits = opened.into_iter().map(|(s, sent)| async move {
        (sent, wait_closed(s, sent + HEADER.max(BODY) + MARGIN).await)
    });
    let closes = tokio::spawn(futures::future::join_all(waits));

    // Meanwhile, normal requests are served promptly (well within the header timeout, so they
    // are not waiting for the half-sent ones to be cut off).
    for i in 0..5 {
        let sent = Instant::now();
        let resp = tokio::time::timeout(HEADER, t.http.get(t.url("/healthz")).send())
            .await
            .expect("healthz answered within the header timeout")
            .unwrap();
        assert_eq!(resp.status(), 200);
        tokio::time::timeout(
            HEADER,
            t.send(json!({"event": "edge", "properties": {"i": i}})),
        )
        .await
        .expect("event accepted within the header timeout");
        assert!(sent.elapsed() < HEADER);
    }

    let results = closes.await.unwrap();
    let mut heads_closed = 0;
    let mut bodies_answered = 0;
    for (i, (sent, result)) in results.into_iter().enumerate() {
        let (received, closed_at) = result.unwrap_or_else(|e| panic!("connection {i}: {e}"));
        let after = closed_at.duration_since(sent);
        if i < 1200 {
            assert!(after >= HEADER, "head {i} cut off early, after {after:?}");
            assert_eq!(received, "", "head {i}: nothing is sent back");
            heads_closed += 1;
        } else {
            assert!(after >= BODY, "body {i} cut off early, after {after:?}");
            assert!(
                received.starts_with("HTTP/1.1 408 "),
                "body {i}: {received}"
            );
            assert!(received.contains(r#""code":"body_timeout""#), "{received}");
            let lower = received.to_ascii_lowercase();
            assert!(lower.contains("\r\nx-request-id: "), "{received}");
            assert!(lower.contains("\r\nconnection: close\r\n"), "{received}");
            bodies_answered += 1;
        }
    }
    assert_eq!((heads_closed, bodies_answered), (1200, 200));
    eprintln!(
        "opened 1,400 half-sent requests in {opened_in:?}; all closed {:?} after the start",
        started.elapsed()
    );
    // Still serving afterwards.
    let resp = t.http.get(t.url("/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn idle_connections_are_closed() {
    let t = TestServer::start(short_timeouts).await;
    let addr = t.srv().addr;

    // After a response, a keep-alive connection waits for the idle timeout — longer than the
    // header timeout, which only runs once a new request has begun.
    let after_a_request = async {
        let (mut s, sent) = open(addr, GET_HEALTHZ.to_vec()).await;
        let resp = read_response(&mut s, MARGIN).await.unwrap();
        assert!(resp.starts_with("HTTP/1.1 200 "), "{resp}");
        let (rest, closed_at) = wait_closed(s, sent + IDLE + MARGIN).await.unwrap();
        assert_eq!(rest, "");
        closed_at.duration_since(sent)
    };
    // A new connection that never sends anything gets the header timeout, not the idle one
    // (SPEC §5.2): its first request is due at once.
    let silent = async {
        let connected = Instant::now();
        let s = TcpStream::connect(addr).await.unwrap();
        let (rest, closed_at) = wait_closed(s, connected + HEADER + MARGIN).await.unwrap();
        assert_eq!(rest, "");
        closed_at.duration_since(connected)
    };
    let (after_a_request, silent) = tokio::join!(after_a_request, silent);
    assert!(
        after_a_request >= IDLE,
        "closed after {after_a_request:?}, before the idle timeout"
    );
    assert!(
        silent >= HEADER && silent < IDLE,
        "a silent new connection closed after {silent:?}"
    );
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_for_a_free_slot() {
    let t = TestServer::start(|c| c.server.max_connections = 50).await;
    let addr = t.srv().addr;

    // 50 keep-alive connections, each served once (so each holds a slot) and then idle.
    let mut held = Vec::new();
    for _ in 0..50 {
        let (mut s, _) = open(addr, GET_HEALTHZ.to_vec()).await;
        let resp = read_response(&mut s, MARGIN).await.unwrap();
        assert!(resp.starts_with("HTTP/1.1 200 "), "{resp}");
        held.push(s);
    }

    // The 51st connects (the kernel's backlog takes it) but is not served ...
    let (mut waiting, _) = open(addr, GET_HEALTHZ.to_vec()).await;
    let early = read_response(&mut waiting, Duration::from_millis(500)).await;
    assert!(early.is_err(), "served beyond the cap: {early:?}");

    // ... until one of the 50 closes; then it is.
    drop(held.pop());
    let resp = read_response(&mut waiting, MARGIN).await.unwrap();
    assert!(resp.starts_with("HTTP/1.1 200 "), "{resp}");
}

#[tokio::test]
async fn every_response_has_a_request_id() {
    let t = TestServer::start(|_| {}).await;
    let id_of = |resp: &reqwest::Response| {
        resp.headers()
            .get("x-request-id")
            .map(|v| v.to_str().unwrap().to_string())
    };

    let sent = "client-chosen.id_42";
    let resp = t
        .http
        .get(t.url("/healthz"))
        .header("X-Request-Id", sent)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(id_of(&resp).as_deref(), Some(sent), "echoed");

    let a = t.http.get(t.url("/healthz")).send().await.unwrap();
    let b = t.http.get(t.url("/healthz")).send().await.unwrap();
    let (a, b) = (id_of(&a).unwrap(), id_of(&b).unwrap());
    assert!(!a.is_empty() && !b.is_empty());
    assert_ne!(a, b, "generated ids are unique");

    for bad in ["has space", &"x".repeat(201)] {
        let resp = t
            .http
            .get(t.url("/healthz"))
            .header("X-Request-Id", bad)
            .send()
            .await
            .unwrap();
        let id = id_of(&resp).unwrap();
        assert!(!id.is_empty() && id != bad, "an insane id is replaced");
    }

    let resp = t.http.get(t.url("/no/such/path")).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    assert!(id_of(&resp).is_some_and(|id| !id.is_empty()));

    let resp = t
        .http
        .post(t.url("/v1/event"))
        .header("Content-Type", "application/json")
        .header("X-Request-Id", "for-the-401")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(id_of(&resp).as_deref(), Some("for-the-401"));
}

/// The value of `stowage_http_requests_total` for a route and status (0 before the first).
async fn requests_counted(t: &TestServer, route: &str, status: u16) -> f64 {
    let text = common::get_text(&t.http, &t.srv().metrics_url()).await;
    let (route, status) = (format!("route=\"{route}\""), format!("status=\"{status}\""));
    text.lines()
        .filter(|l| l.starts_with("stowage_http_requests_total{"))
        .find(|l| l.contains(&route) && l.contains(&status))
        .map_or(0.0, |l| l.rsplit(' ').next().unwrap().parse().unwrap())
}

/// The ingest routes' `POST`s are answered in front of the router (`http::lane`), and answered
/// as the router would: the client's request id or a fresh one, the headers every response
/// carries (the node's name when asked), the JSON errors in each endpoint's shape, the request
/// counter; other methods on those paths and unknown calls still get the router's 405 and 404.
#[tokio::test]
async fn the_ingest_lane_answers_as_the_router_would() {
    let t = TestServer::start(|c| {
        c.server.node_header = true;
        c.node.id = "lane-node".into();
    })
    .await;
    let token = t.seeded.token.clone();
    let send = |method: reqwest::Method, path: &str, body: String, id: Option<&str>| {
        let mut req = t
            .http
            .request(method, t.url(path))
            .header("X-Auth-Token", &token)
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(id) = id {
            req = req.header("X-Request-Id", id);
        }
        req.send()
    };
    let check = |resp: &reqwest::Response, status: u16, id: Option<&str>| {
        assert_eq!(resp.status(), status, "{resp:?}");
        let headers = resp.headers();
        let got = headers["x-request-id"].to_str().unwrap();
        match id {
            Some(id) => assert_eq!(got, id),
            None => {
                let fresh = uuid::Uuid::parse_str(got).unwrap();
                assert_eq!(fresh.get_version_num(), 7, "{got}");
            }
        }
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["x-stowage-node"], "lane-node");
    };
    let event = json!({"event": "lane", "properties": {"n": 1}}).to_string();
    let unsupported = requests_counted(&t, "/v1/event", 415).await;

    let resp = send(
        reqwest::Method::POST,
        "/v1/event",
        event.clone(),
        Some("lane-1"),
    )
    .await
    .unwrap();
    check(&resp, 200, Some("lane-1"));
    assert_eq!(common::status_json(resp).await.1["success"], true);
    let resp = send(reqwest::Method::POST, "/v1/event", event.clone(), None)
        .await
        .unwrap();
    check(&resp, 200, None);

    let resp = send(
        reqwest::Method::POST,
        "/v1/event",
        "{nope".into(),
        Some("lane-2"),
    )
    .await
    .unwrap();
    check(&resp, 400, Some("lane-2"));
    let (_, body) = common::status_json(resp).await;
    assert_eq!(body["error"]["code"], "invalid_json", "{body}");
    for _ in 0..2 {
        let resp = t
            .http
            .post(t.url("/v1/event"))
            .header("X-Auth-Token", &token)
            .header("Content-Type", "text/plain")
            .body(event.clone())
            .send()
            .await
            .unwrap();
        check(&resp, 415, None);
    }
    // Other tests of this process count too, never down.
    assert!(requests_counted(&t, "/v1/event", 415).await >= unsupported + 2.0);

    // The Segment endpoints: a call, a batch, and a refusal in their shape.
    let track = json!({"type": "track", "event": "lane", "userId": "u1"});
    let resp = send(
        reqwest::Method::POST,
        "/v1/track",
        track.to_string(),
        Some("lane-3"),
    )
    .await
    .unwrap();
    check(&resp, 200, Some("lane-3"));
    let batch = json!({"batch": [track, track]}).to_string();
    let resp = send(reqwest::Method::POST, "/v1/batch", batch, None)
        .await
        .unwrap();
    check(&resp, 200, None);
    assert_eq!(
        common::status_json(resp).await.1["ids"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let resp = t
        .http
        .post(t.url("/v1/identify"))
        .header("X-Auth-Token", "not-a-token")
        .body(json!({"userId": "u1"}).to_string())
        .send()
        .await
        .unwrap();
    check(&resp, 401, None);
    let (_, body) = common::status_json(resp).await;
    assert_eq!(body["code"], "invalid_token", "{body}");
    assert_eq!(body["error"]["code"], "invalid_token", "{body}");

    // Not the lane's: the router answers, with the same headers.
    let resp = send(
        reqwest::Method::GET,
        "/v1/event",
        String::new(),
        Some("lane-4"),
    )
    .await
    .unwrap();
    check(&resp, 405, Some("lane-4"));
    let resp = send(reqwest::Method::PUT, "/v1/batch", String::new(), None)
        .await
        .unwrap();
    check(&resp, 405, None);
    let resp = send(reqwest::Method::POST, "/v1/nosuch", event, Some("lane-5"))
        .await
        .unwrap();
    check(&resp, 404, Some("lane-5"));

    t.flush().await;
    let element = t.element("lane", None);
    assert_eq!(
        t.rows(&element).await.len(),
        5,
        "two events and three track calls, each stored once"
    );
}
