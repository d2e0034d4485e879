//! `Sweeper`: asks the coordinator for its periodic pass on a fixed
//! interval. Runs on actix/tokio time, so paused test time drives it.

use crate::actors::coordinator::{Coordinator, Sweep};
use actix::{Actor, Addr, AsyncContext, Context};
use std::time::Duration;

/// See the module documentation.
pub struct Sweeper {
    pub coordinator: Addr<Coordinator>,
    pub interval: Duration,
}

impl Actor for Sweeper {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(self.interval, |act, _| {
            // do_send: a sweep must not wait behind a full mailbox; a
            // skipped tick would only delay detection by one interval.
            act.coordinator.do_send(Sweep);
        });
    }
}
