//! The coordinator process: load config, recover the database, serve until
//! SIGINT/SIGTERM, then stop gracefully.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use taskyard::config::CoordinatorOptions;
use taskyard::process::{load_config, StopOutcome};
use taskyard::signals::Waited;

/// mimalloc: measured ~25% less coordinator CPU than the system allocator
/// (docs/performance-log.md); `main` first turns huge pages off (see `taskyard::memory`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs the taskyard coordinator. Every config key is also a flag; flags
/// override the file. Exit codes: 0 stopped cleanly, 1 stopped after
/// shutdown-timeout with changes not durable (commits failing), 2 bad
/// config or cannot start (database, listen address), 3 the database refused
/// a commit for good (memory no longer matched it: restart to recover).
#[derive(Parser)]
#[command(name = "taskyard-coordinator", version)]
struct Args {
    /// TOML config file (see config/coordinator.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    options: CoordinatorOptions,
}

fn main() -> ExitCode {
    taskyard::memory::disable_transparent_huge_pages();
    let args = Args::parse();
    let config = match load_config(args.config.as_deref(), args.options) {
        Ok(config) => config,
        Err(e) => return fail(e),
    };
    let (log, flush) = taskyard::logging::build_flushed_logger(config.log_level, config.log_format);
    // On PostgreSQL the process is a node of a cluster: it starts as a
    // standby and leads in terms (see docs/guide/high-availability.md).
    let coordinator = match taskyard::process::spawn(config, log.clone()) {
        Ok(handle) => handle,
        Err(e) => return fail(e),
    };
    match taskyard::signals::wait_for_shutdown_signal_or_end(|| coordinator.has_ended()) {
        Ok(Waited::Signal) => slog::info!(log, "signal received; stopping"),
        Ok(Waited::Ended) => {}
        Err(e) => slog::error!(log, "cannot wait for signals; stopping"; "error" => %e),
    }
    let stopped = coordinator.stop();
    // The persistence thread may still hold a logger clone (blocked on the
    // database): wait for every line, the last one included, to be written.
    drop(flush);
    match stopped {
        StopOutcome::Durable => ExitCode::SUCCESS,
        // The coordinator logged how many changes were not durable.
        StopOutcome::NotDurable => ExitCode::from(1),
        // The coordinator logged what the database refused.
        StopOutcome::CommitRefused => ExitCode::from(3),
    }
}

fn fail(error: impl std::fmt::Display) -> ExitCode {
    eprintln!("taskyard-coordinator: {error}");
    ExitCode::from(2)
}
