//! The `stowage` binary: parse the command line and dispatch to [`stowage::cli`].

/// mimalloc: the request path allocates many small short-lived objects (parsed keys, cells,
/// response bodies); glibc malloc/free were ~20% of the server's profile under load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    stowage::cli::main()
}
