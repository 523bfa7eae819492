//! The `stowage` binary: parse the command line and dispatch to [`stowage::cli`].

/// mimalloc: the request path allocates many small short-lived objects (parsed keys, cells,
/// response bodies); glibc malloc/free were ~20% of the server's profile under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    no_transparent_huge_pages();
    prompt_allocator_purge();
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

/// mimalloc's `purge_delay` option (its index in mimalloc 3's `mi_option_e`; the Rust bindings
/// name only some options).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory stays with the allocator before it goes back to the OS, unless the
/// operator set `MIMALLOC_PURGE_DELAY`.
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// Makes mimalloc hand freed memory back after 10 ms instead of its default 1 s. Under batch
/// load the request path frees large blocks (bodies, builders, encoded pages) faster than they
/// are reused, and a second of them was 150–200 MiB of peak RSS: the shop mix peaked at 531
/// MiB with the default and at 374–384 MiB with 10 ms, within the 384 MiB a team's budget allows
/// (BENCHMARKS.md, "Memory under batch load"). `MIMALLOC_PURGE_DELAY` still decides when set.
fn prompt_allocator_purge() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mi_option_set stores an integer in mimalloc's option table, which every purge
    // reads afresh; no memory of ours is touched.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
}

#[cfg(test)]
mod tests {
    /// Index 15 is `purge_delay` in the mimalloc linked in: no other option defaults to 1000
    /// (ms), so a reordered option table (another mimalloc) fails here instead of setting
    /// something else.
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads and writes an integer in mimalloc's option table.
        unsafe {
            assert_eq!(
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY),
                1000
            );
            super::prompt_allocator_purge();
            assert_eq!(
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY),
                super::PURGE_DELAY_MS
            );
        }
    }
}
