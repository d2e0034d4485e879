//! The PostgreSQL schema (everything in schema `taskyard`) and its
//! versioned migrations. The version lives in `taskyard.schema_version`;
//! each step runs in a transaction of its own under an advisory lock, so
//! coordinators starting together migrate once. A database newer than
//! this binary is refused untouched.
//!
//! Same semantics as SQLite's schema version 6 (see `store::schema`), in
//! PostgreSQL's native types: `uuid` ids and leases, `bigint` times (unix
//! milliseconds), `bytea` payloads and results.

use postgres::Client;

/// The version this binary writes.
pub const SCHEMA_VERSION: i64 = 6;

/// Taken (per transaction) by every migration step. Any constant unique
/// to taskyard: "tkyd" in ASCII.
const MIGRATION_LOCK: i64 = 0x746b_7964;

/// `fillfactor` 80 leaves room in each page for the new version of a row,
/// so most transitions (which change no indexed column) are HOT updates
/// that touch no index.
const V1: &str = "
CREATE TABLE taskyard.jobs (
    id uuid PRIMARY KEY,
    task_type text NOT NULL,
    payload bytea NOT NULL,
    priority smallint NOT NULL,
    sequence bigint NOT NULL,
    submitted_at bigint NOT NULL,
    state text NOT NULL,
    attempts integer NOT NULL,
    max_attempts integer NOT NULL,
    timeout_ms bigint NOT NULL,
    lease uuid,
    worker_id text,
    assigned_at bigint,
    next_retry_at bigint,
    result bytea,
    error text,
    idempotency_key text,
    updated_at bigint NOT NULL,
    finished_at bigint,
    not_before bigint,
    last_attempt_number integer,
    last_attempt_worker text,
    last_attempt_lease uuid,
    last_attempt_started_at bigint,
    last_attempt_ended_at bigint,
    last_attempt_outcome text
) WITH (fillfactor = 80);
CREATE UNIQUE INDEX jobs_idempotency_key ON taskyard.jobs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_active ON taskyard.jobs (sequence) WHERE finished_at IS NULL;
CREATE INDEX jobs_finished_at ON taskyard.jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_order ON taskyard.jobs (sequence, submitted_at, id);
CREATE TABLE taskyard.attempts (
    job_id uuid NOT NULL,
    number integer NOT NULL,
    worker_id text NOT NULL,
    lease uuid NOT NULL,
    started_at bigint NOT NULL,
    ended_at bigint,
    outcome text,
    PRIMARY KEY (job_id, number)
);
CREATE TABLE taskyard.terminal_counts (
    task_type text NOT NULL,
    state text NOT NULL,
    jobs bigint NOT NULL,
    PRIMARY KEY (task_type, state)
);
CREATE TABLE taskyard.leader (
    id smallint PRIMARY KEY CHECK (id = 1),
    holder text NOT NULL,
    epoch bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL,
    client_addr text,
    worker_addr text,
    http_addr text
);
INSERT INTO taskyard.leader (id, holder, epoch, expires_at, renewed_at)
    VALUES (1, '', 0, '-infinity', '-infinity');
CREATE TABLE taskyard.members (
    node text PRIMARY KEY,
    role text NOT NULL,
    client_addr text,
    worker_addr text,
    http_addr text,
    seen_at timestamptz NOT NULL
);
";

/// Version 2: finished-job counts kept per write connection (`shard`),
/// so that the connections a batch is split between never wait on each
/// other's count rows; a count is the sum over shards.
const V2: &str = "
ALTER TABLE taskyard.terminal_counts ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE taskyard.terminal_counts DROP CONSTRAINT terminal_counts_pkey;
ALTER TABLE taskyard.terminal_counts ADD PRIMARY KEY (task_type, state, shard);
";

/// One step: from `version - 1` to `version`.
/// Schedules: as SQLite's version 6 (see `store::schedules`).
const V3: &str = "
CREATE TABLE taskyard.schedules (
    name text PRIMARY KEY,
    definition bytea NOT NULL,
    last_slot bigint,
    updated_at bigint NOT NULL
);
";

/// A schedule's fired and skipped counts: as SQLite's version 7.
const V4: &str = "
ALTER TABLE taskyard.schedules ADD COLUMN fired bigint NOT NULL DEFAULT 0;
ALTER TABLE taskyard.schedules ADD COLUMN skipped_overlap bigint NOT NULL DEFAULT 0;
ALTER TABLE taskyard.schedules ADD COLUMN skipped_catchup bigint NOT NULL DEFAULT 0;
";

/// History pages served by an index for every filter: as SQLite's
/// version 8. (The partial indexes on `state` make an assignment that
/// found room in its page no longer a HOT update; few were, see
/// docs/performance-log.md.)
const V5: &str = "
CREATE INDEX jobs_failed ON taskyard.jobs (sequence, submitted_at, id) WHERE state = 'FAILED';
CREATE INDEX jobs_cancelled ON taskyard.jobs (sequence, submitted_at, id)
    WHERE state = 'CANCELLED';
CREATE INDEX jobs_low ON taskyard.jobs (sequence, submitted_at, id) WHERE priority = 0;
CREATE INDEX jobs_high ON taskyard.jobs (sequence, submitted_at, id) WHERE priority = 2;
CREATE INDEX jobs_type_order ON taskyard.jobs (task_type, sequence);
";

/// A job's concurrency key: as SQLite's version 9.
const V6: &str = "
ALTER TABLE taskyard.jobs ADD COLUMN concurrency_key text;
";

const STEPS: [(i64, &str); 6] = [(1, V1), (2, V2), (3, V3), (4, V4), (5, V5), (6, V6)];

/// Why the schema could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum PgSchemaError {
    #[error("schema taskyard version {found} is newer than this binary supports ({supported}); upgrade taskyard")]
    TooNew { found: i64, supported: i64 },
    #[error("migrating schema taskyard: {0}")]
    Failed(String),
}

/// Brings schema `taskyard` to `SCHEMA_VERSION` and returns the version
/// found. Nothing changes when it is newer.
pub fn migrate(client: &mut Client) -> Result<i64, PgSchemaError> {
    let failed = |e: postgres::Error| PgSchemaError::Failed(super::connect::error_text(&e));
    let found = {
        let mut tx = client.transaction().map_err(failed)?;
        let found = lock_and_read(&mut tx).map_err(failed)?;
        if found.is_none() {
            // A fresh database: the schema and its version table first.
            tx.batch_execute(
                "CREATE SCHEMA IF NOT EXISTS taskyard;
                 CREATE TABLE taskyard.schema_version (version bigint NOT NULL);
                 INSERT INTO taskyard.schema_version VALUES (0);",
            )
            .map_err(failed)?;
            tx.commit().map_err(failed)?;
        }
        found.unwrap_or(0)
    };
    if found > SCHEMA_VERSION {
        return Err(PgSchemaError::TooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (version, sql) in STEPS {
        let mut tx = client.transaction().map_err(failed)?;
        // Another coordinator may have migrated meanwhile: read again
        // under the lock.
        let now = lock_and_read(&mut tx).map_err(failed)?.unwrap_or(0);
        if now > SCHEMA_VERSION {
            return Err(PgSchemaError::TooNew {
                found: now,
                supported: SCHEMA_VERSION,
            });
        }
        if now >= version {
            continue;
        }
        tx.batch_execute(sql).map_err(failed)?;
        tx.execute(
            "UPDATE taskyard.schema_version SET version = $1",
            &[&version],
        )
        .map_err(failed)?;
        tx.commit().map_err(failed)?;
    }
    Ok(found)
}

/// Takes the migration lock for this transaction and reads the version:
/// `None` when there is no version table yet.
fn lock_and_read(tx: &mut postgres::Transaction<'_>) -> Result<Option<i64>, postgres::Error> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    let exists: bool = tx
        .query_one(
            "SELECT to_regclass('taskyard.schema_version') IS NOT NULL",
            &[],
        )?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let row = tx.query_opt("SELECT version FROM taskyard.schema_version", &[])?;
    Ok(Some(row.map_or(0, |r| r.get(0))))
}
