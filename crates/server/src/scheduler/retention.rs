//! The hot set: memory holds every non-terminal job and a bounded window
//! of recently finished ones; older finished jobs are evicted and live on
//! in the database only (read through the history pool).
//!
//! Finished jobs enter a FIFO in the order they finished. Each entry is
//! tagged with the batch that carries the finishing change (`seal`), and a
//! job is evicted only once that batch is durable and the job is not dirty
//! again, so eviction never loses a change. Eviction pops from the front,
//! so its cost is the number of entries it removes, never the number of
//! jobs held.

use crate::scheduler::hash_map::{shrink_if_sparse, HashMap};
use crate::scheduler::state::CoordinatorState;
use std::collections::VecDeque;
use taskyard_client::clock::Now;
use taskyard_protocol::{JobId, JobState};

/// The most finished jobs evicted in one step of the coordinator. 10,000
/// jobs finishing in half a second (a cron slot of 10,000 schedules) are
/// evicted over many steps, with requests handled in between, instead of
/// holding the coordinator for one long sweep (~1 µs a job).
pub const EVICTIONS_PER_STEP: usize = 256;

/// How many finished jobs memory keeps, how many of their bytes, and for
/// how long. The oldest finished job is evicted while any bound is
/// exceeded (and its row is durable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Most finished jobs kept in memory (`retain-finished-in-memory`).
    pub max_finished: usize,
    /// Longest a finished job stays in memory, in milliseconds
    /// (`retain-finished-in-memory-millis`).
    pub max_age_ms: u64,
    /// Most payload and result bytes of finished jobs kept in memory
    /// (`retain-finished-in-memory-bytes`).
    pub max_bytes: u64,
}

impl Retention {
    /// Keeps every finished job forever: the behaviour before retention,
    /// and what a state without a history read path must do.
    pub const UNBOUNDED: Retention = Retention {
        max_finished: usize::MAX,
        max_age_ms: u64::MAX,
        max_bytes: u64::MAX,
    };
}

/// The bytes of a job that a finished job holds in memory beyond its
/// fixed fields: its payload and its result.
pub(super) fn held_bytes(job: &crate::scheduler::Job) -> u64 {
    (job.payload.len() + job.result.as_ref().map_or(0, |r| r.len())) as u64
}

/// One finish, in finishing order.
#[derive(Debug, Clone, Copy)]
struct Finished {
    id: JobId,
    finished_at: i64,
    /// Which finish of the job this is (see `FinishedJobs::latest`).
    serial: u64,
    /// The batch carrying the finishing change; `None` until sealed.
    batch: Option<u64>,
}

/// The finished jobs in memory, oldest finish first.
#[derive(Debug, Default)]
pub(super) struct FinishedJobs {
    fifo: VecDeque<Finished>,
    /// Each finished job in memory → the serial of its latest finish and
    /// the bytes it holds (`held_bytes`). An entry of `fifo` whose serial
    /// is not here is stale (the job was requeued, or finished again
    /// later) and is skipped.
    latest: HashMap<JobId, (u64, u64)>,
    next_serial: u64,
    /// How many entries at the back of `fifo` are not sealed yet.
    unsealed: usize,
    /// The bytes held by the finished jobs in memory, summed.
    bytes: u64,
}

impl FinishedJobs {
    /// The job just became terminal at `now`, holding `bytes`.
    pub(super) fn finished(&mut self, id: JobId, now: i64, bytes: u64) {
        let serial = self.next_serial;
        self.next_serial += 1;
        if let Some((_, old)) = self.latest.insert(id, (serial, bytes)) {
            self.bytes -= old;
        }
        self.bytes += bytes;
        self.fifo.push_back(Finished {
            id,
            finished_at: now,
            serial,
            batch: None,
        });
        self.unsealed += 1;
    }

    /// The job stopped being terminal (a requeue) or left memory.
    pub(super) fn forget(&mut self, id: JobId) {
        if let Some((_, bytes)) = self.latest.remove(&id) {
            self.bytes -= bytes;
        }
    }

    /// The payload and result bytes the finished jobs in memory hold.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Finished jobs in memory.
    pub(super) fn len(&self) -> usize {
        self.latest.len()
    }

    /// Removes the oldest entry. Unsealed entries are the newest ones, so
    /// an unsealed entry popped (a stale one: its job was requeued in the
    /// step that finished it) is one fewer to seal.
    fn pop_front(&mut self) {
        if let Some(entry) = self.fifo.pop_front() {
            if entry.batch.is_none() {
                self.unsealed = self.unsealed.saturating_sub(1);
            }
        }
    }

    /// Room held for entries, whichever of its two collections holds more.
    #[cfg(test)]
    pub(super) fn spare_capacity(&self) -> usize {
        self.fifo.capacity().max(self.latest.capacity())
    }

    /// Gives back the room a burst of finishes took once most has left.
    fn shrink_if_sparse(&mut self) {
        shrink_if_sparse(&mut self.latest);
        if self.fifo.capacity() > 4 * self.fifo.len() + 16 {
            self.fifo.shrink_to_fit();
        }
    }

    fn is_current(&self, entry: &Finished) -> bool {
        self.latest.get(&entry.id).map(|(serial, _)| *serial) == Some(entry.serial)
    }
}

impl CoordinatorState {
    /// Sets the hot-set bounds. Only meaningful with a history read path:
    /// an evicted job is no longer answered from memory.
    pub fn set_retention(&mut self, retention: Retention) {
        self.retention = retention;
    }

    /// Tags every finish since the last call with `batch`, the batch that
    /// will carry those changes. The coordinator calls it at the end of
    /// each step, before the step's rows are handed to the group commit.
    pub fn seal_finished(&mut self, batch: u64) {
        let unsealed = std::mem::take(&mut self.finished.unsealed);
        let start = self.finished.fifo.len().saturating_sub(unsealed);
        for entry in self.finished.fifo.range_mut(start..) {
            entry.batch = Some(batch);
        }
    }

    /// Evicts finished jobs beyond the retention window whose last change
    /// is in a batch no newer than `durable` and which are not dirty, at
    /// most `EVICTIONS_PER_STEP`; returns how many (that many: more may be
    /// due, and the caller evicts again in a later step). Stops at the
    /// first job that is due but not yet durable (those behind it finished
    /// later). Counts per state are counters and do not change; the job
    /// stays reachable through the database, and its idempotency key stays
    /// resolvable in memory.
    pub fn evict_finished(&mut self, now: Now, durable: u64) -> usize {
        let mut evicted = 0;
        while let Some(entry) = self.finished.fifo.front().copied() {
            if evicted == EVICTIONS_PER_STEP {
                break;
            }
            if !self.finished.is_current(&entry) {
                self.finished.pop_front();
                continue;
            }
            if !self.beyond_window(&entry, now.wall_ms) || !self.is_durable(&entry, durable) {
                break;
            }
            self.finished.pop_front();
            self.evict(entry.id);
            evicted += 1;
        }
        // A drain of a deep queue leaves the maps sized for the queue's
        // peak (2,000,000 jobs drained held 3 times the memory of 200,000
        // after both had settled; docs/performance-log.md). Only eviction removes
        // jobs from memory, so this is where the room is given back.
        if evicted > 0 {
            shrink_if_sparse(&mut self.jobs);
            self.finished.shrink_if_sparse();
        }
        evicted
    }

    fn beyond_window(&self, entry: &Finished, now: i64) -> bool {
        let age = u64::try_from(now.saturating_sub(entry.finished_at)).unwrap_or(0);
        self.finished.len() > self.retention.max_finished
            || age > self.retention.max_age_ms
            || self.finished.bytes() > self.retention.max_bytes
    }

    /// True while the finished jobs in memory hold more bytes than
    /// `retain-finished-in-memory-bytes`: the coordinator then evicts after
    /// a commit instead of waiting for the sweep. O(1).
    pub fn finished_over_bytes(&self) -> bool {
        self.finished.bytes() > self.retention.max_bytes
    }

    fn is_durable(&self, entry: &Finished, durable: u64) -> bool {
        entry.batch.is_some_and(|b| b <= durable) && !self.dirty.contains(entry.id)
    }

    /// Removes a durable finished job from memory.
    fn evict(&mut self, id: JobId) {
        self.finished.forget(id);
        if let Some(job) = self.jobs.remove(&id) {
            self.by_sequence.remove(&job.order_key());
        }
    }

    /// The database deleted this expired job (durably): its idempotency
    /// key is forgotten and it no longer counts. A copy still in memory
    /// leaves too, unless memory changed it since (a requeue, not yet
    /// written: that write stores the job again, so it stays and counts
    /// as memory has it). Costs O(1).
    pub fn forget_expired(
        &mut self,
        id: JobId,
        key: Option<&str>,
        task_type: &str,
        state: JobState,
    ) {
        if let Some(key) = key {
            if self.idempotency.get(key) == Some(&id) {
                self.idempotency.remove(key);
            }
        }
        match self.jobs.get(&id) {
            None => self.state_counts.remove(task_type, state),
            Some(held) if held.state.is_terminal() && !self.dirty.contains(id) => {
                let (held_type, held_state) = (held.task_type.clone(), held.state);
                self.state_counts.remove(&held_type, held_state);
                self.evict(id);
            }
            Some(_) => {}
        }
    }

    /// Brings a finished job read back from the database into memory (to
    /// requeue it); it already counts. A job that is not finished, or is
    /// already held, changes nothing.
    pub fn restore(&mut self, job: crate::scheduler::Job, now: Now) {
        if !job.state.is_terminal() || self.holds(job.id) || self.deleting.contains(&job.id) {
            return;
        }
        // Sealed with this step's batch like a fresh finish: later than
        // needed, never too early.
        let bytes = held_bytes(&job);
        self.finished
            .finished(job.id, job.finished_at.unwrap_or(now.wall_ms), bytes);
        self.insert(job, now);
    }

    /// Finished jobs held in memory.
    pub fn finished_in_memory(&self) -> usize {
        self.finished.len()
    }

    /// Jobs held in memory, of every state.
    pub fn jobs_in_memory(&self) -> usize {
        self.jobs.len()
    }

    /// True when the job is in memory (non-terminal, or finished within
    /// the retention window); otherwise only the database may know it.
    pub fn holds(&self, id: JobId) -> bool {
        self.jobs.contains_key(&id)
    }
}

#[cfg(test)]
#[path = "retention_tests.rs"]
mod tests;
