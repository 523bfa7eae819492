//! `X-Request-Id`: every response carries one — the request's own when it sent a sane one, else a
//! fresh UUIDv7 — and the request runs inside a `request{request_id, method, path}` span, so every
//! log line of the request (handlers' `warn!`/`error!` too) names it. Headers are never logged.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header::HeaderName;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// The header, lower-case as HTTP/1 sends it.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Longest client-supplied id kept; a longer one is replaced.
const MAX_LEN: usize = 200;

/// Middleware: takes or makes the id, runs the request in its span, sets it on the response.
pub async fn request_id(mut req: Request, next: Next) -> Response {
    let id = match req.headers().get(&X_REQUEST_ID).filter(|v| is_sane(v)) {
        Some(v) => v.clone(),
        None => {
            let id = generate();
            req.headers_mut().insert(X_REQUEST_ID, id.clone());
            id
        }
    };
    // ERROR level so the span is enabled under any log filter that lets a line through: with an
    // INFO span and `level = "warn"`, the warnings would lose their request id.
    let span = tracing::error_span!(
        "request",
        request_id = %id.to_str().unwrap_or_default(),
        method = %req.method(),
        path = %loggable_path(req.uri().path()),
    );
    let mut resp = next.run(req).instrument(span).await;
    resp.headers_mut().insert(X_REQUEST_ID, id);
    resp
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

fn generate() -> HeaderValue {
    let id = uuid::Uuid::now_v7();
    let mut buf = uuid::Uuid::encode_buffer();
    HeaderValue::from_str(id.hyphenated().encode_lower(&mut buf))
        .expect("a hyphenated UUID is a valid header value")
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use hyper::service::Service as _;

    use super::*;

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

    #[tokio::test]
    async fn log_lines_of_a_request_carry_its_id() {
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
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
    }
}
