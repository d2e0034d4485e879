//! Pure scheduling policy and state: no actors, no sockets, no clock reads.
//! Every function takes `now` and returns or records what should happen.

pub mod bulk;
pub mod claims;
pub mod concurrency_gate;
#[cfg(test)]
mod concurrency_tests;
pub mod control;
pub mod counts;
pub mod deletion;
pub mod deletion_queue;
mod dirty;
pub mod expiry_run;
pub mod fair_queue;
pub mod group_commit;
pub mod hash_map;
pub mod job;
pub mod lifecycle;
pub mod metrics;
pub mod observe;
pub mod plan;
pub mod queries;
pub mod queue_stats;
pub mod queues;
pub mod rate_limit;
pub mod recovery;
pub mod retention;
pub mod retry;
pub mod row;
pub mod schedule;
pub mod sharded_map;
pub mod state;
pub mod stored_read;
pub mod submission;
pub mod sweep;
pub mod task_type_metrics;
pub mod timeline;
pub mod workers;

#[cfg(test)]
mod clock_tests;
#[cfg(test)]
mod invariant_tests;
#[cfg(test)]
mod metrics_tests;
#[cfg(test)]
mod ordering_tests;
#[cfg(test)]
mod peer_tests;
#[cfg(test)]
mod tests;

pub use control::{CancelRefused, RequeueRefused};
pub use job::{Job, OrderKey};
pub use lifecycle::StaleResult;
pub use metrics::Metrics;
pub use observe::{JobPage, PageCursor, QueueDepth, StatsSnapshot};
pub use recovery::{RecoverySummary, Stored, RESTARTED_DURING_FINAL_ATTEMPT};
pub use retention::Retention;
pub use retry::RetryPolicy;
pub use row::JobRow;
pub use state::{CoordinatorState, Effect, Policy, TransitionRefused};
pub use stored_read::Walked;
pub use timeline::{Timeline, TimelineSnapshot};
pub use workers::SessionId;
