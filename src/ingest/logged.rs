//! What the WAL keeps of an accepted Segment message, and replay from it: the message as sent
//! (a slice of the request body, no copy; its call in the record's flags), or, when the batch
//! shared a `context` or `sentAt` with it, an envelope of the call, the shared part and the
//! message. Either way replay rebuilds exactly the rows that were accepted.

use bytes::Bytes;
use chrono::DateTime;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::event::EventRows;
use super::segment::{Call, Shared, parse_message};
use super::top_fields::Top;
use crate::model::Invalid;
use crate::wal::record::{FLAG_SEGMENT, FLAG_SEGMENT_RAW};

/// Where a record's flags keep the call of a raw message.
const CALL_SHIFT: u8 = 3;
const CALL_MASK: u8 = 0b111 << CALL_SHIFT;

/// What the WAL keeps of an accepted message.
pub struct Logged {
    /// The record body.
    pub body: Bytes,
    /// The record flags ([`FLAG_SEGMENT`], and for a raw message [`FLAG_SEGMENT_RAW`] and its
    /// call).
    pub flags: u8,
}

/// The WAL record of `message`, a part of `request`. With nothing shared by the batch the body
/// is the message itself, sliced out of the request without a copy (the request body lives
/// until the last of its records is written); otherwise it is the [`envelope`].
pub fn logged(call: Call, shared: Shared, request: &Bytes, message: &str) -> Logged {
    let raw = (shared.context.is_none() && shared.sent_at.is_none())
        .then(|| slice_of(request, message))
        .flatten();
    match raw {
        Some(body) => Logged {
            body,
            flags: FLAG_SEGMENT | FLAG_SEGMENT_RAW | code(call) << CALL_SHIFT,
        },
        None => Logged {
            body: Bytes::from(envelope(call, shared, message)),
            flags: FLAG_SEGMENT,
        },
    }
}

/// `part` as a slice of `whole`, when it lies within it.
fn slice_of(whole: &Bytes, part: &str) -> Option<Bytes> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then(|| whole.slice(start..end))
}

/// What the WAL keeps of a message whose batch shared a part with it: the call, what the batch
/// shared, and the message as sent.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    call: &'a str,
    #[serde(borrow, default)]
    context: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "sentAt")]
    sent_at: Option<&'a RawValue>,
    #[serde(borrow)]
    message: &'a RawValue,
}

/// The WAL record body of an accepted message: exactly [`envelope_len`] bytes, so that a
/// `Bytes` made of it is one allocation.
fn envelope(call: Call, shared: Shared, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(envelope_len(call, shared, message));
    envelope_into(&mut out, call, shared, message);
    debug_assert_eq!(out.len(), out.capacity());
    out
}

/// The length of [`envelope`].
fn envelope_len(call: Call, shared: Shared, message: &str) -> usize {
    let context = shared
        .context
        .map_or(0, |v| CONTEXT_KEY.len() + v.get().len());
    let sent_at = shared
        .sent_at
        .map_or(0, |v| SENT_AT_KEY.len() + v.get().len());
    CALL_KEY.len()
        + call.name().len()
        + 1
        + context
        + sent_at
        + MESSAGE_KEY.len()
        + message.len()
        + 1
}

const CALL_KEY: &[u8] = br#"{"call":""#;
const CONTEXT_KEY: &[u8] = br#","context":"#;
const SENT_AT_KEY: &[u8] = br#","sentAt":"#;
const MESSAGE_KEY: &[u8] = br#","message":"#;

fn envelope_into(out: &mut Vec<u8>, call: Call, shared: Shared, message: &str) {
    out.extend_from_slice(CALL_KEY);
    out.extend_from_slice(call.name().as_bytes());
    out.push(b'"');
    for (key, v) in [(CONTEXT_KEY, shared.context), (SENT_AT_KEY, shared.sent_at)] {
        if let Some(v) = v {
            out.extend_from_slice(key);
            out.extend_from_slice(v.get().as_bytes());
        }
    }
    out.extend_from_slice(MESSAGE_KEY);
    out.extend_from_slice(message.as_bytes());
    out.push(b'}');
}

/// Rebuilds a message's rows from its WAL record (body and flags, [`logged`]), with its original
/// receive time and id.
pub fn replay_message(
    body: &[u8],
    flags: u8,
    received_at_us: i64,
    id: &str,
) -> Result<EventRows, Invalid> {
    let received_at = DateTime::from_timestamp_micros(received_at_us)
        .ok_or_else(|| Invalid::new("invalid_timestamp", "receive time out of range"))?;
    let (call, message, shared) = if flags & FLAG_SEGMENT_RAW != 0 {
        let code = (flags & CALL_MASK) >> CALL_SHIFT;
        let call = from_code(code)
            .ok_or_else(|| Invalid::new("unsupported_type", format!("call number {code}")))?;
        (call, body, Shared::default())
    } else {
        let env: Envelope = serde_json::from_slice(body)
            .map_err(|e| Invalid::new("invalid_json", e.to_string()))?;
        let call = Call::from_type(env.call)
            .ok_or_else(|| Invalid::new("unsupported_type", env.call.to_string()))?;
        let shared = Shared {
            context: env.context,
            sent_at: env.sent_at,
        };
        (call, env.message.get().as_bytes(), shared)
    };
    let msg: Top =
        serde_json::from_slice(message).map_err(|e| Invalid::new("invalid_json", e.to_string()))?;
    parse_message(&msg, Some(call), shared, received_at, usize::MAX, Some(id)).map(|(_, r)| r)
}

/// The calls in the order of their number in a record's flags (bits 3–5).
const CALLS: [Call; 6] = [
    Call::Track,
    Call::Identify,
    Call::Page,
    Call::Screen,
    Call::Group,
    Call::Alias,
];

/// The number of `call` in a record's flags.
fn code(call: Call) -> u8 {
    CALLS
        .iter()
        .position(|c| *c == call)
        .expect("every call is listed") as u8
}

/// The call numbered `n` ([`code`]).
fn from_code(n: u8) -> Option<Call> {
    CALLS.get(usize::from(n)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepts `text` as part of `request` (with `shared`, on `endpoint`), logs it as the
    /// handler does, replays the record and checks the rows are the same; the record's flags.
    fn round_trip(request: &Bytes, text: &str, shared: Shared, endpoint: Option<Call>) -> u8 {
        let received = DateTime::from_timestamp_micros(1_800_000_000_000_000).unwrap();
        let msg: Top = serde_json::from_str(text).unwrap();
        let (call, rows) = parse_message(&msg, endpoint, shared, received, 1000, None).unwrap();
        let record = logged(call, shared, request, text);
        let again = replay_message(
            &record.body,
            record.flags,
            received.timestamp_micros(),
            &rows.id,
        )
        .unwrap();
        let view = |r: &EventRows| {
            (
                r.table.clone(),
                r.standard.clone(),
                r.tracks_only.clone(),
                r.properties.clone(),
                r.tracks,
            )
        };
        assert_eq!(view(&again), view(&rows), "{text}");
        record.flags
    }

    const MESSAGES: [&str; 5] = [
        r#"{"type":"identify","userId":"u","traits":{"a":1,"id":2},"timestamp":"2026-01-01T00:00:00Z","context":{"ip":"9.9.9.9"}}"#,
        r#"{"type":"page","anonymousId":"a","name":"Home","properties":{"name":"x","n":1.5}}"#,
        r#"{"type":"event","event":"Groups","userId":7,"properties":{"big":12345678901234567890}}"#,
        r#"{"type":"alias","userId":"u","previousId":"p","messageId":"m"}"#,
        r#"{"type":"screen","userId":"u","name":"S","sentAt":"2026-01-01T00:00:09Z","timestamp":"2026-01-01T00:00:00Z"}"#,
    ];

    #[test]
    fn replay_from_the_envelope_rebuilds_the_same_rows() {
        let ctx =
            RawValue::from_string(r#"{"ip":"1.2.3.4","library":{"name":"x"}}"#.into()).unwrap();
        let sent = RawValue::from_string(r#""2026-01-01T00:00:10Z""#.into()).unwrap();
        for shared in [
            Shared {
                context: Some(&ctx),
                sent_at: Some(&sent),
            },
            Shared {
                context: Some(&ctx),
                sent_at: None,
            },
            Shared {
                context: None,
                sent_at: Some(&sent),
            },
        ] {
            for text in MESSAGES {
                let request = Bytes::from(format!("[{text}]"));
                let text = std::str::from_utf8(&request[1..request.len() - 1]).unwrap();
                let flags = round_trip(&request, text, shared, None);
                assert_eq!(flags, FLAG_SEGMENT, "an envelope: {text}");
            }
        }
    }

    #[test]
    fn a_message_with_nothing_shared_is_logged_as_sent() {
        // As NDJSON lines of one request: each record is its line, not a copy.
        let request = Bytes::from(MESSAGES.join("\n"));
        let text = std::str::from_utf8(&request).unwrap();
        let mut calls = Vec::new();
        for line in text.split('\n') {
            let flags = round_trip(&request, line, Shared::default(), None);
            assert_eq!(
                flags & (FLAG_SEGMENT | FLAG_SEGMENT_RAW),
                FLAG_SEGMENT | FLAG_SEGMENT_RAW
            );
            let record = logged(Call::Track, Shared::default(), &request, line);
            assert_eq!(&record.body[..], line.as_bytes());
            assert_eq!(record.body.as_ptr(), line.as_ptr(), "sliced, not copied");
            calls.push(from_code((flags & CALL_MASK) >> CALL_SHIFT).unwrap());
        }
        let expected = [
            Call::Identify,
            Call::Page,
            Call::Track,
            Call::Alias,
            Call::Screen,
        ];
        assert_eq!(calls, expected);
        // On a call's own endpoint, without a type: the endpoint's call is what replays.
        let text = r#"{"userId":"u","groupId":"g","traits":{"plan":"pro"}}"#;
        let request = Bytes::from(text);
        let flags = round_trip(&request, text, Shared::default(), Some(Call::Group));
        assert_eq!(
            from_code((flags & CALL_MASK) >> CALL_SHIFT),
            Some(Call::Group)
        );
        // Text that is not part of the request is enveloped, never sliced out of bounds.
        let elsewhere = String::from(MESSAGES[1]);
        let flags = round_trip(&request, &elsewhere, Shared::default(), None);
        assert_eq!(flags, FLAG_SEGMENT);
    }

    #[test]
    fn a_raw_record_with_an_unknown_call_is_refused_not_misread() {
        let flags = FLAG_SEGMENT | FLAG_SEGMENT_RAW | 7 << CALL_SHIFT;
        let err = replay_message(br#"{"userId":"u"}"#, flags, 0, "x").unwrap_err();
        assert_eq!(err.code, "unsupported_type");
    }
}
