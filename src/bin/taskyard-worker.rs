//! `taskyard-worker`: connects to a coordinator and runs tasks until
//! SIGINT/SIGTERM. Every config key is also a flag; flags override the file.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use taskyard::config::{self, WorkerOptions};
use taskyard::logging::build_logger;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "taskyard-worker",
    version,
    about = "Runs taskyard tasks for a coordinator"
)]
struct Cli {
    /// TOML config file (kebab-case keys, the same names as the flags).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    options: WorkerOptions,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match config::load::<WorkerOptions>(cli.config.as_deref(), cli.options) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("taskyard-worker: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("taskyard-worker: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let log = build_logger(config.log_level, config.log_format);
    let shutdown = CancellationToken::new();
    runtime.spawn(cancel_on_signal(shutdown.clone()));
    runtime.block_on(taskyard::worker::run(config, log, shutdown));
    ExitCode::SUCCESS
}

/// Cancels `shutdown` on the first SIGINT or SIGTERM. If the handlers cannot
/// be installed the worker runs until killed.
async fn cancel_on_signal(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return;
        };
        tokio::select! {
            Ok(()) = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    shutdown.cancel();
}
