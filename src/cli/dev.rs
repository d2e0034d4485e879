//! `taskyard dev`: a coordinator and embedded workers in one process, for
//! trying taskyard locally. Stops cleanly on Ctrl-C.

use crate::actors::{CoordinatorHandle, StopOutcome};
use crate::cli::{CliError, Exit};
use crate::config::{load, CoordinatorOptions, WorkerConfig};
use crate::protocol::limits::{self, Range};
use crate::worker::WorkerHandle;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DevArgs {
    /// TOML file with coordinator keys (see config/dev.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Embedded workers to start (1 to 64).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub workers: u32,
    /// Task slots per embedded worker (1 to the config's max-worker-capacity).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub capacity: u32,
}

/// Runs until SIGINT/SIGTERM, then stops workers and the coordinator.
pub fn run(args: DevArgs) -> Result<Exit, CliError> {
    let config = load::<CoordinatorOptions>(args.config.as_deref(), Default::default())
        .map_err(|e| CliError::Setup(e.to_string()))?;
    check_args(&args, config.max_worker_capacity)?;
    let log = crate::logging::build_logger(config.log_level, config.log_format);
    let db = config.db_path.clone();
    let coordinator = CoordinatorHandle::spawn(config, log.clone())
        .map_err(|e| CliError::Setup(e.to_string()))?;
    let workers: Vec<WorkerHandle> = (1..=args.workers)
        .map(|i| {
            let config = WorkerConfig {
                coordinator: coordinator.worker_addr.to_string(),
                worker_id: format!("dev-worker-{i}"),
                capacity: args.capacity,
                ..WorkerConfig::default()
            };
            WorkerHandle::spawn(config, log.clone())
        })
        .collect();
    print_banner(&coordinator, args.workers, &db);
    let waited = crate::signals::wait_for_shutdown_signal();
    println!("\nstopping...");
    for worker in workers {
        worker.stop();
    }
    let stopped = coordinator.stop();
    waited.map_err(|e| CliError::Setup(format!("cannot wait for Ctrl-C: {e}")))?;
    match stopped {
        StopOutcome::Durable => Ok(Exit::Success),
        StopOutcome::NotDurable => Err(CliError::Setup(
            "stopped before every change was durable (see the log)".into(),
        )),
    }
}

/// The most embedded workers `dev` starts: each is a thread and a connection.
pub const MAX_DEV_WORKERS: u64 = 64;

/// `--workers` and `--capacity` within their ranges, so every embedded
/// worker's registration is one the coordinator accepts.
fn check_args(args: &DevArgs, max_capacity: u32) -> Result<(), CliError> {
    let bad = |e: limits::OutOfRange| CliError::BadArgument(e.to_string());
    Range::new("--workers", 1, MAX_DEV_WORKERS)
        .check(args.workers.into())
        .map_err(bad)?;
    Range::new("--capacity", 1, max_capacity.into())
        .check(args.capacity.into())
        .map_err(bad)?;
    Ok(())
}

fn print_banner(coordinator: &CoordinatorHandle, workers: u32, db: &std::path::Path) {
    let client = coordinator.client_addr;
    let flag = if client.port() == 7400 && client.ip().is_loopback() {
        String::new()
    } else {
        format!(" --coordinator {client}")
    };
    println!("taskyard dev cluster ready");
    println!("  clients connect to  {client}");
    println!(
        "  workers connect to  {}  ({workers} embedded)",
        coordinator.worker_addr
    );
    println!("  database            {}", db.display());
    println!();
    println!("In another terminal:");
    println!("  cargo run --release --bin taskyard --{flag} submit echo --payload '{{\"message\":\"hello\"}}' --wait");
    println!("Press Ctrl-C to stop.");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(workers: u32, capacity: u32) -> DevArgs {
        DevArgs {
            config: None,
            workers,
            capacity,
        }
    }

    #[test]
    fn workers_and_capacity_are_bounded_naming_the_flag() {
        assert!(check_args(&args(64, 10_000), 10_000).is_ok());
        for (bad, flag) in [
            (args(65, 4), "--workers: 65 is outside 1..=64"),
            (args(0, 4), "--workers: 0"),
            (args(2, 10_001), "--capacity: 10001 is outside 1..=10000"),
            (args(2, 0), "--capacity: 0"),
        ] {
            let err = check_args(&bad, 10_000).expect_err(flag).to_string();
            assert!(err.starts_with(flag), "{err}");
        }
    }
}
