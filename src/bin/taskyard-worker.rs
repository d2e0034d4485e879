//! `taskyard-worker`: connects to a coordinator and runs tasks until
//! SIGINT/SIGTERM, then drains (a second signal stops it at once). Every
//! config key is also a flag; flags override the file. Exits 2 on a config
//! error, and 1 with one line naming the coordinator and the cause when a
//! coordinator refuses it for good (wrong token, TLS or protocol version
//! mismatch, refused registration).

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use taskyard::config::{self, ConfigError, ConfigOptions};
use taskyard::worker::WorkerOptions;
use taskyard::worker::{BuildError, Worker};

/// mimalloc, as in the coordinator (where it measured ~25% less CPU than the
/// system allocator, docs/performance-log.md); `main` first turns huge pages off (see
/// `taskyard::memory`; `exec` programs get the system's setting back).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    // First: started as an `exec` program's supervisor, this process
    // becomes that program and the call does not return.
    taskyard::worker::exec_supervisor::run_if_requested();
    taskyard::memory::disable_transparent_huge_pages();
    let cli = Cli::parse();
    let flag_keys = cli.options.keys_set();
    let file = cli.config.as_deref();
    let loaded = config::load::<WorkerOptions>(file, cli.options).and_then(|config| {
        config
            .resolve_coordinators()
            .map_err(|invalid| ConfigError::about_key(file, &flag_keys, invalid))?;
        Ok(config)
    });
    let config = match loaded {
        Ok(config) => config,
        Err(e) => {
            eprintln!("taskyard-worker: {e}");
            return ExitCode::from(2);
        }
    };
    match Worker::builder(config).run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ (BuildError::ExecAllow(_) | BuildError::ExecSupervisor(_))) => {
            eprintln!("taskyard-worker: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("taskyard-worker: {e}");
            ExitCode::FAILURE
        }
    }
}
