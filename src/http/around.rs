//! What happens around every request, in one middleware (one state clone, one boxed future):
//! the client address behind a trusted proxy ([`forwarded`](super::forwarded)), the request id
//! and the span it runs in ([`request_id`](super::request_id)), the request counter by route
//! and status ([`metrics`](super::metrics)), and the headers every response carries
//! ([`health`](super::health)).

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use super::state::AppState;
use super::{forwarded, health, metrics, request_id};

/// The middleware.
pub async fn around(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    forwarded::replace_client(&state.trusted_proxies, &mut req);
    let route = metrics::route_of(req.uri().path());
    let id = request_id::take_or_make(&mut req);
    let span = request_id::span(&id, &req);
    let mut resp = next.run(req).instrument(span).await;
    metrics::count_request(route, resp.status());
    let headers = resp.headers_mut();
    headers.insert(request_id::X_REQUEST_ID, id);
    health::add_headers(&state, headers);
    resp
}
