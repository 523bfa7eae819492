//! Where the text encoders write: [`Sink`], a byte buffer appended to by fixed-size blocks.
//! `Vec<u8>` is one (tests, headers, cold paths). [`Cursor`] is the one the row loops use: it
//! writes into a `Vec`'s spare capacity with the write position and the capacity in locals,
//! which the compiler keeps in registers. Appending to the `Vec` itself reloads its length and
//! pointer after every store (a byte store may alias them), so each value waited on a
//! store-to-load round trip of the one before.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

/// An append-only byte buffer.
pub trait Sink {
    /// Appends the first `keep` bytes of `block` (at most `N`): one `N`-byte store, then the
    /// length moves by `keep`. A fixed-size copy costs less than a call to `memcpy` for the
    /// few bytes of a typical value.
    fn put<const N: usize>(&mut self, block: &[u8; N], keep: usize);

    /// Appends `bytes` (any length).
    fn put_slice(&mut self, bytes: &[u8]);

    /// Appends one byte.
    #[inline(always)]
    fn push(&mut self, b: u8) {
        self.put(&[b], 1);
    }

    /// Runs `f` on the buffer as a `Vec` (the cold paths: long values, escapes).
    fn vec<R>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> R) -> R;

    /// Lets `f` write into `N` bytes of spare room at the end, as a block of possibly
    /// uninitialised bytes, and appends the first `k` of them, `k` being what `f` returns.
    ///
    /// # Safety
    /// `f` must return at most `N` and must have initialised the first `k` bytes of the block.
    unsafe fn write_with<const N: usize>(
        &mut self,
        f: impl FnOnce(&mut [MaybeUninit<u8>; N]) -> usize,
    );
}

impl Sink for Vec<u8> {
    #[inline(always)]
    fn put<const N: usize>(&mut self, block: &[u8; N], keep: usize) {
        let at = self.len();
        self.extend_from_slice(block);
        self.truncate(at + keep.min(N));
    }

    #[inline(always)]
    fn put_slice(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    #[inline(always)]
    fn vec<R>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        f(self)
    }

    #[inline(always)]
    unsafe fn write_with<const N: usize>(
        &mut self,
        f: impl FnOnce(&mut [MaybeUninit<u8>; N]) -> usize,
    ) {
        self.reserve(N);
        let at = self.len();
        let spare: &mut [MaybeUninit<u8>; N] = (&mut self.spare_capacity_mut()[..N])
            .try_into()
            .expect("N bytes were reserved");
        let k = f(spare);
        debug_assert!(k <= N);
        // SAFETY: the caller initialised the first k ≤ N bytes of the spare capacity.
        unsafe { self.set_len(at + k) };
    }
}

/// The largest number of bytes per row a row encoder has written, shared by the threads that
/// encode its batches: each batch's buffer is sized once from it.
pub struct RowSize(AtomicUsize);

impl RowSize {
    /// Starting from a guess of `bytes` per row.
    pub const fn new(bytes: usize) -> Self {
        Self(AtomicUsize::new(bytes))
    }

    /// Reserves room in `out` for `rows` rows, lets `write` append them through a cursor, and
    /// learns from what it wrote.
    #[inline(always)]
    pub fn write(&self, out: &mut Vec<u8>, rows: usize, write: impl FnOnce(&mut Cursor)) {
        let per_row = self.0.load(Ordering::Relaxed);
        out.reserve(rows * per_row + per_row / 2);
        let start = out.len();
        write(&mut Cursor::new(out));
        if rows > 0 {
            let seen = (out.len() - start).div_ceil(rows);
            self.0.fetch_max(seen, Ordering::Relaxed);
        }
    }
}

/// Appends to a `Vec<u8>` through a raw pointer, the length and capacity kept in the cursor;
/// the `Vec`'s length is set when the cursor is dropped, grows the `Vec` or hands it to
/// [`Sink::vec`].
///
/// Keep it a local of the loop that writes and pass it only to inlined functions: once its
/// address reaches a function that is not inlined, the compiler must keep its fields in memory,
/// which is what it is for avoiding.
pub struct Cursor<'a> {
    vec: &'a mut Vec<u8>,
    /// `vec`'s buffer.
    ptr: *mut u8,
    /// Bytes written (initialised) from `ptr`; [`LENT`] while [`Sink::vec`] has the `Vec`.
    len: usize,
    /// `vec`'s capacity.
    cap: usize,
}

/// The cursor's `len` while the `Vec` is lent to a [`Sink::vec`] closure, which may shrink or
/// replace it: should the closure panic, the drop must then leave the `Vec`'s length alone.
const LENT: usize = usize::MAX;

impl<'a> Cursor<'a> {
    /// A cursor at the end of `vec`.
    pub fn new(vec: &'a mut Vec<u8>) -> Self {
        let (ptr, len, cap) = (vec.as_mut_ptr(), vec.len(), vec.capacity());
        Self { vec, ptr, len, cap }
    }

    /// Makes room for `n` more bytes.
    #[inline(always)]
    fn room(&mut self, n: usize) {
        if self.cap - self.len < n {
            (self.ptr, self.cap) = grow(self.vec, self.len, n);
        }
        debug_assert!(self.cap - self.len >= n);
    }
}

/// Sets `vec`'s length to `len` (all initialised) and reserves `n` more bytes; returns the
/// buffer and capacity. Takes the `Vec`, not the cursor, so the cursor's address never leaves
/// the loop that owns it.
#[cold]
#[inline(never)]
fn grow(vec: &mut Vec<u8>, len: usize, n: usize) -> (*mut u8, usize) {
    // SAFETY: a cursor's `len` bytes are initialised (every write covers what it keeps).
    unsafe { vec.set_len(len) };
    vec.reserve(n);
    (vec.as_mut_ptr(), vec.capacity())
}

impl Sink for Cursor<'_> {
    #[inline(always)]
    fn put<const N: usize>(&mut self, block: &[u8; N], keep: usize) {
        self.room(N);
        // SAFETY: `room` made N bytes of capacity available at `len`; all N are written, so the
        // `keep.min(N)` kept are initialised. `block` cannot overlap the spare capacity: the
        // cursor holds the only reference to the `Vec`.
        unsafe { std::ptr::copy_nonoverlapping(block.as_ptr(), self.ptr.add(self.len), N) };
        self.len += keep.min(N);
    }

    #[inline(always)]
    fn put_slice(&mut self, bytes: &[u8]) {
        self.room(bytes.len());
        // SAFETY: `room` made `bytes.len()` bytes available at `len`; `bytes` cannot overlap
        // the spare capacity: the cursor holds the only reference to the `Vec`.
        unsafe {
            let dst = self.ptr.add(self.len);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
        }
        self.len += bytes.len();
    }

    #[inline(always)]
    fn vec<R>(&mut self, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        // SAFETY: the cursor's `len` bytes are initialised.
        unsafe { self.vec.set_len(self.len) };
        self.len = LENT;
        let r = f(self.vec);
        (self.ptr, self.len, self.cap) =
            (self.vec.as_mut_ptr(), self.vec.len(), self.vec.capacity());
        r
    }

    #[inline(always)]
    unsafe fn write_with<const N: usize>(
        &mut self,
        f: impl FnOnce(&mut [MaybeUninit<u8>; N]) -> usize,
    ) {
        self.room(N);
        // SAFETY: `room` made N bytes of capacity available at `len`, and `MaybeUninit<u8>`
        // arrays have no alignment or validity requirement.
        let block = unsafe { &mut *self.ptr.add(self.len).cast::<[MaybeUninit<u8>; N]>() };
        let k = f(block);
        debug_assert!(k <= N);
        // The caller initialised the first k ≤ N bytes.
        self.len += k;
    }
}

impl Drop for Cursor<'_> {
    fn drop(&mut self) {
        if self.len != LENT {
            // SAFETY: every byte up to `len` was written (see `put`, `put_slice`, `write_with`).
            unsafe { self.vec.set_len(self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same appends through a cursor and through the `Vec` itself, across regrowths (the
    /// cursor starts with no spare room) and hand-overs to `vec`.
    #[test]
    fn a_cursor_writes_what_the_vec_would() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let (mut direct, mut through) = (b"head".to_vec(), b"head".to_vec());
        through.shrink_to_fit();
        {
            let mut cur = Cursor::new(&mut through);
            for i in 0..20_000usize {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let block: [u8; 16] = std::array::from_fn(|k| b'a' + ((x >> k) % 26) as u8);
                let keep = (x >> 20) as usize % 20; // past 16 too: kept to 16
                let long: Vec<u8> = (0..(x >> 40) % 100).map(|k| k as u8).collect();
                match i % 5 {
                    0 => {
                        direct.put(&block, keep);
                        cur.put(&block, keep);
                    }
                    1 => {
                        direct.put_slice(&long);
                        cur.put_slice(&long);
                    }
                    2 => {
                        direct.push(i as u8);
                        cur.push(i as u8);
                    }
                    3 => {
                        let n = keep.min(12);
                        let fill = |b: &mut [MaybeUninit<u8>; 12]| {
                            for (k, c) in b.iter_mut().take(n).enumerate() {
                                c.write(block[k]);
                            }
                            n
                        };
                        // SAFETY: `fill` initialises the n ≤ 12 bytes it reports.
                        unsafe {
                            direct.write_with(fill);
                            cur.write_with(fill);
                        }
                    }
                    _ => {
                        // Appended to, moved to another allocation, or shrunk first: the cursor
                        // must pick up the new buffer, length and capacity.
                        let how = (i / 5) % 3;
                        let change = |v: &mut Vec<u8>| match how {
                            0 => v.extend_from_slice(&long),
                            1 => {
                                let mut w = Vec::with_capacity(v.len() + long.len() + 1);
                                w.extend_from_slice(v);
                                w.extend_from_slice(&long);
                                *v = w;
                            }
                            _ => {
                                v.shrink_to_fit();
                                v.extend_from_slice(&long);
                            }
                        };
                        let before = direct.clone();
                        direct.vec(change);
                        cur.vec(|v| {
                            // The cursor's writes so far, committed.
                            assert!(*v == before, "at {i}");
                            change(v)
                        });
                    }
                }
                assert!(cur.ptr == cur.vec.as_mut_ptr() && cur.cap == cur.vec.capacity());
                assert!(cur.len <= cur.cap);
            }
        }
        assert_eq!(through.len(), direct.len());
        assert!(through == direct);
    }

    /// A closure given the `Vec` may replace it with a smaller one and then panic: the cursor
    /// must not set the old length on it as it is dropped.
    #[test]
    fn a_panic_while_the_vec_is_lent_leaves_its_length_alone() {
        let mut v = vec![7u8; 100];
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut cur = Cursor::new(&mut v);
            cur.put(b"abcd", 4);
            cur.vec(|v| {
                *v = Vec::new();
                panic!("while lent");
            });
        }));
        assert!(caught.is_err());
        assert_eq!(v.len(), 0);
        assert!(v.len() <= v.capacity());
    }
}
