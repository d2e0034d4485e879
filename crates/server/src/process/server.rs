//! Starting a coordinator: open and recover the database, then open the
//! listeners, then accept connections. Also a handle that runs one on its
//! own thread, for `taskyard dev`, tests and benchmarks.

use crate::actors::coordinator::{Coordinator, ExpiryPolicy, Shutdown, NOT_DURABLE_EXIT_CODE};
use crate::actors::persistence::{Persistence, PersistenceLink};
use crate::actors::stored_reads::{ReadShares, StoredReads};
use crate::actors::sweeper::Sweeper;
use crate::config::CoordinatorConfig;
use crate::net::client_session::ClientSession;
use crate::net::handshake::{ListenerPolicy, SessionContext};
use crate::net::listener::{accept_loop, Accepted, ListenerSetup, ReadHalf, Slots, WriteHalf};
use crate::net::open_files;
use crate::net::worker_session::WorkerSession;
use crate::net::write_budget::UnwrittenBytes;
use crate::process::node::{standby, term_io, NodeView};
use crate::scheduler::{CoordinatorState, RecoverySummary, Retention, Stored};
use crate::store::{OpenedStore, ReadBudget, Store, StoreError, StoredJobReader};
use actix::{Actor, Addr};
use slog::{info, warn, Logger};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use taskyard_client::clock::{Clock, SystemClock};
use taskyard_client::security::tls;
use taskyard_protocol::register::WorkerLimits;
use taskyard_protocol::Role;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Name of the thread `CoordinatorHandle` runs the actor system on (the
/// coordinator and every session).
pub const COORDINATOR_THREAD: &str = "taskyard-coordinator";
pub use crate::actors::persistence::PERSISTENCE_THREAD;

/// Why a coordinator could not start. Nothing was listening when it failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {addr} ({key}): {reason}")]
    Bind {
        key: &'static str,
        addr: SocketAddr,
        reason: String,
    },
    #[error("coordinator thread ended before it was ready")]
    Thread,
    #[error("key `{key}`: {reason}")]
    Config { key: String, reason: String },
}

/// A started coordinator inside the current actix system.
pub struct CoordinatorServer {
    pub client_addr: SocketAddr,
    pub worker_addr: SocketAddr,
    /// The HTTP listener's bound address; `None` when `http-listen` is empty.
    pub http_addr: Option<SocketAddr>,
    pub coordinator: Addr<Coordinator>,
    pub recovery: RecoverySummary,
    /// Answers encoded for client connections and not yet taken by their
    /// sockets, summed over every client connection.
    pub client_unwritten: UnwrittenBytes,
    /// Assignments encoded for worker connections and not yet taken by
    /// their sockets, summed over every worker connection.
    pub worker_unwritten: UnwrittenBytes,
}

impl CoordinatorServer {
    /// Must run inside an actix system. Recovery happens before either
    /// listener opens, so no peer ever sees a half-loaded state.
    pub async fn start(
        config: &CoordinatorConfig,
        clock: Arc<dyn Clock>,
        log: Logger,
    ) -> Result<CoordinatorServer, StartError> {
        let started = Instant::now();
        let mut listeners = Listeners::from_config(config)?;
        // The store first: a database another coordinator owns is refused
        // before this one says anything else.
        let (mut store, readers, stored) = open_and_load(config, &log)?;
        listeners.max_connections = open_files::fit_max_connections(config.max_connections, &log);
        let client_unwritten = listeners.client.unwritten.clone();
        let worker_unwritten = listeners.worker.unwritten.clone();
        let mut state = CoordinatorState::for_config(config, log.clone());
        let recovery = state.recover_stored(stored, clock.now());
        schedules_at_start(&mut store, &mut state, config, clock.now(), &log)?;
        info!(log, "recovered"; "db" => store.describe(), "rows" => recovery.loaded,
              "stored" => recovery.stored,
              "awaiting_claim" => recovery.awaiting_claim,
              "millis" => started.elapsed().as_millis() as u64);
        let clients = bind("client-listen", config.client_listen).await?;
        let workers = bind("worker-listen", config.worker_listen).await?;
        let http = bind_http(config)?;
        let (client_addr, worker_addr) = (
            local_addr(&clients, "client-listen")?,
            local_addr(&workers, "worker-listen")?,
        );
        let history = readers.map(|readers| StoredReads::start_with(readers, read_budget(config)));
        let http_bound = http.as_ref().and_then(|l| l.local_addr().ok());
        record_holder(store.as_ref(), &client_addr, &worker_addr, http_bound, &log);
        let coordinator = start_term(
            config,
            clock.clone(),
            store,
            state,
            TermLinks {
                history: history.map(|h| h.recipient()),
                fence_watch: None,
                epoch: 0,
                trust: None,
            },
            &log,
        );
        let me = advertised(
            config,
            &client_addr,
            &worker_addr,
            http_bound.as_ref(),
            config.resolved_node_name(),
        );
        let view = NodeView::single(me, coordinator.clone());
        listeners.spawn(clients, workers, &view, &log);
        let http_addr = match http {
            Some(listener) => {
                let link = crate::http::CoordinatorLink::for_node(view, clock);
                Some(spawn_http(listener, link, config)?)
            }
            None => None,
        };
        info!(log, "coordinator listening"; "clients" => %client_addr, "workers" => %worker_addr,
              "http" => http_addr.map_or_else(|| "off".to_string(), |a| a.to_string()));
        Ok(CoordinatorServer {
            client_addr,
            worker_addr,
            http_addr,
            coordinator,
            recovery,
            client_unwritten,
            worker_unwritten,
        })
    }
}

/// Leaves this coordinator's addresses with the store (SQLite writes them
/// into its lock file), so a second coordinator started on the same
/// database can say whom it found. Only advice: a failure is a warning.
fn record_holder(
    store: &dyn Store,
    client: &SocketAddr,
    worker: &SocketAddr,
    http: Option<SocketAddr>,
    log: &Logger,
) {
    let http = http.map_or_else(|| "off".to_string(), |a| a.to_string());
    let addresses = format!("clients {client}, workers {worker}, http {http}");
    if let Err(e) = store.record_holder(&addresses) {
        warn!(log, "cannot record this coordinator's addresses with the store"; "error" => %e);
    }
}

/// The hot-set bounds from the config.
fn retention(config: &CoordinatorConfig) -> Retention {
    Retention {
        max_finished: config.retain_finished_in_memory,
        max_age_ms: config.retain_finished_in_memory_millis,
        max_bytes: config.retain_finished_in_memory_bytes,
    }
}

/// What one page of history may cost (`history-read-budget`,
/// `history-read-rows`).
pub(crate) fn read_budget(config: &CoordinatorConfig) -> ReadBudget {
    ReadBudget {
        time: Duration::from_millis(config.history_read_budget_millis),
        rows: config.history_read_rows,
    }
}

/// How history reads share the readers (`history-readers`,
/// `history-reads-per-connection`, `history-reads-waiting`).
fn read_shares(config: &CoordinatorConfig) -> ReadShares {
    ReadShares {
        readers: config.history_readers,
        per_connection: config.history_reads_per_connection,
        waiting: config.history_reads_waiting,
    }
}

/// How long finished jobs stay in the database, from the config.
fn expiry(config: &CoordinatorConfig) -> ExpiryPolicy {
    ExpiryPolicy {
        job_retention_ms: config.job_retention_millis,
        failed_retention_ms: config.failed_job_retention_millis,
        interval_ms: config.expiry_interval_millis,
        batch_rows: config.expiry_batch_rows,
    }
}

pub(crate) async fn bind(key: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr).await.map_err(|e| StartError::Bind {
        key,
        addr,
        reason: e.to_string(),
    })
}

/// Binds `http-listen` (if set) with the other listeners, so a bad address
/// fails start-up before anything is served.
pub(crate) fn bind_http(
    config: &CoordinatorConfig,
) -> Result<Option<std::net::TcpListener>, StartError> {
    let addr = config
        .http_addr()
        .map_err(|(key, reason)| StartError::Config { key, reason })?;
    let Some(addr) = addr else {
        return Ok(None);
    };
    let listener = std::net::TcpListener::bind(addr).map_err(|e| StartError::Bind {
        key: "http-listen",
        addr,
        reason: e.to_string(),
    })?;
    Ok(Some(listener))
}

/// Starts actix-web on the bound listener, talking to whoever `link`
/// says serves.
pub(crate) fn spawn_http(
    listener: std::net::TcpListener,
    link: crate::http::CoordinatorLink,
    config: &CoordinatorConfig,
) -> Result<SocketAddr, StartError> {
    let addr = listener.local_addr().map_err(|e| StartError::Bind {
        key: "http-listen",
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        reason: e.to_string(),
    })?;
    let token = config
        .client_secret()
        .map_err(|(key, reason)| StartError::Config { key, reason })?;
    let allowed_hosts = config
        .http_allowed_hosts()
        .map_err(|(key, reason)| StartError::Config { key, reason })?;
    let server =
        crate::http::serve(listener, link, token, allowed_hosts).map_err(|e| StartError::Bind {
            key: "http-listen",
            addr,
            reason: e.to_string(),
        })?;
    actix_rt::spawn(server);
    Ok(addr)
}

/// What a term's coordinator is linked to besides its store.
pub(crate) struct TermLinks {
    /// Reads of jobs no longer in memory (SQLite's reader pool); none:
    /// every finished job stays in memory until it expires.
    pub history: Option<crate::actors::stored_reads::StoredReadLink>,
    /// Told when a commit is fenced (PostgreSQL).
    pub fence_watch: Option<actix::Recipient<crate::actors::coordinator::Fenced>>,
    /// The lease's epoch this term won (0 on SQLite), stamped on every
    /// frame to workers.
    pub epoch: u64,
    /// Until when the lease is trusted (PostgreSQL): nothing is released
    /// after it.
    pub trust: Option<crate::ha::TrustDeadline>,
}

/// Starts a term's actors on the current actix system: `Persistence` on
/// `store`, the `Coordinator` on the recovered `state`, and its `Sweeper`.
pub(crate) fn start_term(
    config: &CoordinatorConfig,
    clock: Arc<dyn Clock>,
    store: Box<dyn Store>,
    state: CoordinatorState,
    links: TermLinks,
    log: &Logger,
) -> Addr<Coordinator> {
    let persistence = Persistence::start(store, log.clone());
    let mut coordinator =
        Coordinator::new(state, clock, PersistenceLink::to(&persistence), log.clone())
            .with_shutdown_timeout(Duration::from_millis(config.shutdown_timeout_millis))
            .with_expiry(persistence.clone().recipient(), expiry(config))
            .with_deletion(persistence.clone().recipient())
            .with_schedule_writes(persistence.clone().recipient())
            .with_epoch(links.epoch);
    if let Some(history) = links.history {
        coordinator = coordinator.with_history(history, read_shares(config), retention(config));
    }
    if let Some(watch) = links.fence_watch {
        coordinator = coordinator.with_fence_watch(watch);
    }
    if let Some(trust) = links.trust {
        coordinator = coordinator.with_trust(trust);
    }
    let coordinator = coordinator.start();
    Sweeper {
        coordinator: coordinator.clone(),
        interval: Duration::from_millis(config.sweep_interval_millis),
    }
    .start();
    coordinator
}

/// This node's name and the addresses it advertises: the `advertise-*`
/// keys, else the bound listeners.
pub(crate) fn advertised(
    config: &CoordinatorConfig,
    client: &SocketAddr,
    worker: &SocketAddr,
    http: Option<&SocketAddr>,
    node: String,
) -> taskyard_protocol::LeaderAddresses {
    let pick = |key: &str, bound: Option<&SocketAddr>| {
        if key.is_empty() {
            bound.map(|a| a.to_string())
        } else {
            Some(key.to_string())
        }
    };
    taskyard_protocol::LeaderAddresses {
        node,
        epoch: 0,
        client: pick(&config.advertise_client, Some(client)),
        worker: pick(&config.advertise_worker, Some(worker)),
        http: pick(&config.advertise_http, http),
    }
}

pub(crate) fn local_addr(
    listener: &TcpListener,
    key: &'static str,
) -> Result<SocketAddr, StartError> {
    listener.local_addr().map_err(|e| StartError::Bind {
        key,
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        reason: e.to_string(),
    })
}

/// The opened store, its history readers, and what recovery read from it.
type Opened = (
    Box<dyn Store>,
    Option<Vec<Box<dyn StoredJobReader>>>,
    Stored,
);

/// Opens (and migrates) the store the config names (`store::open`) and
/// reads what recovery needs. On a thread of its own: the PostgreSQL
/// driver blocks on a runtime of its own, which it may not do on the actor
/// system's thread. A database that cannot be reached is a start-up error
/// naming `postgres-url` and the address (never the password).
fn open_and_load(config: &CoordinatorConfig, log: &Logger) -> Result<Opened, StartError> {
    let window = config.retain_finished_in_memory;
    let open = crate::store::open(config, log).open;
    std::thread::scope(|scope| {
        let opening = std::thread::Builder::new()
            .name("taskyard-open-store".into())
            .spawn_scoped(scope, || -> Result<Opened, StartError> {
                let OpenedStore { mut store, history } = open()?;
                let stored = store.load_for_recovery(window)?;
                Ok((store, history, stored))
            })
            .map_err(|_| StartError::Thread)?;
        opening.join().map_err(|_| StartError::Thread)?
    })
}

/// Loads and reconciles the schedules (`schedule_startup`) on a thread
/// of its own, for the same reason as `open_and_load`.
fn schedules_at_start(
    store: &mut Box<dyn Store>,
    state: &mut CoordinatorState,
    config: &CoordinatorConfig,
    now: taskyard_client::clock::Now,
    log: &Logger,
) -> Result<(), StartError> {
    let declared = config.declared_schedules();
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("taskyard-schedules".into())
            .spawn_scoped(scope, || {
                crate::process::schedule_startup::restore_schedules(
                    store.as_mut(),
                    state,
                    &declared,
                    now,
                    log,
                )
            })
            .map_err(|_| StartError::Thread)?
            .join()
            .map_err(|_| StartError::Thread)?
            .map_err(StartError::from)
    })
}

/// Both listeners' rules, from the config. Reads token and TLS files, so
/// failures name the key and file.
pub(crate) struct Listeners {
    client: ListenerPolicy,
    worker: ListenerPolicy,
    tls: Option<TlsAcceptor>,
    pub(crate) max_connections: usize,
}

impl Listeners {
    pub(crate) fn from_config(config: &CoordinatorConfig) -> Result<Listeners, StartError> {
        let invalid = |(key, reason): (String, String)| StartError::Config { key, reason };
        let policy = |role, token| ListenerPolicy {
            role,
            token,
            max_frame_bytes: config.max_frame_bytes,
            handshake_timeout: Duration::from_millis(config.handshake_timeout_millis),
            max_in_flight: config.max_in_flight_requests,
            // A worker's reads are never paused (its heartbeats and results
            // must arrive while it drains a burst); one that stops taking
            // its assignments is dropped instead (`StallWatch`).
            max_unwritten_bytes: match role {
                Role::Client => config.max_unwritten_answer_bytes,
                Role::Worker => usize::MAX,
            },
            unwritten: UnwrittenBytes::default(),
            idle_timeout: match role {
                Role::Client => Some(Duration::from_millis(config.client_idle_timeout_millis)),
                Role::Worker => None,
            },
            worker_limits: WorkerLimits {
                max_task_types: config.max_task_types_per_worker,
                max_capacity: config.max_worker_capacity,
                max_error_bytes: config.max_error_bytes,
                max_unwritten_bytes: config.max_unwritten_worker_bytes,
                stall_patience: Duration::from_millis(config.heartbeat_timeout_millis),
            },
            advertised_http: None,
        };
        let tls = match config.tls_enabled() {
            true => Some(
                tls::acceptor(&config.tls_cert, &config.tls_key)
                    .map_err(|reason| invalid(("tls-cert".into(), reason)))?,
            ),
            false => None,
        };
        Ok(Listeners {
            client: policy(Role::Client, config.client_secret().map_err(invalid)?),
            worker: policy(Role::Worker, config.worker_secret().map_err(invalid)?),
            tls,
            max_connections: config.max_connections,
        })
    }

    fn setup(&self, name: &'static str, policy: &ListenerPolicy) -> ListenerSetup {
        ListenerSetup {
            name,
            slots: Slots::new(self.max_connections),
            tls: self.tls.clone(),
            handshake_timeout: policy.handshake_timeout,
            max_frame_bytes: policy.max_frame_bytes,
        }
    }

    /// Spawns both accept loops: workers first, then clients.
    pub(crate) fn spawn(
        self,
        clients: TcpListener,
        workers: TcpListener,
        view: &NodeView,
        log: &Logger,
    ) {
        self.spawn_accept_loop(&self.worker, workers, view, log, WorkerSession::start);
        self.spawn_accept_loop(&self.client, clients, view, log, ClientSession::start);
    }

    /// Spawns the accept loop of the listener for `policy.role`: while
    /// this node serves a term, each connection it accepts gets a session
    /// from `start_session` (held to `policy`, bound to the term); while
    /// it does not, each is answered `NotLeader` and closed. Logs carry
    /// the listener's name.
    fn spawn_accept_loop<Session: 'static>(
        &self,
        policy: &ListenerPolicy,
        listener: TcpListener,
        view: &NodeView,
        log: &Logger,
        start_session: fn(ReadHalf, WriteHalf, Addr<Coordinator>, SessionContext) -> Session,
    ) {
        let name = policy.role.name();
        let (view, log) = (view.clone(), log.new(slog::o!("listener" => name)));
        let policy = Arc::new(ListenerPolicy {
            advertised_http: view.read().me.http.clone(),
            ..policy.clone()
        });
        let setup = self.setup(name, &policy);
        actix_rt::spawn(accept_loop(
            listener,
            setup,
            log.clone(),
            move |a: Accepted| {
                let Some(term) = view.term() else {
                    actix_rt::spawn(standby::answer_not_leader(
                        a,
                        policy.role,
                        view.leader_addresses(),
                        policy.handshake_timeout,
                        policy.max_frame_bytes,
                        log.clone(),
                    ));
                    return;
                };
                let (read, write) = match &term.sessions {
                    Some(token) => term_io::bind(a.read, a.write, token),
                    None => (a.read, a.write),
                };
                let conn = SessionContext::new(Arc::clone(&policy), a.peer, Some(a.slot), &log);
                start_session(read, write, term.coordinator, conn);
            },
        ));
    }
}

/// A coordinator running on its own thread with its own actix system.
pub struct CoordinatorHandle {
    pub client_addr: SocketAddr,
    pub worker_addr: SocketAddr,
    pub http_addr: Option<SocketAddr>,
    pub recovery: RecoverySummary,
    /// See [`CoordinatorServer::client_unwritten`].
    pub client_unwritten: UnwrittenBytes,
    /// See [`CoordinatorServer::worker_unwritten`].
    pub worker_unwritten: UnwrittenBytes,
    coordinator: Addr<Coordinator>,
    system: actix::System,
    /// Ends with the actor system's exit code.
    thread: Option<std::thread::JoinHandle<i32>>,
}

/// How a graceful stop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopOutcome {
    /// Everything was durable; every held answer was released.
    Durable,
    /// `shutdown-timeout-millis` passed first: some changes were never
    /// committed (the coordinator logged how many) and their answers were
    /// never sent.
    NotDurable,
    /// The coordinator had already ended by itself: the database refused
    /// a commit for good (logged with the database's words). Nothing it
    /// had not committed was acknowledged; a restart recovers.
    CommitRefused,
}

impl StopOutcome {
    /// The outcome an actor system's exit code stands for.
    pub(crate) fn of_exit_code(code: i32) -> StopOutcome {
        match code {
            0 => StopOutcome::Durable,
            crate::actors::coordinator::COMMIT_REFUSED_EXIT_CODE => StopOutcome::CommitRefused,
            _ => StopOutcome::NotDurable,
        }
    }
}

/// Runs what `start` starts on an actix system of its own, on a thread
/// named `COORDINATOR_THREAD`; returns once it started (or failed to), with
/// the system and the thread, which ends with the system's exit code.
pub(crate) fn spawn_system<S, F>(
    start: impl FnOnce() -> F + Send + 'static,
) -> Result<(S, actix::System, std::thread::JoinHandle<i32>), StartError>
where
    S: Send + 'static,
    F: std::future::Future<Output = Result<S, StartError>>,
{
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(COORDINATOR_THREAD.into())
        .spawn(move || {
            let system = actix::System::new();
            let started = system.block_on(start());
            let ok = started.is_ok();
            let _ = ready_tx.send(started.map(|s| (s, actix::System::current())));
            if !ok {
                return 0;
            }
            system.run_with_code().unwrap_or(NOT_DURABLE_EXIT_CODE)
        })
        .map_err(|_| StartError::Thread)?;
    let (server, system) = ready_rx.recv().map_err(|_| StartError::Thread)??;
    Ok((server, system, thread))
}

impl CoordinatorHandle {
    /// Starts a coordinator with the system clock; returns once it listens.
    pub fn spawn(config: CoordinatorConfig, log: Logger) -> Result<CoordinatorHandle, StartError> {
        let (server, system, thread) = spawn_system(move || async move {
            CoordinatorServer::start(&config, Arc::new(SystemClock), log).await
        })?;
        Ok(CoordinatorHandle {
            client_addr: server.client_addr,
            worker_addr: server.worker_addr,
            http_addr: server.http_addr,
            recovery: server.recovery,
            client_unwritten: server.client_unwritten,
            worker_unwritten: server.worker_unwritten,
            coordinator: server.coordinator,
            system,
            thread: Some(thread),
        })
    }

    /// The coordinator actor, for tests that inspect it.
    pub fn coordinator(&self) -> &Addr<Coordinator> {
        &self.coordinator
    }

    /// Graceful stop: state frozen and flushed, then sockets closed; within
    /// `shutdown-timeout-millis` even when commits keep failing.
    pub fn stop(mut self) -> StopOutcome {
        self.coordinator.do_send(Shutdown);
        StopOutcome::of_exit_code(self.join())
    }

    /// True once the coordinator ended by itself (see
    /// [`StopOutcome::CommitRefused`]); `stop` then says how.
    pub fn has_ended(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Abrupt stop, like a crash of the process's actors: nothing pending
    /// is flushed. Answers not yet released are never sent.
    pub fn kill(mut self) {
        self.system.stop();
        self.join();
    }

    /// Waits for the system's thread; its exit code (a panic counts as
    /// not durable).
    fn join(&mut self) -> i32 {
        match self.thread.take() {
            Some(thread) => thread.join().unwrap_or(NOT_DURABLE_EXIT_CODE),
            None => 0,
        }
    }
}

impl Drop for CoordinatorHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.system.stop();
            self.join();
        }
    }
}
