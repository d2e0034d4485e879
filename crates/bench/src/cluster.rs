//! What the benchmark runs against: a coordinator it starts in this process
//! (temporary database, ephemeral ports) or one already running, plus
//! in-process workers that run the benchmark's no-op task types.

use crate::postgres::BenchPostgres;
use crate::seed::{self, SeedPlan};
use crate::{BenchError, BenchOptions};
use slog::Logger;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taskyard_client::client::Client;
use taskyard_client::client::ClientOptions;
use taskyard_client::clock::Clock;
use taskyard_client::worker::WorkerConfig;
use taskyard_client::worker::{TaskRegistry, Threads, WorkerHandle};
use taskyard_protocol::{JobId, TaskOutcome};
use taskyard_server::actors::coordinator::{Inspect, Inspection};
use taskyard_server::config::limit::DeclaredLimit;
use taskyard_server::config::{CoordinatorConfig, PostgresUrl, StoreKind};
use taskyard_server::process::node::NodeHandle;
use taskyard_server::process::CoordinatorHandle;

/// Succeeds at once: what the throughput phase submits.
pub const NOOP: &str = "bench.noop";
/// Succeeds at once after noting when it started: the paced latency phase.
pub const TIMED: &str = "bench.timed";
/// No worker runs it: `--preload` jobs wait behind everything else.
pub const UNRUN: &str = "bench.unrun";
/// The task type of `--seed-finished` jobs: a type of its own, so their
/// counts (which drop as expiry deletes them) do not mix with the drain's.
pub const SEEDED: &str = "bench.seeded";
/// Advertised by `--idle-workers` connections; never submitted.
pub const IDLE: &str = "bench.idle";

/// When each `TIMED` job started on a worker.
#[derive(Clone, Default)]
pub struct StartTimes(Arc<Mutex<HashMap<JobId, Instant>>>);

impl StartTimes {
    pub(super) fn record(&self, job: JobId) {
        if let Ok(mut times) = self.0.lock() {
            times.insert(job, Instant::now());
        }
    }

    pub fn get(&self, job: JobId) -> Option<Instant> {
        self.0.lock().ok()?.get(&job).copied()
    }
}

/// A coordinator (owned or remote) and the benchmark's workers.
pub struct Cluster {
    pub client_addr: String,
    pub client_options: ClientOptions,
    pub worker_addr: String,
    pub start_times: StartTimes,
    own: Option<OwnCoordinator>,
    workers: Vec<WorkerHandle>,
    log: Logger,
}

/// A coordinator this process started, with its temporary database (or
/// the PostgreSQL it runs on, dropped after it).
struct OwnCoordinator {
    running: Running,
    config: CoordinatorConfig,
    dir: TempDir,
    postgres: Option<BenchPostgres>,
}

/// How the own coordinator was started: as `taskyard-coordinator` starts
/// it for the configured store (on PostgreSQL a node that wins the lease
/// and leads with its fence, as in production).
enum Running {
    Single(CoordinatorHandle),
    Node(NodeHandle),
}

impl Running {
    /// Starts the coordinator `config` describes and returns once it
    /// serves, with the rows recovery loaded when known.
    fn start(config: &CoordinatorConfig, log: Logger) -> Result<(Running, usize), BenchError> {
        let failed =
            |e: taskyard_server::process::server::StartError| BenchError::Start(e.to_string());
        match taskyard_server::process::spawn(config.clone(), log).map_err(failed)? {
            taskyard_server::process::Running::Single(handle) => {
                let rows = handle.recovery.loaded;
                Ok((Running::Single(handle), rows))
            }
            taskyard_server::process::Running::Node(node) => {
                wait_leading(&node, LEAD_WITHIN)?;
                let running = Running::Node(node);
                // Nothing has been submitted yet: what it holds is what
                // recovery loaded.
                let rows = inspect(&running)?.jobs_in_memory;
                Ok((running, rows))
            }
        }
    }

    fn client_addr(&self) -> SocketAddr {
        match self {
            Running::Single(h) => h.client_addr,
            Running::Node(n) => n.client_addr,
        }
    }

    fn worker_addr(&self) -> SocketAddr {
        match self {
            Running::Single(h) => h.worker_addr,
            Running::Node(n) => n.worker_addr,
        }
    }

    fn coordinator(
        &self,
    ) -> Option<actix::Addr<taskyard_server::actors::coordinator::Coordinator>> {
        match self {
            Running::Single(h) => Some(h.coordinator().clone()),
            Running::Node(n) => n.coordinator(),
        }
    }

    fn stop(self) {
        match self {
            Running::Single(h) => {
                h.stop();
            }
            Running::Node(n) => {
                n.stop();
            }
        }
    }
}

/// The counters of the coordinator `running` serves with.
fn inspect(running: &Running) -> Result<Inspection, BenchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| BenchError::Failed(format!("cannot build a runtime: {e}")))?;
    let coordinator = running
        .coordinator()
        .ok_or_else(|| BenchError::Failed("the node no longer leads".into()))?;
    let inspected = runtime
        .block_on(coordinator.send(Inspect))
        .map_err(|e| BenchError::Failed(format!("coordinator unreachable: {e}")))?;
    inspected.map_err(|e| BenchError::Failed(format!("coordinator invariant broken: {e}")))
}

/// How long a node started on a free lease may take to lead.
pub(super) const LEAD_WITHIN: Duration = Duration::from_secs(30);

/// Waits until `node` serves (won the lease and recovered).
pub(super) fn wait_leading(node: &NodeHandle, within: Duration) -> Result<(), BenchError> {
    let deadline = Instant::now() + within;
    while node.coordinator().is_none() {
        if Instant::now() > deadline {
            let view = node.view.read();
            return Err(BenchError::Start(format!(
                "the node on PostgreSQL did not lead within {within:?} (role {}, lease error {:?})",
                view.role.name(),
                view.lease_error
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

impl Cluster {
    /// Starts (or reaches) the coordinator and `opts.workers` workers, and
    /// returns once every worker is registered.
    pub fn start(opts: &BenchOptions, log: Logger) -> Result<Cluster, BenchError> {
        let (own, client_addr, worker_addr) = match &opts.coordinator {
            Some(addr) => (None, addr.clone(), remote_worker_addr(opts, addr)?),
            None => {
                let own = OwnCoordinator::start(opts, log.clone())?;
                let (c, w) = (own.running.client_addr(), own.running.worker_addr());
                (Some(own), c.to_string(), w.to_string())
            }
        };
        let mut cluster = Cluster {
            client_addr,
            client_options: opts.client.clone(),
            worker_addr,
            start_times: StartTimes::default(),
            own,
            workers: Vec::new(),
            log,
        };
        if !opts.backlog {
            cluster.start_workers(opts)?;
        }
        Ok(cluster)
    }

    /// Starts `opts.workers` workers and returns once every one is
    /// registered.
    pub fn start_workers(&mut self, opts: &BenchOptions) -> Result<(), BenchError> {
        let times = self.start_times.clone();
        self.add_workers(opts.workers, opts.capacity, opts.prefetch, "bench", || {
            registry(&times)
        })
    }

    /// Starts `n` more workers (ids `PREFIX-PID-I`) running what
    /// `registry` builds, and returns once every worker is registered.
    pub(super) fn add_workers(
        &mut self,
        n: u32,
        capacity: u32,
        prefetch: u32,
        prefix: &str,
        registry: impl Fn() -> TaskRegistry,
    ) -> Result<(), BenchError> {
        self.workers.extend((1..=n).map(|i| {
            let config = WorkerConfig {
                coordinator: self.worker_addr.clone(),
                worker_id: format!("{prefix}-{}-{i}", std::process::id()),
                capacity,
                prefetch,
                ..WorkerConfig::default()
            };
            WorkerHandle::spawn_with_registry(config, registry(), self.log.clone())
        }));
        self.wait_for_workers(Duration::from_secs(15))
    }

    fn wait_for_workers(&self, within: Duration) -> Result<(), BenchError> {
        let mut client = Client::connect_with(&self.client_addr, &self.client_options)?;
        let deadline = Instant::now() + within;
        let ours: Vec<_> = self.workers.iter().map(|w| w.worker_id().clone()).collect();
        loop {
            let connected = client.workers()?;
            if ours
                .iter()
                .all(|id| connected.iter().any(|w| &w.worker_id == id))
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(BenchError::Failed(format!(
                    "workers did not register at {} within {within:?}",
                    self.worker_addr
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// True when the coordinator runs in this process (its thread CPU and
    /// commit counters can be read).
    pub fn is_own(&self) -> bool {
        self.own.is_some()
    }

    /// The coordinator's counters; `None` for a remote coordinator.
    pub fn inspect(&self) -> Result<Option<Inspection>, BenchError> {
        let Some(own) = &self.own else {
            return Ok(None);
        };
        inspect(&own.running).map(Some)
    }

    /// How many `--seed-finished` jobs the database still holds (expiry
    /// deletes them with `--seed-expired`); `None` for a remote
    /// coordinator. Reads the database beside the coordinator.
    pub fn seeded_left(&self) -> Result<Option<u64>, BenchError> {
        let Some(own) = self.own.as_ref().filter(|o| o.postgres.is_none()) else {
            return Ok(None);
        };
        let path = &own.config.db_path;
        let fail = |e: rusqlite::Error| BenchError::Failed(format!("{}: {e}", path.display()));
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
        let conn = rusqlite::Connection::open_with_flags(path, flags).map_err(fail)?;
        let left: i64 = conn
            .query_row(
                "SELECT count(*) FROM jobs WHERE worker_id = ?1",
                [seed::SEED_WORKER],
                |r| r.get(0),
            )
            .map_err(fail)?;
        Ok(Some(left.max(0) as u64))
    }

    /// Stops the workers, stops the coordinator gracefully and starts it
    /// again on the same database: how long until it is ready to serve, and
    /// how many rows it loaded. `None` for a remote coordinator.
    pub fn restart_timed(&mut self) -> Result<Option<(Duration, usize)>, BenchError> {
        self.stop_workers();
        let Some(own) = self.own.take() else {
            return Ok(None);
        };
        own.running.stop();
        let started = Instant::now();
        let (running, rows) = Running::start(&own.config, self.log.clone())?;
        let ready = started.elapsed();
        self.own = Some(OwnCoordinator { running, ..own });
        Ok(Some((ready, rows)))
    }

    fn stop_workers(&mut self) {
        for worker in self.workers.drain(..) {
            worker.stop();
        }
    }

    /// Stops everything this process started and removes its database.
    pub fn stop(mut self) {
        self.stop_workers();
        if let Some(own) = self.own.take() {
            own.running.stop();
            drop(own.dir);
            drop(own.postgres);
        }
    }
}

impl OwnCoordinator {
    fn start(opts: &BenchOptions, log: Logger) -> Result<OwnCoordinator, BenchError> {
        let dir = TempDir::create()?;
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        let needed = opts.preload + opts.jobs + u64::from(opts.latency_jobs) + 1000;
        let config = CoordinatorConfig {
            client_listen: any_port,
            worker_listen: any_port,
            db_path: dir.0.join("bench.db"),
            sqlite_synchronous: opts.synchronous,
            max_active_jobs: needed.max(CoordinatorConfig::default().max_active_jobs),
            max_schedules: (opts.schedules as usize)
                .max(CoordinatorConfig::default().max_schedules),
            http_listen: String::new(),
            limit: (opts.limit > 0)
                .then(|| DeclaredLimit {
                    pattern: "bench:*".into(),
                    max_running: opts.limit,
                })
                .into_iter()
                .collect(),
            ..CoordinatorConfig::default()
        };
        let postgres = match opts.store {
            StoreKind::Sqlite => None,
            StoreKind::Postgres => Some(BenchPostgres::prepare(opts.postgres_url.as_deref())?),
        };
        let config = match &postgres {
            Some(pg) => CoordinatorConfig {
                store: StoreKind::Postgres,
                postgres_url: PostgresUrl::new(pg.url()),
                postgres_write_connections: opts.write_connections,
                node_name: "bench".into(),
                ..config
            },
            None => config,
        };
        if opts.seed_finished > 0 {
            match &postgres {
                Some(pg) => seed::seed_postgres(pg.url(), &seed_plan(opts))?,
                None => seed::seed(&config.db_path, &seed_plan(opts))?,
            };
        }
        let (running, _) = Running::start(&config, log)?;
        Ok(OwnCoordinator {
            running,
            config,
            dir,
            postgres,
        })
    }
}

/// `--seed-finished` jobs: finished an hour ago, or 8 days ago (past the
/// default `job-retention-millis`) with `--seed-expired`.
fn seed_plan(opts: &BenchOptions) -> SeedPlan {
    const HOUR_MS: i64 = 3_600_000;
    let age = if opts.seed_expired { 8 * 24 } else { 1 } * HOUR_MS;
    let now = taskyard_client::clock::SystemClock.now_millis();
    SeedPlan {
        finished: opts.seed_finished,
        active: 0,
        keyed: false,
        finished_from: now - age - opts.seed_finished as i64,
        task_type: SEEDED.into(),
    }
}

/// `--worker-addr`, else the client port plus one (the default layout,
/// 7400 for clients and 7401 for workers).
fn remote_worker_addr(opts: &BenchOptions, client_addr: &str) -> Result<String, BenchError> {
    if let Some(addr) = &opts.worker_addr {
        return Ok(addr.clone());
    }
    let bad = || {
        BenchError::Failed(format!(
            "cannot derive the worker address from {client_addr:?}; pass --worker-addr"
        ))
    };
    let (host, port) = client_addr.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    Ok(format!("{host}:{}", port.checked_add(1).ok_or_else(bad)?))
}

/// The benchmark's task types: `NOOP` and `TIMED`.
pub(super) fn registry(start_times: &StartTimes) -> TaskRegistry {
    let mut registry = TaskRegistry::empty();
    let done = || async { TaskOutcome::Succeeded(Vec::new()) };
    let times = start_times.clone();
    // Both names are valid task types, so registering cannot fail. Neither
    // handler blocks, so both run on the connection's thread.
    let _ = registry.register_on(NOOP, Threads::Connection, move |_, _| done());
    let _ = registry.register_on(TIMED, Threads::Connection, move |ctx, _| {
        times.record(ctx.job_id);
        done()
    });
    registry
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn create() -> Result<TempDir, BenchError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("taskyard-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path)
            .map_err(|e| BenchError::Start(format!("cannot create {}: {e}", path.display())))?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
