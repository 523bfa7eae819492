//! `POST /data/table` and `POST /api/data/table`: authenticate the data key, resolve the
//! element (404 unless it is the key's team's), and stream the table.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tracing::error;

use super::AppState;
use super::body::{header_str, read_limited};
use crate::catalog::TeamId;
use crate::download::{plan, request, stream};
use crate::error::ApiError;

/// Largest download request body.
const MAX_REQUEST: usize = 64 * 1024;

/// Handler for table downloads.
pub async fn download(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let team = authenticate(&state, &headers)?;
    check_accept(&headers)?;
    let body = read_limited(&headers, body, MAX_REQUEST).await?;
    let req = request::parse(&body)?;
    let catalog = state.catalog.clone();
    let plan = tokio::task::spawn_blocking(move || plan::plan(&catalog, &team, &req))
        .await
        .map_err(|e| {
            error!(error = %e, "download planning panicked");
            ApiError::internal()
        })??;
    let body = stream::json_body(state.store.clone(), plan, state.config.download.batch_rows);
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<TeamId, ApiError> {
    let Some(key) = header_str(headers, "x-api-key").filter(|k| !k.is_empty()) else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing_api_key",
            "x-api-key header is required",
        ));
    };
    match state.catalog.auth_data_key(key) {
        Ok(Some(team)) => Ok(team),
        Ok(None) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            "the API key is unknown or revoked",
        )),
        Err(e) => {
            error!(error = %e, "catalog unavailable during key check");
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "catalog unavailable; retry",
            )
            .retry_after(state.config.ingest.retry_after.0))
        }
    }
}

/// 406 unless `Accept` (when given) allows JSON.
fn check_accept(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(accept) = header_str(headers, header::ACCEPT.as_str()) else {
        return Ok(());
    };
    let ok = accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q_zero = parts.any(|p| {
            let p = p.trim();
            p.strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                == Some(0.0)
        });
        !q_zero
            && matches!(
                media.as_str(),
                "" | "*/*" | "application/*" | "application/json"
            )
    });
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            format!("cannot produce {accept:?}; this endpoint serves application/json"),
        ))
    }
}
