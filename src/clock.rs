//! Where the coordinator reads time: once per handler, then passed down as
//! `now` (unix milliseconds). Tests inject `ManualClock`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in unix milliseconds.
pub trait Clock: Send + Sync + 'static {
    fn now_millis(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

/// A clock that moves only when told to; clones share the same time.
#[derive(Debug, Default, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn starting_at(millis: i64) -> Self {
        ManualClock(Arc::new(AtomicI64::new(millis)))
    }

    pub fn advance(&self, millis: i64) {
        self.0.fetch_add(millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
