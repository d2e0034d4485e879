//! Starting a coordinator: open and recover the database, then open the
//! listeners, then accept connections. Also a handle that runs one on its
//! own thread, for `taskyard dev`, tests and benchmarks.

use crate::actors::client_session::ClientSession;
use crate::actors::coordinator::{Coordinator, Shutdown};
use crate::actors::listener::accept_loop;
use crate::actors::persistence::Persistence;
use crate::actors::sweeper::Sweeper;
use crate::actors::worker_session::WorkerSession;
use crate::clock::{Clock, SystemClock};
use crate::config::CoordinatorConfig;
use crate::scheduler::{CoordinatorState, Policy, RecoverySummary};
use crate::store::{JobStore, StoreError};
use actix::{Actor, Addr, SyncArbiter};
use slog::{info, Logger};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// Name of the thread `CoordinatorHandle` runs the actor system on (the
/// coordinator and every session).
pub const COORDINATOR_THREAD: &str = "taskyard-coordinator";
/// Name of the `Persistence` (SQLite) thread.
pub const PERSISTENCE_THREAD: &str = "taskyard-persist";

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
}

/// A started coordinator inside the current actix system.
pub struct CoordinatorServer {
    pub client_addr: SocketAddr,
    pub worker_addr: SocketAddr,
    pub coordinator: Addr<Coordinator>,
    pub recovery: RecoverySummary,
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
        let store = JobStore::open(&config.db_path, config.sqlite_synchronous)?;
        let rows = store.load_all()?;
        let mut state = CoordinatorState::new(Policy::from_config(config), log.clone());
        let recovery = state.recover(rows, clock.now_millis());
        info!(log, "recovered"; "db" => %config.db_path.display(), "rows" => recovery.loaded,
              "requeued" => recovery.requeued, "failed" => recovery.failed,
              "millis" => started.elapsed().as_millis() as u64);
        let clients = bind("client-listen", config.client_listen).await?;
        let workers = bind("worker-listen", config.worker_listen).await?;
        let (client_addr, worker_addr) = (
            local_addr(&clients, "client-listen")?,
            local_addr(&workers, "worker-listen")?,
        );
        let persistence = start_persistence(store, log.clone());
        let coordinator =
            Coordinator::new(state, clock, persistence.recipient(), log.clone()).start();
        Sweeper {
            coordinator: coordinator.clone(),
            interval: Duration::from_millis(config.sweep_interval_millis),
        }
        .start();
        spawn_listeners(clients, workers, &coordinator, config.max_frame_bytes, &log);
        info!(log, "coordinator listening"; "clients" => %client_addr, "workers" => %worker_addr);
        Ok(CoordinatorServer {
            client_addr,
            worker_addr,
            coordinator,
            recovery,
        })
    }
}

async fn bind(key: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr).await.map_err(|e| StartError::Bind {
        key,
        addr,
        reason: e.to_string(),
    })
}

fn local_addr(listener: &TcpListener, key: &'static str) -> Result<SocketAddr, StartError> {
    listener.local_addr().map_err(|e| StartError::Bind {
        key,
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        reason: e.to_string(),
    })
}

fn start_persistence(store: JobStore, log: Logger) -> Addr<Persistence> {
    // A SyncArbiter builds its actor with a factory; with one thread it is
    // called once, and the store moves into that one actor.
    let store = Mutex::new(Some(store));
    // Named so benchmarks can find its CPU time in /proc.
    let named = || std::thread::Builder::new().name(PERSISTENCE_THREAD.into());
    SyncArbiter::start_with_thread_builder(1, named, move || {
        let store = store
            .lock()
            .ok()
            .and_then(|mut s| s.take())
            .expect("the persistence arbiter has exactly one thread");
        Persistence::new(store, log.clone())
    })
}

fn spawn_listeners(
    clients: TcpListener,
    workers: TcpListener,
    coordinator: &Addr<Coordinator>,
    max_frame_bytes: usize,
    log: &Logger,
) {
    let (c, l) = (
        coordinator.clone(),
        log.new(slog::o!("listener" => "worker")),
    );
    actix_rt::spawn(accept_loop(workers, l.clone(), move |stream| {
        let (read, write) = stream.into_split();
        WorkerSession::start(read, write, c.clone(), max_frame_bytes, l.clone());
    }));
    let (c, l) = (
        coordinator.clone(),
        log.new(slog::o!("listener" => "client")),
    );
    actix_rt::spawn(accept_loop(clients, l.clone(), move |stream| {
        let (read, write) = stream.into_split();
        ClientSession::start(read, write, c.clone(), max_frame_bytes, l.clone());
    }));
}

/// A coordinator running on its own thread with its own actix system.
pub struct CoordinatorHandle {
    pub client_addr: SocketAddr,
    pub worker_addr: SocketAddr,
    pub recovery: RecoverySummary,
    coordinator: Addr<Coordinator>,
    system: actix::System,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CoordinatorHandle {
    /// Starts a coordinator with the system clock; returns once it listens.
    pub fn spawn(config: CoordinatorConfig, log: Logger) -> Result<CoordinatorHandle, StartError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(COORDINATOR_THREAD.into())
            .spawn(move || {
                let system = actix::System::new();
                let started = system.block_on(CoordinatorServer::start(
                    &config,
                    Arc::new(SystemClock),
                    log,
                ));
                let ok = started.is_ok();
                let _ = ready_tx.send(started.map(|s| (s, actix::System::current())));
                if ok {
                    let _ = system.run();
                }
            })
            .map_err(|_| StartError::Thread)?;
        let (server, system) = ready_rx.recv().map_err(|_| StartError::Thread)??;
        Ok(CoordinatorHandle {
            client_addr: server.client_addr,
            worker_addr: server.worker_addr,
            recovery: server.recovery,
            coordinator: server.coordinator,
            system,
            thread: Some(thread),
        })
    }

    /// The coordinator actor, for tests that inspect it.
    pub fn coordinator(&self) -> &Addr<Coordinator> {
        &self.coordinator
    }

    /// Graceful stop: state frozen and flushed, then sockets closed.
    pub fn stop(mut self) {
        self.coordinator.do_send(Shutdown);
        self.join();
    }

    /// Abrupt stop, like a crash of the process's actors: nothing pending
    /// is flushed. Answers not yet released are never sent.
    pub fn kill(mut self) {
        self.system.stop();
        self.join();
    }

    fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
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
