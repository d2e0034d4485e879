//! Durable before observable: every outbound effect waits here, tagged with
//! the persistence batch holding the state it reveals, until that batch is
//! committed.

use crate::protocol::{ClientResponse, CoordinatorToWorker};
use crate::scheduler::{JobPage, StatsSnapshot};
use actix::{Message, Recipient};
use std::collections::VecDeque;

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
    Jobs(JobPage),
    Stats(Box<StatsSnapshot>),
    /// Everything committed so far is durable and the coordinator answers.
    Ready,
}

/// One held effect and where it goes.
pub enum Delivery {
    Worker(Recipient<SendToWorker>, SendToWorker),
    Client(Recipient<ClientAnswer>, ClientAnswer),
    Query(Recipient<QueryAnswer>, QueryAnswer),
}

impl Delivery {
    /// Whether this hands a job to a worker (a result will follow).
    pub fn is_task_assign(&self) -> bool {
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

    /// Hands the message to its session's mailbox (unbounded: never blocks,
    /// never drops while the session lives).
    pub fn deliver(self) {
        match self {
            Delivery::Worker(to, message) => to.do_send(message),
            Delivery::Client(to, message) => to.do_send(message),
            Delivery::Query(to, message) => to.do_send(message),
        }
    }
}

/// Batch numbering and held effects. Batches are committed in order, one at
/// a time, so "batch N durable" means every batch ≤ N is durable and tags
/// are released in the order they were held.
#[derive(Default)]
pub struct Outbox {
    held: VecDeque<(u64, Delivery)>,
    /// The newest batch number handed to persistence.
    sent: u64,
    /// The newest batch number known committed.
    durable: u64,
}

impl Outbox {
    /// The batch an effect produced now must wait for: the next batch if
    /// there are unsent changes (they will be in it), else the newest sent.
    pub fn tag(&self, unsent_changes: bool) -> u64 {
        if unsent_changes {
            self.sent + 1
        } else {
            self.sent
        }
    }

    /// Holds `delivery` until batch `tag` is durable, or delivers it at once
    /// if it already is.
    pub fn hold(&mut self, tag: u64, delivery: Delivery) {
        if tag <= self.durable && self.held.is_empty() {
            delivery.deliver();
        } else {
            self.held.push_back((tag, delivery));
        }
    }

    /// Numbers the next batch to send.
    pub fn next_batch(&mut self) -> u64 {
        self.sent += 1;
        self.sent
    }

    /// Batch `number` is committed: returns every effect now releasable, in order.
    pub fn committed(&mut self, number: u64) -> Vec<Delivery> {
        self.durable = self.durable.max(number);
        let ready = self
            .held
            .iter()
            .take_while(|(tag, _)| *tag <= self.durable)
            .count();
        self.held.drain(..ready).map(|(_, d)| d).collect()
    }

    /// Effects still waiting for durability.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    pub fn durable(&self) -> u64 {
        self.durable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_the_batch_that_will_carry_the_change() {
        let mut outbox = Outbox::default();
        assert_eq!(outbox.tag(false), 0, "nothing ever sent: already durable");
        assert_eq!(outbox.tag(true), 1);
        assert_eq!(outbox.next_batch(), 1);
        assert_eq!(outbox.tag(false), 1, "a read waits for the batch in flight");
        assert_eq!(outbox.tag(true), 2, "a change rides on the next batch");
    }

    #[test]
    fn committing_a_later_batch_releases_earlier_tags() {
        let mut outbox = Outbox::default();
        outbox.next_batch();
        outbox.next_batch();
        assert_eq!(outbox.committed(2).len(), 0);
        assert_eq!(outbox.durable(), 2);
    }
}
