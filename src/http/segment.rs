//! The Segment Tracking API (SPEC §2.2): `POST /v1/batch` (a JSON `{"batch":[…]}` or NDJSON)
//! and `POST /v1/track|identify|page|screen|group|alias`. Auth by `X-Auth-Token`, HTTP Basic or
//! the body's `writeKey`; the body is read as JSON whatever its `Content-Type` says, unless a
//! batch is labelled NDJSON; validation is all-or-nothing; a batch is one submission. Errors
//! carry `code` and `message` at the top level too, where Segment SDKs read them.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use super::AppState;
use super::body::{expected_len, media_type, read_limited};
use super::events::{check_token, header_token, ingest_error, wait_header};
use super::request_id::Scope;
use crate::http::error::ApiError;
use crate::ingest::direct::{self, DirectBuild};
use crate::ingest::event::EventRows;
use crate::ingest::logged::logged;
use crate::ingest::segment::{Call, Shared, parse_message};
use crate::ingest::submit::{BatchError, Item, Prebuilt};
use crate::ingest::top_fields::Top;
use crate::ingest::{Accepted, IngestError, bulk};
use crate::model::tape::Tape;
use crate::model::{TeamId, valid_json};

/// `POST /v1/batch`, behind the router's middleware (the fast lane answers `POST`s itself with
/// [`respond`]; this serves a router driven without it).
pub async fn post_batch(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    respond(&state, &headers, body, None, &Scope::Entered).await
}

/// `POST /v1/{call}` for the six Segment calls, behind the router's middleware.
pub async fn post_call(
    State(state): State<AppState>,
    Path(call): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let Some(call) = Call::from_type(&call).filter(|_| call != "event") else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such endpoint",
        ));
    };
    respond(&state, &headers, body, Some(call), &Scope::Entered).await
}

/// The answer to a batch (`call` none) or to one call; log lines go to `scope`.
pub async fn respond(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    call: Option<Call>,
    scope: &Scope,
) -> Result<Response, ApiError> {
    accept(state, headers, body, call, scope)
        .await
        .map_err(rejected)
}

fn rejected(e: ApiError) -> ApiError {
    metrics::counter!("stowage_events_rejected_total", "code" => e.code).increment(1);
    e.segment()
}

/// A JSON batch body; other top-level fields are ignored.
#[derive(Deserialize)]
struct BatchBody<'a> {
    #[serde(borrow)]
    batch: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    context: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "sentAt")]
    sent_at: Option<&'a RawValue>,
    #[serde(default, rename = "writeKey")]
    write_key: Option<String>,
}

/// The messages of a request, as sent, and what they share.
struct Messages<'a> {
    list: Vec<&'a str>,
    shared: Shared<'a>,
    write_key: Option<String>,
}

async fn accept(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    call: Option<Call>,
    scope: &Scope,
) -> Result<Response, ApiError> {
    let received_at = chrono::Utc::now();
    let ingest = &state.config.ingest;
    // A token in the headers is checked before the body is read.
    let from_header = header_token(headers);
    let mut team = match &from_header {
        Some(t) => Some(check_token(state, Some(t), scope)?),
        None => None,
    };
    // Segment's API reads JSON whatever the label (SPEC §2.2 "Content type"): browsers'
    // `sendBeacon` says text/plain, SDKs that gzip the body themselves say form-urlencoded.
    let ndjson = call.is_none() && is_ndjson(headers);
    let limit = if call.is_none() {
        ingest.max_batch_body.0
    } else {
        ingest.max_body.0
    } as usize;
    // No room: wait for some before the body is read (it stays with the client meanwhile),
    // holding the team's turn among its waiters until this request is submitted (admitted or
    // refused before the submission first yields).
    let mut turn = match &team {
        Some(team) => {
            state
                .ingest
                .wait_for_room(team, expected_len(headers, limit))
                .await
        }
        None => None,
    };
    let body = own_buffer(read_limited(headers, body, limit).await?);
    let messages = if call.is_some() {
        single(&body)?
    } else if ndjson {
        lines(&body)?
    } else {
        batch(&body)?
    };
    if messages.list.len() > ingest.max_batch_events {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_events",
            format!(
                "a batch may hold at most {} messages; this one has {}",
                ingest.max_batch_events,
                messages.list.len()
            ),
        ));
    }
    // Every message carries the batch's `context` and `sentAt` (into its rows and its WAL
    // record): refuse a batch whose shared part, repeated, would be many times its own size.
    let shared: usize = [messages.shared.context, messages.shared.sent_at]
        .iter()
        .flatten()
        .map(|v| v.get().len())
        .sum();
    if shared.saturating_mul(messages.list.len()) > limit.saturating_mul(4) {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the batch's context ({shared} bytes) repeated in each of its {} messages would \
                 exceed {} bytes; send smaller batches or put the context in the messages",
                messages.list.len(),
                limit.saturating_mul(4)
            ),
        ));
    }
    let team = match team.take() {
        Some(t) => t,
        None => check_token(state, messages.write_key.as_deref(), scope)?,
    };
    let wait = wait_header(headers)?;
    let max_columns = state.config.limits.columns_per_table;
    let at = received_at.timestamp_micros();
    let direct = (call.is_none() && ingest.direct_build)
        .then(|| built_directly(&messages, &body, received_at, max_columns))
        .flatten();
    if let Some((items, prebuilt)) = direct {
        let answer = answer(call, &items);
        let n = items.len() as u64;
        drop(turn.take());
        let result = state
            .ingest
            .submit_prebuilt(&team, items, prebuilt, at, wait)
            .await;
        // Rows that would pass a limit: built again the usual way, which names the message.
        if !matches!(&result, Err(e) if matches!(e.error, IngestError::Rebuild)) {
            metrics::counter!("stowage_batches_built_directly_total").increment(1);
            return submitted(state, &team, call, answer, n, result, scope);
        }
    }
    let mut items = Vec::with_capacity(messages.list.len());
    let mut errors = Vec::new();
    for (i, text) in messages.list.iter().enumerate() {
        let parsed = Top::parse(text)
            .map_err(|e| {
                if e.is_data() {
                    ApiError::bad_request("invalid_body", "a message must be a JSON object")
                } else {
                    ApiError::bad_request("invalid_json", format!("not valid JSON: {e}"))
                }
            })
            .and_then(|msg| {
                parse_message(&msg, call, messages.shared, received_at, max_columns, None)
                    .map_err(ApiError::from)
            });
        match parsed {
            Ok((c, rows)) => {
                let record = logged(c, messages.shared, &body, text);
                items.push(Item {
                    rows,
                    body: record.body,
                    flags: record.flags,
                    received_at: None,
                })
            }
            Err(e) if call.is_some() => return Err(e),
            Err(e) => errors.push(item_error(i, &e)),
        }
    }
    if !errors.is_empty() {
        return Err(invalid_batch(errors));
    }
    // The answer is written now, while the ids are at hand (the events move into the WAL);
    // built by hand so `success` comes first, as SPEC §2.1 shows it.
    let answer = answer(call, &items);
    let n = items.len() as u64;
    drop(turn);
    // A single call's event is gathered with the team's others; a batch is submitted whole.
    let result = match (call, items.len()) {
        (Some(_), 1) => {
            let item = items.pop().expect("one item");
            (state.ingest.submit_one(&team, item, at, wait).await).map(|a| vec![a])
        }
        _ => state.ingest.submit_batch(&team, items, at, wait).await,
    };
    submitted(state, &team, call, answer, n, result, scope)
}

/// The messages of a batch built straight into a batch per table ([`DirectBuild`]), with the
/// items that log them; `None` when it is to be built the usual way: fewer than
/// [`bulk::MIN_EVENTS`] messages, or one the direct build does not take (it then also names
/// the fault).
fn built_directly(
    messages: &Messages,
    body: &Bytes,
    received_at: chrono::DateTime<chrono::Utc>,
    max_columns: usize,
) -> Option<(Vec<Item>, Prebuilt)> {
    if messages.list.len() < bulk::MIN_EVENTS {
        return None;
    }
    let mut build = DirectBuild::default();
    let mut built = Vec::with_capacity(messages.list.len());
    let mut tape = Tape::default();
    for text in &messages.list {
        let msg = Top::parse_on(text, tape).ok()?;
        built.push(
            build
                .message(&msg, messages.shared, received_at, max_columns)
                .ok()?,
        );
        tape = msg.into_tape();
    }
    let tables = build.finish().ok()?;
    let lengths: Vec<usize> = messages.list.iter().map(|t| t.len()).collect();
    let sizes = direct::sizes(&tables, &lengths);
    let items = built
        .into_iter()
        .zip(&messages.list)
        .map(|(b, text)| {
            let record = logged(b.call, messages.shared, body, text);
            Item {
                rows: EventRows::unbuilt(b.id, b.client_id),
                body: record.body,
                flags: record.flags,
                received_at: None,
            }
        })
        .collect();
    Some((items, Prebuilt { tables, sizes }))
}

/// The answer to a submitted batch, or its refusal.
fn submitted(
    state: &AppState,
    team: &TeamId,
    call: Option<Call>,
    answer: Vec<u8>,
    n: u64,
    result: Result<Vec<Accepted>, BatchError>,
    scope: &Scope,
) -> Result<Response, ApiError> {
    let retry = state.config.ingest.retry_after.0;
    match result {
        Ok(outcomes) => {
            let dups = outcomes
                .iter()
                .filter(|o| **o == Accepted::Duplicate)
                .count() as u64;
            let accepted = "stowage_events_accepted_total";
            super::metrics::count(accepted, "kind", "stored", n - dups);
            if dups > 0 {
                super::metrics::count(accepted, "kind", "duplicate", dups);
            }
        }
        Err(e) => {
            let err = ingest_error(team, e.error, retry, scope);
            return Err(match (e.index, call) {
                (Some(i), None) => invalid_batch(vec![item_error(i, &err)]),
                _ => err,
            });
        }
    }
    Ok(([(header::CONTENT_TYPE, "application/json")], answer).into_response())
}

/// The body of a 200: the id of a single call's message, or the ids of a batch's, in order.
fn answer(call: Option<Call>, items: &[Item]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(32 + items.iter().map(|it| it.rows.id.len() + 3).sum::<usize>());
    let id = |out: &mut Vec<u8>, id: &str| {
        serde_json::to_writer(&mut *out, id).expect("a string serialises");
    };
    match call {
        Some(_) => {
            out.extend_from_slice(br#"{"success":true,"id":"#);
            match items.first() {
                Some(it) => id(&mut out, &it.rows.id),
                None => out.extend_from_slice(b"null"),
            }
        }
        None => {
            out.extend_from_slice(br#"{"success":true,"ids":["#);
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                id(&mut out, &it.rows.id);
            }
            out.push(b']');
        }
    }
    out.push(b'}');
    out
}

/// The request body as its messages' WAL records hold it: they are slices of it
/// ([`logged`]) and keep its buffer alive until written, so a body that shares its buffer (a
/// small body is a slice of the connection's read buffer) or leaves most of it unused (a gzip
/// body's room to grow) is copied once into a buffer of its own size. The records never keep
/// more than twice the body.
fn own_buffer(body: Bytes) -> Bytes {
    match body.try_into_mut() {
        Ok(buf) if buf.capacity() <= 2 * buf.len() => buf.freeze(),
        Ok(buf) => Bytes::copy_from_slice(&buf),
        Err(shared) => Bytes::copy_from_slice(&shared),
    }
}

/// Whether a batch is labelled NDJSON (one message per line); any other label, or none, is
/// read as JSON.
fn is_ndjson(headers: &HeaderMap) -> bool {
    matches!(
        media_type(headers).as_deref(),
        Some("application/x-ndjson" | "application/ndjson")
    )
}

fn not_json(e: serde_json::Error) -> ApiError {
    if e.is_data() {
        ApiError::bad_request(
            "invalid_body",
            format!("body must be a JSON object with a \"batch\" array: {e}"),
        )
    } else {
        ApiError::bad_request("invalid_json", format!("body is not valid JSON: {e}"))
    }
}

fn batch(body: &[u8]) -> Result<Messages<'_>, ApiError> {
    let b: BatchBody = serde_json::from_slice(body).map_err(not_json)?;
    let list = b
        .batch
        .ok_or_else(|| {
            ApiError::bad_request("invalid_body", "body must have a \"batch\" array").field("batch")
        })?
        .into_iter()
        .map(RawValue::get)
        .collect();
    Ok(Messages {
        list,
        shared: Shared {
            context: b.context,
            sent_at: b.sent_at,
        },
        write_key: b.write_key,
    })
}

fn single(body: &[u8]) -> Result<Messages<'_>, ApiError> {
    let text = valid_json::utf8(body)
        .ok_or_else(|| ApiError::bad_request("invalid_json", "body is not UTF-8"))?;
    #[derive(Deserialize)]
    struct Key {
        #[serde(default, rename = "writeKey")]
        write_key: Option<serde_json::Value>,
    }
    let key: Key = serde_json::from_str(text).map_err(not_json)?;
    Ok(Messages {
        list: vec![text],
        shared: Shared::default(),
        write_key: key.write_key.and_then(|v| v.as_str().map(str::to_string)),
    })
}

/// NDJSON: one message per non-blank line. A `writeKey` may come on the lines; if several
/// lines carry one, they must agree.
fn lines(body: &[u8]) -> Result<Messages<'_>, ApiError> {
    let text = valid_json::utf8(body)
        .ok_or_else(|| ApiError::bad_request("invalid_json", "body is not UTF-8"))?;
    let list: Vec<&str> = text
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .collect();
    let mut write_key: Option<String> = None;
    for line in &list {
        if !line.contains("\"writeKey\"") {
            continue;
        }
        #[derive(Deserialize)]
        struct Key {
            #[serde(default, rename = "writeKey")]
            write_key: Option<serde_json::Value>,
        }
        // A line that does not parse is reported with its index by the validation later.
        let Ok(Key {
            write_key: Some(serde_json::Value::String(k)),
        }) = serde_json::from_str(line)
        else {
            continue;
        };
        match &write_key {
            Some(prev) if *prev != k => {
                return Err(ApiError::bad_request(
                    "invalid_body",
                    "the lines of one batch carry different writeKeys",
                )
                .field("writeKey"));
            }
            _ => write_key = Some(k),
        }
    }
    Ok(Messages {
        list,
        shared: Shared::default(),
        write_key,
    })
}

fn item_error(index: usize, e: &ApiError) -> serde_json::Value {
    let mut v = json!({"index": index, "code": e.code, "message": e.message});
    if let Some(f) = &e.field {
        v["field"] = json!(f);
    }
    v
}

fn invalid_batch(errors: Vec<serde_json::Value>) -> ApiError {
    let mut e = ApiError::bad_request(
        "invalid_batch",
        format!(
            "{} message(s) of the batch are invalid; nothing was stored",
            errors.len()
        ),
    );
    e.errors = Some(Box::new(errors));
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::record::FLAG_SEGMENT_RAW;

    #[test]
    fn every_form_of_body_lends_its_messages_to_the_records() {
        let ndjson = Bytes::from(
            "{\"type\":\"track\",\"event\":\"a\",\"userId\":\"u\"}\r\n\n{\"type\":\"identify\",\"userId\":\"u\"}\n",
        );
        let json_batch = Bytes::from(
            r#"{"batch":[{"type":"track","event":"a","userId":"u"},{"type":"page","userId":"u"}]}"#,
        );
        let one_call = Bytes::from(r#"{"userId":"u","event":"a","writeKey":"k"}"#);
        let forms = [
            (&ndjson, lines(&ndjson).ok().unwrap()),
            (&json_batch, batch(&json_batch).ok().unwrap()),
            (&one_call, single(&one_call).ok().unwrap()),
        ];
        for (body, messages) in forms {
            assert!(!messages.list.is_empty());
            for text in messages.list {
                let record = logged(Call::Track, messages.shared, body, text);
                assert_ne!(record.flags & FLAG_SEGMENT_RAW, 0, "sliced: {text}");
                assert_eq!(&record.body[..], text.as_bytes());
            }
        }
    }

    #[test]
    fn a_body_keeps_no_buffer_larger_than_twice_itself() {
        // Exact: kept as it is.
        let exact = Bytes::from(vec![b'x'; 1000]);
        let at = exact.as_ptr();
        assert_eq!(own_buffer(exact).as_ptr(), at);
        // A slice of a larger buffer that lives on (the connection's read buffer): copied.
        let read_buffer = Bytes::from(vec![b'y'; 64 << 10]);
        let body = read_buffer.slice(100..1100);
        let owned = own_buffer(body.clone());
        assert_ne!(owned.as_ptr(), body.as_ptr());
        assert_eq!(owned, body);
        assert!(owned.is_unique());
        // Most of its room unused (a gzip body's): copied.
        let mut roomy = Vec::with_capacity(4000);
        roomy.extend_from_slice(&[b'z'; 1000]);
        let roomy = Bytes::from(roomy);
        let at = roomy.as_ptr();
        let owned = own_buffer(roomy);
        assert_ne!(owned.as_ptr(), at);
        assert_eq!(&owned[..], &[b'z'; 1000][..]);
    }
}
