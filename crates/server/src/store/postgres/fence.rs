//! The fence: every write transaction begins by reading the leader
//! lease's epoch under a share lock, and goes no further when it is not
//! the one this coordinator was elected with. The lock keeps a new leader
//! from taking the lease (which updates that row) until the transaction
//! ends, so a transaction that passed the check commits under the epoch it
//! checked.

use super::PostgresStore;
use crate::store::StoreError;
use postgres::SimpleQueryMessage;

/// The epoch, read under a row lock (PostgreSQL's `FOR SHARE`).
pub(super) const READ_EPOCH: &str = "SELECT epoch FROM taskyard.leader WHERE id = 1 FOR SHARE";

/// Begins a write transaction whose statements find rows by key only.
/// Every write statement touches a batch's rows by primary key (or expiry
/// the oldest finished through `jobs_finished_at`), but the planner,
/// estimating 10 rows for an `unnest` and going by statistics that lag a
/// fast-growing table, chose hash joins over a sequential scan of `jobs`:
/// measured, a 1,024-row update went from 9 ms to 150 ms as the table grew
/// to 40,000 rows. `SET LOCAL` (PostgreSQL's) keeps index lookups for this
/// transaction only; reads elsewhere plan as usual.
const BEGIN_WRITE: &str = "BEGIN; SET LOCAL enable_seqscan = off; \
    SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off;";

impl PostgresStore {
    /// Begins a write transaction unless one is open, checking the fence
    /// first when one is set: BEGIN and the check go in one round trip.
    /// On a fenced error the caller rolls back; nothing was written.
    pub(super) fn begin_write(&mut self) -> Result<(), StoreError> {
        if self.in_transaction {
            return Ok(());
        }
        let fence = self.fence;
        // A transaction left open by a coordinator that stopped (SIGSTOP, a
        // hung thread) must not hold the lease row for good: PostgreSQL
        // ends the session once it sits idle in the transaction this long,
        // and a standby can take the lease.
        let idle = format!(
            "SET LOCAL idle_in_transaction_session_timeout = {};",
            self.idle_limit.as_millis().clamp(1, i32::MAX as u128)
        );
        let sql = match fence {
            Some(_) => format!("{BEGIN_WRITE} {idle} {READ_EPOCH}"),
            None => format!("{BEGIN_WRITE} {idle}"),
        };
        let answer = self.conn()?.client.simple_query(&sql);
        // A BEGIN that failed half-way may still have opened one.
        self.in_transaction = true;
        let answer = answer.map_err(|e| self.driver(&e))?;
        let Some(expected) = fence else {
            return Ok(());
        };
        let found = answer.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        });
        match found.as_deref().map(str::parse::<u64>) {
            Some(Ok(epoch)) if epoch == expected => Ok(()),
            Some(Ok(epoch)) => Err(StoreError::fenced(
                self.target.describe(),
                format!("fenced: the leader lease is at epoch {epoch}, this coordinator holds epoch {expected}; nothing was written"),
            )),
            _ => Err(StoreError::fenced(
                self.target.describe(),
                format!("fenced: no leader lease row (taskyard.leader id 1); this coordinator holds epoch {expected}; nothing was written"),
            )),
        }
    }
}
