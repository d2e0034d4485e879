//! Scheduling safety over real TCP: every job is assigned exactly once and
//! has exactly one result applied, seen from both sides — what each worker
//! was given, and what the coordinator stored.

mod common;

use common::*;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taskyard::client::Client;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::*;
use taskyard::worker::{TaskContext, TaskRegistry, WorkerHandle};

/// What workers did with the `record` task, shared by every worker.
#[derive(Default)]
struct Recorder {
    /// Every TaskAssign a worker acted on: (worker, job, lease).
    given: Mutex<Vec<(String, JobId, LeaseId)>>,
    /// Every attempt that completed and sent its result: (job, lease).
    finished: Mutex<Vec<(JobId, LeaseId)>>,
    /// While set, workers built with `holds` keep new attempts running forever.
    hold: AtomicBool,
    held: AtomicUsize,
}

impl Recorder {
    fn given(&self) -> Vec<(String, JobId, LeaseId)> {
        self.given.lock().expect("recorder lock").clone()
    }

    fn finished(&self) -> Vec<(JobId, LeaseId)> {
        self.finished.lock().expect("recorder lock").clone()
    }
}

/// A registry with one task type, `record`: it notes the attempt, runs for
/// `run_for` and succeeds with the attempt's lease as its result, so the
/// coordinator's stored result names the attempt that was applied.
fn recording_registry(
    worker: &str,
    recorder: &Arc<Recorder>,
    run_for: Duration,
    holds: bool,
) -> TaskRegistry {
    let (worker, recorder) = (worker.to_string(), Arc::clone(recorder));
    let mut registry = TaskRegistry::empty();
    let handler = move |ctx: TaskContext, _payload: Vec<u8>| {
        let (worker, recorder) = (worker.clone(), Arc::clone(&recorder));
        async move {
            let attempt = (worker, ctx.job_id, ctx.lease);
            recorder.given.lock().expect("recorder lock").push(attempt);
            if holds && recorder.hold.load(Ordering::SeqCst) {
                recorder.held.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(run_for).await;
            let done = (ctx.job_id, ctx.lease);
            recorder.finished.lock().expect("recorder lock").push(done);
            TaskOutcome::Succeeded(ctx.lease.to_string().into_bytes())
        }
    };
    registry
        .register("record", handler)
        .expect("valid task type");
    registry
}

fn record_job() -> SubmitRequest {
    SubmitRequest {
        max_attempts: Some(3),
        ..SubmitRequest::new("record", encode_json(&json!({})))
    }
}

fn accepted(answer: &SubmitAnswer) -> JobId {
    match answer {
        SubmitAnswer::Accepted { job_id, .. } => *job_id,
        SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
    }
}

fn add_recording_worker(cluster: &mut Cluster, name: &str, registry: TaskRegistry) {
    let config = worker_config(cluster.coordinator().worker_addr, name, 4);
    let worker = WorkerHandle::spawn_with_registry(config, registry, quiet_log());
    cluster.workers.push(worker);
}

/// Submits `per_thread` jobs from each of `threads` client threads, in
/// batches of `batch` (1: one `Submit` each); the accepted ids.
fn submit_from_threads(addr: &str, threads: usize, per_thread: usize, batch: usize) -> Vec<JobId> {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                let mut client = Client::connect(&addr).expect("connect");
                let mut ids = Vec::new();
                for _ in 0..per_thread / batch {
                    let answers = if batch == 1 {
                        vec![client.submit(record_job()).expect("submit")]
                    } else {
                        let reqs = (0..batch).map(|_| record_job()).collect();
                        client.submit_batch(reqs).expect("submit batch")
                    };
                    ids.extend(answers.iter().map(accepted));
                }
                ids
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().expect("submitting thread"))
        .collect()
}

/// Waits until no job is QUEUED, RUNNING or in RETRY_WAIT.
fn wait_until_all_terminal(client: &mut Client, timeout: Duration) {
    let pending = [JobState::Queued, JobState::Running, JobState::RetryWait];
    wait_until("every job terminal", timeout, || {
        pending
            .iter()
            .all(|s| client.list(Some(*s), 1).is_ok_and(|jobs| jobs.is_empty()))
    });
}

fn per_job<T>(items: impl IntoIterator<Item = (JobId, T)>) -> HashMap<JobId, Vec<T>> {
    let mut map: HashMap<JobId, Vec<T>> = HashMap::new();
    for (job, item) in items {
        map.entry(job).or_default().push(item);
    }
    map
}

#[test]
fn sixty_jobs_from_four_threads_at_five_workers_are_each_assigned_once() {
    let recorder = Arc::new(Recorder::default());
    let mut cluster = Cluster::start_configured(|_| {});
    for i in 0..5 {
        let name = format!("worker-{i}");
        let registry = recording_registry(&name, &recorder, Duration::from_millis(2), false);
        add_recording_worker(&mut cluster, &name, registry);
    }
    cluster.wait_for_workers(5);

    let submitted = submit_from_threads(&cluster.client_addr(), 4, 15, 1);
    assert_eq!(submitted.len(), 60);
    let mut client = cluster.client();
    wait_until_all_terminal(&mut client, Duration::from_secs(20));

    let given = per_job(recorder.given().into_iter().map(|g| (g.1, g.2)));
    let jobs = client.list(None, 100).expect("list");
    assert_eq!(jobs.len(), 60);
    for job in &jobs {
        assert!(submitted.contains(&job.job_id));
        let leases = &given[&job.job_id];
        assert_eq!(leases.len(), 1, "{} given {leases:?}", job.job_id);
        assert_eq!(job.state, JobState::Succeeded, "{job:?}");
        assert_eq!(job.attempts, 1, "{job:?}");
        let result = client.result(job.job_id).expect("result");
        assert_eq!(result, leases[0].to_string().into_bytes());
    }
    assert_eq!(given.len(), 60, "no job the client did not submit");
}

/// Each stored job as (state, attempts, result), read from the database.
fn stored_jobs(db: &std::path::Path) -> HashMap<JobId, (String, u32, Option<Vec<u8>>)> {
    let sql = "SELECT id, state, attempts, result FROM jobs";
    let rows = db::rows(db, sql, |r| {
        let id: String = r.get(0)?;
        Ok((id, (r.get(1)?, r.get(2)?, r.get(3)?)))
    });
    rows.into_iter()
        .map(|(id, stored)| (JobId(id.parse().expect("uuid")), stored))
        .collect()
}

/// Worker `worker-3` is made to hold its next four attempts, then stopped
/// and replaced midway. Exactly those four jobs run twice; every job still
/// has exactly one result sent and applied, and the applied one is the
/// attempt that finished.
#[test]
fn five_thousand_jobs_with_a_worker_replaced_midway_are_applied_once_each() {
    let started = Instant::now();
    let recorder = Arc::new(Recorder::default());
    let mut cluster = Cluster::start_configured(|c| c.retry_base_millis = 20);
    for i in 0..10 {
        let name = format!("worker-{i}");
        let registry = recording_registry(&name, &recorder, Duration::ZERO, i == 3);
        add_recording_worker(&mut cluster, &name, registry);
    }
    cluster.wait_for_workers(10);

    let addr = cluster.client_addr();
    let submitting = std::thread::spawn(move || submit_from_threads(&addr, 8, 625, 125));
    wait_until("half the jobs given", Duration::from_secs(30), || {
        recorder.given().len() >= 2500
    });
    recorder.hold.store(true, Ordering::SeqCst);
    wait_until("worker-3 holding 4", Duration::from_secs(10), || {
        recorder.held.load(Ordering::SeqCst) == 4
    });
    let dropped = cluster.workers.remove(3);
    assert_eq!(dropped.worker_id().0, "worker-3");
    dropped.stop();
    let registry = recording_registry("worker-10", &recorder, Duration::ZERO, false);
    add_recording_worker(&mut cluster, "worker-10", registry);

    let submitted = submitting.join().expect("submitting threads");
    assert_eq!(submitted.len(), 5000);
    wait_until_all_terminal(&mut cluster.client(), Duration::from_secs(30));
    let db = cluster.db_path();
    cluster.stop();
    let stored = stored_jobs(&db);

    let given = per_job(recorder.given().into_iter().map(|g| (g.1, (g.0, g.2))));
    let finished = per_job(recorder.finished());
    assert_eq!(stored.len(), 5000);
    let mut run_twice = 0;
    for id in &submitted {
        let (state, attempts, result) = &stored[id];
        let (given, finished) = (&given[id], &finished[id]);
        assert_eq!(state, "SUCCEEDED", "{id}");
        assert_eq!(given.len(), *attempts as usize, "{id}: {given:?}");
        assert_eq!(finished.len(), 1, "{id}: one result sent: {finished:?}");
        assert_eq!(result, &Some(finished[0].to_string().into_bytes()), "{id}");
        if *attempts == 2 {
            assert_eq!(given[0].0, "worker-3", "{id}: only held jobs rerun");
            run_twice += 1;
        }
    }
    assert_eq!(run_twice, 4, "exactly the four held jobs ran twice");
    eprintln!("5000 jobs in {:?}", started.elapsed());
}
