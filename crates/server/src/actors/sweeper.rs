//! `Sweeper`: asks the coordinator for its periodic pass on a fixed
//! interval, until the coordinator stops. Runs on actix/tokio time, so
//! paused test time drives it.

use crate::actors::coordinator::{Coordinator, Sweep};
use actix::{Actor, ActorContext, Addr, AsyncContext, Context};
use std::time::Duration;

/// See the module documentation.
pub struct Sweeper {
    pub coordinator: Addr<Coordinator>,
    pub interval: Duration,
}

impl Actor for Sweeper {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(self.interval, |act, ctx| {
            // A deposed coordinator (its term ended) is gone for good.
            if !act.coordinator.connected() {
                ctx.stop();
                return;
            }
            // do_send: a sweep must not wait behind a full mailbox; a
            // skipped tick would only delay detection by one interval.
            act.coordinator.do_send(Sweep);
        });
    }
}
