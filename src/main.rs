//! The `stowage` binary: parse the command line and dispatch to [`stowage::cli`].

/// mimalloc: the request path allocates many small short-lived objects (parsed keys, cells,
/// response bodies); glibc malloc/free were ~20% of the server's profile under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    no_transparent_huge_pages();
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
