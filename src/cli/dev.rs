//! `taskyard dev`: a coordinator and embedded workers in one process, for
//! trying taskyard locally. Stops cleanly on Ctrl-C.

use crate::actors::{CoordinatorHandle, StopOutcome};
use crate::cli::{CliError, Exit};
use crate::config::{load, CoordinatorOptions, WorkerConfig};
use crate::worker::WorkerHandle;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DevArgs {
    /// TOML file with coordinator keys (see config/dev.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Embedded workers to start.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub workers: u32,
    /// Task slots per embedded worker.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub capacity: u32,
}

/// Runs until SIGINT/SIGTERM, then stops workers and the coordinator.
pub fn run(args: DevArgs) -> Result<Exit, CliError> {
    let config = load::<CoordinatorOptions>(args.config.as_deref(), Default::default())
        .map_err(|e| CliError::Setup(e.to_string()))?;
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
