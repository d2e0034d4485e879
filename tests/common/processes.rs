//! Looking at processes from the outside, independently of the worker's own
//! bookkeeping: which live (non-zombie) processes are in a process group.

use std::time::Duration;

/// `path` opened for appending (created if missing): where a process that
/// is killed and started again writes its output, every run after the last.
pub fn append_log(path: &std::path::Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("process log")
}

/// Every pid /proc lists now.
fn pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

/// Pids of live (not zombie) processes whose process group is `pgid`.
pub fn live_group_members(pgid: i32) -> Vec<i32> {
    pids()
        .into_iter()
        .filter(|pid| group_of(*pid) == Some(pgid))
        .collect()
}

/// Pids of live processes with `needle` in their command line.
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    pids()
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(needle) && group_of(*pid).is_some()
        })
        .collect()
}

/// The process group of live (not zombie) process `pid`.
pub fn group_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().take(3).collect();
    match fields.as_slice() {
        [state, _, group] if *state != "Z" => group.parse().ok(),
        _ => None,
    }
}

/// Waits until a file holds a process group id (written by the program
/// under test as `echo $$ > file`); returns it.
pub fn read_pgid(path: &std::path::Path) -> i32 {
    let mut pgid = None;
    super::wait_until(
        "the program wrote its pgid",
        Duration::from_secs(10),
        || {
            pgid = std::fs::read_to_string(path)
                .ok()
                .and_then(|text| text.trim().parse().ok());
            pgid.is_some()
        },
    );
    pgid.expect("pgid")
}

/// Executions per job, from worker processes' JSON logs (`--log-format
/// json --log-level debug`): their "task assigned" lines.
pub fn executions(logs: &[std::path::PathBuf]) -> std::collections::HashMap<String, u32> {
    let mut counts = std::collections::HashMap::new();
    for log in logs {
        let text = std::fs::read_to_string(log).expect("read worker log");
        for line in text.lines() {
            let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if record["msg"] == "task assigned" {
                if let Some(job) = record["job"].as_str() {
                    *counts.entry(job.to_string()).or_insert(0) += 1;
                }
            }
        }
    }
    counts
}

/// Child processes killed (and reaped) when dropped: when the test ends,
/// passing or not.
pub struct Killed(pub Vec<std::process::Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
