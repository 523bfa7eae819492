//! float64 values as text: the shortest decimal that reads back as the same value, in zmij's
//! notation (`1.0`, `0.25`, `1e-7`, `1.5e300`), formatted straight into the output buffer's
//! spare room — no staging buffer and no copy call per value.

/// Bytes zmij may write for one value.
const ZMIJ_MAX: usize = 24;
// `zmij::Buffer` is its 24-byte array and nothing else, so it may be laid over spare capacity.
const _: () = assert!(size_of::<zmij::Buffer>() == ZMIJ_MAX && align_of::<zmij::Buffer>() == 1);

/// Appends finite `v` in its shortest round-trip form.
#[inline(always)]
pub fn push_f64(out: &mut Vec<u8>, v: f64) {
    out.reserve(ZMIJ_MAX);
    let at = out.len();
    // SAFETY: `out` has ZMIJ_MAX spare bytes at `at`, and `zmij::Buffer` is exactly an array of
    // ZMIJ_MAX `MaybeUninit<u8>` (asserted above), so it may be laid over them. `format_finite`
    // returns the text it wrote, which is initialised; it is moved to `at` should zmij ever
    // return it from elsewhere, and the length is then set to cover it.
    unsafe {
        let dst = out.as_mut_ptr().add(at);
        let text = (*dst.cast::<zmij::Buffer>()).format_finite(v);
        let len = text.len();
        if text.as_ptr() != dst.cast_const() {
            std::ptr::copy(text.as_ptr(), dst, len);
        }
        out.set_len(at + len);
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
        for i in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = match i % 3 {
                0 => f64::from_bits(x),
                1 => (x % 10_000_000_000) as f64 / 10f64.powi((x >> 40) as i32 % 7),
                _ => (x >> 11) as f64 / (1u64 << 53) as f64,
            };
            if v.is_finite() {
                push_f64(&mut out, v);
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
}
