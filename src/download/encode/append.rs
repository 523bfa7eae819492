//! Appending values to a response buffer without a library call per value: short byte runs are
//! copied as one fixed-size block and cut back (a memcpy call costs more than the copy for the
//! 5–30 byte values of a typical row), integers and timestamps are formatted into a fixed-size
//! array, and text is checked for bytes that need escaping eight at a time.

/// Fixed block size of [`push_window`].
pub const WINDOW: usize = 32;

/// Appends `data[start..start + len]`. When a whole [`WINDOW`] is readable from `start` and the
/// run fits in it, the window is copied (a couple of vector moves) and `out` cut back to the run.
#[inline(always)]
pub fn push_window(out: &mut Vec<u8>, data: &[u8], start: usize, len: usize) {
    if len <= WINDOW
        && let Some(block) = data.get(start..start + WINDOW)
    {
        let block: &[u8; WINDOW] = block.try_into().expect("the range is WINDOW long");
        let at = out.len();
        out.extend_from_slice(block);
        out.truncate(at + len);
    } else {
        out.extend_from_slice(&data[start..start + len]);
    }
}

/// `b` repeated in every byte of a word.
const fn splat(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// Whether any byte of `w` is below 0x20, or a `"` or a `\`.
#[inline(always)]
pub fn word_needs_json_escape(w: u64) -> bool {
    const LO: u64 = splat(0x01);
    const HI: u64 = splat(0x80);
    let zero = |v: u64| v.wrapping_sub(LO) & !v & HI;
    let below_space = w.wrapping_sub(splat(0x20)) & !w & HI;
    (below_space | zero(w ^ splat(b'"')) | zero(w ^ splat(b'\\'))) != 0
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

/// Runs `word` over `s` eight bytes at a time (the tail padded with a harmless byte).
#[inline(always)]
fn any_word(s: &[u8], pad: u8, word: impl Fn(u64) -> bool) -> bool {
    let chunks = s.chunks_exact(8);
    let tail = chunks.remainder();
    let whole = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("chunks of 8"));
    if chunks.into_iter().any(|c| word(whole(c))) {
        return true;
    }
    let mut last = [pad; 8];
    last[..tail.len()].copy_from_slice(tail);
    word(u64::from_le_bytes(last))
}

/// Whether `s` has a control character, `"` or `\` (JSON must escape them).
#[inline]
pub fn needs_json_escape(s: &[u8]) -> bool {
    any_word(s, b'a', word_needs_json_escape)
}

/// Whether a CSV field must be quoted (a comma, quote or line break in it).
#[inline]
pub fn needs_csv_quote(s: &[u8]) -> bool {
    any_word(s, b'a', word_needs_csv_quote)
}

/// The index of the first byte at or after `from` that `word` may flag, skipping whole clean
/// eight-byte words (the byte itself is then checked by the caller).
#[inline(always)]
pub fn skip_clean(s: &[u8], mut from: usize, word: impl Fn(u64) -> bool) -> usize {
    while let Some(chunk) = s.get(from..from + 8) {
        if word(u64::from_le_bytes(chunk.try_into().expect("8 bytes"))) {
            break;
        }
        from += 8;
    }
    from
}

/// "00" … "99".
pub const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends `v` in decimal.
#[inline]
pub fn push_i64(out: &mut Vec<u8>, v: i64) {
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
    let at = out.len();
    out.extend_from_slice(&buf);
    out.truncate(at + len);
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
        for v in cases {
            let mut out = b"x".to_vec();
            push_i64(&mut out, v);
            assert_eq!(&out[1..], itoa::Buffer::new().format(v).as_bytes(), "{v}");
        }
    }

    #[test]
    fn escape_checks_match_the_byte_by_byte_rule() {
        let json = |s: &[u8]| s.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        let csv = |s: &[u8]| s.iter().any(|&b| matches!(b, b',' | b'"' | b'\n' | b'\r'));
        let alphabet = b"ab,\"\\\n\r\t\x01\x1f \x7f\xc3\xa9\xf0\x9f\x8e\x89";
        let mut x = 12345u64;
        for len in 0..40 {
            for _ in 0..200 {
                let s: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Mostly clean text, sometimes one special byte.
                        if x % 8 == 0 {
                            alphabet[(x >> 8) as usize % alphabet.len()]
                        } else {
                            b'a' + (x >> 8) as u8 % 26
                        }
                    })
                    .collect();
                assert_eq!(needs_json_escape(&s), json(&s), "{s:?}");
                assert_eq!(needs_csv_quote(&s), csv(&s), "{s:?}");
            }
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
