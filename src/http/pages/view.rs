//! What the templates show, already formatted: the signed-in header, times, sizes, sentences.

use crate::accounts::Caller;

/// The header of a signed-in page: team, user and the sign-out form's token.
#[derive(Debug, Clone)]
pub struct Chrome {
    /// Team name.
    pub team: String,
    /// User's display name.
    pub user: String,
    /// `owner` / `member`.
    pub role: &'static str,
    /// The session's CSRF token, for the page's forms.
    pub csrf: String,
}

impl Chrome {
    /// The header for `caller`.
    pub fn of(caller: &Caller) -> Chrome {
        Chrome {
            team: caller.team.name.clone(),
            user: caller.user.name.clone(),
            role: caller.user.role.as_str(),
            csrf: caller.csrf().unwrap_or_default().to_string(),
        }
    }
}

/// A moment (ms since epoch) for people: `2026-11-22 14:03 UTC`.
pub fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

/// An optional moment, `never` when absent.
pub fn when_or(ms: Option<i64>, none: &str) -> String {
    ms.map(when).unwrap_or_else(|| none.to_string())
}

/// Bytes for people: `512 B`, `1.5 KiB`, `12.3 MiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A duration for people, in its largest whole unit: `7 days`, `15 minutes`, `1 second`.
pub fn duration(d: std::time::Duration) -> String {
    let secs = d.as_secs().max(1);
    let (n, unit) = [
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
        (1, "second"),
    ]
    .into_iter()
    .find(|(u, _)| secs.is_multiple_of(*u) || secs >= *u * 2)
    .map_or((secs, "second"), |(u, name)| (secs.div_ceil(u), name));
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// A count with thousands separators: `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` as a sentence: capital first letter, final full stop.
pub fn sentence(text: &str) -> String {
    let text = text.trim();
    let mut chars = text.chars();
    let Some(first) = chars.next() else {
        return String::new();
    };
    let mut out: String = first.to_uppercase().chain(chars).collect();
    if !out.ends_with(['.', '!', '?', ')']) {
        out.push('.');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(size(10), "10 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(5 * 1024 * 1024), "5.0 MiB");
        assert_eq!(
            duration(std::time::Duration::from_secs(7 * 86_400)),
            "7 days"
        );
        assert_eq!(duration(std::time::Duration::from_secs(90)), "90 seconds");
        assert_eq!(duration(std::time::Duration::from_secs(900)), "15 minutes");
        assert_eq!(duration(std::time::Duration::from_millis(10)), "1 second");
        assert_eq!(count(0), "0");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(123), "123");
        assert_eq!(when(0), "1970-01-01 00:00 UTC");
        assert_eq!(
            sentence("a team must keep an owner"),
            "A team must keep an owner."
        );
        assert_eq!(sentence("done."), "Done.");
    }
}
