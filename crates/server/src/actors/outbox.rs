//! What the coordinator sends out once it is durable: the messages to
//! sessions and the HTTP bridge, and `Delivery`, one held effect with its
//! destination. `GroupCommit` decides when each is released.

use crate::actors::coordinator::HeldEffect;
use crate::scheduler::StatsSnapshot;
use actix::{Message, Recipient};
use taskyard_protocol::{ClientResponse, CoordinatorToWorker};

/// Coordinator → `WorkerSession`: write `frame`; close afterwards if asked.
#[derive(Message, Debug, Clone, PartialEq)]
#[rtype(result = "()")]
pub struct SendToWorker {
    pub frame: CoordinatorToWorker,
    pub then_close: bool,
}

/// Coordinator → `ClientSession`: the answer to request `request_id`,
/// released only once everything it shows is durable.
#[derive(Message, Debug, Clone, PartialEq)]
#[rtype(result = "()")]
pub struct ClientAnswer {
    pub request_id: u64,
    pub response: ClientResponse,
}

/// Coordinator → the HTTP API: the answer to `Query` `request_id`, released
/// like a `ClientAnswer` only once everything it shows is durable.
#[derive(Message, Debug, Clone, PartialEq)]
#[rtype(result = "()")]
pub struct QueryAnswer {
    pub request_id: u64,
    pub result: QueryResult,
}

/// What a `Query` found.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryResult {
    Stats(Box<StatsSnapshot>),
    Timeline(Box<crate::scheduler::TimelineSnapshot>),
    /// Everything committed so far is durable and the coordinator answers.
    Ready,
    /// The coordinator cannot be relied on now; `reason` says why (commits
    /// failing, stopping). Sent at once, not held: it reveals no job state.
    NotReady {
        reason: String,
    },
}

/// The answers that need no commit, and why each may go at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unheld {
    /// A request refused before anything changed: it reveals no job state.
    Refusal,
    /// `/readyz` saying the coordinator is not ready: no job state.
    NotReady,
    /// Counters and depths during a commit outage, so operators can still
    /// scrape `/metrics`: aggregates, which may count changes not yet
    /// durable (the one answer that may).
    OutageAggregates,
    /// The answer to a schedule change the database has just stored: it
    /// shows what is durable already.
    StoredByItsOwnWrite,
}

/// One held effect and where it goes.
pub enum Delivery {
    Worker(Recipient<SendToWorker>, SendToWorker),
    Client(Recipient<ClientAnswer>, ClientAnswer),
    Query(Recipient<QueryAnswer>, QueryAnswer),
}

impl HeldEffect for Delivery {
    fn starts_attempt(&self) -> bool {
        matches!(
            self,
            Delivery::Worker(
                _,
                SendToWorker {
                    frame: CoordinatorToWorker::TaskAssign { .. },
                    ..
                }
            )
        )
    }

    fn awaited(&self) -> bool {
        matches!(self, Delivery::Client(..) | Delivery::Query(..))
    }
}

impl Delivery {
    /// The answer `response` to the client request `request_id`.
    pub fn client(
        to: Recipient<ClientAnswer>,
        request_id: u64,
        response: taskyard_protocol::ClientResponse,
    ) -> Delivery {
        Delivery::Client(
            to,
            ClientAnswer {
                request_id,
                response,
            },
        )
    }

    /// Sends an answer without waiting for a commit: the one exception to
    /// "durable before observable", for the answers `Unheld` lists. Every
    /// other answer is held by `GroupCommit` and released by `deliver`.
    pub fn deliver_unheld(self, _why: Unheld) {
        self.deliver();
    }

    /// Hands the message to its session's mailbox (unbounded: never blocks,
    /// never drops while the session lives). Only `GroupCommit`'s release
    /// and `deliver_unheld` call it.
    pub(crate) fn deliver(self) {
        match self {
            Delivery::Worker(to, message) => to.do_send(message),
            Delivery::Client(to, message) => to.do_send(message),
            Delivery::Query(to, message) => to.do_send(message),
        }
    }

    /// Answers the request this effect answers with the failure of the
    /// commit it waited for (`reason`) instead of what it held: a client
    /// hears `NotDurable`, an HTTP query `NotReady`. A worker frame is
    /// nobody's answer and is dropped (`GroupCommit` never fails one).
    pub fn fail(self, reason: &str) {
        let reason = format!(
            "the commit carrying this request failed, so whether it took effect is unknown \
             until the coordinator is ready again: {reason}"
        );
        match self {
            Delivery::Client(to, answer) => to.do_send(ClientAnswer {
                request_id: answer.request_id,
                response: ClientResponse::NotDurable { reason },
            }),
            Delivery::Query(to, answer) => to.do_send(QueryAnswer {
                request_id: answer.request_id,
                result: QueryResult::NotReady { reason },
            }),
            Delivery::Worker(..) => {}
        }
    }
}
