//! Time values as clients send them: RFC 3339 / ISO 8601 text with an offset or `Z`, read into
//! microseconds since the epoch (UTC), the unit of every timestamp column.

use chrono::{DateTime, Utc};
use serde_json::Value as Json;

/// RFC 3339 / ISO 8601 with an offset or `Z`, any number of fraction digits → µs since epoch.
pub fn parse_time(v: &Json) -> Option<i64> {
    let s = v.as_str()?.trim();
    let dt = DateTime::parse_from_rfc3339(s)
        .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .ok()?;
    Some(dt.with_timezone(&Utc).timestamp_micros())
}
