//! `X-Request-Id`: every response carries one — the request's own when it sent a sane one, else a
//! fresh UUIDv7 — and every log line of the request (handlers' `warn!`/`error!` too) is written
//! inside a `request{request_id, method, path}` span, so it names the request. Behind the
//! router's middleware the request runs inside that span; on the ingest fast lane
//! ([`lane`](super::lane)) the span is opened for each line logged ([`Scope`]). Headers are
//! never logged.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header::HeaderName;

/// The header, lower-case as HTTP/1 sends it.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Longest client-supplied id kept; a longer one is replaced.
const MAX_LEN: usize = 200;

/// The request's own id when it sent a sane one, else a fresh one (set on the request too).
pub fn take_or_make(req: &mut Request) -> HeaderValue {
    match req.headers().get(&X_REQUEST_ID).filter(|v| is_sane(v)) {
        Some(v) => v.clone(),
        None => {
            let id = generate();
            req.headers_mut().insert(X_REQUEST_ID, id.clone());
            id
        }
    }
}

/// The id of a request the fast lane answers: its own when sane, else a fresh one.
pub fn of(headers: &axum::http::HeaderMap) -> HeaderValue {
    match headers.get(&X_REQUEST_ID).filter(|v| is_sane(v)) {
        Some(v) => v.clone(),
        None => generate(),
    }
}

/// Where a handler's log lines go: the request's span, entered already by the middleware, or —
/// on the fast lane ([`lane`](super::lane)), which opens no span for a request that logs nothing
/// — opened for the line.
pub enum Scope {
    /// The middleware's span is entered.
    Entered,
    /// No span yet: one is opened for each line logged.
    Lane {
        /// The request's id.
        id: HeaderValue,
        /// Its path, as logged.
        path: &'static str,
    },
}

impl Scope {
    /// Runs `log` (something that logs) inside the request's span.
    pub fn log<T>(&self, log: impl FnOnce() -> T) -> T {
        match self {
            Scope::Entered => log(),
            Scope::Lane { id, path } => tracing::error_span!(
                "request",
                request_id = %id.to_str().unwrap_or_default(),
                method = %"POST",
                path = %path,
            )
            .in_scope(log),
        }
    }
}

/// The span a request runs in.
pub fn span(id: &HeaderValue, req: &Request) -> tracing::Span {
    // ERROR level so the span is enabled under any log filter that lets a line through: with an
    // INFO span and `level = "warn"`, the warnings would lose their request id.
    tracing::error_span!(
        "request",
        request_id = %id.to_str().unwrap_or_default(),
        method = %req.method(),
        path = %loggable_path(req.uri().path()),
    )
}

/// The path as logged: the secret of a one-time link (`/invite/<secret>`) is cut out.
pub fn loggable_path(path: &str) -> std::borrow::Cow<'_, str> {
    match path.find("/invite/") {
        Some(i) => format!("{}/invite/…", &path[..i]).into(),
        None => path.into(),
    }
}

/// 1 to 200 visible ASCII characters (no spaces or control characters).
fn is_sane(v: &HeaderValue) -> bool {
    let b = v.as_bytes();
    !b.is_empty() && b.len() <= MAX_LEN && b.iter().all(|c| (0x21..=0x7e).contains(c))
}

/// A UUIDv7: the millisecond clock, then 74 bits from a per-thread generator seeded from the
/// kernel once (an id must be unique, not secret; a kernel draw per request cost ~2 % of the
/// request path).
fn generate() -> HeaderValue {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let mut seed = [0u8; 8];
            let _ = getrandom::fill(&mut seed);
            u64::from_le_bytes(seed) | 1
        });
    }
    // wyrand: one multiply per 64 bits.
    let next = || {
        STATE.with(|s| {
            let x = s.get().wrapping_add(0xa076_1d64_78bd_642f);
            s.set(x);
            let t = u128::from(x) * u128::from(x ^ 0xe703_7ed1_a0b4_28db);
            (t >> 64) as u64 ^ t as u64
        })
    };
    let mut random = [0u8; 10];
    random[..8].copy_from_slice(&next().to_le_bytes());
    random[8..].copy_from_slice(&next().to_le_bytes()[..2]);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let id = uuid::Builder::from_unix_timestamp_millis(ms, &random).into_uuid();
    let mut buf = uuid::Uuid::encode_buffer();
    HeaderValue::from_str(id.hyphenated().encode_lower(&mut buf))
        .expect("a hyphenated UUID is a valid header value")
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Body;
    use axum::middleware::Next;
    use axum::response::Response;
    use axum::routing::get;
    use hyper::service::Service as _;
    use tracing::Instrument;

    use super::*;

    /// The id and span as the real middleware (`http::around`) sets them.
    async fn request_id(mut req: Request, next: Next) -> Response {
        let id = take_or_make(&mut req);
        let span = span(&id, &req);
        let mut resp = next.run(req).instrument(span).await;
        resp.headers_mut().insert(X_REQUEST_ID, id);
        resp
    }

    /// Log output captured in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// WARN and above of this thread captured in memory, until the guard is dropped.
    fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    #[tokio::test]
    async fn log_lines_of_a_request_carry_its_id() {
        let (logs, _default) = capture();
        let router = Router::new()
            .route("/x", get(|| async { tracing::warn!("inside the handler") }))
            .layer(axum::middleware::from_fn(request_id));
        let service = hyper_util::service::TowerToHyperService::new(router);
        let req = Request::get("/x?secret=no")
            .header("x-request-id", "abc-1")
            .header("x-auth-token", "tok-secret")
            .body(Body::empty())
            .unwrap();
        let resp = service.call(req).await.unwrap();
        assert_eq!(resp.headers()[X_REQUEST_ID], "abc-1");
        let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        assert!(logs.contains("inside the handler"), "{logs}");
        assert!(
            logs.contains("request{request_id=abc-1 method=GET path=/x}"),
            "{logs}"
        );
        assert!(!logs.contains("secret"), "{logs}");
    }

    /// A line logged through a lane's scope is in the request's span; one logged beside it is
    /// not in any.
    #[test]
    fn a_lane_scope_opens_the_span_for_its_line() {
        let (logs, _default) = capture();
        let scope = Scope::Lane {
            id: HeaderValue::from_static("lane-7"),
            path: "/v1/event",
        };
        let answer = scope.log(|| {
            tracing::warn!("through the scope");
            42
        });
        assert_eq!(answer, 42);
        tracing::warn!("beside it");
        Scope::Entered.log(|| tracing::warn!("entered already"));
        let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        let line = |text: &str| logs.lines().find(|l| l.contains(text)).unwrap().to_string();
        assert!(
            line("through the scope")
                .contains("request{request_id=lane-7 method=POST path=/v1/event}"),
            "{logs}"
        );
        assert!(!line("beside it").contains("request{"), "{logs}");
        assert!(!line("entered already").contains("request{"), "{logs}");
    }

    #[test]
    fn sanity() {
        assert!(is_sane(&HeaderValue::from_static("abc-123_XYZ.~")));
        assert!(is_sane(&HeaderValue::from_str(&"a".repeat(200)).unwrap()));
        assert!(!is_sane(&HeaderValue::from_str(&"a".repeat(201)).unwrap()));
        assert!(!is_sane(&HeaderValue::from_static("")));
        assert!(!is_sane(&HeaderValue::from_static("has space")));
        assert!(!is_sane(&HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap()));
        assert!(!is_sane(&HeaderValue::from_bytes(b"tab\there").unwrap()));
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        assert!(is_sane(&a), "{a:?}");
        let parsed = uuid::Uuid::parse_str(a.to_str().unwrap()).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        let ids: std::collections::HashSet<_> = (0..10_000).map(|_| generate()).collect();
        assert_eq!(ids.len(), 10_000);
    }
}
