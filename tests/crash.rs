//! Crash recovery with real processes: the built coordinator is killed with
//! SIGKILL three times while three worker processes run 2,000 sleep jobs.
//! No acknowledged job may be lost, each succeeded job has exactly one
//! applied result, and no job may run more often than its attempt budget
//! allows. The workers outlive each crash and keep running their tasks;
//! the restarted coordinator re-attaches the ones they claim when they
//! register again and requeues only those nobody claims.

mod common;

use common::jobs::{connect_within, submit_keyed_until_answered};
use common::rng::XorShift;
use common::{db, wait_until};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use taskyard::client::Client;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::{JobId, JobSummary, SubmitRequest, MAX_LIST_JOBS};

const JOBS: usize = 2000;
const BATCH: usize = 50;
const KILLS: usize = 3;
const MAX_ATTEMPTS: u32 = 3;

struct Ports {
    client: SocketAddr,
    worker: SocketAddr,
}

fn start_coordinator(db: &Path, ports: &Ports, log: &Path) -> Child {
    let stderr = common::processes::append_log(log);
    Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
        .arg("--db-path")
        .arg(db)
        .args(["--client-listen", &ports.client.to_string()])
        .args(["--worker-listen", &ports.worker.to_string()])
        .arg("--http-listen=127.0.0.1:0")
        .args([
            "--sweep-interval-millis",
            "50",
            "--heartbeat-timeout-millis",
            "1000",
        ])
        .args(["--retry-base-millis", "20", "--retry-cap-millis", "200"])
        .args(["--default-max-attempts", &MAX_ATTEMPTS.to_string()])
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start coordinator")
}

fn start_worker(i: usize, ports: &Ports, log: &Path) -> Child {
    let stderr = std::fs::File::create(log).expect("worker log");
    Command::new(env!("CARGO_BIN_EXE_taskyard-worker"))
        .args(["--coordinator", &ports.worker.to_string()])
        .args([
            "--worker-id",
            &format!("crash-worker-{i}"),
            "--capacity",
            "4",
        ])
        .args([
            "--heartbeat-interval-millis",
            "200",
            "--reconnect-max-millis",
            "100",
        ])
        .args(["--log-level", "debug", "--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start worker")
}

/// Submits every job in batches with idempotency keys, retrying a batch
/// whose answer was lost to a crash (the keys make the retry harmless).
/// Returns the acknowledged ids.
/// Every job's summary, page after page.
fn every_job(client: &mut Client) -> Result<Vec<JobSummary>, taskyard::client::ClientError> {
    let mut jobs = Vec::new();
    let mut cursor = None;
    loop {
        let page = client.list_from(None, None, MAX_LIST_JOBS, cursor)?;
        jobs.extend(page.jobs);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(jobs),
        }
    }
}

fn submit_all(addr: &str, mut rng: XorShift) -> Vec<JobId> {
    let mut acknowledged = Vec::with_capacity(JOBS);
    let mut client = connect_within(addr, Duration::from_secs(20));
    for start in (0..JOBS).step_by(BATCH) {
        let batch: Vec<SubmitRequest> = (start..start + BATCH)
            .map(|i| SubmitRequest {
                idempotency_key: Some(format!("crash-{i}")),
                ..SubmitRequest::new(
                    "sleep",
                    encode_json(&json!({ "millis": 1 + rng.below(20) })),
                )
            })
            .collect();
        acknowledged.extend(submit_keyed_until_answered(&mut client, addr, batch));
    }
    acknowledged
}

/// Applied results per job: attempts stored as succeeded, earlier ones
/// in `attempts` and the last one in the job's own row.
fn applied_results(db: &Path) -> HashMap<String, u32> {
    let sql = "SELECT id, COUNT(*) FROM (
                 SELECT job_id AS id, outcome FROM attempts
                 UNION ALL SELECT id, last_attempt_outcome FROM jobs)
               WHERE json_extract(outcome, '$.kind') = 'succeeded' GROUP BY id";
    db::rows(db, sql, |r| Ok((r.get(0)?, r.get(1)?)))
        .into_iter()
        .collect()
}

fn stored_jobs(db: &Path) -> HashMap<String, (String, Option<String>)> {
    let sql = "SELECT id, state, error FROM jobs";
    db::rows(db, sql, |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .into_iter()
        .collect()
}

#[test]
fn kill_9_three_times_loses_no_acknowledged_job_and_never_exceeds_the_budget() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("crash.db");
    let coordinator_log = dir.path().join("coordinator.log");
    let ports = Ports {
        client: common::free_port(),
        worker: common::free_port(),
    };
    // The seed is printed; TASKYARD_CRASH_SEED replays a failing run.
    let mut rng = XorShift::seeded("crash", "TASKYARD_CRASH_SEED");
    let submit_rng = rng.clone();
    let mut coordinator = start_coordinator(&db, &ports, &coordinator_log);
    let worker_logs: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("worker-{i}.log")))
        .collect();
    let mut workers: Vec<Child> = worker_logs
        .iter()
        .enumerate()
        .map(|(i, log)| start_worker(i, &ports, log))
        .collect();

    let addr = ports.client.to_string();
    let submitter = std::thread::spawn({
        let addr = addr.clone();
        move || submit_all(&addr, submit_rng)
    });
    for _ in 0..KILLS {
        std::thread::sleep(Duration::from_millis(150 + rng.below(500)));
        coordinator.kill().expect("kill -9");
        coordinator.wait().expect("reap");
        coordinator = start_coordinator(&db, &ports, &coordinator_log);
    }
    let acknowledged = submitter.join().expect("submitter");

    let mut client = connect_within(&addr, Duration::from_secs(20));
    let wanted: HashSet<JobId> = acknowledged.iter().copied().collect();
    wait_until(
        "every acknowledged job to be terminal",
        Duration::from_secs(90),
        || {
            // One answer lists at most 500 jobs: page through all of them.
            let jobs = match every_job(&mut client) {
                Ok(jobs) => jobs,
                Err(_) => {
                    client = connect_within(&addr, Duration::from_secs(20));
                    return false;
                }
            };
            let terminal = jobs
                .iter()
                .filter(|j| wanted.contains(&j.job_id) && j.state.is_terminal())
                .count();
            terminal == wanted.len()
        },
    );
    for worker in &mut workers {
        let _ = Command::new("kill")
            .args(["-TERM", &worker.id().to_string()])
            .status();
        worker.wait().expect("worker exits");
    }
    let _ = Command::new("kill")
        .args(["-TERM", &coordinator.id().to_string()])
        .status();
    coordinator.wait().expect("coordinator exits");

    let stored = stored_jobs(&db);
    let applied = applied_results(&db);
    let runs = common::processes::executions(&worker_logs);
    let (mut succeeded, mut failed) = (0, 0);
    for id in &acknowledged {
        let (state, error) = stored
            .get(&id.to_string())
            .unwrap_or_else(|| panic!("acknowledged job {id} missing from the database"));
        let results = applied.get(&id.to_string()).copied().unwrap_or(0);
        match state.as_str() {
            "SUCCEEDED" => {
                assert_eq!(results, 1, "job {id}: one applied result");
                succeeded += 1
            }
            "FAILED" => {
                assert_eq!(results, 0, "job {id}: no applied result");
                assert_eq!(
                    error.as_deref(),
                    Some("restarted during final attempt"),
                    "job {id}"
                );
                failed += 1;
            }
            other => panic!("job {id} ended {other}"),
        }
    }
    for (job, count) in &runs {
        assert!(*count <= MAX_ATTEMPTS, "job {job} ran {count} times");
    }
    let total_runs: u32 = runs.values().sum();
    println!(
        "acknowledged {}, succeeded {succeeded}, failed {failed}, executions {total_runs}, \
         jobs executed more than once {}, {:.1} s",
        acknowledged.len(),
        runs.values().filter(|c| **c > 1).count(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(acknowledged.len(), JOBS);
    assert_eq!(succeeded + failed, JOBS);
}
