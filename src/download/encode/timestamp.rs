//! Timestamps as RFC 3339 text (`YYYY-MM-DDTHH:MM:SS[.fff[fff]]Z`, as chrono's `AutoSi` writes
//! them) without `fmt`: the date part of the last day seen is kept per thread (event tables are
//! in time order, so most rows share their day with the previous one) and the time is built as
//! two words in registers (digits by multiply-shift) and appended as two stores — no staging
//! block, whose piecewise stores would stall the load that copies it.

use std::cell::Cell;

use super::append::{PAIRS, digits8, splat};

thread_local! {
    /// The last day (since the epoch) written, and its `YYYY-MM-DD`.
    static DAY: Cell<(i64, [u8; 10])> = const { Cell::new((i64::MIN, [0; 10])) };
}

/// Writes µs since the epoch as `YYYY-MM-DDTHH:MM:SS[.fff[fff]]Z`.
#[inline]
pub fn write_rfc3339(micros: i64, out: &mut Vec<u8>) {
    let (secs, frac) = (
        micros.div_euclid(1_000_000),
        micros.rem_euclid(1_000_000) as u32,
    );
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400) as u32);
    let Some(date) = date(days) else {
        // Years outside 0..=9999: a sign and as many digits as needed.
        let (y, m, d) = civil_from_days(days);
        out.extend_from_slice(format!("{y:+05}").as_bytes());
        out.extend_from_slice(&date_bytes(0, m as u32, d as u32)[4..]);
        push_time(out, sod, frac);
        return;
    };
    out.extend_from_slice(&date);
    push_time(out, sod, frac);
}

/// Appends `THH:MM:SS[.fff[fff]]Z` for `sod` seconds into the day and `frac` µs.
#[inline(always)]
fn push_time(out: &mut Vec<u8>, sod: u32, frac: u32) {
    let (h, m, s) = (sod / 3600, sod / 60 % 60, sod % 60);
    // `00HHMMSS` and `00ffffff`, byte k of the word being character k.
    let hms = digits8(h * 10_000 + m * 100 + s) | splat(b'0');
    let digit = |k: u32| (hms >> (8 * k)) & 0xff;
    let (colon, dot) = (b':' as u64, b'.' as u64);
    let time = b'T' as u64
        | (digit(2) << 8)
        | (digit(3) << 16)
        | (colon << 24)
        | (digit(4) << 32)
        | (digit(5) << 40)
        | (colon << 48)
        | (digit(6) << 56);
    out.extend_from_slice(&time.to_le_bytes());
    // The seconds' last digit, then `.ffffff` (or what is kept of it) and `Z`.
    let rest = digit(7) | (dot << 8) | ((digits8(frac) | splat(b'0')) & !0xffff);
    let z = b'Z' as u64;
    let (rest, len) = match frac {
        0 => ((rest & 0xff) | (z << 8), 2),
        f if f % 1000 == 0 => ((rest & !(0xff << 40)) | (z << 40), 6),
        _ => (rest, 8),
    };
    let at = out.len();
    out.extend_from_slice(&rest.to_le_bytes());
    out.truncate(at + len);
    if len == 8 {
        out.push(b'Z');
    }
}

/// `YYYY-MM-DD` of `days` since the epoch, from the per-thread cache when it is the last day
/// seen; `None` for years outside 0..=9999.
#[inline]
fn date(days: i64) -> Option<[u8; 10]> {
    DAY.with(|last| {
        let (seen, bytes) = last.get();
        if seen == days {
            return Some(bytes);
        }
        let (y, m, d) = civil_from_days(days);
        if !(0..=9999).contains(&y) {
            return None;
        }
        let bytes = date_bytes(y as u32, m as u32, d as u32);
        last.set((days, bytes));
        Some(bytes)
    })
}

#[inline(always)]
fn pair(b: &mut [u8], at: usize, v: u32) {
    let p = v as usize * 2;
    b[at] = PAIRS[p];
    b[at + 1] = PAIRS[p + 1];
}

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
    fn random_timestamps_match_chrono_whatever_the_day_before() {
        // Runs of the same day (the cache hits), jumps (it misses), whole seconds and
        // milliseconds (the short forms), years 1 to 9999.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut micros = 0i64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            micros = match x % 4 {
                0 => (x >> 8) as i64 % 253_402_300_800_000_000 - 62_135_596_800_000_000 / 2,
                1 => micros + (x >> 40) as i64,
                2 => micros - micros.rem_euclid(1_000_000),
                _ => micros - micros.rem_euclid(1000),
            };
            assert_eq!(ts(micros), chrono(micros), "{micros}");
        }
    }
}
