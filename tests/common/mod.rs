//! Shared helpers for end-to-end tests: a real coordinator and real workers
//! in-process over TCP on ephemeral loopback ports, with a temporary database.

#![allow(dead_code)]

pub mod browser;
pub mod cli;
pub mod db;
pub mod dev;
pub mod external;
pub mod ha_processes;
pub mod http;
pub mod jobs;
pub mod markdown;
pub mod postgres;
pub mod processes;
pub mod proxy;
pub mod python;
pub mod raw_client;
pub mod raw_worker;
pub mod rng;
pub mod sessions;
pub mod shell;
pub mod standby;
pub mod tasks;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use taskyard::client::Client;
use taskyard::config::CoordinatorConfig;
use taskyard::process::CoordinatorHandle;
use taskyard::worker::WorkerConfig;
use taskyard::worker::{TaskRegistry, WorkerHandle};

pub fn quiet_log() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

/// A coordinator config on ephemeral ports with its database in `dir`.
pub fn coordinator_config(dir: &std::path::Path) -> CoordinatorConfig {
    CoordinatorConfig {
        client_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        worker_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        db_path: dir.join("taskyard.db"),
        http_listen: "127.0.0.1:0".to_string(),
        sweep_interval_millis: 50,
        ..CoordinatorConfig::default()
    }
}

/// The `exec-supervisor` for workers run inside the test binary, whose
/// `main` is the test harness's and cannot supervise: the built
/// `taskyard-worker`.
pub fn exec_supervisor() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_taskyard-worker"))
}

pub fn worker_config(coordinator: SocketAddr, id: &str, capacity: u32) -> WorkerConfig {
    WorkerConfig {
        coordinator: coordinator.to_string(),
        worker_id: id.to_string(),
        capacity,
        heartbeat_interval_millis: 200,
        reconnect_max_millis: 200,
        ..WorkerConfig::default()
    }
}

/// A coordinator and its workers; stopped (gracefully) on drop.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub coordinator: Option<CoordinatorHandle>,
    pub workers: Vec<WorkerHandle>,
}

impl Cluster {
    /// Starts a coordinator and `workers` workers of `capacity` each, and
    /// waits until every worker is registered.
    pub fn start(workers: usize, capacity: u32) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cluster = Cluster {
            coordinator: Some(start_coordinator(coordinator_config(dir.path()))),
            dir,
            workers: Vec::new(),
        };
        for i in 0..workers {
            cluster.add_worker(&format!("worker-{i}"), capacity);
        }
        cluster.wait_for_workers(workers);
        cluster
    }

    /// A coordinator whose config `configure` adjusts (on top of
    /// [`coordinator_config`]), and no workers yet.
    pub fn start_configured(configure: impl FnOnce(&mut CoordinatorConfig)) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = coordinator_config(dir.path());
        configure(&mut config);
        Cluster {
            coordinator: Some(start_coordinator(config)),
            dir,
            workers: Vec::new(),
        }
    }

    pub fn coordinator(&self) -> &CoordinatorHandle {
        self.coordinator.as_ref().expect("coordinator running")
    }

    pub fn client_addr(&self) -> String {
        self.coordinator().client_addr.to_string()
    }

    /// A client of the coordinator's HTTP listener.
    pub fn http(&self) -> http::Http {
        http::Http::new(self.coordinator().http_addr.expect("http listener on"))
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("taskyard.db")
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.client_addr()).expect("client connects")
    }

    pub fn add_worker(&mut self, id: &str, capacity: u32) {
        let config = worker_config(self.coordinator().worker_addr, id, capacity);
        self.workers.push(WorkerHandle::spawn(config, quiet_log()));
    }

    /// Starts a worker with `config`, running the task types of `registry`.
    pub fn add_worker_with(&mut self, config: WorkerConfig, registry: TaskRegistry) {
        let worker = WorkerHandle::spawn_with_registry(config, registry, quiet_log());
        self.workers.push(worker);
    }

    pub fn wait_for_workers(&self, n: usize) {
        let mut client = self.client();
        wait_until(
            &format!("{n} workers registered"),
            Duration::from_secs(10),
            || client.workers().map(|w| w.len() == n).unwrap_or(false),
        );
    }

    /// Stops the workers, then the coordinator gracefully.
    pub fn stop(&mut self) {
        for worker in self.workers.drain(..) {
            worker.stop();
        }
        if let Some(coordinator) = self.coordinator.take() {
            coordinator.stop();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn start_coordinator(config: CoordinatorConfig) -> CoordinatorHandle {
    CoordinatorHandle::spawn(config, quiet_log()).expect("coordinator starts")
}

/// Polls `condition` until it holds; panics naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A loopback port that was free a moment ago, for a process that must be
/// told its address up front (and keep it across restarts).
pub fn free_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}

/// True (the caller returns early: skipped) when `found` is false, after
/// the note of `external::missing` naming the Debian `package`; a failure
/// under `TASKYARD_REQUIRE_EXTERNAL=1`. Prefer `external::program`, which
/// also finds the program.
pub fn skip_without(program: &str, found: bool, package: &'static str) -> bool {
    let found = found.then_some(());
    external::present(program, found, external::Package::Debian(package)).is_none()
}
