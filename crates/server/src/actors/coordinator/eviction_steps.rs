//! Evicting finished jobs from memory a bounded step at a time: the sweep
//! evicts at most `EVICTIONS_PER_STEP`, and while more are due the
//! coordinator sends itself `EvictFinished` for the next step, so the
//! requests that arrive meanwhile are handled between the steps instead of
//! waiting behind one eviction of 10,000 jobs.

use super::Coordinator;
use crate::scheduler::retention::EVICTIONS_PER_STEP;
use actix::{AsyncContext, Context, Handler, Message};

/// Coordinator → itself: evict the next step of finished jobs.
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct EvictFinished;

impl Handler<EvictFinished> for Coordinator {
    type Result = ();

    fn handle(&mut self, _: EvictFinished, ctx: &mut Context<Self>) {
        if self.deposed {
            return;
        }
        self.evict_step(ctx);
    }
}

impl Coordinator {
    /// Evicts one step of finished jobs; asks for another if this one was
    /// full.
    pub(super) fn evict_step(&mut self, ctx: &mut Context<Self>) {
        let now = self.now();
        if self.state.evict_finished(now, self.commits.durable()) == EVICTIONS_PER_STEP {
            ctx.notify(EvictFinished);
        }
    }
}
