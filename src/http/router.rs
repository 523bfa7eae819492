//! Routes. Every error, including unknown paths and wrong methods, is the JSON
//! error body — except on the HTML pages ([`pages`]), which answer people in HTML — and every
//! response has an `X-Request-Id`.

use axum::Router;
use axum::routing::{get, post};

use super::state::AppState;
use super::{api, events, health, import, pages, segment, tables};
use crate::http::error::ApiError;

/// The service's routes.
pub fn router(state: AppState) -> Router {
    let download =
        post(tables::download).fallback(|| async { ApiError::method_not_allowed("POST") });
    Router::new()
        .route(
            "/v1/event",
            post(events::post_event).fallback(|| async { ApiError::method_not_allowed("POST") }),
        )
        .route(
            "/v1/batch",
            post(segment::post_batch)
                .fallback(|| async { ApiError::method_not_allowed("POST").segment() }),
        )
        .route(
            "/v1/{call}",
            post(segment::post_call)
                .fallback(|| async { ApiError::method_not_allowed("POST").segment() }),
        )
        .route(
            "/v1/import",
            post(import::post_import).fallback(|| async { ApiError::method_not_allowed("POST") }),
        )
        .route("/data/table", download.clone())
        .route("/api/data/table", download)
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(api::routes())
        .merge(pages::routes())
        .fallback(|| async {
            ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "not_found",
                "no such endpoint",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            super::around::around,
        ))
        .with_state(state)
}
