//! Finished jobs are bounded in memory by bytes, not only by count and
//! age: a real coordinator process runs 1,000 echo jobs whose payloads and
//! results are 60 KB each (120 MB in all), in waves of 30; its resident
//! memory once they finished grows by less than 60 MB (the default
//! `retain-finished-in-memory-bytes` is 16 MiB), and every job's view
//! still comes back whole, read from the database once evicted.

mod common;

use common::processes::Killed;

use common::jobs::{connect_within, request, result_text, status, submit, wait_for_job};
use common::{free_port, wait_until};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::Duration;
use taskyard::protocol::{JobId, JobState};

const JOBS: usize = 1_000;
const WAVE: usize = 30;
const BYTES: usize = 60 * 1024;

/// The resident memory of process `pid`, in bytes.
fn resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

#[test]
fn a_thousand_60_kb_jobs_grow_the_coordinator_by_less_than_60_mb_and_read_back_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (client_addr, worker_addr) = (free_port(), free_port());
    let coordinator = Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
        .arg("--db-path")
        .arg(dir.path().join("bytes.db"))
        .args(["--client-listen", &client_addr.to_string()])
        .args(["--worker-listen", &worker_addr.to_string()])
        .args(["--http-listen", "", "--sqlite-preallocate-wal", "false"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start coordinator");
    let pid = coordinator.id();
    let worker = Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .args(["--coordinator", &worker_addr.to_string()])
        .args(["--worker-id", "bytes", "--capacity", &WAVE.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start worker");
    let _children = Killed(vec![coordinator, worker]);
    let mut client = connect_within(&client_addr.to_string(), Duration::from_secs(20));
    let message = "m".repeat(BYTES);
    let run_wave = |client: &mut taskyard::client::Client, n: usize| -> Vec<JobId> {
        let ids: Vec<JobId> = (0..n)
            .map(|_| submit(client, request("echo", json!({ "message": message }))))
            .collect();
        for id in &ids {
            wait_for_job(client, *id, "succeeded", Duration::from_secs(30), |v| {
                v.state == JobState::Succeeded
            });
        }
        ids
    };
    // Warm up the connections, threads and caches before measuring.
    run_wave(&mut client, WAVE);
    let before = resident(pid);
    let mut ids = Vec::new();
    while ids.len() < JOBS {
        ids.extend(run_wave(&mut client, WAVE.min(JOBS - ids.len())));
    }
    // Evictions follow commits; a sweep later, the window is at its bound.
    let mut grown = 0;
    wait_until(
        "the coordinator's growth to settle under 60 MB",
        Duration::from_secs(10),
        || {
            grown = resident(pid).saturating_sub(before);
            grown < 60 * 1024 * 1024
        },
    );
    println!(
        "coordinator grew {} KiB for {JOBS} jobs of 2 x 60 KB",
        grown / 1024
    );
    for id in [ids[0], ids[JOBS / 2], ids[JOBS - 1]] {
        let view = status(&mut client, id);
        assert_eq!(result_text(&view), message, "job {id} comes back whole");
        assert!(
            view.payload.len() > BYTES,
            "job {id}'s payload comes back whole"
        );
    }
}
