//! Time values as clients send them: RFC 3339 / ISO 8601 text with an offset or `Z`, read into
//! microseconds since the epoch (UTC), the unit of every timestamp column; and calendar days
//! (`YYYY-MM-DD`), read into days since 1970-01-01, the unit of a date column.

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value as Json;

/// RFC 3339 / ISO 8601 with an offset or `Z`, any number of fraction digits → µs since epoch.
pub fn parse_time(v: &Json) -> Option<i64> {
    parse_time_text(v.as_str()?)
}

/// [`parse_time`] of a text.
pub fn parse_time_text(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(us) = utc_micros(s.as_bytes()) {
        return Some(us);
    }
    let dt = DateTime::parse_from_rfc3339(s)
        .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .ok()?;
    Some(dt.with_timezone(&Utc).timestamp_micros())
}

/// The form SDKs send, `YYYY-MM-DDTHH:MM:SS[.f]Z` with up to nine fraction digits, read without
/// chrono's general parser (a fifth of a narrow event's validation); `None` for any other form
/// (lowercase letters, an offset, a leap second, more digits), which the general parser reads.
/// The calendar checks are chrono's own.
fn utc_micros(b: &[u8]) -> Option<i64> {
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        b.get(r)?.iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let (fraction, end) = match b.get(19) {
        Some(b'Z') => (0, 19),
        Some(b'.') => {
            let n = b[20..].iter().take_while(|c| c.is_ascii_digit()).count();
            if !(1..=9).contains(&n) {
                return None;
            }
            (digits(20..20 + n)? * 10u32.pow(9 - n as u32), 20 + n)
        }
        _ => return None,
    };
    if end + 1 != b.len() || b[end] != b'Z' || second > 59 {
        return None;
    }
    let t = NaiveDate::from_ymd_opt(year as i32, month, day)?
        .and_hms_nano_opt(hour, minute, second, fraction)?;
    Some(t.and_utc().timestamp_micros())
}

/// `YYYY-MM-DD` → days since 1970-01-01.
pub fn parse_date(v: &Json) -> Option<i32> {
    let day = NaiveDate::parse_from_str(v.as_str()?.trim(), "%Y-%m-%d").ok()?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from(day.signed_duration_since(epoch).num_days()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chrono_only(s: &str) -> Option<i64> {
        let s = s.trim();
        let dt = DateTime::parse_from_rfc3339(s)
            .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z"))
            .ok()?;
        Some(dt.with_timezone(&Utc).timestamp_micros())
    }

    /// The fast form reads every text exactly as chrono does, and refuses what chrono refuses.
    #[test]
    fn the_sdk_form_reads_as_chrono_reads_it() {
        let mut texts: Vec<String> = [
            "2026-11-27T07:45:31.232Z",
            "2026-11-27T07:45:31Z",
            "2026-11-27T07:45:31.1Z",
            "2026-11-27T07:45:31.123456789Z",
            "2026-11-27T07:45:31.1234567891Z",
            "1969-12-31T23:59:59.999999Z",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999Z",
            "2024-02-29T12:00:00Z",
            "2023-02-29T12:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-11-27T24:00:00Z",
            "2026-11-27T23:60:00Z",
            "2016-12-31T23:59:60Z",
            "2026-11-27T07:45:31.Z",
            "2026-11-27T07:45:31.232z",
            "2026-11-27t07:45:31.232Z",
            "2026-11-27 07:45:31.232Z",
            "2026-11-27T07:45:31.232+02:00",
            "2026-11-27T07:45:31.232Zx",
            "2026-11-27T07:45:31.232",
            "2026-1-27T07:45:31Z",
            "+2026-11-27T07:45:31Z",
            " 2026-11-27T07:45:31.232Z ",
            "2026-11-27T07:45:3a.232Z",
            "2026-11-27T07:45:31.2a2Z",
            "",
            "2026",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every digit of a valid time swapped for each other byte that could come there.
        let base = "2024-02-29T23:59:59.987654Z";
        for i in 0..base.len() {
            for c in ['0', '1', '2', '3', '5', '9', 'Z', '.', '-', ':', 'T'] {
                let mut s = base.to_string();
                s.replace_range(i..i + 1, &c.to_string());
                texts.push(s);
            }
        }
        for s in &texts {
            assert_eq!(parse_time_text(s), chrono_only(s), "{s:?}");
        }
        assert!(
            utc_micros(b"2026-11-27T07:45:31.232Z").is_some(),
            "the fast form is taken"
        );
    }
}
