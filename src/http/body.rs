//! Reading request bodies under a size limit, with `Content-Encoding: gzip` decoded (the
//! decompressed size is what counts) — whole, or as a form — and header helpers shared by the
//! handlers.

use std::io::Read;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use bytes::Bytes;

use super::edge::is_body_timeout;
use crate::http::error::ApiError;

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("body is larger than {limit} bytes"),
    )
}

/// Receives the whole body of a state-changing request (any method but GET and HEAD) before
/// anything else of it is looked at, so that who the caller is and what they may do is checked
/// when the request is complete — not when its head arrived, possibly a body timeout earlier,
/// while the caller's rights may have ended since. The bytes are kept as sent (still gzipped,
/// if so); at most `2 × limit` raw bytes, the handler enforcing `limit` after decoding.
pub async fn receive_first(
    req: axum::extract::Request,
    limit: usize,
) -> Result<axum::extract::Request, ApiError> {
    use axum::http::Method;
    if req.method() == Method::GET || req.method() == Method::HEAD {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    let raw_limit = limit.saturating_mul(2);
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > raw_limit as u64) {
        return Err(too_large(limit));
    }
    let bytes = axum::body::to_bytes(body, raw_limit)
        .await
        .map_err(|e| body_error(e, limit))?;
    Ok(axum::extract::Request::from_parts(parts, Body::from(bytes)))
}

fn body_error(e: axum::Error, limit: usize) -> ApiError {
    let inner = e.into_inner();
    if inner.is::<http_body_util::LengthLimitError>() {
        too_large(limit)
    } else if is_body_timeout(&*inner) {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!("{inner}; send the whole body promptly"),
        )
    } else {
        ApiError::bad_request("invalid_body", format!("could not read the body: {inner}"))
    }
}

/// The most bytes a request's body may turn out to hold, before it is read: its declared length,
/// or `limit` for a gzipped body or one of unknown length.
pub fn expected_len(headers: &HeaderMap, limit: usize) -> u64 {
    let plain = matches!(encoding(headers).as_deref(), None | Some("" | "identity"));
    match declared_len(headers) {
        Some(n) if plain => n.min(limit as u64),
        _ => limit as u64,
    }
}

/// `Content-Encoding`, trimmed and in lower case.
fn encoding(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_ascii_lowercase())
}

/// `Content-Length`, when it is a number.
fn declared_len(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Reads the whole body, refusing more than `limit` bytes (after decompression).
pub async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let gzip = match encoding(headers).as_deref() {
        None | Some("") | Some("identity") => false,
        Some("gzip") | Some("x-gzip") => true,
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_encoding",
                format!("Content-Encoding {other:?} is not supported; use gzip or none"),
            ));
        }
    };
    if declared_len(headers).is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    let raw = axum::body::to_bytes(body, limit)
        .await
        .map_err(|e| body_error(e, limit))?;
    if !gzip {
        return Ok(raw);
    }
    let mut out = Vec::with_capacity(raw.len() * 4);
    flate2::read::GzDecoder::new(&raw[..])
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            ApiError::bad_request("invalid_gzip", format!("body is not valid gzip: {e}"))
        })?;
    if out.len() > limit {
        return Err(too_large(limit));
    }
    Ok(out.into())
}

/// Reads a form-urlencoded body of at most `limit` bytes into `T`: the errors of
/// [`read_limited`], or 400 `invalid_form` when it does not parse.
pub async fn read_form<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<T, ApiError> {
    let bytes = read_limited(headers, body, limit).await?;
    serde_urlencoded::from_bytes(&bytes)
        .map_err(|e| ApiError::bad_request("invalid_form", e.to_string()))
}

/// A header's value as text, if present and readable.
pub fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// The media type of `Content-Type`, lowercased and without parameters (`text/plain` for
/// `text/plain;charset=UTF-8`), if there is one.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    header_str(headers, header::CONTENT_TYPE.as_str())
        .and_then(|ct| ct.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
}

/// Whether `Content-Type` is `application/json` (any parameters).
pub fn is_json(headers: &HeaderMap) -> bool {
    media_type(headers).as_deref() == Some("application/json")
}
