//! The HTTP side's session with the `Coordinator`: it turns "ask and await"
//! into the coordinator's message API, where answers arrive later through
//! the outbox, once durable.
//!
//! Why an actor and not a oneshot per request: a `Recipient` needs an actor
//! address, and starting an actor per request from actix-web's worker
//! threads would tie handlers to the arbiter they run on. One `Bridge` on
//! the coordinator's arbiter mints request ids and keeps a oneshot sender
//! per pending request; the coordinator's outbox delivers each answer here
//! (`ClientAnswer` / `QueryAnswer`), and the bridge completes the oneshot.
//! A handler therefore sees an answer only after the batch holding every
//! state it shows is committed — the same rule as the TCP `ClientSession`.

use crate::actors::coordinator::{ClientCommand, Coordinator, Query, QueryKind};
use crate::actors::node_view::{NodeRole, NodeView};
use crate::actors::outbox::{ClientAnswer, QueryAnswer, QueryResult};
use actix::{Actor, Addr, Context, Handler, Message, MessageResult};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use taskyard_client::clock::Clock;
use taskyard_protocol::{ClientRequest, ClientResponse, LeaderAddresses};
use tokio::sync::oneshot;

/// Longest a handler waits for the coordinator (a stuck commit, a stopping
/// coordinator); the request then fails with 503.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why no answer came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BridgeError {
    #[error("the coordinator did not answer in time")]
    Timeout,
    #[error("the coordinator is stopping")]
    Stopped,
    /// This process is a standby: the leader (if known) serves instead.
    #[error("{}", standby_text(.0.as_deref()))]
    NotLeader(Option<Box<LeaderAddresses>>),
    /// This process won the lease and is loading the database; it serves
    /// once recovery is done.
    #[error("recovering from the database after winning the leader lease (epoch {0})")]
    Recovering(u64),
    /// The commit carrying the request failed (the reason says why):
    /// whether it took effect is unknown until `/readyz` is ready again.
    #[error("{0}")]
    NotDurable(String),
}

/// `standby: NODE leads (client ADDR, http ADDR)`, or that none is known.
pub fn standby_text(leader: Option<&LeaderAddresses>) -> String {
    let Some(l) = leader else {
        return "standby: no leader known yet".to_string();
    };
    let mut text = format!("standby: {} leads (epoch {}", l.node, l.epoch);
    for (what, addr) in [
        ("client", &l.client),
        ("worker", &l.worker),
        ("http", &l.http),
    ] {
        if let Some(addr) = addr {
            text.push_str(&format!(", {what} {addr}"));
        }
    }
    text.push(')');
    text
}

/// The pending requests. Entries whose handler gave up are pruned as new
/// ones arrive, so a coordinator that drops answers (it is stopping) cannot
/// make the map grow without bound.
#[derive(Default)]
pub struct Bridge {
    next_id: u64,
    clients: HashMap<u64, oneshot::Sender<ClientResponse>>,
    queries: HashMap<u64, oneshot::Sender<QueryResult>>,
}

impl Actor for Bridge {
    type Context = Context<Self>;
}

/// Handler → bridge: reserve a request id whose `ClientAnswer` completes `reply`.
#[derive(Message)]
#[rtype(result = "u64")]
struct ExpectClient(oneshot::Sender<ClientResponse>);

/// Handler → bridge: reserve a request id whose `QueryAnswer` completes `reply`.
#[derive(Message)]
#[rtype(result = "u64")]
struct ExpectQuery(oneshot::Sender<QueryResult>);

impl Bridge {
    fn mint(&mut self) -> u64 {
        self.next_id += 1;
        if self.next_id.is_multiple_of(64) {
            self.clients.retain(|_, tx| !tx.is_closed());
            self.queries.retain(|_, tx| !tx.is_closed());
        }
        self.next_id
    }
}

impl Handler<ExpectClient> for Bridge {
    type Result = MessageResult<ExpectClient>;
    fn handle(&mut self, m: ExpectClient, _: &mut Context<Self>) -> Self::Result {
        let id = self.mint();
        self.clients.insert(id, m.0);
        MessageResult(id)
    }
}

impl Handler<ExpectQuery> for Bridge {
    type Result = MessageResult<ExpectQuery>;
    fn handle(&mut self, m: ExpectQuery, _: &mut Context<Self>) -> Self::Result {
        let id = self.mint();
        self.queries.insert(id, m.0);
        MessageResult(id)
    }
}

impl Handler<ClientAnswer> for Bridge {
    type Result = ();
    fn handle(&mut self, m: ClientAnswer, _: &mut Context<Self>) {
        if let Some(tx) = self.clients.remove(&m.request_id) {
            let _ = tx.send(m.response);
        }
    }
}

impl Handler<QueryAnswer> for Bridge {
    type Result = ();
    fn handle(&mut self, m: QueryAnswer, _: &mut Context<Self>) {
        if let Some(tx) = self.queries.remove(&m.request_id) {
            let _ = tx.send(m.result);
        }
    }
}

/// What HTTP handlers hold: cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct CoordinatorLink {
    /// Who serves: the term's coordinator while this process leads.
    pub view: NodeView,
    /// The coordinator's clock, for ages (heartbeat age) shown to users.
    pub clock: Arc<dyn Clock>,
    bridge: Addr<Bridge>,
}

impl CoordinatorLink {
    /// Starts the bridge on the current arbiter (the coordinator's), for
    /// a single coordinator that always leads (SQLite).
    pub fn start(coordinator: Addr<Coordinator>, clock: Arc<dyn Clock>) -> Self {
        let me = LeaderAddresses::default();
        CoordinatorLink::for_node(NodeView::single(me, coordinator), clock)
    }

    /// Starts the bridge for a node whose coordinator comes and goes with
    /// its terms of leadership (`view`).
    pub fn for_node(view: NodeView, clock: Arc<dyn Clock>) -> Self {
        CoordinatorLink {
            view,
            clock,
            bridge: Bridge::default().start(),
        }
    }

    /// The coordinator serving now, or who leads instead.
    pub fn coordinator(&self) -> Result<Addr<Coordinator>, BridgeError> {
        if let Some(term) = self.view.term() {
            return Ok(term.coordinator);
        }
        if let NodeRole::Recovering { epoch } = self.view.read().role {
            return Err(BridgeError::Recovering(epoch));
        }
        Err(BridgeError::NotLeader(
            self.view.leader_addresses().map(Box::new),
        ))
    }

    /// Sends a wire-protocol request, exactly as a TCP client would, and
    /// waits for its durable answer. `send` (not `do_send`): a flood of HTTP
    /// requests waits on the coordinator's bounded mailbox.
    pub async fn request(&self, request: ClientRequest) -> Result<ClientResponse, BridgeError> {
        self.request_from(None, request).await
    }

    /// `request` on behalf of the HTTP peer at `peer`: the coordinator
    /// shares its history readers out per peer.
    pub async fn request_from(
        &self,
        peer: Option<IpAddr>,
        request: ClientRequest,
    ) -> Result<ClientResponse, BridgeError> {
        let coordinator = self.coordinator()?;
        let (tx, rx) = oneshot::channel();
        let request_id = self.bridge.send(ExpectClient(tx)).await.map_err(stopped)?;
        let command = ClientCommand {
            reply_to: self.bridge.clone().recipient(),
            request_id,
            request,
            peer,
        };
        coordinator.send(command).await.map_err(stopped)?;
        match wait(rx, ANSWER_TIMEOUT).await? {
            ClientResponse::NotDurable { reason } => Err(BridgeError::NotDurable(reason)),
            response => Ok(response),
        }
    }

    /// Sends a `Query` and waits (at most `within`) for its durable answer.
    pub async fn query(
        &self,
        query: QueryKind,
        within: Duration,
    ) -> Result<QueryResult, BridgeError> {
        let coordinator = self.coordinator()?;
        let ready = matches!(query, QueryKind::Ready);
        let (tx, rx) = oneshot::channel();
        let request_id = self.bridge.send(ExpectQuery(tx)).await.map_err(stopped)?;
        let message = Query {
            reply_to: self.bridge.clone().recipient(),
            request_id,
            query,
        };
        coordinator.send(message).await.map_err(stopped)?;
        match wait(rx, within).await? {
            // A failed commit answers any other query this way.
            QueryResult::NotReady { reason } if !ready => Err(BridgeError::NotDurable(reason)),
            result => Ok(result),
        }
    }
}

fn stopped<E>(_: E) -> BridgeError {
    BridgeError::Stopped
}

async fn wait<T>(rx: oneshot::Receiver<T>, within: Duration) -> Result<T, BridgeError> {
    match tokio::time::timeout(within, rx).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(_)) => Err(BridgeError::Stopped),
        Err(_) => Err(BridgeError::Timeout),
    }
}
