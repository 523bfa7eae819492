//! `POST /data/table` and `POST /api/data/table`: authenticate the data key, resolve the
//! element (404 unless it is the key's team's), and stream the table — or, for an SQL element,
//! the result of its query.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tracing::error;

use super::AppState;
use super::body::{header_str, read_limited};
use crate::catalog::Element;
use crate::download::compress::Compressor;
use crate::download::encode::{self, EncodeOptions};
use crate::download::request::DownloadRequest;
use crate::download::{DownloadError, format, passthrough, plan, query, request, stream};
use crate::http::error::ApiError;
use crate::model::TeamId;

/// What a download reads: a table element's plan, or an SQL element's query.
enum Planned {
    /// A warehouse table, with columns, filters and limit.
    Table(plan::Plan),
    /// A query, run once the response is about to start.
    Sql {
        /// The element (its limit applies on top).
        element: Element,
        /// Its query.
        sql: String,
        /// The caller's team.
        team: TeamId,
        /// The request (params, columns, filters, limit).
        req: DownloadRequest,
        /// Include rows not yet committed.
        fresh: bool,
    },
}

/// Largest download request body.
const MAX_REQUEST: usize = 64 * 1024;

/// Handler for table downloads.
pub async fn download(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let team = authenticate(&state, &headers)?;
    let body = read_limited(&headers, body, MAX_REQUEST).await?;
    let req = request::parse(&body)?;
    let format = format::negotiate(
        req.format.as_deref(),
        header_str(&headers, header::ACCEPT.as_str()),
    )
    .map_err(DownloadError::from)?;
    let compression =
        format::negotiate_encoding(header_str(&headers, header::ACCEPT_ENCODING.as_str()));
    let opts = EncodeOptions {
        int64_as_string: req.int64_as_string,
    };
    let catalog = state.catalog.clone();
    let (element, req, team) = tokio::task::spawn_blocking(move || {
        let element = plan::element(&catalog, &team, &req)?;
        Ok::<_, DownloadError>((element, req, team))
    })
    .await
    .map_err(|e| {
        error!(error = %e, "download planning panicked");
        ApiError::internal()
    })??;
    // A cursor pages over committed files: it implies not fresh unless the request says
    // fresh, which `request::parse` refused with a cursor.
    let fresh = req.fresh.unwrap_or(element.fresh && req.cursor.is_none());
    let planned = match element.sql.clone() {
        Some(sql) => Planned::Sql {
            element,
            sql,
            team,
            req,
            fresh,
        },
        None => {
            // Lent before the snapshot is taken (SPEC §3.5): the snapshot's watermark then
            // tells which lent rows its files already hold.
            let lent = match fresh {
                true => Some(
                    state
                        .buffers
                        .lend(&team, std::slice::from_ref(&element.source))
                        .await
                        .map_err(DownloadError::from)?
                        .table(&element.source),
                ),
                false => None,
            };
            let catalog = state.catalog.clone();
            tokio::task::spawn_blocking(move || {
                plan::plan(&catalog, &team, element, &req, lent.as_ref()).map(Planned::Table)
            })
            .await
            .map_err(|e| {
                error!(error = %e, "download planning panicked");
                ApiError::internal()
            })??
        }
    };
    let internal = |e: &dyn std::fmt::Display| {
        error!(error = %e, "cannot start the download encoder");
        ApiError::internal()
    };
    let compressor = Compressor::new(compression).map_err(|e| internal(&e))?;
    let (store, batch_rows) = (state.store.clone(), state.config.download.batch_rows);
    let mut passthrough = false;
    let body = match planned {
        Planned::Table(plan) => {
            passthrough = format == format::Format::Parquet && passthrough::applies(&plan);
            if passthrough {
                passthrough::body(store, plan, batch_rows, compressor)
            } else {
                let encoder =
                    encode::encoder(format, &plan.columns, opts).map_err(|e| internal(&e))?;
                stream::body(store, plan, batch_rows, encoder, compressor)
            }
        }
        Planned::Sql {
            element,
            sql,
            team,
            req,
            fresh,
        } => {
            let started = query::start(&state.sql, &team, &element, &sql, &req, fresh).await?;
            let encoder =
                encode::encoder(format, &started.columns, opts).map_err(|e| internal(&e))?;
            query::body(started, encoder, compressor)
        }
    };
    let mut resp = ([(header::CONTENT_TYPE, format.content_type())], body).into_response();
    if let Some(enc) = compression.header() {
        resp.headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static(enc));
    }
    if format == format::Format::Parquet {
        let how = if passthrough { "passthrough" } else { "encode" };
        resp.headers_mut()
            .insert(passthrough::HEADER, HeaderValue::from_static(how));
    }
    resp.headers_mut().insert(
        header::VARY,
        HeaderValue::from_static("accept, accept-encoding"),
    );
    Ok(resp)
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
        Err(e) => Err(ApiError::catalog_unavailable(
            &e,
            state.config.ingest.retry_after.0,
        )),
    }
}
