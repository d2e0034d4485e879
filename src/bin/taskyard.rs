//! The `taskyard` CLI: parse the command line, run it, exit with its code.
//! Exit codes are listed in `taskyard --help` and in
//! `taskyard::cli::EXIT_CODES`.

use std::process::ExitCode;
use taskyard::cli;

/// mimalloc: measured ~25% less coordinator CPU than the system allocator
/// (docs/performance-log.md); `main` first turns huge pages off (see `taskyard::memory`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    taskyard::memory::disable_transparent_huge_pages();
    // Clap prints its own usage errors and exits 2 (`--help` and `--version` exit 0).
    let cli = cli::parse::parse();
    cli::run(cli)
}
