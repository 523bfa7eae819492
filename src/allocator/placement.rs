//! Where a block goes: the binary's global allocator, mimalloc with one rule of its own. A block
//! of [`ALONE_FROM`] up to 512 KiB is asked for as 512 KiB + 1 byte, so mimalloc gives it a page
//! of its own (as it does every block over 512 KiB) instead of a place among blocks of its size
//! class on a shared 512 KiB or 4 MiB page — except in work that opts out ([`unplaced`],
//! [`Unplaced`], [`unplace_this_thread`]).
//!
//! Why: those sizes are where the team buffers' long-lived memory meets the requests'
//! short-lived memory — a chunk's columns, a request's body and built arrays, the flush
//! encoder's pages. On shared pages one live block keeps a whole page resident after the
//! blocks beside it are freed: under one team's shop batches the process held ~300 MiB for
//! ~140 MiB of live blocks, whatever mimalloc's purge delay, and the team budget (which charges
//! the resident size) turned requests away for it (BENCHMARKS.md, twenty-fourth and
//! twenty-fifth sessions). Alone on its page, a freed block gives its page back whole; the
//! unused end of a page is never touched, so it is not resident.
//!
//! The price is the allocation: a block on a page of its own costs ~0.6 µs to make and free
//! against ~0.04 µs on a shared page. Work that makes and drops such blocks at a high rate
//! without holding them — a download's decode and encode, SQL's execution, an import's decode,
//! a compaction's merge — opts out and gets mimalloc's own placement.
//!
//! A block that grows (a `Vec` doubling) inside its own page's room is grown in place.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use libmimalloc_sys as mi;

/// The smallest block given a page of its own (mimalloc's small and medium pages hold the sizes
/// below it: 64 KiB is a medium page's eighth).
pub const ALONE_FROM: usize = 64 << 10;

/// mimalloc's largest block on a shared page (`MI_LARGE_MAX_OBJ_SIZE` in mimalloc 3): larger
/// ones get a page of their own.
const SHARED_UP_TO: usize = 512 << 10;

thread_local! {
    /// Whether the work running on this thread opted out of the placement.
    static OPTED_OUT: Cell<bool> = const { Cell::new(false) };
}

/// The size asked of mimalloc for a block of `size` bytes on this thread.
pub fn placed(size: usize) -> usize {
    if (ALONE_FROM..=SHARED_UP_TO).contains(&size) && !OPTED_OUT.with(Cell::get) {
        SHARED_UP_TO + 1
    } else {
        size
    }
}

/// Runs `work` with mimalloc's own placement on this thread (for synchronous work, such as a
/// blocking task's body).
pub fn unplaced<R>(work: impl FnOnce() -> R) -> R {
    let before = OPTED_OUT.with(|o| o.replace(true));
    let _restore = Restore(before);
    work()
}

/// Gives this thread mimalloc's own placement from now on (a runtime's threads that run only
/// opted-out work, such as SQL's).
pub fn unplace_this_thread() {
    OPTED_OUT.with(|o| o.set(true));
}

/// Puts the thread's choice back when dropped, also on a panic.
struct Restore(bool);

impl Drop for Restore {
    fn drop(&mut self) {
        OPTED_OUT.with(|o| o.set(self.0));
    }
}

/// A future whose every poll runs with mimalloc's own placement (a task migrates between
/// threads, so the choice is made again at each poll).
pub struct Unplaced<F>(Pin<Box<F>>);

impl<F: Future> Unplaced<F> {
    pub fn new(work: F) -> Self {
        Self(Box::pin(work))
    }
}

impl<F: Future> Future for Unplaced<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        unplaced(|| self.0.as_mut().poll(cx))
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
        // SAFETY: as `alloc`. mimalloc would zero the whole block it hands out (all 512 KiB of
        // a page of its own, touching memory nobody asked for), so only the layout's bytes are
        // zeroed here.
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
        // SAFETY: `ptr` came from mimalloc and is live. A placed block (one of the placed
        // sizes with a page's room behind it) that is to stay placed keeps its place while its
        // page holds `new_size`; any other block goes to mimalloc, which moves it, or keeps it
        // where it is when the new size is at least half its room (so a block of up to ~1 MiB
        // shrinking into the placed sizes may keep its room; a larger one moves).
        unsafe {
            if asked != new_size && (ALONE_FROM..=SHARED_UP_TO).contains(&layout.size()) {
                let room = mi::mi_usable_size(ptr.cast());
                if room > SHARED_UP_TO && room >= new_size {
                    return ptr;
                }
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

    fn alloc_free(size: usize) -> usize {
        let layout = Layout::from_size_align(size, 64).unwrap();
        // SAFETY: a non-zero layout; the block is written within its size and freed once.
        unsafe {
            let p = Placed.alloc(layout);
            assert!(!p.is_null());
            assert_eq!(p as usize % 64, 0, "aligned");
            p.write_bytes(7, size);
            let room = usable(p);
            Placed.dealloc(p, layout);
            room
        }
    }

    /// The sizes between 64 KiB and 512 KiB get a page of their own (room past 512 KiB); the
    /// others keep mimalloc's size classes, and so do all sizes in opted-out work.
    #[test]
    fn middle_sizes_get_a_page_of_their_own_unless_opted_out() {
        for size in [ALONE_FROM, 100 << 10, SHARED_UP_TO] {
            assert!(alloc_free(size) > SHARED_UP_TO, "{size}");
            let room = unplaced(|| alloc_free(size));
            assert!(room < 2 * size, "{size} opted out: {room}");
        }
        // The choice is put back after the opted-out work.
        assert!(alloc_free(100 << 10) > SHARED_UP_TO);
        for size in [ALONE_FROM - 1, 8 << 10] {
            assert!(alloc_free(size) < 2 * size, "{size}");
        }
    }

    /// An opted-out future allocates with mimalloc's placement in every poll, and the thread's
    /// choice is back once the poll returns.
    #[tokio::test]
    async fn an_unplaced_future_opts_out_in_each_poll() {
        let room = Unplaced::new(async {
            let first = alloc_free(100 << 10);
            tokio::task::yield_now().await;
            (first, alloc_free(100 << 10))
        })
        .await;
        assert!(room.0 < 200 << 10 && room.1 < 200 << 10, "{room:?}");
        assert!(alloc_free(100 << 10) > SHARED_UP_TO);
    }

    /// Growing keeps the contents, in place while the page has room; zeroed blocks are zero; a
    /// large block shrinking into the placed sizes gives its room back.
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

            let large = Layout::from_size_align(64 << 20, 8).unwrap();
            let l = Placed.alloc(large);
            l.write_bytes(3, 100 << 10);
            let shrunk = Placed.realloc(l, large, 100 << 10);
            assert!(usable(shrunk) < 1 << 20, "kept {}", usable(shrunk));
            assert!((0..100 << 10).all(|i| *shrunk.add(i) == 3));
            Placed.dealloc(shrunk, Layout::from_size_align(100 << 10, 8).unwrap());

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
