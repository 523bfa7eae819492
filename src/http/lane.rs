//! The ingest fast lane: `POST /v1/event`, `POST /v1/batch` and the six Segment calls answered
//! from the connection, without the router and its middleware. A response from the lane is what
//! the router would have sent: the same handler ([`events::respond`], [`segment::respond`]), and
//! what [`around`](super::around) adds — the request id, the request counter by route and
//! status, the headers every response carries. What the lane leaves out is the per-request
//! machinery: the route lookup, the middleware's boxed futures and state clone, and the
//! `request` span, which the fmt subscriber fills (its fields formatted, a registry entry) for
//! every request although the event path logs only when something fails. Those were ~10 % of a
//! single event's CPU (BENCHMARKS.md, thirteenth session). The event path's log lines still
//! name the request: they are written inside the span, opened for the line
//! ([`Scope::Lane`]). Every other request, and any other method on these paths, goes to the
//! router.

use std::future::Future;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request};
use axum::response::{IntoResponse, Response};
use futures::future::Either;

use super::edge::Responder;
use super::request_id::{self, Scope, X_REQUEST_ID};
use super::state::AppState;
use super::{events, health, metrics, segment};
use crate::ingest::segment::Call;

/// The router, with the ingest routes' `POST`s answered in front of it.
#[derive(Clone)]
pub struct Front {
    router: Router,
    state: AppState,
}

impl Front {
    /// `router` behind the lane, which answers with `state`.
    pub fn new(router: Router, state: AppState) -> Front {
        Front { router, state }
    }
}

/// Which ingest endpoint a request is for.
#[derive(Clone, Copy)]
enum Endpoint {
    Event,
    Segment(Option<Call>),
}

/// The paths the lane answers, with their endpoint (the static path is the logged one).
const PATHS: [(&str, Endpoint); 8] = [
    ("/v1/event", Endpoint::Event),
    ("/v1/batch", Endpoint::Segment(None)),
    ("/v1/track", Endpoint::Segment(Some(Call::Track))),
    ("/v1/identify", Endpoint::Segment(Some(Call::Identify))),
    ("/v1/page", Endpoint::Segment(Some(Call::Page))),
    ("/v1/screen", Endpoint::Segment(Some(Call::Screen))),
    ("/v1/group", Endpoint::Segment(Some(Call::Group))),
    ("/v1/alias", Endpoint::Segment(Some(Call::Alias))),
];

impl Responder for Front {
    fn respond(
        &self,
        req: Request<Body>,
    ) -> impl Future<Output = Response> + Send + 'static + use<> {
        let lane = (req.method() == Method::POST)
            .then(|| PATHS.iter().find(|(path, _)| *path == req.uri().path()))
            .flatten()
            .copied();
        match lane {
            Some((path, endpoint)) => {
                let state = self.state.clone();
                Either::Left(async move { answer(&state, req, path, endpoint).await })
            }
            None => Either::Right(self.router.respond(req)),
        }
    }
}

/// The answer to a request on the lane, with what [`around`](super::around) adds to every
/// response.
async fn answer(
    state: &AppState,
    req: Request<Body>,
    path: &'static str,
    to: Endpoint,
) -> Response {
    // The client address behind a trusted proxy (`forwarded::replace_client`) is not resolved:
    // no ingest handler reads `ClientAddr`. One that comes to (a per-address throttle, an audit
    // line) must resolve it here first.
    let (parts, body) = req.into_parts();
    let id = request_id::of(&parts.headers);
    let scope = Scope::Lane {
        id: id.clone(),
        path,
    };
    let answered = match to {
        Endpoint::Event => events::respond(state, &parts.headers, body, &scope).await,
        Endpoint::Segment(call) => {
            segment::respond(state, &parts.headers, body, call, &scope).await
        }
    };
    let mut resp = answered.into_response();
    metrics::count_request(metrics::route_of(path), resp.status());
    let headers = resp.headers_mut();
    headers.insert(X_REQUEST_ID, id);
    health::add_headers(state, headers);
    resp
}
