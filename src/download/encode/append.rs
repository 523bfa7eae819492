//! Appending values to a response buffer without a library call per value: short byte runs are
//! copied as one fixed-size block and cut back (a memcpy call costs more than the copy for the
//! 5–30 byte values of a typical row), integers and timestamps are formatted into a fixed-size
//! array, and text is checked for bytes that need escaping eight at a time.

use super::sink::Sink;

/// Fixed block size of [`push_window`].
pub const WINDOW: usize = 32;

/// Appends `data[start..start + len]`. When a whole [`WINDOW`] is readable from `start` and the
/// run fits in it, the window is copied (a couple of vector moves) and only the run kept.
#[inline(always)]
pub fn push_window(out: &mut impl Sink, data: &[u8], start: usize, len: usize) {
    if len <= WINDOW
        && let Some(block) = data.get(start..start + WINDOW)
    {
        let block: &[u8; WINDOW] = block.try_into().expect("the range is WINDOW long");
        out.put(block, len);
    } else {
        out.put_slice(&data[start..start + len]);
    }
}

/// `b` repeated in every byte of a word.
pub const fn splat(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// The high bit set in the bytes of `w` that may be below 0x20, a `"` or a `\`: the lowest
/// set one is exact (a borrow can only flag bytes above a true one), so `0` means clean.
#[inline(always)]
pub fn json_escape_flags(w: u64) -> u64 {
    const LO: u64 = splat(0x01);
    const HI: u64 = splat(0x80);
    let zero = |v: u64| v.wrapping_sub(LO) & !v & HI;
    let below_space = w.wrapping_sub(splat(0x20)) & !w & HI;
    below_space | zero(w ^ splat(b'"')) | zero(w ^ splat(b'\\'))
}

/// Whether any byte of `w` is below 0x20, or a `"` or a `\`.
#[inline(always)]
pub fn word_needs_json_escape(w: u64) -> bool {
    json_escape_flags(w) != 0
}

/// The high bit set in the bytes of `w` that may be a `"`; the lowest set one is exact.
#[inline(always)]
pub fn quote_flags(w: u64) -> u64 {
    let v = w ^ splat(b'"');
    v.wrapping_sub(splat(0x01)) & !v & splat(0x80)
}

/// Whether any byte of `w` is a `,`, `"`, `\n` or `\r`.
#[inline(always)]
pub fn word_needs_csv_quote(w: u64) -> bool {
    const LO: u64 = splat(0x01);
    const HI: u64 = splat(0x80);
    let zero = |v: u64| v.wrapping_sub(LO) & !v & HI;
    (zero(w ^ splat(b','))
        | zero(w ^ splat(b'"'))
        | zero(w ^ splat(b'\n'))
        | zero(w ^ splat(b'\r')))
        != 0
}

/// Runs `word` over `data[start..start + len]` eight bytes at a time. The last word is read
/// in one load, without staging the tail in a padded block (whose piecewise stores stall the
/// load): a value of 8 bytes or more ends with the word of its last 8 bytes (overlapping the
/// previous one is harmless); a shorter one is read from the buffer around it and its bytes
/// past `len` replaced by a clean padding byte.
#[inline(always)]
fn any_word(data: &[u8], start: usize, len: usize, word: impl Fn(u64) -> bool) -> bool {
    let s = &data[start..start + len];
    let load = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    if len >= 8 {
        let chunks = s.chunks_exact(8);
        return chunks.into_iter().any(|c| word(load(c))) || word(load(&s[len - 8..]));
    }
    if len == 0 {
        return false;
    }
    const PAD: u64 = splat(b'a');
    let keep = (1u64 << (8 * len)) - 1;
    let w = if let Some(b) = data.get(start..start + 8) {
        load(b)
    } else if start + len >= 8 {
        load(&data[start + len - 8..start + len]) >> (8 * (8 - len))
    } else {
        s.iter().rev().fold(0, |w, &b| (w << 8) | b as u64)
    };
    word((w & keep) | (PAD & !keep))
}

/// Whether `data[start..start + len]` has a control character, `"` or `\` (JSON must escape
/// them).
#[inline]
pub fn needs_json_escape(data: &[u8], start: usize, len: usize) -> bool {
    any_word(data, start, len, word_needs_json_escape)
}

/// Whether the CSV field `data[start..start + len]` must be quoted (a comma, quote or line
/// break in it).
#[inline]
pub fn needs_csv_quote(data: &[u8], start: usize, len: usize) -> bool {
    any_word(data, start, len, word_needs_csv_quote)
}

/// Appends `s` eight bytes at a time, with `special` appending each byte `flags` finds (in
/// place of the byte): a clean word is copied whole, a flagged one up to its first flagged
/// byte (no call per run). `flags` must flag exactly the lowest special byte of a word, as
/// [`json_escape_flags`] and [`quote_flags`] do. The last bytes are checked one at a time.
#[inline(always)]
pub fn copy_flagged(
    s: &[u8],
    out: &mut Vec<u8>,
    flags: impl Fn(u64) -> u64,
    special: impl Fn(u8, &mut Vec<u8>),
) {
    out.reserve(s.len() + 8);
    let mut i = 0;
    while let Some(word) = s.get(i..i + 8) {
        let word: &[u8; 8] = word.try_into().expect("8 bytes");
        let found = flags(u64::from_le_bytes(*word));
        let at = out.len();
        out.extend_from_slice(word);
        if found == 0 {
            i += 8;
            continue;
        }
        let k = (found.trailing_zeros() / 8) as usize;
        out.truncate(at + k);
        special(word[k], out);
        i += k + 1;
    }
    for &b in &s[i..] {
        // The byte alone in a word of clean padding.
        if flags((splat(b'a') & !0xff) | b as u64) & 0x80 != 0 {
            special(b, out);
        } else {
            out.push(b);
        }
    }
}

/// "00" … "99".
pub const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// The eight decimal digits of `n` (< 10^8), zero-padded, as ASCII bytes in memory order
/// (most significant first), computed in one word: 4-digit halves, then pairs, then digits,
/// each split by a multiply-shift (exact in these ranges, no carry between lanes).
#[inline(always)]
pub fn digits8(n: u32) -> u64 {
    let n = n as u64;
    let mut v = (n / 10_000) | ((n % 10_000) << 32);
    let q = ((v * 10_486) >> 20) & 0x0000_007f_0000_007f;
    v = q | ((v - q * 100) << 16);
    let q = ((v * 103) >> 10) & 0x000f_000f_000f_000f;
    q | ((v - q * 10) << 8)
}

/// Appends `v` in decimal. Always inlined: a call per value cost 2-3 % of a numeric table's
/// JSON download.
#[inline(always)]
pub fn push_i64(out: &mut impl Sink, v: i64) {
    let n = v.unsigned_abs();
    if n < 100_000_000 {
        // Up to eight digits as one word, its leading zero digits (bytes 0) dropped.
        if v < 0 {
            out.push(b'-');
        }
        let d = digits8(n as u32);
        let lead = if n == 0 { 7 } else { d.trailing_zeros() / 8 };
        out.put(
            &((d >> (8 * lead)) | splat(b'0')).to_le_bytes(),
            8 - lead as usize,
        );
        return;
    }
    out.vec(|out| push_long(out, v));
}

/// Appends `v` (at least 10^8 in magnitude) in decimal: out of line, so the row loops inline
/// only the short case.
#[inline(never)]
fn push_long(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 24];
    let neg = v < 0;
    let mut n = v.unsigned_abs();
    let digits = n.checked_ilog10().map_or(1, |d| d as usize + 1);
    let len = digits + neg as usize;
    let mut i = len;
    while n >= 100 {
        let p = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        buf[i] = PAIRS[p];
        buf[i + 1] = PAIRS[p + 1];
    }
    if n >= 10 {
        let p = n as usize * 2;
        i -= 2;
        buf[i] = PAIRS[p];
        buf[i + 1] = PAIRS[p + 1];
    } else {
        i -= 1;
        buf[i] = b'0' + n as u8;
    }
    if neg {
        buf[0] = b'-';
    }
    out.put(&buf, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_match_itoa() {
        let mut cases = vec![
            0i64,
            1,
            -1,
            9,
            10,
            99,
            100,
            101,
            999_999,
            i64::MAX,
            i64::MIN,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push((x as i64) >> (x % 64));
        }
        // Every digit count's edges, both signs, and a dense run of small values.
        for k in 0..19 {
            let p = 10i64.pow(k);
            cases.extend([p - 1, p, p + 1, -p + 1, -p, -p - 1]);
        }
        cases.extend(-100_000..100_000);
        for v in cases {
            let mut out = b"x".to_vec();
            push_i64(&mut out, v);
            assert_eq!(&out[1..], itoa::Buffer::new().format(v).as_bytes(), "{v}");
        }
    }

    #[test]
    fn escape_checks_match_the_byte_by_byte_rule() {
        use super::text::{csv_rule, embedded, json_rule, mostly_clean};
        let alphabet = b"ab,\"\\\n\r\t\x01\x1f \x7f\xc3\xa9\xf0\x9f\x8e\x89";
        let mut x = 12345u64;
        for len in 0..40 {
            for _ in 0..200 {
                let s = mostly_clean(&mut x, len, 8, alphabet);
                // Alone, and inside buffers of special bytes (which must not leak in).
                for (before, after) in [(0, 0), (3, 0), (0, 5), (9, 9)] {
                    let data = embedded(&s, before, after);
                    let (at, n) = (before, s.len());
                    assert_eq!(
                        needs_json_escape(&data, at, n),
                        json_rule(&s),
                        "{s:?} {before}"
                    );
                    assert_eq!(
                        needs_csv_quote(&data, at, n),
                        csv_rule(&s),
                        "{s:?} {before}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_lowest_flag_is_the_first_special_byte() {
        let json = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        let alphabet = b"a\"\\\n\x01\x1f \x7f\x80\xc3\xa9\xff!#";
        let mut x = 0x853c_49e6_748f_ea9bu64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let word: [u8; 8] =
                std::array::from_fn(|k| alphabet[(x >> (k * 5)) as usize % alphabet.len()]);
            let w = u64::from_le_bytes(word);
            let first = |f: u64| (f != 0).then(|| f.trailing_zeros() as usize / 8);
            assert_eq!(
                first(json_escape_flags(w)),
                word.iter().position(|&b| json(b)),
                "{word:?}"
            );
            assert_eq!(
                first(quote_flags(w)),
                word.iter().position(|&b| b == b'"'),
                "{word:?}"
            );
        }
    }

    #[test]
    fn windows_copy_exactly_the_run() {
        let data: Vec<u8> = (0..100u8).collect();
        for start in 0..100 {
            for len in 0..=(100 - start).min(40) {
                let mut out = vec![7u8];
                push_window(&mut out, &data, start, len);
                assert_eq!(&out[1..], &data[start..start + len]);
            }
        }
    }
}

/// Generated text for the tests of this module and of [`super::clean`], and the byte-by-byte
/// rules they are checked against.
#[cfg(test)]
pub(super) mod text {
    /// Whether JSON must escape a byte of `s` (a control byte, `"` or `\`).
    pub fn json_rule(s: &[u8]) -> bool {
        s.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
    }

    /// Whether CSV must quote `s` (a `,`, `"`, `\n` or `\r` in it).
    pub fn csv_rule(s: &[u8]) -> bool {
        s.iter().any(|&b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
    }

    /// `len` bytes from the xorshift state `x`: lowercase letters, and one byte in `one_in` on
    /// average from `alphabet`.
    pub fn mostly_clean(x: &mut u64, len: usize, one_in: u64, alphabet: &[u8]) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                if (*x).is_multiple_of(one_in) {
                    alphabet[(*x >> 8) as usize % alphabet.len()]
                } else {
                    b'a' + (*x >> 8) as u8 % 26
                }
            })
            .collect()
    }

    /// `s` after `before` quote bytes and followed by `after` newlines: special bytes around a
    /// value, which must not count as its own.
    pub fn embedded(s: &[u8], before: usize, after: usize) -> Vec<u8> {
        let mut data = vec![b'"'; before];
        data.extend_from_slice(s);
        data.extend(std::iter::repeat_n(b'\n', after));
        data
    }
}
