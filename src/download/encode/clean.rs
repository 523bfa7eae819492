//! Copying a short text value that needs no escaping or quoting in one step: the value's
//! [`WINDOW`]-byte block is loaded once, checked for special bytes with SSE2 compares (the
//! bytes past the value masked off), and stored whole when the value is clean — instead of a
//! word-by-word check followed by a separate copy. Other architectures, and values that are
//! longer or too near their buffer's end for a whole block, take the word-at-a-time path.

use super::append::{WINDOW, needs_csv_quote, needs_json_escape, push_window};
use super::sink::Sink;

/// Which bytes make a value special.
#[derive(Clone, Copy)]
pub enum Special {
    /// A control character (below 0x20), `"` or `\` (JSON escapes them).
    Json,
    /// `,`, `"`, `\n` or `\r` (a CSV field with one is quoted).
    Csv,
}

/// Appends `data[start..start + len]` and returns `true` if it has no [`Special`] byte; else
/// appends nothing and returns `false`.
#[inline(always)]
pub fn push_if_clean(
    out: &mut impl Sink,
    data: &[u8],
    start: usize,
    len: usize,
    special: Special,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if len <= WINDOW
        && let Some(block) = data.get(start..start + WINDOW)
    {
        let block: &[u8; WINDOW] = block.try_into().expect("the range is WINDOW long");
        return sse2::push_if_clean(out, block, len, special);
    }
    let dirty = match special {
        Special::Json => needs_json_escape(data, start, len),
        Special::Csv => needs_csv_quote(data, start, len),
    };
    if !dirty {
        push_window(out, data, start, len);
    }
    !dirty
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    //! SSE2 is part of x86_64, so these intrinsics need no runtime check.
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };

    use super::{Sink, Special, WINDOW};

    const _: () = assert!(WINDOW == 32);

    /// One bit per byte of `v` that is special.
    #[inline(always)]
    fn flags(v: __m128i, special: Special) -> u32 {
        // SAFETY: SSE2 is always available on x86_64; these work on registers only.
        unsafe {
            let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
            let hits = match special {
                // min(v, 0x1f) == v  ⇔  v ≤ 0x1f (unsigned).
                Special::Json => _mm_or_si128(
                    _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v),
                    _mm_or_si128(eq(b'"'), eq(b'\\')),
                ),
                Special::Csv => _mm_or_si128(
                    _mm_or_si128(eq(b','), eq(b'"')),
                    _mm_or_si128(eq(b'\n'), eq(b'\r')),
                ),
            };
            _mm_movemask_epi8(hits) as u32 & 0xffff
        }
    }

    /// The first `len` bytes of `block` are the value.
    #[inline(always)]
    pub fn push_if_clean(
        out: &mut impl Sink,
        block: &[u8; WINDOW],
        len: usize,
        s: Special,
    ) -> bool {
        // SAFETY: the loads read the 32 bytes of `block`.
        let (a, b) = unsafe {
            let p = block.as_ptr().cast::<__m128i>();
            (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)))
        };
        let hits = flags(a, s) | (flags(b, s) << 16);
        let value = ((1u64 << len) - 1) as u32;
        if hits & value != 0 {
            return false;
        }
        out.put(block, len);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_byte_by_byte_rule_at_every_length_and_offset() {
        use super::super::append::text::{csv_rule, embedded, json_rule, mostly_clean};
        let alphabet = b"ab,\"\\\n\r\t\x01\x1f \x7f\x80\xc3\xa9\xf0\x9f\x8e\x89\xff";
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for len in 0..=40 {
            for _ in 0..300 {
                let s = mostly_clean(&mut x, len, 6, alphabet);
                // Special bytes around the value must not count; with and without room for a
                // whole block after it.
                for (before, after) in [(0, 0), (5, 0), (0, 40), (7, 40)] {
                    let data = embedded(&s, before, after);
                    let rules = [(Special::Json, json_rule(&s)), (Special::Csv, csv_rule(&s))];
                    for (special, dirty) in rules {
                        let mut out = b"x".to_vec();
                        let clean = push_if_clean(&mut out, &data, before, len, special);
                        assert_eq!(clean, !dirty, "{s:?} {before} {after}");
                        let want: &[u8] = if clean { &s } else { &[] };
                        assert_eq!(&out[1..], want, "{s:?} {before} {after}");
                    }
                }
            }
        }
    }
}
