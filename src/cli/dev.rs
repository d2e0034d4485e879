//! `taskyard dev`: a coordinator and embedded workers in one process, for
//! trying taskyard locally. Stops cleanly on Ctrl-C.

use crate::cli::{output, CliError, Context, Exit};
use crate::config::CoordinatorOptions;
use crate::process::load_config;
use crate::process::{CoordinatorHandle, StartError, StopOutcome};
use crate::protocol::limits::{self, Range};
use crate::store::StoreErrorKind;
use crate::worker::WorkerConfig;
use crate::worker::WorkerHandle;
use clap::Args;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
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
    /// SQLite database file (default: the config's db-path,
    /// taskyard-data/taskyard.db).
    #[arg(long, value_name = "FILE")]
    pub db_path: Option<PathBuf>,
    /// Port of the client listener on 127.0.0.1 (default 7400; 0: any free port).
    #[arg(long, value_name = "PORT")]
    pub client_port: Option<u16>,
    /// Port of the worker listener on 127.0.0.1 (default 7401; 0: any free port).
    #[arg(long, value_name = "PORT")]
    pub worker_port: Option<u16>,
    /// Port of the HTTP API and dashboard on 127.0.0.1 (default 7480; 0: any free port).
    #[arg(long, value_name = "PORT")]
    pub http_port: Option<u16>,
}

impl DevArgs {
    /// The coordinator keys these flags set; they override the config file.
    fn overrides(&self) -> CoordinatorOptions {
        let local = |port: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        CoordinatorOptions {
            db_path: self.db_path.clone(),
            client_listen: self.client_port.map(local),
            worker_listen: self.worker_port.map(local),
            http_listen: self.http_port.map(|port| local(port).to_string()),
            ..Default::default()
        }
    }
}

/// Runs until SIGINT/SIGTERM, then stops workers and the coordinator.
/// With `--json` the banner is one JSON line (`banner_json`) and nothing
/// else is printed on stdout.
pub fn run(ctx: &Context, args: DevArgs) -> Result<Exit, CliError> {
    let config = load_config(args.config.as_deref(), args.overrides())
        .map_err(|e| CliError::Setup(e.to_string()))?;
    check_args(&args, config.max_worker_capacity)?;
    let log = crate::logging::build_logger(config.log_level, config.log_format);
    let db = config.db_path.clone();
    let coordinator = CoordinatorHandle::spawn(config, log.clone()).map_err(not_started)?;
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
    let banner = Banner {
        client: coordinator.client_addr,
        worker: coordinator.worker_addr,
        http: coordinator.http_addr,
        workers: args.workers,
        db,
    };
    match ctx.json {
        true => output::emit(&banner.json().to_string())?,
        false => output::emit(&banner.text())?,
    }
    let waited = crate::signals::wait_for_shutdown_signal_or_end(|| coordinator.has_ended());
    if matches!(waited, Ok(crate::signals::Waited::Signal)) {
        output::warn("\nstopping...");
    }
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
        StopOutcome::CommitRefused => Err(CliError::Setup(
            "the database refused a commit (see the log); start dev again to recover from it"
                .into(),
        )),
    }
}

/// Why `dev` could not start, in its own words where a newcomer needs
/// a next step: another `dev` (or coordinator) on the same database, or
/// a port already taken.
fn not_started(e: StartError) -> CliError {
    match e {
        StartError::Store(e) if e.kind == StoreErrorKind::InUse => CliError::Setup(format!(
            "another taskyard already runs on this database ({e}); stop it, or start \
             this one with --db-path OTHER.db and free ports (--client-port, \
             --worker-port, --http-port; 0 picks any)"
        )),
        StartError::Bind { key, addr, reason } => CliError::Setup(format!(
            "cannot listen on {addr} ({key}): {reason}; is another taskyard running? \
             Pick free ports with --client-port, --worker-port, --http-port (0 picks any)"
        )),
        other => CliError::Setup(other.to_string()),
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

/// Where the dev cluster listens, as its banner tells.
#[derive(Debug, Clone)]
pub struct Banner {
    pub client: SocketAddr,
    pub worker: SocketAddr,
    /// `None`: `http-listen` is empty, no HTTP API or dashboard.
    pub http: Option<SocketAddr>,
    pub workers: u32,
    pub db: PathBuf,
}

impl Banner {
    /// The dashboard's address for a browser on this machine: a listener
    /// on every interface (0.0.0.0, [::]) is reached on loopback.
    pub fn dashboard_url(&self) -> Option<String> {
        let mut addr = self.http?;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
            });
        }
        Some(format!("http://{addr}/"))
    }

    /// For people: the addresses, the dashboard, and a first command.
    pub fn text(&self) -> String {
        let client = self.client;
        let flag = if client.port() == 7400 && client.ip().is_loopback() {
            String::new()
        } else {
            format!(" --coordinator {client}")
        };
        let dashboard = self
            .dashboard_url()
            .unwrap_or_else(|| "off (http-listen is empty)".to_string());
        [
            "taskyard dev cluster ready".to_string(),
            format!("  clients connect to  {client}"),
            format!(
                "  workers connect to  {}  ({} embedded)",
                self.worker, self.workers
            ),
            format!("  dashboard           {dashboard}"),
            format!("  database            {}", self.db.display()),
            String::new(),
            "In another terminal:".to_string(),
            format!("  cargo run --release --bin taskyard --{flag} submit echo --payload '{{\"message\":\"hello\"}}' --wait"),
            "Press Ctrl-C to stop.".to_string(),
        ]
        .join("\n")
    }

    /// For scripts (`dev --json`): `{"client", "worker", "http",
    /// "dashboard", "database", "workers"}`; `http` and `dashboard` are
    /// `null` when HTTP is off.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "client": self.client.to_string(),
            "worker": self.worker.to_string(),
            "http": self.http.map(|a| a.to_string()),
            "dashboard": self.dashboard_url(),
            "database": self.db.display().to_string(),
            "workers": self.workers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(workers: u32, capacity: u32) -> DevArgs {
        DevArgs {
            config: None,
            workers,
            capacity,
            db_path: None,
            client_port: None,
            worker_port: None,
            http_port: None,
        }
    }

    fn banner(http: Option<&str>) -> Banner {
        Banner {
            client: SocketAddr::from(([127, 0, 0, 1], 7400)),
            worker: SocketAddr::from(([127, 0, 0, 1], 7401)),
            http: http.map(|a| a.parse().expect("addr")),
            workers: 2,
            db: PathBuf::from("taskyard-data/taskyard.db"),
        }
    }

    #[test]
    fn the_banner_prints_the_dashboard_url() {
        let text = banner(Some("127.0.0.1:7480")).text();
        assert!(
            text.contains("  dashboard           http://127.0.0.1:7480/"),
            "{text}"
        );
        assert!(text.contains("submit echo"), "{text}");
        assert!(!text.contains("--coordinator"), "default port: {text}");
        let off = banner(None).text();
        assert!(
            off.contains("dashboard           off (http-listen is empty)"),
            "{off}"
        );
    }

    #[test]
    fn a_dashboard_on_every_interface_is_shown_on_loopback() {
        assert_eq!(
            banner(Some("0.0.0.0:8080")).dashboard_url().as_deref(),
            Some("http://127.0.0.1:8080/")
        );
        assert_eq!(
            banner(Some("[::]:8080")).dashboard_url().as_deref(),
            Some("http://[::1]:8080/")
        );
        assert_eq!(
            banner(Some("10.1.2.3:8080")).dashboard_url().as_deref(),
            Some("http://10.1.2.3:8080/")
        );
    }

    #[test]
    fn the_json_banner_names_every_address() {
        let value = banner(Some("127.0.0.1:7480")).json();
        assert_eq!(value["client"], "127.0.0.1:7400");
        assert_eq!(value["worker"], "127.0.0.1:7401");
        assert_eq!(value["dashboard"], "http://127.0.0.1:7480/");
        assert_eq!(value["workers"], 2);
        assert_eq!(banner(None).json()["dashboard"], serde_json::Value::Null);
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
