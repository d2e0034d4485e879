//! The database schema and its migrations. The version lives in
//! `PRAGMA user_version`; each step is one function run in a transaction.

use rusqlite::{Connection, Transaction};

/// The version this binary writes. Version 1 is the schema before
/// priorities (no `priority` or `sequence` columns); version 2 kept every
/// attempt in `attempts`; version 3 keeps a job's last attempt in its row;
/// version 4 indexes what retention reads (see `V3_TO_V4`); version 5
/// keeps the count of finished jobs per task type and state (see
/// `V4_TO_V5`).
pub const SCHEMA_VERSION: i64 = 9;

const JOBS_V1: &str = "
CREATE TABLE jobs (
    id TEXT PRIMARY KEY NOT NULL,
    task_type TEXT NOT NULL,
    payload BLOB NOT NULL,
    submitted_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    timeout_ms INTEGER NOT NULL,
    lease TEXT,
    worker_id TEXT,
    assigned_at INTEGER,
    next_retry_at INTEGER,
    result BLOB,
    error TEXT,
    idempotency_key TEXT,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER
);
";

/// Version 1 → 2: base priority and submission sequence, delayed start, and
/// the attempt history. Existing rows become NORMAL with sequence 0, so they keep
/// submission-time order among themselves; their history starts empty.
const V1_TO_V2: &str = "
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN sequence INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN not_before INTEGER;
CREATE TABLE attempts (
    job_id TEXT NOT NULL,
    number INTEGER NOT NULL,
    worker_id TEXT NOT NULL,
    lease TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    outcome TEXT,
    PRIMARY KEY (job_id, number)
) WITHOUT ROWID;
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
";

/// Version 2 → 3: the job's last attempt, in its own row, so that starting
/// or ending an attempt rewrites one row instead of two (`attempts` holds
/// the earlier ones). Existing rows keep all their attempts in `attempts`,
/// which stays valid: the columns start out NULL.
const V2_TO_V3: &str = "
ALTER TABLE jobs ADD COLUMN last_attempt_number INTEGER;
ALTER TABLE jobs ADD COLUMN last_attempt_worker TEXT;
ALTER TABLE jobs ADD COLUMN last_attempt_lease TEXT;
ALTER TABLE jobs ADD COLUMN last_attempt_started_at INTEGER;
ALTER TABLE jobs ADD COLUMN last_attempt_ended_at INTEGER;
ALTER TABLE jobs ADD COLUMN last_attempt_outcome TEXT;
";

/// Version 3 → 4: indexes for retention. `jobs_active` holds only the
/// non-terminal rows (exactly those without `finished_at`), so start-up
/// loads the active set without reading history. It is keyed by
/// `sequence`, which never changes, so a transition rewrites its entry in
/// place: keyed by `state`, each move between non-terminal states moved
/// the entry across the index and cost the drain 30% (BENCHMARKS.md); `jobs_finished_at` orders finished rows for the in-memory
/// window and for expiry; `jobs_order` serves history pages newest first.
/// Finished rows written before version 2 have no `finished_at`; they get
/// their last update time, so they too enter the window and expire. No
/// other row changes.
const V3_TO_V4: &str = "
UPDATE jobs SET finished_at = updated_at
    WHERE finished_at IS NULL AND state NOT IN ('QUEUED', 'RUNNING', 'RETRY_WAIT');
CREATE INDEX jobs_active ON jobs (sequence) WHERE finished_at IS NULL;
CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_order ON jobs (sequence, submitted_at, id);
";

/// Version 4 → 5: `terminal_counts` holds how many stored jobs each
/// (task type, terminal state) has, so start-up reads a few rows instead
/// of counting the whole table (5,000,000 finished rows took seconds;
/// docs/performance-log.md). The store keeps it exact in the transaction that writes
/// or deletes the rows (`write`, `expiry`): a row entering a terminal state
/// adds one, leaving it (a retry) or being deleted (expiry) takes one away.
/// (Not by triggers: a trigger on every row update doubled the cost of a
/// commit.) The migration counts the finished rows once.
const V4_TO_V5: &str = "
CREATE TABLE terminal_counts (
    task_type TEXT NOT NULL,
    state TEXT NOT NULL,
    jobs INTEGER NOT NULL,
    PRIMARY KEY (task_type, state)
) WITHOUT ROWID;
INSERT INTO terminal_counts (task_type, state, jobs)
    SELECT task_type, state, count(*) FROM jobs
    WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
    GROUP BY task_type, state;
";

/// One migration step: from `version - 1` to `version`.
/// Schedules (see `store::schedules`): the definition as MessagePack, the
/// newest slot fired (moved with the job that fires it), the last change.
const V5_TO_V6: &str = "
CREATE TABLE schedules (
    name TEXT PRIMARY KEY NOT NULL,
    definition BLOB NOT NULL,
    last_slot INTEGER,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
";

/// A schedule's counts, so they survive restarts: slots fired (moved
/// with the jobs that fire them, see `store::schedules`) and slots skipped
/// by reason (written after the pass that skipped them). Schedules stored
/// before count from 0.
const V6_TO_V7: &str = "
ALTER TABLE schedules ADD COLUMN fired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN skipped_overlap INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN skipped_catchup INTEGER NOT NULL DEFAULT 0;
";

/// Version 7 → 8: every filter a history page offers is served by an
/// index in the page's order, at little cost to the drain. A state or
/// priority that few jobs have gets a partial index of its own (FAILED,
/// CANCELLED; LOW, HIGH), written only by the jobs that have it, so the
/// common path (NORMAL jobs that SUCCEED) writes none of them; the common
/// values are found by walking `jobs_order`, where nearly every row
/// matches. Task types get one index keyed by type and sequence (written
/// once per job, at submission; ties of sequence, only in databases from
/// before version 2, are sorted among themselves). Three full indexes
/// keyed like `jobs_order` cost the persistence thread a third more CPU
/// per job; these cost about a tenth (docs/performance-log.md). An id prefix is a
/// range of the primary key.
const V7_TO_V8: &str = "
CREATE INDEX jobs_failed ON jobs (sequence, submitted_at, id) WHERE state = 'FAILED';
CREATE INDEX jobs_cancelled ON jobs (sequence, submitted_at, id) WHERE state = 'CANCELLED';
CREATE INDEX jobs_low ON jobs (sequence, submitted_at, id) WHERE priority = 0;
CREATE INDEX jobs_high ON jobs (sequence, submitted_at, id) WHERE priority = 2;
CREATE INDEX jobs_type_order ON jobs (task_type, sequence);
";

/// Version 8 → 9: a job's concurrency key (flow control), fixed at
/// submission. Jobs stored before have none.
const V8_TO_V9: &str = "
ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;
";

type Step = fn(&Transaction<'_>) -> rusqlite::Result<()>;

const STEPS: [(i64, Step); 9] = [
    (1, |tx| tx.execute_batch(JOBS_V1)),
    (2, |tx| tx.execute_batch(V1_TO_V2)),
    (3, |tx| tx.execute_batch(V2_TO_V3)),
    (4, |tx| tx.execute_batch(V3_TO_V4)),
    (5, |tx| tx.execute_batch(V4_TO_V5)),
    (6, |tx| tx.execute_batch(V5_TO_V6)),
    (7, |tx| tx.execute_batch(V6_TO_V7)),
    (8, |tx| tx.execute_batch(V7_TO_V8)),
    (9, |tx| tx.execute_batch(V8_TO_V9)),
];

/// Why the schema could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("database schema version {found} is newer than this binary supports ({supported}); upgrade taskyard")]
    TooNew { found: i64, supported: i64 },
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// Brings the database to `SCHEMA_VERSION`, one step per transaction. A
/// database newer than this binary is refused without being modified.
pub fn migrate(conn: &mut Connection) -> Result<i64, SchemaError> {
    migrate_to(conn, SCHEMA_VERSION)
}

/// Brings the database to `target` (at most `SCHEMA_VERSION`); tests use it
/// to build databases of older versions.
pub(crate) fn migrate_to(conn: &mut Connection, target: i64) -> Result<i64, SchemaError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(SchemaError::TooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (version, step) in STEPS.iter().filter(|(v, _)| *v > found && *v <= target) {
        let tx = conn.transaction()?;
        step(&tx)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
    }
    Ok(found)
}
