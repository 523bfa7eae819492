//! How long the allocator keeps memory it freed, decided by how much the process holds. mimalloc
//! gives freed memory back to the OS after its purge delay; memory given back and needed again
//! is faulted in afresh (the kernel zeroes each page). Under batch load the request path and the
//! flush free and reuse tens of MiB a second, so a short delay costs CPU (page faults and
//! `madvise` were 11.7 % of a narrow batch load's samples at 10 ms) and a long one costs memory
//! (one team's shop load peaked at 412 MiB with 1 s against 285 MiB with 10 ms).
//!
//! So the delay follows the resident size: while it is below `server.reuse_memory_below`, freed
//! memory stays with the allocator for [`KEEP`] and is reused; at or above it, the delay drops
//! to [`PROMPT`] and the arenas' freed ranges are given back at once (a forced `mi_collect`, on
//! every reading while the size stays at or above the limit: a forced purge is skipped when
//! another thread is purging at that moment, and ranges freed under the long delay keep its
//! expiry). It decides after each reading of the resident size (`crate::resident`, every 10 ms),
//! and goes back to keeping once the size is [`HYSTERESIS`] below the limit. Where the live
//! memory stays below that, the two modes alternate: the freed memory fills the room up to the
//! limit, is given back, and fills it again (for narrow batches, several times a second), each
//! turn one forced purge. Freed pages still held by other threads' heaps are not given back by
//! the collect; they are by mimalloc's own purges. The limit 0 keeps the prompt delay always;
//! the environment variable `MIMALLOC_PURGE_DELAY`, when set, decides instead.
//!
//! Where the binary's blocks go (its global allocator) is [`placement`]'s: blocks of 64–512 KiB
//! on pages of their own, so what is freed goes back as whole pages.

pub mod placement;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// mimalloc's `purge_delay` option (its index in mimalloc 3's `mi_option_e`; the Rust bindings
/// name only some options).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Purge delay while the process is below its limit (mimalloc's own default).
pub const KEEP: Duration = Duration::from_millis(1000);

/// Purge delay at or above the limit, and for commands that are not a server.
pub const PROMPT: Duration = Duration::from_millis(10);

/// How far below the limit the resident size must fall before freed memory is kept again.
pub const HYSTERESIS: u64 = 32 << 20;

/// The resident size above which freed memory goes back promptly; 0 until a server starts.
static LIMIT: AtomicU64 = AtomicU64::new(0);

/// Whether the mode in force (set by the reading hook) is [`Mode::Keep`].
static KEEPING: AtomicBool = AtomicBool::new(false);

/// Sets the prompt purge delay, unless the operator set `MIMALLOC_PURGE_DELAY`. Called first
/// thing by the binary, so a command that is not a server (the load generator, an import) keeps
/// its memory small.
pub fn prompt_purge() {
    if operator_decides() {
        return;
    }
    set_delay(PROMPT);
}

/// Lets freed memory stay with the allocator while the process holds less than `limit` bytes
/// (0: never), from now on; starts following the resident size the first time. A later call
/// changes the limit (tests start several servers in one process).
pub fn reuse_below(limit: u64) {
    if operator_decides() {
        return;
    }
    LIMIT.store(limit, Ordering::Relaxed);
    if limit == 0 {
        switch(Mode::Prompt);
        return;
    }
    static WATCHING: OnceLock<()> = OnceLock::new();
    WATCHING.get_or_init(|| {
        switch(Mode::Prompt);
        if !crate::resident::on_reading(on_reading) {
            tracing::warn!("the resident size is not watched; freed memory goes back promptly");
        }
    });
}

fn operator_decides() -> bool {
    std::env::var_os("MIMALLOC_PURGE_DELAY").is_some()
}

/// What the allocator does with freed memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Keeps it for [`KEEP`].
    Keep,
    /// Gives it back after [`PROMPT`].
    Prompt,
}

/// The mode for a process holding `resident` bytes under `limit`, in `mode` now.
pub fn next(mode: Mode, resident: u64, limit: u64) -> Mode {
    match mode {
        _ if resident >= limit => Mode::Prompt,
        Mode::Prompt if resident.saturating_add(HYSTERESIS) > limit => Mode::Prompt,
        _ => Mode::Keep,
    }
}

/// After each reading of the resident size (on the reading thread): switches the mode.
fn on_reading(resident: u64) {
    let mode = if KEEPING.load(Ordering::Relaxed) {
        Mode::Keep
    } else {
        Mode::Prompt
    };
    let limit = LIMIT.load(Ordering::Relaxed);
    let now = next(mode, resident, limit);
    if now != mode {
        switch(now);
        KEEPING.store(now == Mode::Keep, Ordering::Relaxed);
        tracing::debug!(resident, mode = ?now, "freed memory");
    } else if mode == Mode::Prompt && resident >= limit {
        give_back();
    }
}

/// Puts `mode` in force; going prompt also gives back, now, what was waiting to be.
pub fn switch(mode: Mode) {
    match mode {
        Mode::Keep => set_delay(KEEP),
        Mode::Prompt => {
            set_delay(PROMPT);
            give_back();
        }
    }
    metrics::gauge!("stowage_allocator_purge_delay_seconds").set(delay().as_secs_f64());
}

/// Purges every arena's freed ranges now, whatever their expiry.
fn give_back() {
    // SAFETY: mi_collect walks mimalloc's own structures under its own locks; forced, it purges
    // every arena's freed ranges, whichever thread freed them. (A thread that never allocated
    // has no heap and mimalloc ignores its collect: the reading thread has allocated.)
    unsafe { libmimalloc_sys::mi_collect(true) }
}

fn set_delay(delay: Duration) {
    // SAFETY: mi_option_set stores an integer in mimalloc's option table, which every purge
    // reads afresh; no memory of ours is touched.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, delay.as_millis() as _) }
}

/// The purge delay in force.
pub fn delay() -> Duration {
    // SAFETY: reads an integer from mimalloc's option table.
    let ms = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
    Duration::from_millis(ms.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Above the limit the memory goes back; it is kept again only well below it.
    #[test]
    fn the_mode_follows_the_resident_size_with_a_margin() {
        let limit = 320 * MIB;
        assert_eq!(next(Mode::Keep, 100 * MIB, limit), Mode::Keep);
        assert_eq!(next(Mode::Keep, limit, limit), Mode::Prompt);
        assert_eq!(next(Mode::Prompt, limit - MIB, limit), Mode::Prompt);
        assert_eq!(next(Mode::Prompt, limit - HYSTERESIS, limit), Mode::Keep);
        assert_eq!(next(Mode::Prompt, 10 * MIB, limit), Mode::Keep);
        // The limit 0: always prompt.
        assert_eq!(next(Mode::Keep, 0, 0), Mode::Prompt);
        assert_eq!(next(Mode::Prompt, 0, 0), Mode::Prompt);
    }
}
