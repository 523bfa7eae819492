//! The four time columns of an event — `timestamp`, `original_timestamp`, `sent_at`,
//! `received_at` — from the times a message carries and the moment its request arrived.
//!
//! `/v1/event` keeps the seed's rule (SPEC §2.1): `timestamp` as sent, else the receive time.
//! The Segment calls correct for the client's clock as Segment and RudderStack do (SPEC §2.2
//! "Clock skew"): the client's event time is the message's `timestamp`, else its
//! `originalTimestamp` (RudderStack's SDKs send that, and `timestamp` only when the app passes
//! one); its send time is the message's `sentAt`, else the batch's; with both, the stored
//! `timestamp` is `received_at − (sentAt − client time)`, the span the event waited on the client
//! moved onto the server's clock.

use chrono::{DateTime, Utc};
use serde_json::Value as Json;
use serde_json::value::RawValue;

use super::top_fields::{Raw, Top, plain_str};
use crate::model::Invalid;
use crate::model::time::{parse_time, parse_time_text};

/// Which rule gives an event its times.
#[derive(Debug, Clone, Copy)]
pub enum TimeRule<'a> {
    /// `/v1/event`: the client's `timestamp` as sent.
    AsSent,
    /// The Segment calls: the client's time corrected by its `sentAt`; `batch_sent_at` is the
    /// batch's `sentAt`, for messages without their own.
    SkewCorrected { batch_sent_at: Option<&'a RawValue> },
}

/// An event's time columns, in microseconds since the epoch (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTimes {
    /// The event's time on the server's clock (see the module doc); the receive time when the
    /// client gave none.
    pub timestamp: i64,
    /// When the request arrived; one value for every message of a batch.
    pub received_at: i64,
    /// The client's event time as it sent it (Segment calls only).
    pub original_timestamp: Option<i64>,
    /// When the client says it sent the message.
    pub sent_at: Option<i64>,
}

/// The times a message carries, as the client sent them.
#[derive(Debug, Default, Clone, Copy)]
struct ClientTimes {
    /// `timestamp`: the event time the app gave.
    timestamp: Option<i64>,
    /// `originalTimestamp`: the event time RudderStack's SDKs record when the app gives none.
    original_timestamp: Option<i64>,
    /// The message's `sentAt`, else the batch's.
    sent_at: Option<i64>,
}

impl EventTimes {
    /// Reads a message's time fields by `rule`; an unreadable one is 400 `invalid_timestamp`.
    pub fn read(
        msg: &Top,
        rule: TimeRule,
        received_at: DateTime<Utc>,
    ) -> Result<EventTimes, Invalid> {
        let received_at = received_at.timestamp_micros();
        let timestamp = time_field(msg.get("timestamp").map(Raw::get), "timestamp")?;
        let own_sent_at = time_field(msg.get("sentAt").map(Raw::get), "sentAt")?;
        Ok(match rule {
            TimeRule::AsSent => EventTimes {
                timestamp: timestamp.unwrap_or(received_at),
                received_at,
                original_timestamp: None,
                sent_at: own_sent_at,
            },
            TimeRule::SkewCorrected { batch_sent_at } => {
                let client = ClientTimes {
                    timestamp,
                    original_timestamp: time_field(
                        msg.get("originalTimestamp").map(Raw::get),
                        "originalTimestamp",
                    )?,
                    sent_at: match own_sent_at {
                        Some(t) => Some(t),
                        None => time_field(batch_sent_at.map(RawValue::get), "sentAt")?,
                    },
                };
                EventTimes::skew_corrected(client, received_at)
            }
        })
    }

    fn skew_corrected(client: ClientTimes, received_at: i64) -> EventTimes {
        let client_time = client.timestamp.or(client.original_timestamp);
        let timestamp = match (client_time, client.sent_at) {
            (Some(event), Some(sent)) => received_at.saturating_sub(sent.saturating_sub(event)),
            (Some(event), None) => event,
            (None, _) => received_at,
        };
        EventTimes {
            timestamp,
            received_at,
            original_timestamp: client_time,
            sent_at: client.sent_at,
        }
    }
}

/// A time field (absent or null → `None`), or 400 `invalid_timestamp` naming it.
fn time_field(raw: Option<&str>, field: &str) -> Result<Option<i64>, Invalid> {
    let invalid = |message: String| Invalid::new("invalid_timestamp", message).field(field);
    let Some(raw) = raw else {
        return Ok(None);
    };
    // As SDKs send it: the text read where it is.
    if let Some(text) = plain_str(raw)
        && let Some(us) = parse_time_text(text)
    {
        return Ok(Some(us));
    }
    let value: Json = serde_json::from_str(raw).map_err(|e| invalid(format!("{field}: {e}")))?;
    if value.is_null() {
        return Ok(None);
    }
    parse_time(&value).map(Some).ok_or_else(|| {
        invalid(format!(
            "{field} must be an ISO 8601 date-time with an offset or Z, e.g. 2012-12-02T00:30:08.276Z"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECEIVED: i64 = 1_000_000_000;

    fn times(message: &str, rule: TimeRule) -> Result<EventTimes, Invalid> {
        let msg: Top = serde_json::from_str(message).unwrap();
        let received = DateTime::from_timestamp_micros(RECEIVED).unwrap();
        EventTimes::read(&msg, rule, received)
    }

    fn segment(message: &str, batch_sent_at: Option<&str>) -> EventTimes {
        let batch = batch_sent_at.map(|t| RawValue::from_string(format!("\"{t}\"")).unwrap());
        let rule = TimeRule::SkewCorrected {
            batch_sent_at: batch.as_deref(),
        };
        times(message, rule).unwrap_or_else(|e| panic!("{message}: {}", e.message))
    }

    /// `1970-01-01T00:00:SSZ` in µs.
    fn s(seconds: i64) -> i64 {
        seconds * 1_000_000
    }

    #[test]
    fn segment_shape_timestamp_corrected_by_sent_at() {
        let seg = r#"{"timestamp":"1970-01-01T00:00:10Z"}"#;
        // received 1000 s − (sent 30 s − client 10 s) = 980 s.
        let expected = EventTimes {
            timestamp: s(980),
            received_at: RECEIVED,
            original_timestamp: Some(s(10)),
            sent_at: Some(s(30)),
        };
        assert_eq!(segment(seg, Some("1970-01-01T00:00:30Z")), expected);
        // The message's own sentAt comes before the batch's.
        let own = r#"{"timestamp":"1970-01-01T00:00:10Z","sentAt":"1970-01-01T00:00:30Z"}"#;
        assert_eq!(segment(own, Some("1970-01-01T00:00:50Z")), expected);
        // No sentAt anywhere: the client's time as sent, still kept as original_timestamp.
        let alone = segment(seg, None);
        assert_eq!(
            (alone.timestamp, alone.original_timestamp, alone.sent_at),
            (s(10), Some(s(10)), None)
        );
    }

    #[test]
    fn rudderstack_shape_uses_original_timestamp() {
        // What @rudderstack/rudder-sdk-node sends: originalTimestamp and a sentAt per message
        // (and one per batch); the identify waited 3 s on the client.
        let rs = r#"{"originalTimestamp":"1970-01-01T00:00:07Z","sentAt":"1970-01-01T00:00:10Z"}"#;
        let t = segment(rs, Some("1970-01-01T00:00:11Z"));
        assert_eq!(
            t,
            EventTimes {
                timestamp: RECEIVED - s(3),
                received_at: RECEIVED,
                original_timestamp: Some(s(7)),
                sent_at: Some(s(10)),
            }
        );
        // An app-given timestamp wins over originalTimestamp.
        let both = r#"{"timestamp":"1970-01-01T00:00:05Z","originalTimestamp":"1970-01-01T00:00:07Z","sentAt":"1970-01-01T00:00:10Z"}"#;
        let t = segment(both, None);
        assert_eq!(
            (t.timestamp, t.original_timestamp),
            (RECEIVED - s(5), Some(s(5)))
        );
        // The batch's sentAt when the message has none.
        let t = segment(
            r#"{"originalTimestamp":"1970-01-01T00:00:07Z"}"#,
            Some("1970-01-01T00:00:09Z"),
        );
        assert_eq!((t.timestamp, t.sent_at), (RECEIVED - s(2), Some(s(9))));
    }

    #[test]
    fn no_client_time_means_the_receive_time() {
        let t = segment(r#"{"sentAt":"1970-01-01T00:00:10Z"}"#, None);
        assert_eq!(
            t,
            EventTimes {
                timestamp: RECEIVED,
                received_at: RECEIVED,
                original_timestamp: None,
                sent_at: Some(s(10)),
            }
        );
    }

    #[test]
    fn v1_event_keeps_the_timestamp_as_sent() {
        let msg = r#"{"timestamp":"1970-01-01T00:00:10Z","originalTimestamp":"1970-01-01T00:00:07Z","sentAt":"1970-01-01T00:00:30Z"}"#;
        assert_eq!(
            times(msg, TimeRule::AsSent).unwrap(),
            EventTimes {
                timestamp: s(10),
                received_at: RECEIVED,
                original_timestamp: None,
                sent_at: Some(s(30)),
            }
        );
    }

    #[test]
    fn unreadable_times_name_their_field() {
        for (msg, field) in [
            (r#"{"timestamp":"yesterday"}"#, "timestamp"),
            (
                r#"{"originalTimestamp":"2012-12-02T00:30:08"}"#,
                "originalTimestamp",
            ),
            (r#"{"sentAt":5}"#, "sentAt"),
        ] {
            let rule = TimeRule::SkewCorrected {
                batch_sent_at: None,
            };
            let e = times(msg, rule).unwrap_err();
            assert_eq!(
                (e.code, e.field.as_deref()),
                ("invalid_timestamp", Some(field))
            );
        }
        let bad_batch = RawValue::from_string("\"soon\"".into()).unwrap();
        let rule = TimeRule::SkewCorrected {
            batch_sent_at: Some(&bad_batch),
        };
        let e = times(r#"{"timestamp":"1970-01-01T00:00:10Z"}"#, rule).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref()),
            ("invalid_timestamp", Some("sentAt"))
        );
    }

    #[test]
    fn timestamps_accept_offsets_and_any_fraction() {
        let t = |s: &str| parse_time(&Json::String(s.into()));
        assert_eq!(t("2012-12-02T00:30:08.276Z"), Some(1_354_408_208_276_000));
        assert_eq!(
            t("2012-12-02T01:30:08.276123456+01:00"),
            Some(1_354_408_208_276_123)
        );
        assert_eq!(t("2012-12-02T00:30:08Z"), Some(1_354_408_208_000_000));
        assert_eq!(t("2012-12-02T00:30:08+0000"), Some(1_354_408_208_000_000));
        assert_eq!(t("2012-12-02"), None);
    }
}
