//! CPU time and memory of this process, read from `/proc` (Linux only;
//! elsewhere every reading is `None`).
//!
//! Per-thread time comes from `/proc/self/task/<tid>/schedstat` (nanoseconds
//! on a CPU), so the coordinator's own thread can be told apart from the
//! workers and load generator sharing the process.

use std::fs;
use std::time::{Duration, Instant};

/// Linux reports process times in `/proc/<pid>/stat` in units of USER_HZ,
/// which is 100 on every architecture Linux supports.
const USER_HZ: u64 = 100;

/// CPU time consumed so far, by thread name and by the whole process.
#[derive(Debug, Clone, Copy)]
pub struct CpuSnapshot {
    pub at: Instant,
    /// The actor-system thread: the coordinator actor and every session.
    pub coordinator: Option<Duration>,
    /// The SQLite thread.
    pub persistence: Option<Duration>,
    /// Every thread of the process, including workers and load generator.
    pub process: Option<Duration>,
}

impl CpuSnapshot {
    pub fn take(coordinator_thread: &str, persistence_thread: &str) -> CpuSnapshot {
        CpuSnapshot {
            at: Instant::now(),
            coordinator: thread_cpu(coordinator_thread),
            persistence: thread_cpu(persistence_thread),
            process: process_cpu(),
        }
    }
}

/// CPU used between two snapshots, in milliseconds, per thread group.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CpuUsed {
    pub wall_ms: f64,
    pub coordinator_thread_ms: Option<f64>,
    pub persistence_thread_ms: Option<f64>,
    pub process_ms: Option<f64>,
}

impl CpuUsed {
    pub fn between(before: &CpuSnapshot, after: &CpuSnapshot) -> CpuUsed {
        let delta = |a: Option<Duration>, b: Option<Duration>| Some(millis(b?.saturating_sub(a?)));
        CpuUsed {
            wall_ms: millis(after.at.duration_since(before.at)),
            coordinator_thread_ms: delta(before.coordinator, after.coordinator),
            persistence_thread_ms: delta(before.persistence, after.persistence),
            process_ms: delta(before.process, after.process),
        }
    }

    /// The coordinator thread's share of one core over the interval, in percent.
    pub fn coordinator_percent(&self) -> Option<f64> {
        let used = self.coordinator_thread_ms?;
        (self.wall_ms > 0.0).then(|| 100.0 * used / self.wall_ms)
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Summed on-CPU time of the threads whose name starts with `name` (the
/// kernel keeps 15 bytes of a thread's name).
fn thread_cpu(name: &str) -> Option<Duration> {
    let short = &name.as_bytes()[..name.len().min(15)];
    let mut total = None;
    for entry in fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = entry.path();
        let comm = fs::read(dir.join("comm")).unwrap_or_default();
        if comm.strip_suffix(b"\n").unwrap_or(&comm) != short {
            continue;
        }
        let schedstat = fs::read_to_string(dir.join("schedstat")).ok()?;
        let nanos: u64 = schedstat.split_whitespace().next()?.parse().ok()?;
        total = Some(total.unwrap_or(Duration::ZERO) + Duration::from_nanos(nanos));
    }
    total
}

/// User plus system time of the whole process, exited threads included.
fn process_cpu() -> Option<Duration> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 1000 / USER_HZ))
}

/// Resident set size of this process in bytes.
pub fn rss_bytes() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reports_its_own_cpu_and_memory_on_linux() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        assert!(process_cpu().is_some());
        assert!(rss_bytes().is_some_and(|b| b > 0));
        let name = std::thread::current().name().map(str::to_string);
        if let Some(name) = name {
            assert!(thread_cpu(&name).is_some(), "thread {name}");
        }
    }
}
