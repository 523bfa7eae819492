//! The `stowage` binary: parse the command line and dispatch to [`stowage::cli`].

/// mimalloc: the request path allocates many small short-lived objects (parsed keys, cells,
/// response bodies); glibc malloc/free were ~20% of the server's profile under load. Blocks of
/// 64 to 512 KiB get pages of their own ([`stowage::allocator::placement`]).
#[global_allocator]
static GLOBAL: stowage::allocator::placement::Placed = stowage::allocator::placement::Placed;

fn main() -> std::process::ExitCode {
    no_transparent_huge_pages();
    no_death_by_file_size();
    stowage::allocator::prompt_purge();
    stowage::cli::main()
}

/// Turns transparent huge pages off for this process (and the ones it starts). mimalloc asks for
/// them on its arenas; each first touch of a 2 MiB page then zeroes all of it, which made the
/// first large download after start (or after idle memory went back to the OS) spend 110–180 ms
/// in the kernel's `clear_page` — 25–35 % more CPU for a 5M-row numeric JSON download — and
/// raised peak RSS by a quarter (BENCHMARKS.md). Later downloads were no faster with them.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours; should the
    // kernel refuse it (older than 3.15), huge pages simply stay as the system configures them.
    unsafe {
        let (on, unused): (libc::c_ulong, libc::c_ulong) = (1, 0);
        libc::prctl(libc::PR_SET_THP_DISABLE, on, unused, unused, unused);
    }
}

/// A write past the file-size limit (`ulimit -f`) raises SIGXFSZ, whose default ends the
/// process; ignored, the write fails with EFBIG, which the WAL and the flush report and survive
/// (a spare not made, a buffered acknowledgement kept: tests/wal_file_limit.rs) as the docs say.
fn no_death_by_file_size() {
    #[cfg(target_os = "linux")]
    // SAFETY: sets a signal's disposition to ignored, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use stowage::allocator::{KEEP, Mode, PROMPT, delay, switch};
    use stowage::resident::Statm;

    /// Here mimalloc is the allocator. The option set is mimalloc's `purge_delay`: no other
    /// option defaults to 1000 (ms), so a reordered option table (another mimalloc) fails here
    /// instead of setting something else. Memory freed while keeping stays resident; going
    /// prompt, from another thread (as the watching thread does), gives it back at once.
    #[test]
    fn the_allocator_keeps_freed_memory_or_gives_it_back() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        assert_eq!(delay(), Duration::from_millis(1000), "mimalloc's default");
        let mut statm = Statm::open().unwrap();
        switch(Mode::Keep);
        assert_eq!(delay(), KEEP);
        let chunks: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 1 << 20]).collect();
        let full = statm.resident().unwrap();
        drop(chunks);
        // Past the prompt delay, a purge that is due gives back nothing: the memory is kept.
        std::thread::sleep(PROMPT * 5);
        // SAFETY: collects this thread's heap and purges what is due, under mimalloc's locks.
        unsafe { libmimalloc_sys::mi_collect(false) };
        let kept = statm.resident().unwrap();
        assert!(kept + (16 << 20) > full, "kept: {full} then {kept}");
        std::thread::spawn(|| {
            let _allocates = std::hint::black_box(vec![0u8; 64]);
            switch(Mode::Prompt)
        })
        .join()
        .unwrap();
        assert_eq!(delay(), PROMPT);
        let given = statm.resident().unwrap();
        assert!(given + (48 << 20) <= kept, "{full} {kept} then {given}");
    }
}
