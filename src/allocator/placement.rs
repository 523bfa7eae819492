//! Where a block goes: the binary's global allocator, mimalloc with one rule of its own. A block
//! of [`ALONE_FROM`] up to 512 KiB is asked for as 512 KiB + 1 byte, so mimalloc gives it a page
//! of its own, as it does every block over 512 KiB, instead of a place among blocks of its size
//! class on a shared 512 KiB or 4 MiB page.
//!
//! Why: those sizes are where the buffers' long-lived memory meets the requests' short-lived
//! memory — a chunk's columns (8,192 rows: 64 KiB of numbers, more of text), a request's body
//! and its built arrays, the encoder's pages. On shared pages, one chunk column still alive keeps
//! the whole page resident after the requests' blocks beside it are freed. Under one team's shop
//! batches the process held ~300 MiB for ~140 MiB of live blocks (counted at the global
//! allocator, BENCHMARKS.md, twenty-fourth session), whatever the purge delay (0 ms changed
//! nothing): the rest was pages kept by a few live blocks. The team budget charges that
//! resident size, so those pages turned requests away. Alone on its page, a freed block gives
//! its page back whole; the unused end of a page is never touched, so it is not resident.
//!
//! A block that grows (a `Vec` doubling) inside its page's room is grown in place, without a
//! copy. Blocks below [`ALONE_FROM`] and over 512 KiB are placed as mimalloc places them.

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys as mi;

/// The smallest block given a page of its own (mimalloc's small and medium pages hold the sizes
/// below it: 64 KiB is a medium page's eighth).
pub const ALONE_FROM: usize = 64 << 10;

/// mimalloc's largest block on a shared page (`MI_LARGE_MAX_OBJ_SIZE` in mimalloc 3): larger
/// ones get a page of their own.
const SHARED_UP_TO: usize = 512 << 10;

/// The size asked of mimalloc for a block of `size` bytes.
pub fn placed(size: usize) -> usize {
    if (ALONE_FROM..=SHARED_UP_TO).contains(&size) {
        SHARED_UP_TO + 1
    } else {
        size
    }
}

/// mimalloc, with blocks of [`ALONE_FROM`] to 512 KiB alone on their pages.
pub struct Placed;

// SAFETY: every block comes from mimalloc's aligned calls with the layout's alignment and at
// least the layout's size, and goes back through `mi_free`/`mi_realloc_aligned`, which take any
// block mimalloc gave out whatever size was asked for it.
unsafe impl GlobalAlloc for Placed {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation call; a null return is the out-of-memory answer.
        unsafe { mi::mi_malloc_aligned(placed(layout.size()), layout.align()).cast() }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let asked = placed(layout.size());
        // SAFETY: as `alloc`. mimalloc would zero the whole block it hands out (all 512 KiB
        // of a page of its own, touching memory nobody asked for), so only the layout's bytes
        // are zeroed here.
        unsafe {
            if asked == layout.size() {
                return mi::mi_zalloc_aligned(asked, layout.align()).cast();
            }
            let p: *mut u8 = mi::mi_malloc_aligned(asked, layout.align()).cast();
            if !p.is_null() {
                p.write_bytes(0, layout.size());
            }
            p
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi::mi_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let asked = placed(new_size);
        // SAFETY: `ptr` came from mimalloc and is live. A block with room for `new_size` stays
        // where it is: its page is its own or its size class holds `new_size`.
        unsafe {
            if asked != new_size && mi::mi_usable_size(ptr.cast()) >= new_size {
                return ptr;
            }
            mi::mi_realloc_aligned(ptr.cast(), asked, layout.align()).cast()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usable(ptr: *mut u8) -> usize {
        // SAFETY: `ptr` is a live block from mimalloc.
        unsafe { mi::mi_usable_size(ptr.cast()) }
    }

    /// The sizes between 64 KiB and 512 KiB get a page of their own (room past 512 KiB); the
    /// others keep mimalloc's size classes.
    #[test]
    fn middle_sizes_get_a_page_of_their_own() {
        for size in [ALONE_FROM, 100 << 10, SHARED_UP_TO] {
            let layout = Layout::from_size_align(size, 64).unwrap();
            // SAFETY: a non-zero layout; the block is freed below with it.
            let p = unsafe { Placed.alloc(layout) };
            assert!(!p.is_null());
            assert_eq!(p as usize % 64, 0, "aligned");
            assert!(usable(p) > SHARED_UP_TO, "{size}: {}", usable(p));
            // SAFETY: writes inside the block, then frees it with its layout.
            unsafe {
                p.write_bytes(7, size);
                Placed.dealloc(p, layout);
            }
        }
        for size in [ALONE_FROM - 1, 8 << 10] {
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: as above.
            let p = unsafe { Placed.alloc(layout) };
            assert!(usable(p) < 2 * size, "{size}: {}", usable(p));
            // SAFETY: frees the block with its layout.
            unsafe { Placed.dealloc(p, layout) };
        }
    }

    /// Growing keeps the contents, in place while the page has room; zeroed blocks are zero.
    #[test]
    fn a_block_grows_in_its_own_room_and_keeps_its_bytes() {
        let small = Layout::from_size_align(40 << 10, 8).unwrap();
        // SAFETY: each block is used within its size and freed once, with the layout it has.
        unsafe {
            let p = Placed.alloc(small);
            for i in 0..small.size() {
                *p.add(i) = (i % 251) as u8;
            }
            let q = Placed.realloc(p, small, 80 << 10);
            assert!(usable(q) > SHARED_UP_TO);
            let grown = Layout::from_size_align(80 << 10, 8).unwrap();
            let r = Placed.realloc(q, grown, 300 << 10);
            assert_eq!(r, q, "grown in place");
            assert!((0..small.size()).all(|i| *r.add(i) == (i % 251) as u8));
            let big = Layout::from_size_align(300 << 10, 8).unwrap();
            let s = Placed.realloc(r, big, 2 << 20);
            assert!((0..small.size()).all(|i| *s.add(i) == (i % 251) as u8));
            Placed.dealloc(s, Layout::from_size_align(2 << 20, 8).unwrap());

            // A block written and freed first, so the zeroed one is likely its page again.
            let zeroed = Layout::from_size_align(200 << 10, 64).unwrap();
            let dirty = Placed.alloc(zeroed);
            dirty.write_bytes(0xff, zeroed.size());
            Placed.dealloc(dirty, zeroed);
            let z = Placed.alloc_zeroed(zeroed);
            assert!((0..zeroed.size()).all(|i| *z.add(i) == 0));
            Placed.dealloc(z, zeroed);
        }
    }
}
