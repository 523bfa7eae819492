//! JSON escaping and CSV quote doubling of long text without a branch per special byte: 16
//! bytes at a time, each half expanded by one SSSE3 shuffle (a table of the 256 ways eight bytes
//! can hold special bytes gives, for each output byte, which input byte or the inserted one — a
//! backslash, or a second quote — goes there). Text with a byte to escape every few words
//! (quotes, newlines) otherwise runs at the pace of mispredicted branches. A block holding a
//! control byte without a two-character JSON escape (`\u00XX`) is left to the caller's scalar
//! path, as are the last bytes under 16.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
    _mm_or_si128, _mm_set1_epi8, _mm_shuffle_epi8, _mm_srli_si128, _mm_storeu_si128,
    _mm_unpacklo_epi64,
};

/// For each 8-bit mask of special bytes, the shuffle that writes the eight bytes with the
/// inserted byte (source index 8) before each special one, and the output length.
#[cfg(target_arch = "x86_64")]
static SHUFFLES: [([u8; 16], u8); 256] = {
    let mut t = [([0x80u8; 16], 0u8); 256];
    let mut mask = 0;
    while mask < 256 {
        let mut out = 0;
        let mut i = 0;
        while i < 8 {
            if mask >> i & 1 == 1 {
                t[mask].0[out] = 8;
                out += 1;
            }
            t[mask].0[out] = i as u8;
            out += 1;
            i += 1;
        }
        t[mask].1 = out as u8;
        mask += 1;
    }
    t
};

/// JSON-escapes whole 16-byte blocks of `s` into `out` while they hold only special bytes with
/// a two-character escape; returns how many bytes of `s` it consumed (0 for text under 16
/// bytes, or a CPU without SSSE3).
#[inline]
pub fn escape_blocks(s: &[u8], out: &mut Vec<u8>) -> usize {
    blocks_if_available::<true>(s, out)
}

/// Copies whole 16-byte blocks of `s` into `out` with each `"` doubled (CSV); returns how many
/// bytes of `s` it consumed (0 for text under 16 bytes, or a CPU without SSSE3).
#[inline]
pub fn double_quotes_blocks(s: &[u8], out: &mut Vec<u8>) -> usize {
    blocks_if_available::<false>(s, out)
}

#[inline(always)]
fn blocks_if_available<const JSON: bool>(s: &[u8], out: &mut Vec<u8>) -> usize {
    #[cfg(target_arch = "x86_64")]
    if s.len() >= 16 && std::is_x86_feature_detected!("ssse3") {
        // SAFETY: SSSE3 is available (checked just above).
        return unsafe { blocks::<JSON>(s, out) };
    }
    let _ = (s, out);
    0
}

/// `JSON`: JSON escapes; else CSV quote doubling.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
unsafe fn blocks<const JSON: bool>(s: &[u8], out: &mut Vec<u8>) -> usize {
    // Each 16-byte block writes at most 32 bytes.
    out.reserve(2 * s.len() + 32);
    let eq = |v: __m128i, b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
    // The letter after the backslash for bytes 0..16 (0 for those escaped as \u00XX).
    let letters = from_bytes(*b"\0\0\0\0\0\0\0\0btn\0fr\0\0");
    let inserted = _mm_set1_epi8(if JSON { b'\\' } else { b'"' } as i8);
    let mut i = 0;
    while i + 16 <= s.len() {
        // SAFETY: `i + 16 <= s.len()`, so the load reads inside `s`.
        let v = unsafe { _mm_loadu_si128(s.as_ptr().add(i).cast()) };
        if !JSON {
            expand(out, v, _mm_movemask_epi8(eq(v, b'"')) as usize, inserted);
            i += 16;
            continue;
        }
        let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
        let special = _mm_or_si128(control, _mm_or_si128(eq(v, b'"'), eq(v, b'\\')));
        // Controls: their letter (pshufb reads the low four bits; bytes 0x10..0x1f map to 0
        // through the high-nibble check below).
        let low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x0f)), v);
        let letter = _mm_and_si128(_mm_shuffle_epi8(letters, v), low);
        let no_letter = _mm_and_si128(control, eq(letter, 0));
        if _mm_movemask_epi8(no_letter) != 0 {
            break;
        }
        // Controls become their letter; `"` and `\` stay as they are.
        let text = _mm_or_si128(_mm_and_si128(control, letter), andnot(control, v));
        expand(out, text, _mm_movemask_epi8(special) as usize, inserted);
        i += 16;
    }
    i
}

/// Appends the 16 bytes of `text` with `inserted` before each byte whose bit is set in `mask`.
/// `out` must have room for 32 more bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
fn expand(out: &mut Vec<u8>, text: __m128i, mask: usize, inserted: __m128i) {
    let mut half = text;
    for m in [mask & 0xff, mask >> 8] {
        let (shuffle, len) = &SHUFFLES[m];
        // SAFETY: the table row is 16 bytes; the caller reserved room for 32 bytes, and the
        // length then covers only the `len` bytes this half wrote.
        unsafe {
            let src = _mm_unpacklo_epi64(half, inserted);
            let idx = _mm_loadu_si128(shuffle.as_ptr().cast());
            let at = out.len();
            _mm_storeu_si128(out.as_mut_ptr().add(at).cast(), _mm_shuffle_epi8(src, idx));
            out.set_len(at + *len as usize);
        }
        half = _mm_srli_si128::<8>(half);
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn andnot(a: __m128i, b: __m128i) -> __m128i {
    // SAFETY: SSE2 is part of x86_64.
    unsafe { std::arch::x86_64::_mm_andnot_si128(a, b) }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn from_bytes(bytes: [u8; 16]) -> __m128i {
    // SAFETY: reads the 16 bytes of the array.
    unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON and CSV encoders' tests compare whole outputs with serde_json and RFC 4180; this
    /// one checks the block path is what they exercise here, and where it stops.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn blocks_are_taken_and_stop_at_a_control_byte_without_a_short_escape() {
        if !std::is_x86_feature_detected!("ssse3") {
            return;
        }
        let s = "a \"quoted\"\n\tline \\ with é and more text, then\u{1} and more text here";
        let stop = s.find('\u{1}').unwrap() / 16 * 16;
        let mut out = Vec::new();
        assert_eq!(escape_blocks(s.as_bytes(), &mut out), stop);
        let want = serde_json::to_string(&s[..stop]).unwrap();
        assert_eq!(out, want.as_bytes()[1..want.len() - 1]);

        let mut out = Vec::new();
        let n = s.len() / 16 * 16;
        assert_eq!(double_quotes_blocks(s.as_bytes(), &mut out), n);
        assert_eq!(out, s[..n].replace('"', "\"\"").as_bytes());
    }
}
