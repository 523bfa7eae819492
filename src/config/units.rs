//! The units config values are written in: durations (`"10s"`, `"200ms"`) and byte sizes
//! (`"64MiB"`, `"1GB"`, or a number of bytes).

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A duration written like `"10s"`, `"200ms"` or `"5m"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(s.trim())
            .map(HumanDuration)
            .map_err(|e| {
                serde::de::Error::custom(format!(
                    "invalid duration {s:?} ({e}); write e.g. \"10s\" or \"200ms\""
                ))
            })
    }
}

/// A byte size written like `"64MiB"`, `"32KiB"`, `"1GB"` or a plain integer of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Str(s) => parse_size(&s).map(ByteSize).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "invalid size {s:?}; write e.g. \"64MiB\", \"32KiB\" or a number of bytes"
                ))
            }),
        }
    }
}

/// Parses `"64MiB"`, `"1.5 GB"`, `"512"`; binary (KiB) and decimal (KB) units.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        _ => return None,
    };
    let v = num * mult as f64;
    (v.is_finite() && v >= 0.0).then_some(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("32 KiB"), Some(32 << 10));
        assert_eq!(parse_size("1GB"), Some(1_000_000_000));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("12 parsecs"), None);
    }
}
