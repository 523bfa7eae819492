//! `POST /v1/import?table=NAME[&format=csv|ndjson|parquet][&delimiter=;]`: loads a file into a warehouse table
//! with the events token (write access to the team's warehouse). The format comes from `format`
//! or the `Content-Type` (`text/csv`, `application/x-ndjson`, `application/vnd.apache.parquet`).
//! All or nothing: `200 {"table","rows","files"}`, or an error and nothing imported.

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};
use tracing::error;

use super::AppState;
use super::body::{header_str, read_limited};
use super::events::authenticate;
use crate::http::error::ApiError;
use crate::warehouse::import::{ImportError, ImportFormat, Importer, Source, import};

/// Handler for imports.
pub async fn post_import(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let team = authenticate(&state, &headers)?;
    let table = params
        .get("table")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request("missing_field", "query parameter table is required")
                .field("table")
        })?;
    let format = match params.get("format") {
        Some(f) => ImportFormat::parse(f).ok_or_else(|| {
            ApiError::bad_request(
                "unsupported_format",
                format!("format {f:?}: use csv, ndjson or parquet"),
            )
            .field("format")
        })?,
        None => {
            let ct = header_str(&headers, header::CONTENT_TYPE.as_str()).unwrap_or("");
            let media = ct
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            match media.as_str() {
                "text/csv" => ImportFormat::Csv(b','),
                "application/x-ndjson" | "application/ndjson" | "application/jsonl" => {
                    ImportFormat::Ndjson
                }
                "application/vnd.apache.parquet" | "application/x-parquet" => ImportFormat::Parquet,
                _ => {
                    return Err(ApiError::new(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        "unsupported_media_type",
                        "send text/csv, application/x-ndjson or application/vnd.apache.parquet, or pass ?format=",
                    ));
                }
            }
        }
    };
    let format = match params.get("delimiter") {
        None => format,
        Some(d) => format.with_delimiter(d).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_field",
                format!("delimiter {d:?}: use one character (not a quote or line break) or tab, with CSV"),
            )
            .field("delimiter")
        })?,
    };
    let body = read_limited(
        &headers,
        body,
        state.config.ingest.max_import_body.0 as usize,
    )
    .await?;
    let to = Importer {
        catalog: &state.catalog,
        store: &state.store,
        parquet: &state.config.parquet,
        prefix: &state.config.storage.prefix,
    };
    match import(&to, &team, table, format, Source::Bytes(body)).await {
        Ok(stats) => Ok(Json(json!(stats))),
        Err(ImportError::Input(msg)) => Err(ApiError::bad_request("invalid_import", msg)),
        Err(e @ ImportError::Internal(_)) => {
            error!(error = %e, "import failed");
            Err(ApiError::internal())
        }
    }
}
