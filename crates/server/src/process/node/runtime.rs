//! A coordinator process on a shared database (`store = "postgres"`): it
//! starts as a standby with every listener open (peers are sent to the
//! leader), and leads in terms. A term begins when the lease thread wins
//! the lease: the store is opened with its fence set to the new epoch,
//! recovery runs on a thread of its own, then the term's `Coordinator`
//! serves on the same listeners. A term ends when the lease is lost or no
//! longer trusted, or a commit is fenced: the coordinator is deposed (held
//! answers dropped unsent), every session of the term is closed, and the
//! node is a standby again, in the same process.

use crate::actors::coordinator::{Coordinator, Depose, Fenced, Shutdown, NOT_DURABLE_EXIT_CODE};
use crate::actors::node_view::{NodeRole, NodeView, Term};
use crate::actors::stored_reads::StoredReads;
use crate::config::CoordinatorConfig;
use crate::ha::{
    LeaseCommand, LeaseEvent, LeaseRunner, LeaseStore, LeaseTiming, NodeIdentity, StepDownReason,
    TrustDeadline, LEASE_THREAD,
};
use crate::net::open_files;
use crate::process::server::{
    advertised, bind, bind_http, local_addr, spawn_http, start_term, Listeners, StartError,
    StopOutcome, TermLinks,
};
use crate::scheduler::{CoordinatorState, RecoverySummary};
use crate::store::{OpenedStore, StoreError, StoreOpener};
use actix::{Actor, Addr, AsyncContext, Context, Handler, Message};
use slog::{error, info, warn, Logger};
use std::net::SocketAddr;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use taskyard_client::clock::{Clock, SystemClock};
use tokio_util::sync::CancellationToken;

/// Longest a clean stop waits for the lease to be released.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Shortest pause between the watchdog's looks at the trust deadline.
const MIN_WATCH: Duration = Duration::from_millis(10);

/// Lease thread → node.
#[derive(Message)]
#[rtype(result = "()")]
struct FromLease(LeaseEvent);

/// Recovery thread → node: a term's store and state, ready to serve.
#[derive(Message)]
#[rtype(result = "()")]
struct Recovered {
    epoch: u64,
    result: Result<(OpenedStore, CoordinatorState, RecoverySummary), StoreError>,
}

/// Handle → node: a graceful stop of the process (SIGTERM).
#[derive(Message)]
#[rtype(result = "()")]
struct StopNode;

/// Switches this process between standby and leader. See the module
/// documentation.
pub struct Node {
    /// A graceful stop was asked: no new term begins, and a term that
    /// ends now stops the process (its coordinator would not).
    stopping: bool,
    view: NodeView,
    config: Arc<CoordinatorConfig>,
    clock: Arc<dyn Clock>,
    open_store: StoreOpener,
    lease: Sender<LeaseCommand>,
    trust: TrustDeadline,
    timing: LeaseTiming,
    log: Logger,
}

impl Actor for Node {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let every = (self.timing.ttl / 20).max(MIN_WATCH);
        ctx.run_interval(every, |node, _| node.watch_trust());
    }
}

impl Node {
    /// Stops serving the moment the trust ends, even while the lease
    /// thread is stuck in a call to the database.
    fn watch_trust(&mut self) {
        let epoch = match self.view.read().role {
            NodeRole::Leading { epoch } | NodeRole::Recovering { epoch } => epoch,
            NodeRole::Standby => return,
        };
        let trusted = self.trust.get().is_some_and(|until| Instant::now() < until);
        if !trusted {
            self.end_term(epoch, StepDownReason::TrustEnded);
            let _ = self.lease.send(LeaseCommand::StepDown {
                epoch,
                reason: StepDownReason::TrustEnded,
            });
        }
    }

    /// The lease is ours at `epoch`: recover on a thread of its own.
    fn begin_term(&mut self, epoch: u64, ctx: &mut Context<Self>) {
        if self.stopping {
            // Released when the lease thread is told to release.
            return;
        }
        let stale = match self.view.read().role {
            NodeRole::Leading { epoch: old } | NodeRole::Recovering { epoch: old } => Some(old),
            NodeRole::Standby => None,
        };
        if let Some(old) = stale {
            self.end_term(old, StepDownReason::Refused);
        }
        self.view.write().role = NodeRole::Recovering { epoch };
        info!(self.log, "won the leader lease; recovering from the database"; "epoch" => epoch);
        let (open, config, clock, log) = (
            self.open_store.clone(),
            self.config.clone(),
            self.clock.clone(),
            self.log.clone(),
        );
        let node = ctx.address();
        let spawned = std::thread::Builder::new()
            .name("taskyard-recover".into())
            .spawn(move || {
                let result = recover(&open, epoch, &config, clock.as_ref(), log);
                node.do_send(Recovered { epoch, result });
            });
        if let Err(e) = spawned {
            error!(self.log, "cannot start recovery"; "error" => %e);
            self.end_term(epoch, StepDownReason::TrustEnded);
        }
    }

    /// Ends the term at `epoch` (if it is the current one): deposes its
    /// coordinator, closes its sessions, and becomes a standby.
    fn end_term(&mut self, epoch: u64, reason: StepDownReason) {
        let mut view = self.view.write();
        let current = match view.role {
            NodeRole::Leading { epoch: e } | NodeRole::Recovering { epoch: e } => e,
            NodeRole::Standby => return,
        };
        if current != epoch {
            return;
        }
        let served = matches!(view.role, NodeRole::Leading { .. });
        view.role = NodeRole::Standby;
        view.last_step_down = Some(format!("epoch {epoch}: {}", reason.describe()));
        if served {
            view.leader_changes += 1;
        }
        if let Some(term) = view.term.take() {
            term.coordinator.do_send(Depose {
                reason: reason.describe().to_string(),
            });
            if let Some(sessions) = term.sessions {
                sessions.cancel();
            }
        }
        drop(view);
        warn!(self.log, "stepped down: standby again"; "epoch" => epoch,
              "reason" => reason.describe());
        if self.stopping && served {
            error!(self.log, "stepped down while stopping: changes not yet durable are lost";
                   "epoch" => epoch);
            actix::System::current().stop_with_code(NOT_DURABLE_EXIT_CODE);
        }
    }
}

/// Opens the store fenced at `epoch` and recovers from it.
fn recover(
    open: &StoreOpener,
    epoch: u64,
    config: &CoordinatorConfig,
    clock: &dyn Clock,
    log: Logger,
) -> Result<(OpenedStore, CoordinatorState, RecoverySummary), StoreError> {
    let started = Instant::now();
    let mut opened = open()?;
    let store = &mut opened.store;
    store.set_fence(Some(epoch));
    let stored = store.load_for_recovery(config.retain_finished_in_memory)?;
    let mut state = CoordinatorState::for_config(config, log.clone());
    let summary = state.recover_stored(stored, clock.now());
    crate::process::schedule_startup::restore_schedules(
        store.as_mut(),
        &mut state,
        &config.declared_schedules(),
        clock.now(),
        &log,
    )?;
    info!(log, "recovered"; "store" => store.describe(), "epoch" => epoch,
          "rows" => summary.loaded, "awaiting_claim" => summary.awaiting_claim, "unclaimable" => summary.unclaimable,
          "millis" => started.elapsed().as_millis() as u64);
    Ok((opened, state, summary))
}

impl Handler<FromLease> for Node {
    type Result = ();

    fn handle(&mut self, m: FromLease, ctx: &mut Context<Self>) {
        match m.0 {
            LeaseEvent::Seen {
                leader,
                members,
                error,
            } => {
                let now = Instant::now();
                let mut view = self.view.write();
                if let Some(leader) = leader {
                    view.leader = Some((leader, now));
                }
                if let Some(members) = members {
                    view.members = Some((members, now));
                }
                view.lease_error = error;
            }
            LeaseEvent::Won { epoch } => self.begin_term(epoch, ctx),
            LeaseEvent::SteppedDown(down) => self.end_term(down.epoch, down.reason),
        }
    }
}

impl Handler<Recovered> for Node {
    type Result = ();

    fn handle(&mut self, m: Recovered, ctx: &mut Context<Self>) {
        if self.view.read().role != (NodeRole::Recovering { epoch: m.epoch }) {
            info!(self.log, "recovery finished after the term ended; discarded"; "epoch" => m.epoch);
            return;
        }
        let (opened, state, _summary) = match m.result {
            Ok(recovered) => recovered,
            Err(e) => {
                error!(self.log, "recovery failed; giving the lease up"; "epoch" => m.epoch,
                       "error" => %e);
                self.end_term(m.epoch, StepDownReason::TrustEnded);
                let _ = self.lease.send(LeaseCommand::StepDown {
                    epoch: m.epoch,
                    reason: StepDownReason::TrustEnded,
                });
                return;
            }
        };
        let links = TermLinks {
            history: opened.history.map(|readers| {
                StoredReads::start_with(readers, crate::process::server::read_budget(&self.config))
                    .recipient()
            }),
            fence_watch: Some(ctx.address().recipient()),
            epoch: m.epoch,
            trust: Some(self.trust.clone()),
        };
        let coordinator = start_term(
            &self.config,
            self.clock.clone(),
            opened.store,
            state,
            links,
            &self.log,
        );
        let mut view = self.view.write();
        view.role = NodeRole::Leading { epoch: m.epoch };
        view.leader_changes += 1;
        view.term = Some(Term {
            epoch: m.epoch,
            coordinator,
            sessions: Some(CancellationToken::new()),
        });
        drop(view);
        info!(self.log, "leading: serving clients and workers"; "epoch" => m.epoch);
    }
}

impl Handler<StopNode> for Node {
    type Result = ();

    fn handle(&mut self, _: StopNode, _: &mut Context<Self>) {
        self.stopping = true;
        match self.view.term() {
            // Freezes, flushes, then stops the system.
            Some(term) => term.coordinator.do_send(Shutdown),
            None => actix::System::current().stop(),
        }
    }
}

impl Handler<Fenced> for Node {
    type Result = ();

    fn handle(&mut self, m: Fenced, _: &mut Context<Self>) {
        let Some(epoch) = self.view.read().term.as_ref().map(|t| t.epoch) else {
            return;
        };
        if epoch != m.epoch {
            // A term already ended; this one was not fenced.
            return;
        }
        error!(self.log, "a commit was fenced: another coordinator leads"; "epoch" => epoch,
               "error" => &m.reason);
        self.end_term(epoch, StepDownReason::Fenced);
        let _ = self.lease.send(LeaseCommand::StepDown {
            epoch,
            reason: StepDownReason::Fenced,
        });
    }
}

/// A started node inside the current actix system.
pub struct NodeServer {
    pub client_addr: SocketAddr,
    pub worker_addr: SocketAddr,
    pub http_addr: Option<SocketAddr>,
    pub view: NodeView,
    node: Addr<Node>,
    lease: Sender<LeaseCommand>,
    lease_thread: std::thread::JoinHandle<()>,
}

impl NodeServer {
    /// Must run inside an actix system. Binds every listener at once (a
    /// standby answers on them), then starts the lease thread with
    /// `lease_store`; terms open their store with `open_store`.
    pub async fn start(
        config: Arc<CoordinatorConfig>,
        clock: Arc<dyn Clock>,
        lease_store: Box<dyn LeaseStore>,
        open_store: StoreOpener,
        log: Logger,
    ) -> Result<NodeServer, StartError> {
        let mut listeners = Listeners::from_config(&config)?;
        listeners.max_connections = open_files::fit_max_connections(config.max_connections, &log);
        let clients = bind("client-listen", config.client_listen).await?;
        let workers = bind("worker-listen", config.worker_listen).await?;
        let http = bind_http(&config)?;
        let (client_addr, worker_addr) = (
            local_addr(&clients, "client-listen")?,
            local_addr(&workers, "worker-listen")?,
        );
        let http_addr = match &http {
            Some(l) => Some(l.local_addr().map_err(|e| StartError::Bind {
                key: "http-listen",
                addr: SocketAddr::from(([0, 0, 0, 0], 0)),
                reason: e.to_string(),
            })?),
            None => None,
        };
        let node_name = config.resolved_node_name();
        let me = advertised(
            &config,
            &client_addr,
            &worker_addr,
            http_addr.as_ref(),
            node_name.clone(),
        );
        let log = log.new(slog::o!("node" => node_name.clone()));
        let view = NodeView::standby(me.clone());
        listeners.spawn(clients, workers, &view, &log);
        if let Some(listener) = http {
            let link = crate::http::CoordinatorLink::for_node(view.clone(), clock.clone());
            spawn_http(listener, link, &config)?;
        }
        let timing = LeaseTiming::from_ttl(config.leader_lease());
        let trust = TrustDeadline::default();
        let (lease, commands) = std::sync::mpsc::channel();
        let node = Node {
            stopping: false,
            view: view.clone(),
            config: config.clone(),
            clock,
            open_store,
            lease: lease.clone(),
            trust: trust.clone(),
            timing,
            log: log.clone(),
        }
        .start();
        let runner = LeaseRunner {
            store: lease_store,
            me: NodeIdentity {
                node: node_name,
                addresses: me,
            },
            timing,
            commands,
            trust,
            report: Box::new({
                let node = node.clone();
                move |event| node.do_send(FromLease(event))
            }),
        };
        let lease_thread = std::thread::Builder::new()
            .name(LEASE_THREAD.into())
            .spawn(move || runner.run())
            .map_err(|_| StartError::Thread)?;
        info!(log, "standby: listening; polling the leader lease"; "clients" => %client_addr,
              "workers" => %worker_addr,
              "http" => http_addr.map_or_else(|| "off".to_string(), |a| a.to_string()),
              "lease_millis" => config.leader_lease_millis);
        Ok(NodeServer {
            client_addr,
            worker_addr,
            http_addr,
            node,
            view,
            lease,
            lease_thread,
        })
    }
}

/// A node running on its own thread with its own actix system: what the
/// `taskyard-coordinator` process runs on PostgreSQL, and what tests start
/// several of.
pub struct NodeHandle {
    pub client_addr: SocketAddr,
    pub worker_addr: SocketAddr,
    pub http_addr: Option<SocketAddr>,
    pub view: NodeView,
    node: Addr<Node>,
    system: actix::System,
    thread: Option<std::thread::JoinHandle<i32>>,
    lease: Sender<LeaseCommand>,
    lease_thread: Option<std::thread::JoinHandle<()>>,
}

impl NodeHandle {
    /// Starts a node with the system clock; returns once it listens (as a
    /// standby: it leads once the lease thread wins the lease).
    pub fn spawn(
        config: CoordinatorConfig,
        lease_store: Box<dyn LeaseStore>,
        open_store: StoreOpener,
        log: Logger,
    ) -> Result<NodeHandle, StartError> {
        let config = Arc::new(config);
        let (server, system, thread) = crate::process::server::spawn_system(move || {
            NodeServer::start(config, Arc::new(SystemClock), lease_store, open_store, log)
        })?;
        Ok(NodeHandle {
            client_addr: server.client_addr,
            worker_addr: server.worker_addr,
            http_addr: server.http_addr,
            view: server.view,
            node: server.node,
            system,
            thread: Some(thread),
            lease: server.lease,
            lease_thread: Some(server.lease_thread),
        })
    }

    /// A node on the shared database `config` names (`store::open`): the
    /// lease on a connection of its own, each term's store and history
    /// readers on theirs. A database unreachable at start-up is an error
    /// (exit 2), as with one coordinator; later outages are waited out. A
    /// store without a lease is refused, naming `store`.
    pub fn spawn_shared(config: CoordinatorConfig, log: Logger) -> Result<NodeHandle, StartError> {
        let backend = crate::store::open(&config, &log);
        NodeHandle::spawn_on(config, backend, log)
    }

    /// `spawn_shared` on the store `backend` (what `store::open` gave for
    /// `config`).
    pub(crate) fn spawn_on(
        config: CoordinatorConfig,
        backend: crate::store::Backend,
        log: Logger,
    ) -> Result<NodeHandle, StartError> {
        let open = backend.open.clone();
        let lease = match backend.open_lease() {
            Some(lease) => lease?,
            None => {
                return Err(StartError::Config {
                    key: "store".into(),
                    reason: format!(
                        "\"{}\" is opened by one coordinator, not shared by a cluster",
                        config.store
                    ),
                })
            }
        };
        NodeHandle::spawn(config, lease, open, log)
    }

    /// The coordinator of the term being served, if this node leads.
    pub fn coordinator(&self) -> Option<Addr<Coordinator>> {
        self.view.term().map(|t| t.coordinator)
    }

    /// Graceful stop. A leader freezes and flushes its state (within
    /// `shutdown-timeout-millis`), closes its sockets, then releases the
    /// lease so a standby takes over at once; a standby just closes.
    pub fn stop(mut self) -> StopOutcome {
        let held = self.view.read().role != NodeRole::Standby;
        self.node.do_send(StopNode);
        let code = self.join();
        let (done, released) = std::sync::mpsc::channel();
        // A standby's lease thread may sit in a wait for a notification:
        // it has nothing to release, so it is not waited for.
        if self.lease.send(LeaseCommand::Release(done)).is_ok() && held {
            let _ = released.recv_timeout(RELEASE_TIMEOUT);
        }
        self.join_lease();
        StopOutcome::of_exit_code(code)
    }

    /// True once the node ended by itself (its term's database refused a
    /// commit for good); `stop` then says how.
    pub fn has_ended(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Abrupt stop, like a crash: nothing flushed, nothing released (the
    /// lease expires by itself).
    pub fn kill(mut self) {
        self.system.stop();
        self.join();
        let _ = self.lease.send(LeaseCommand::Stop);
        self.join_lease();
    }

    fn join(&mut self) -> i32 {
        match self.thread.take() {
            Some(thread) => thread.join().unwrap_or(NOT_DURABLE_EXIT_CODE),
            None => 0,
        }
    }

    /// A standby's lease thread may be waiting for a notification for up
    /// to a third of the lease; it is left to end by itself then.
    fn join_lease(&mut self) {
        if let Some(thread) = self.lease_thread.take() {
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for NodeHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.system.stop();
            self.join();
            let _ = self.lease.send(LeaseCommand::Stop);
        }
    }
}
