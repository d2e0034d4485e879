//! Process groups of `exec` programs: signalling the whole group, telling
//! when it is gone, and a guard that kills it if its supervisor is dropped.
//!
//! A program runs as the leader of a fresh group (its pid is the group id),
//! and everything it starts stays in that group unless it calls `setsid`
//! or `setpgid` itself — a program that does so escapes these guarantees.

use std::time::Duration;

/// How often [`wait_until_gone`] looks.
const POLL: Duration = Duration::from_millis(10);

/// Sends `signal` to every process in group `pgid`. A group that is
/// already gone is not an error.
pub fn signal_group(pgid: i32, signal: libc::c_int) {
    if pgid > 0 {
        // SAFETY: killpg takes plain integers and touches no memory of ours.
        unsafe {
            libc::killpg(pgid, signal);
        }
    }
}

/// True while some process of group `pgid` is still alive. Zombies do not
/// count: they have exited and only wait for their parent (init, for
/// orphans) to collect their status.
pub fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence; no memory is touched.
    let exists = unsafe { libc::kill(-pgid, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
    exists && live_members(pgid).unwrap_or(true)
}

/// Whether /proc lists a non-zombie member of group `pgid`; `None` when
/// /proc cannot be read (then the caller assumes there is one).
fn live_members(pgid: i32) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let live = entries.flatten().any(|entry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // "pid (comm) state ppid pgrp ...": comm may contain spaces, so
        // parse after the last ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().take(3).collect())
            .unwrap_or_default();
        matches!(fields.as_slice(), [state, _, group] if *state != "Z" && group.parse() == Ok(pgid))
    });
    Some(live)
}

/// Returns once no live process is left in group `pgid`.
pub async fn wait_until_gone(pgid: i32) {
    while group_alive(pgid) {
        tokio::time::sleep(POLL).await;
    }
}

/// SIGKILLs its group when dropped while armed: if the future supervising
/// a program is dropped (the worker's task runtime shutting down), the
/// program and its children still die with it.
pub struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    pub fn new(pgid: i32) -> Self {
        GroupGuard { pgid: Some(pgid) }
    }

    /// The group is known to be gone; dropping does nothing.
    pub fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, libc::SIGKILL);
        }
    }
}
