//! Dates as `YYYY-MM-DD` ([`write_date`]); timestamps as RFC 3339 text (`YYYY-MM-DDTHH:MM:SS[.fff[fff]]Z`, as chrono's `AutoSi` writes
//! them) without `fmt`. A [`Rfc3339`] keeps the `YYYY-MM-DDTHH:MM:` of the last minute it wrote
//! (event tables are in time order, so most values share their minute with the one before, and
//! the encoders keep one per batch); the seconds and fraction are built as two words in
//! registers (digits by multiply-shift) and appended as one store — no staging block, whose
//! piecewise stores would stall the load that copies it.

use super::append::{PAIRS, digits8, splat};
use super::sink::Sink;

/// Writes days since 1970-01-01 as `YYYY-MM-DD` (a sign and more digits outside 0..=9999).
pub fn write_date(days: i32, out: &mut Vec<u8>) {
    let (y, m, d) = civil_from_days(i64::from(days));
    if (0..=9999).contains(&y) {
        out.extend_from_slice(&date_bytes(y as u32, m as u32, d as u32));
    } else {
        out.extend_from_slice(format!("{y:+05}").as_bytes());
        out.extend_from_slice(&date_bytes(0, m as u32, d as u32)[4..]);
    }
}

/// Writes µs since the epoch as `YYYY-MM-DDTHH:MM:SS[.fff[fff]]Z`.
pub fn write_rfc3339(micros: i64, out: &mut Vec<u8>) {
    Rfc3339::default().write(micros, out);
}

/// A timestamp writer that remembers the last minute it wrote.
pub struct Rfc3339 {
    /// Minutes since the epoch of `prefix`.
    minute: i64,
    /// `YYYY-MM-DDTHH:MM:` of `minute`.
    prefix: [u8; 17],
}

impl Default for Rfc3339 {
    fn default() -> Self {
        Self {
            minute: i64::MIN,
            prefix: [0; 17],
        }
    }
}

impl Rfc3339 {
    /// Writes µs since the epoch as `YYYY-MM-DDTHH:MM:SS[.fff[fff]]Z`.
    #[inline(always)]
    pub fn write(&mut self, micros: i64, out: &mut impl Sink) {
        let (secs, frac) = (
            micros.div_euclid(1_000_000),
            micros.rem_euclid(1_000_000) as u32,
        );
        let minute = secs.div_euclid(60);
        let sec = (secs - minute * 60) as u32;
        if minute != self.minute && !self.remember(minute) {
            return out.vec(|out| wide_year(minute, sec, frac, out));
        }
        out.put(&self.prefix, self.prefix.len());
        push_seconds(out, sec, frac);
    }

    /// Builds the prefix of `minute`; `false` for years outside 0..=9999.
    #[inline(never)]
    fn remember(&mut self, minute: i64) -> bool {
        let (days, mod_) = (minute.div_euclid(1440), minute.rem_euclid(1440) as u32);
        let (y, m, d) = civil_from_days(days);
        if !(0..=9999).contains(&y) {
            return false;
        }
        self.prefix[..10].copy_from_slice(&date_bytes(y as u32, m as u32, d as u32));
        self.prefix[10..].copy_from_slice(b"THH:MM:");
        pair(&mut self.prefix, 11, mod_ / 60);
        pair(&mut self.prefix, 14, mod_ % 60);
        self.minute = minute;
        true
    }
}

/// Years outside 0..=9999: a sign and as many digits as needed.
#[cold]
fn wide_year(minute: i64, sec: u32, frac: u32, out: &mut Vec<u8>) {
    let (days, mod_) = (minute.div_euclid(1440), minute.rem_euclid(1440) as u32);
    let (y, m, d) = civil_from_days(days);
    out.extend_from_slice(format!("{y:+05}").as_bytes());
    out.extend_from_slice(&date_bytes(0, m as u32, d as u32)[4..]);
    let mut hm = *b"THH:MM:";
    pair(&mut hm, 1, mod_ / 60);
    pair(&mut hm, 4, mod_ % 60);
    out.extend_from_slice(&hm);
    push_seconds(out, sec, frac);
}

/// Appends `SS[.fff[fff]]Z` for `sec` seconds and `frac` µs.
#[inline(always)]
fn push_seconds(out: &mut impl Sink, sec: u32, frac: u32) {
    let p = sec as usize * 2;
    // `00ffffff`, byte k being character k.
    let f = digits8(frac) | splat(b'0');
    let (dot, z) = (b'.' as u64, b'Z' as u64);
    // `SS.fffff` and `fZ`.
    let head = PAIRS[p] as u64 | (PAIRS[p + 1] as u64) << 8 | dot << 16 | (f >> 16) << 24;
    let tail = (f >> 56) | z << 8;
    let (head, len) = match frac {
        0 => ((head & 0xffff) | z << 16, 3),
        f if f % 1000 == 0 => ((head & !(0xff << 48)) | z << 48, 7),
        _ => (head, 10),
    };
    out.put(&(head as u128 | (tail as u128) << 64).to_le_bytes(), len);
}

#[inline(always)]
fn pair(b: &mut [u8], at: usize, v: u32) {
    let p = v as usize * 2;
    b[at] = PAIRS[p];
    b[at + 1] = PAIRS[p + 1];
}

/// `YYYY-MM-DD`.
fn date_bytes(y: u32, m: u32, d: u32) -> [u8; 10] {
    let mut b = *b"0000-00-00";
    pair(&mut b, 0, y / 100);
    pair(&mut b, 2, y % 100);
    pair(&mut b, 5, m);
    pair(&mut b, 8, d);
    b
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(micros: i64) -> String {
        let mut v = Vec::new();
        write_rfc3339(micros, &mut v);
        String::from_utf8(v).unwrap()
    }

    fn chrono(micros: i64) -> String {
        chrono::DateTime::from_timestamp_micros(micros)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    }

    #[test]
    fn timestamps_match_chrono() {
        assert_eq!(ts(1_354_408_208_276_000), "2012-12-02T00:30:08.276Z");
        assert_eq!(ts(1_354_408_208_000_000), "2012-12-02T00:30:08Z");
        assert_eq!(ts(1_354_408_208_000_001), "2012-12-02T00:30:08.000001Z");
        for micros in [
            0i64,
            -1,
            951_782_400_123_456,
            4_102_444_799_999_999,
            -2_208_988_800_000_000,
            -62_167_219_200_000_000, // 0000-01-01
            253_402_300_799_999_999, // 9999-12-31T23:59:59.999999
            253_402_300_800_000_000, // +10000-01-01
            -62_167_219_200_000_001, // -0001-12-31T23:59:59.999999
        ] {
            assert_eq!(ts(micros), chrono(micros), "{micros}");
        }
    }

    #[test]
    fn random_timestamps_match_chrono_whatever_the_minute_before() {
        // Runs of the same minute (the cache hits), jumps (it misses), whole seconds and
        // milliseconds (the short forms), years 1 to 9999, one writer throughout.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut micros = 0i64;
        let mut writer = Rfc3339::default();
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            micros = match x % 4 {
                0 => (x >> 8) as i64 % 253_402_300_800_000_000 - 62_135_596_800_000_000 / 2,
                1 => micros + (x >> 40) as i64,
                2 if x % 8 == 2 => micros + (x >> 60) as i64 * 7_000_000,
                2 => micros - micros.rem_euclid(1_000_000),
                _ => micros - micros.rem_euclid(1000),
            };
            let mut v = Vec::new();
            writer.write(micros, &mut v);
            assert_eq!(String::from_utf8(v).unwrap(), chrono(micros), "{micros}");
        }
    }
}
