//! float64 values as text: the shortest decimal that reads back as the same value, in zmij's
//! notation (`1.0`, `0.25`, `1e-7`, `1.5e+300`). In columns whose values mostly have at most four
//! decimals (prices, rates, readings — common in real tables) such values are written from
//! their integer count of ten-thousandths; the rest by zmij, straight into the output buffer's
//! spare room — no staging buffer and no copy call per value.

use std::mem::MaybeUninit;

use super::append::{digits8, splat};
use super::sink::Sink;

/// Bytes zmij may write for one value.
const ZMIJ_MAX: usize = 24;
// `zmij::Buffer` is its 24-byte array and nothing else, so it may be laid over spare capacity.
const _: () = assert!(size_of::<zmij::Buffer>() == ZMIJ_MAX && align_of::<zmij::Buffer>() == 1);

/// Appends finite `v` in its shortest round-trip form; `short`: try the short-decimal path
/// first (for a column where [`mostly_short`] holds).
#[inline(always)]
pub fn push_f64(out: &mut impl Sink, v: f64, short: bool) {
    if !(short && push_short_decimal(out, v)) {
        push_zmij(out, v);
    }
}

/// Values sampled by [`mostly_short`].
const SAMPLE: usize = 16;

/// Whether at least half of the first values of a column are short decimals: then trying the
/// short path first pays; for full-precision values the failed test would cost ~10 % more
/// than zmij alone.
pub fn mostly_short(values: &[f64]) -> bool {
    let sample = &values[..values.len().min(SAMPLE)];
    let short = sample
        .iter()
        .filter(|&&v| short_decimal(v).is_some())
        .count();
    !sample.is_empty() && 2 * short >= sample.len()
}

/// Ten-thousandths: the finest step [`push_short_decimal`] takes.
const SCALE: f64 = 10_000.0;

/// Writes `v` and returns `true` when it is the double nearest to `m / 10^4` for an integer
/// `0 < |m| < 10^12`, else writes nothing and returns `false`.
///
/// Why the text is then the shortest round-trip one, as zmij would write it: `m / 10^4` has
/// at most 12 significant digits, and any two decimals of at most 15 digits round to different
/// doubles (10^15 < 2^52), so no other decimal as short or shorter reads back as `v`. The test
/// is exact: `m` and 10^4 are exact doubles and the division is correctly rounded, so
/// `m as f64 / 10^4 == |v|` holds exactly when |v| is the double nearest to `m / 10^4`. The
/// range (10^-4 ≤ |v| < 10^8) is inside zmij's fixed notation, whose layout this copies:
/// integer digits, `.`, the fraction without trailing zeros (`.0` when there is none).
#[inline(always)]
fn push_short_decimal(out: &mut impl Sink, v: f64) -> bool {
    let Some(m) = short_decimal(v) else {
        return false;
    };
    let (whole, frac) = ((m / 10_000) as u32, (m % 10_000) as u32);
    // The integer part as in `push_i64`: eight digits in a word, leading zero bytes dropped.
    let d = digits8(whole);
    let lead = if whole == 0 {
        7
    } else {
        d.trailing_zeros() / 8
    };
    let int = (d >> (8 * lead)) | splat(b'0');
    // The four fraction digits, one per byte (first digit lowest; the upper half of the eight
    // digits of a number below 10^4): their trailing zero digits are the high zero bytes.
    let digits = (digits8(frac) >> 32) as u32;
    let keep = if frac == 0 {
        2 // ".0"
    } else {
        5 - digits.leading_zeros() as usize / 8
    };
    let dot = (u64::from(digits | 0x3030_3030) << 8) | u64::from(b'.');
    // An optional sign, `8 - lead` bytes of one word, `keep` of the other.
    out.put(b"-", usize::from(v.is_sign_negative()));
    out.put(&int.to_le_bytes(), 8 - lead as usize);
    out.put(&dot.to_le_bytes(), keep);
    true
}

/// `|v| · 10^4` when that is an integer `m` as [`push_short_decimal`] needs (`|v|` the double
/// nearest to `m / 10^4`, `0 < m < 10^12`).
#[inline(always)]
fn short_decimal(v: f64) -> Option<u64> {
    let a = v.abs();
    if a >= 1e8 || a.is_nan() {
        return None;
    }
    // The nearest integer to a·10^4 (a candidate only: the product is rounded).
    let t = a * SCALE;
    // SAFETY: 0 ≤ t + 0.5 < 10^12 + 1, well inside i64.
    let m = unsafe { (t + 0.5).to_int_unchecked::<i64>() };
    // A quick rejection first, without the division (a divider is slow and, on a busy
    // machine, shared): for a true candidate the product is within a few units in the last
    // place of an integer (|t − m| ≤ ~2^-52·t).
    if m == 0 || (t - m as f64).abs() > t * 1e-15 || m as f64 / SCALE != a {
        return None;
    }
    Some(m as u64)
}

/// Appends finite `v` as zmij writes it.
#[inline(always)]
fn push_zmij(out: &mut impl Sink, v: f64) {
    // SAFETY: `zmij::Buffer` is exactly an array of ZMIJ_MAX `MaybeUninit<u8>` (asserted
    // above), so it may be laid over the block of spare room. `format_finite` returns the text
    // it wrote into that buffer (so at most ZMIJ_MAX bytes), which is initialised; it is moved
    // to the block's start should zmij ever return it from elsewhere in the buffer.
    unsafe {
        out.write_with(|block: &mut [MaybeUninit<u8>; ZMIJ_MAX]| {
            let dst = block.as_mut_ptr().cast::<u8>();
            let text = (*dst.cast::<zmij::Buffer>()).format_finite(v);
            let len = text.len();
            if text.as_ptr() != dst.cast_const() {
                std::ptr::copy(text.as_ptr(), dst, len);
            }
            len
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_as_zmij_writes_them() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut out = b"x".to_vec();
        let mut want = b"x".to_vec();
        for i in 0..400_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = match i % 4 {
                0 => f64::from_bits(x),
                1 => (x % 10_000_000_000) as f64 / 10f64.powi((x >> 40) as i32 % 7),
                2 => (x >> 11) as f64 / (1u64 << 53) as f64,
                // Up to 16 digits with 0–8 decimals, either sign: both sides of every bound
                // of the short-decimal path.
                _ => {
                    let m = (x >> 8) % 10u64.pow(1 + (x % 16) as u32);
                    let v = m as f64 / 10f64.powi((x >> 58) as i32 % 9);
                    if x & 1 == 0 { v } else { -v }
                }
            };
            if v.is_finite() {
                // Both paths for every kind of value (`i / 4`: independent of the kind).
                push_f64(&mut out, v, (i / 4) % 2 == 0);
                want.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
                out.push(b',');
                want.push(b',');
            }
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            String::from_utf8(want).unwrap()
        );
    }

    #[test]
    fn columns_are_sampled_for_short_decimals() {
        let prices: Vec<f64> = (0..100)
            .map(|i| (i * 137 % 10_000) as f64 / 100.0)
            .collect();
        let random: Vec<f64> = (1..100).map(|i| (i as f64).sqrt()).collect();
        assert!(mostly_short(&prices));
        assert!(!mostly_short(&random));
        assert!(!mostly_short(&[]));
        assert!(!mostly_short(&[
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1.5
        ]));
        // Half of the sample is enough; fewer is not.
        let half: Vec<f64> = (0..16)
            .map(|i| if i % 2 == 0 { 1.5 } else { 0.1 + 0.2 })
            .collect();
        assert!(mostly_short(&half));
        assert!(!mostly_short(&half[1..4]));
    }

    #[test]
    fn short_decimals_take_the_integer_path_and_match_zmij() {
        let short = [
            1e-4,
            0.5,
            1.0,
            0.1,
            0.7,
            12.3,
            1234.5678,
            -0.25,
            99_999_999.999_9,
            9e7,
            100.0,
            0.0102,
            -1234.5678,
            -0.0102,
            -99.9,
            -12_345_678.0,
            10.001,
        ];
        let other = [
            0.0,
            -0.0,
            5e-5,
            1.5e-4,
            0.1 + 0.2,
            1e8,
            9e10,
            123_456.789_01,
            1e300,
            2.5e-10,
        ];
        for (values, fast) in [(&short[..], true), (&other[..], false)] {
            for &v in values {
                let mut out = Vec::new();
                assert_eq!(push_short_decimal(&mut out, v), fast, "{v:e}");
                if !fast {
                    assert!(out.is_empty(), "{v:e}");
                    push_zmij(&mut out, v);
                }
                let want = zmij::Buffer::new().format_finite(v).to_string();
                assert_eq!(String::from_utf8(out).unwrap(), want, "{v:e}");
            }
        }
    }
}
