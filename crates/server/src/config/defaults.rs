//! Defaults of coordinator keys that code besides start-up also needs (a
//! state built without a config, a store the benchmark opens): written
//! once, here beside the keys, and read downward by the parts they
//! configure.

/// `postgres-write-connections`: write connections a PostgreSQL store opens.
pub const POSTGRES_WRITE_CONNECTIONS: usize = 2;
/// `metrics-max-task-types`: task types labelled one by one in `/metrics`.
pub const METRICS_MAX_TASK_TYPES: usize = 50;
/// `timeline-task-types`: task types tracked one by one in the timeline.
pub const TIMELINE_TASK_TYPES: usize = 20;
/// `max-schedules`: schedules a coordinator keeps.
pub const MAX_SCHEDULES: usize = 10_000;
/// `history-read-budget`, in milliseconds: a history page's time budget.
pub const HISTORY_READ_BUDGET_MILLIS: u64 = 100;
/// `history-read-rows`: the stretch a page over budget walks.
pub const HISTORY_READ_ROWS: u64 = 20_000;
