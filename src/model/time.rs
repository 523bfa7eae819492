//! Time values as clients send them: RFC 3339 / ISO 8601 text with an offset or `Z`, read into
//! microseconds since the epoch (UTC), the unit of every timestamp column; and calendar days
//! (`YYYY-MM-DD`), read into days since 1970-01-01, the unit of a date column.

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value as Json;

/// RFC 3339 / ISO 8601 with an offset or `Z`, any number of fraction digits → µs since epoch.
pub fn parse_time(v: &Json) -> Option<i64> {
    let s = v.as_str()?.trim();
    let dt = DateTime::parse_from_rfc3339(s)
        .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .ok()?;
    Some(dt.with_timezone(&Utc).timestamp_micros())
}

/// `YYYY-MM-DD` → days since 1970-01-01.
pub fn parse_date(v: &Json) -> Option<i32> {
    let day = NaiveDate::parse_from_str(v.as_str()?.trim(), "%Y-%m-%d").ok()?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from(day.signed_duration_since(epoch).num_days()).ok()
}
