//! The `stowage` binary: parse the command line and dispatch to [`stowage::cli`].

fn main() -> std::process::ExitCode {
    stowage::cli::main()
}
