//! Failover under load with real processes on a real PostgreSQL: two
//! coordinators, three workers, 2,000 keyed jobs from four threads, and the
//! leader killed with SIGKILL twice. The standby must take over each time;
//! no acknowledged job may be lost or have two applied results, and
//! re-attaching running attempts must duplicate less work than a plain
//! requeue of everything running at the kill would.

mod common;

use common::ha_processes::{wait_for_leader, CoordinatorProcess};
use common::jobs::{connect_within, submit_keyed_until_answered};
use common::rng::XorShift;
use serde_json::json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use taskyard::client::Client;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::{AttemptOutcome, JobId, JobState, SubmitRequest};

const JOBS: usize = 2000;
const THREADS: usize = 4;
const BATCH: usize = 25;
const KILLS: usize = 2;
const MAX_ATTEMPTS: u32 = 5;
const LEASE_MILLIS: u64 = 2000;

fn coordinator_flags() -> Vec<String> {
    [
        "--leader-lease-millis",
        &LEASE_MILLIS.to_string(),
        "--sweep-interval-millis",
        "50",
        "--heartbeat-timeout-millis",
        "1500",
        "--retry-base-millis",
        "20",
        "--retry-cap-millis",
        "200",
        "--default-max-attempts",
        &MAX_ATTEMPTS.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn start_worker(i: usize, coordinators: &str, log: &Path) -> Child {
    let stderr = std::fs::File::create(log).expect("worker log");
    Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .args(["--coordinator", coordinators])
        .args([
            "--worker-id",
            &format!("failover-worker-{i}"),
            "--capacity",
            "8",
        ])
        .args([
            "--heartbeat-interval-millis",
            "200",
            "--reconnect-max-millis",
            "200",
        ])
        .args(["--log-level", "debug", "--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start worker")
}

/// Submits `range` in keyed batches, resubmitting a batch whose answer was
/// lost (the keys make that harmless). Returns the acknowledged ids.
fn submit_range(addrs: &str, range: std::ops::Range<usize>, mut rng: XorShift) -> Vec<JobId> {
    let mut acknowledged = Vec::new();
    let mut client = connect_within(addrs, Duration::from_secs(30));
    let mut start = range.start;
    while start < range.end {
        let end = (start + BATCH).min(range.end);
        let batch: Vec<SubmitRequest> = (start..end)
            .map(|i| SubmitRequest {
                idempotency_key: Some(format!("failover-{i}")),
                ..SubmitRequest::new(
                    "sleep",
                    encode_json(&json!({ "millis": 20 + rng.below(180) })),
                )
            })
            .collect();
        acknowledged.extend(submit_keyed_until_answered(&mut client, addrs, batch));
        start = end;
    }
    acknowledged
}

/// Jobs RUNNING on the leader right now: what a plain requeue at a kill
/// now would run again.
fn running_now(client: &mut Client) -> usize {
    client
        .list_from(Some(JobState::Running), None, 500, None)
        .map(|page| page.jobs.len())
        .unwrap_or(0)
}

#[test]
fn the_standby_takes_over_twice_under_load_and_no_acknowledged_job_is_lost_or_applied_twice() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let flags = coordinator_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut coordinators = [
        CoordinatorProcess::start("node-a", &pg.url(), dir.path(), &flags),
        CoordinatorProcess::start("node-b", &pg.url(), dir.path(), &flags),
    ];
    let clients = format!("{},{}", coordinators[0].client, coordinators[1].client);
    let workers_addrs = format!("{},{}", coordinators[0].worker, coordinators[1].worker);
    let mut leader = wait_for_leader(
        &[&coordinators[0], &coordinators[1]],
        Duration::from_secs(20),
    );
    let worker_logs: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("worker-{i}.log")))
        .collect();
    let mut workers: Vec<Child> = worker_logs
        .iter()
        .enumerate()
        .map(|(i, log)| start_worker(i, &workers_addrs, log))
        .collect();

    let mut rng = XorShift::seeded("failover", "TASKYARD_FAILOVER_SEED");
    let per_thread = JOBS / THREADS;
    let submitters: Vec<_> = (0..THREADS)
        .map(|t| {
            let (addrs, rng) = (clients.clone(), XorShift::new(rng.below(u64::MAX) | 1));
            std::thread::spawn(move || {
                submit_range(&addrs, t * per_thread..(t + 1) * per_thread, rng)
            })
        })
        .collect();

    let mut observer = connect_within(&clients, Duration::from_secs(30));
    let (mut takeovers, mut running_at_kills) = (Vec::new(), 0);
    for _ in 0..KILLS {
        std::thread::sleep(Duration::from_millis(1500 + rng.below(1500)));
        let leader_client = coordinators[leader].client.to_string();
        running_at_kills +=
            running_now(&mut connect_within(&leader_client, Duration::from_secs(30)));
        let killed = Instant::now();
        coordinators[leader].kill_9();
        let standby = 1 - leader;
        let deadline = Duration::from_millis(LEASE_MILLIS + 10_000);
        while !coordinators[standby].is_ready() {
            assert!(
                killed.elapsed() < deadline,
                "standby did not take over within {deadline:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        takeovers.push(killed.elapsed());
        coordinators[leader].spawn();
        leader = standby;
    }
    let acknowledged: Vec<JobId> = submitters
        .into_iter()
        .flat_map(|s| s.join().expect("submitter"))
        .collect();
    let wanted: HashSet<JobId> = acknowledged.iter().copied().collect();
    common::wait_until(
        "every acknowledged job to finish",
        Duration::from_secs(120),
        || {
            wanted.iter().all(|id| match observer.status(*id) {
                Ok(Some(view)) => view.state.is_terminal(),
                Ok(None) => false,
                Err(_) => {
                    observer = connect_within(&clients, Duration::from_secs(30));
                    false
                }
            })
        },
    );
    let mut applied_twice = Vec::new();
    for id in &acknowledged {
        let view = observer
            .status(*id)
            .expect("status")
            .expect("acknowledged job exists");
        assert_eq!(
            view.state,
            JobState::Succeeded,
            "job {id}: {:?}",
            view.error
        );
        let successes = view
            .history
            .iter()
            .filter(|a| matches!(a.outcome, Some(AttemptOutcome::Succeeded)))
            .count();
        if successes != 1 {
            applied_twice.push((*id, successes));
        }
    }
    for worker in &mut workers {
        let _ = Command::new("kill")
            .args(["-TERM", &worker.id().to_string()])
            .status();
        let _ = worker.wait();
    }
    let runs = common::processes::executions(&worker_logs);
    for (job, count) in &runs {
        assert!(*count <= MAX_ATTEMPTS, "job {job} ran {count} times");
    }
    let duplicates: u32 = runs.values().map(|c| c.saturating_sub(1)).sum();
    println!(
        "acknowledged {}, takeovers {:?} (lease {LEASE_MILLIS} ms), duplicate executions {duplicates}, \
         running at the kills (a plain requeue would run these again) {running_at_kills}",
        acknowledged.len(),
        takeovers
    );
    assert_eq!(acknowledged.len(), JOBS);
    assert!(
        applied_twice.is_empty(),
        "jobs with other than one applied result: {applied_twice:?}"
    );
    for t in &takeovers {
        assert!(
            *t < Duration::from_millis(LEASE_MILLIS + 5_000),
            "takeover took {t:?}"
        );
    }
    assert!(
        (duplicates as usize) < running_at_kills.max(1),
        "{duplicates} duplicate executions, not fewer than the {running_at_kills} a plain requeue would cause"
    );
}
