//! Reading a coordinator's SQLite file directly: the ground truth of what
//! is durable, whatever the coordinator answers. Every helper opens its own
//! connection, so call them after the coordinator has committed (or
//! stopped), and panics naming the step that failed.

use rusqlite::{Connection, Row};
use std::path::Path;

/// A connection to the database at `db`; creates the file if it is missing.
pub fn open(db: &Path) -> Connection {
    Connection::open(db).unwrap_or_else(|e| panic!("open {}: {e}", db.display()))
}

/// How many jobs are stored, in any state.
pub fn job_count(db: &Path) -> i64 {
    open(db)
        .query_row("SELECT count(*) FROM jobs", [], |r| r.get(0))
        .expect("count jobs")
}

/// How many jobs are stored in `state`, as the database spells it
/// (`"SUCCEEDED"`).
pub fn job_count_in(db: &Path, state: &str) -> i64 {
    open(db)
        .query_row("SELECT count(*) FROM jobs WHERE state = ?1", [state], |r| {
            r.get(0)
        })
        .expect("count jobs in a state")
}

/// Every row `sql` selects, each turned into a `T` by `row`.
pub fn rows<T>(db: &Path, sql: &str, row: impl FnMut(&Row) -> rusqlite::Result<T>) -> Vec<T> {
    let conn = open(db);
    let mut query = conn.prepare(sql).expect("prepare");
    let rows = query.query_map([], row).expect("query");
    rows.map(|r| r.expect("row")).collect()
}

/// The schema version the database records (`PRAGMA user_version`).
pub fn schema_version(db: &Path) -> i64 {
    open(db)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("schema version")
}
