//! `WalCheckpointer`: copies the SQLite WAL back into the database on a
//! thread and connection of its own, so no commit pays for it.
//!
//! Left to SQLite, the commit that takes the WAL past its checkpoint
//! threshold copies every page in it back to the database and fsyncs the
//! database before it returns: 10 to 25 ms on this project's machines,
//! during which every request waiting for a commit waits too (docs/performance-log.md,
//! "Schedules"). Here the writer is told only that something was
//! committed; at most every `CHECKPOINT_INTERVAL` the checkpointer runs a
//! PASSIVE checkpoint, which copies what is committed without waiting for
//! (or blocking) the writer or any reader. What is durable and when does
//! not change: a commit is durable once the WAL holding it is fsynced, and
//! SQLite's checkpoint fsyncs the WAL before copying and the database after.
//! The writer keeps an automatic checkpoint at `BACKSTOP_PAGES`, so a
//! checkpointer that falls behind (or fails) never lets the WAL grow
//! without bound.

use super::StoreError;
use crate::config::Synchronous;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The least time between two checkpoints: pages rewritten within it are
/// copied back once.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(250);

/// Name of the checkpointer's thread.
pub const CHECKPOINT_THREAD: &str = "taskyard-wal-checkpoint";

/// A checkpointer running for one database; stops when dropped.
pub struct WalCheckpointer {
    /// Holds at most one wake-up: a second commit before the checkpointer
    /// looks adds nothing.
    wake: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl WalCheckpointer {
    /// Opens a second connection to `path` (a database in WAL mode) and
    /// starts the thread.
    pub fn start(path: &Path, synchronous: Synchronous) -> Result<WalCheckpointer, StoreError> {
        let fail = |reason: String| StoreError::sqlite(path, format!("WAL checkpointer: {reason}"));
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| fail(e.to_string()))?;
        // The checkpoint's own fsyncs follow this connection's setting.
        conn.pragma_update(None, "synchronous", synchronous.to_string())
            .map_err(|e| fail(e.to_string()))?;
        let (wake, woken) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(CHECKPOINT_THREAD.into())
            .spawn(move || {
                yield_the_cpu();
                run(&conn, &woken)
            })
            .map_err(|e| fail(e.to_string()))?;
        Ok(WalCheckpointer {
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    /// Something was committed: a checkpoint follows within
    /// `CHECKPOINT_INTERVAL`. Never blocks.
    pub fn committed(&self) {
        if let Some(wake) = &self.wake {
            // Full: a wake-up is already pending. Disconnected: the thread
            // ended, and the writer's backstop checkpoints instead.
            let _ = wake.try_send(());
        }
    }
}

impl Drop for WalCheckpointer {
    fn drop(&mut self) {
        drop(self.wake.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Makes this thread the last the kernel runs when threads wait for a
/// core (nice 19; Linux sets it per thread). Copying thousands of pages is
/// several milliseconds of CPU: at equal priority, on a two-core machine it
/// kept the coordinator's actor thread off a core for as long, and the
/// ordinary jobs submitted then waited 10 ms instead of 1 (docs/performance-log.md,
/// "Schedules"). Nothing waits for a checkpoint, and the writer's backstop
/// bounds the WAL if this thread is starved. Elsewhere a no-op (there the
/// call would lower the whole process).
fn yield_the_cpu() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on this thread's own id; a failure
    // leaves the priority as it was.
    unsafe {
        let _ = libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
    }
}

/// Waits for a commit, then for the interval since the last checkpoint to
/// pass, then checkpoints; until the writer side is dropped.
fn run(conn: &Connection, woken: &mpsc::Receiver<()>) {
    let mut last: Option<Instant> = None;
    while woken.recv().is_ok() {
        if let Some(due) = last.map(|at| at + CHECKPOINT_INTERVAL) {
            loop {
                match woken.recv_timeout(due.saturating_duration_since(Instant::now())) {
                    Ok(()) => continue,
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        }
        // A failed checkpoint leaves the WAL as it was; the next commit
        // wakes this thread again, and the writer's backstop bounds the WAL.
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        last = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    use super::CHECKPOINT_THREAD;
    use crate::config::Synchronous;
    use crate::store::tests::row;
    use crate::store::JobStore;
    use std::time::{Duration, Instant};
    use taskyard_protocol::JobState;

    fn db_bytes(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }

    /// The nice value of each of this process's checkpointer threads.
    #[cfg(target_os = "linux")]
    fn checkpointer_nice_values() -> Vec<i64> {
        let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("stat")).ok())
            .filter_map(|stat| {
                // "tid (comm) state ..."; comm is cut to 15 bytes.
                let (head, rest) = stat.rsplit_once(") ")?;
                let comm = head.split_once(" (")?.1;
                (CHECKPOINT_THREAD.starts_with(comm) && comm.len() >= 15)
                    .then(|| rest.split(' ').nth(16)?.parse().ok())?
            })
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_checkpointer_runs_at_the_lowest_priority() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store = JobStore::open(&dir.path().join("t.db"), Synchronous::Full).expect("open");
        store
            .checkpoint_in_background(Synchronous::Full)
            .expect("checkpointer started");
        // The thread lowers itself as it starts.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let nice = checkpointer_nice_values();
            if !nice.is_empty() && nice.iter().all(|n| *n == 19) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "checkpointer threads' nice values: {nice:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn committed_pages_reach_the_database_file_without_a_commit_checkpointing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let mut store = JobStore::open(&path, Synchronous::Full).expect("open");
        store
            .checkpoint_in_background(Synchronous::Full)
            .expect("checkpointer started");
        let before = db_bytes(&path);
        // A few hundred pages: far below the writer's own backstop, so only
        // the checkpointer can copy them into the database file.
        let rows: Vec<_> = (1..=2_000).map(|i| row(i, JobState::Queued)).collect();
        store.commit(&rows).expect("committed");
        let deadline = Instant::now() + Duration::from_secs(10);
        while db_bytes(&path) <= before {
            assert!(
                Instant::now() < deadline,
                "the database file never grew past {before} bytes"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(store); // joins the checkpointer's thread
        let reopened = JobStore::open(&path, Synchronous::Full).expect("reopen");
        let stored = reopened.load_for_recovery(10).expect("load");
        assert_eq!(stored.jobs.len(), 2_000);
    }
}
