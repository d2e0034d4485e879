//! Retention against a real database: finished jobs leave memory once
//! durable, and `status`, `result`, `cancel`, `list` and idempotent
//! resubmission still answer from the database. The coordinator runs in
//! this test's actix system with a manual clock; requests go to it as
//! messages, answers are recorded.

mod common;

use actix::prelude::*;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taskyard::actors::coordinator::*;
use taskyard::actors::outbox::{ClientAnswer, SendToWorker};
use taskyard::clock::ManualClock;
use taskyard::config::CoordinatorConfig;
use taskyard::process::CoordinatorServer;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::*;
use taskyard::scheduler::SessionId;

const WEEK_MS: i64 = 7 * 24 * 60 * 60 * 1000;

#[derive(Default, Clone)]
struct Recorder {
    frames: Arc<Mutex<Vec<CoordinatorToWorker>>>,
    answers: Arc<Mutex<Vec<ClientAnswer>>>,
}

impl Actor for Recorder {
    type Context = Context<Self>;
}

impl Handler<SendToWorker> for Recorder {
    type Result = ();
    fn handle(&mut self, m: SendToWorker, _: &mut Context<Self>) {
        self.frames.lock().expect("lock").push(m.frame);
    }
}

impl Handler<ClientAnswer> for Recorder {
    type Result = ();
    fn handle(&mut self, m: ClientAnswer, _: &mut Context<Self>) {
        self.answers.lock().expect("lock").push(m);
    }
}

/// A started coordinator and a recorder standing in for a client and a
/// worker session.
struct Node {
    server: CoordinatorServer,
    clock: ManualClock,
    recorder: Recorder,
    addr: Addr<Recorder>,
    next_request: u64,
}

fn config(dir: &std::path::Path, keep: usize) -> CoordinatorConfig {
    CoordinatorConfig {
        http_listen: String::new(),
        sqlite_preallocate_wal: false,
        sweep_interval_millis: 3_600_000,
        retain_finished_in_memory: keep,
        ..common::coordinator_config(dir)
    }
}

impl Node {
    async fn start(config: &CoordinatorConfig, clock: ManualClock) -> Node {
        let server = CoordinatorServer::start(config, Arc::new(clock.clone()), common::quiet_log())
            .await
            .expect("coordinator starts");
        let recorder = Recorder::default();
        let addr = recorder.clone().start();
        Node {
            server,
            clock,
            recorder,
            addr,
            next_request: 1,
        }
    }

    /// Sends `request` and waits for its answer.
    async fn ask(&mut self, request: ClientRequest) -> ClientResponse {
        let request_id = self.next_request;
        self.next_request += 1;
        self.server.coordinator.do_send(ClientCommand {
            reply_to: self.addr.clone().recipient(),
            request_id,
            request,
            peer: None,
        });
        let answers = self.recorder.answers.clone();
        let found = wait_for("an answer", || {
            let answers = answers.lock().expect("lock");
            answers
                .iter()
                .find(|a| a.request_id == request_id)
                .map(|a| a.response.clone())
        })
        .await;
        found
    }

    async fn submit(&mut self, key: Option<&str>) -> JobId {
        let mut req = SubmitRequest::new("echo", encode_json(&json!({ "message": "hi" })));
        req.idempotency_key = key.map(str::to_string);
        match self.ask(ClientRequest::Submit(req)).await {
            ClientResponse::Submitted(SubmitAnswer::Accepted { job_id, .. }) => job_id,
            other => panic!("not accepted: {other:?}"),
        }
    }

    /// Runs one job to success through a stand-in worker.
    async fn run_to_success(&mut self, result: &[u8]) -> JobId {
        self.run_to(TaskOutcome::Succeeded(result.to_vec()), JobState::Succeeded)
            .await
    }

    /// Runs one job to its end through a stand-in worker.
    async fn run_to(&mut self, outcome: TaskOutcome, ends: JobState) -> JobId {
        self.server.coordinator.do_send(RegisterWorker {
            session: SessionId(1),
            reply_to: self.addr.clone().recipient(),
            worker_id: WorkerId("w".into()),
            capacity: 1,
            task_types: vec!["echo".into()],
            running: Vec::new(),
        });
        let job = self.submit(None).await;
        let (_, lease) = self.latest_assignment(|id| id == job).await;
        self.report(job, lease, outcome);
        let status = self.status(job).await;
        assert_eq!(status.map(|v| v.state), Some(ends));
        job
    }

    /// The newest assignment to the stand-in worker of a job `wanted`
    /// accepts, once there is one.
    async fn latest_assignment(&self, wanted: impl Fn(JobId) -> bool) -> (JobId, LeaseId) {
        let frames = self.recorder.frames.clone();
        wait_for("the assignment", || {
            let frames = frames.lock().expect("lock");
            frames.iter().rev().find_map(|f| match f {
                CoordinatorToWorker::TaskAssign { job_id, lease, .. } if wanted(*job_id) => {
                    Some((*job_id, *lease))
                }
                _ => None,
            })
        })
        .await
    }

    /// The stand-in worker reports `outcome` for the attempt `lease`.
    fn report(&self, job_id: JobId, lease: LeaseId, outcome: TaskOutcome) {
        self.server.coordinator.do_send(WorkerTaskResult {
            session: SessionId(1),
            worker_id: WorkerId("w".into()),
            job_id,
            lease,
            outcome,
        });
    }

    async fn status(&mut self, job_id: JobId) -> Option<JobView> {
        match self.ask(ClientRequest::Status { job_id }).await {
            ClientResponse::Job(view) => Some(*view),
            ClientResponse::NotFound { .. } => None,
            other => panic!("unexpected answer: {other:?}"),
        }
    }

    async fn list(&mut self, state: Option<JobState>) -> JobList {
        let request = ClientRequest::List {
            state,
            limit: 100,
            task_type: None,
            cursor: None,
        };
        match self.ask(request).await {
            ClientResponse::Jobs(list) => list,
            other => panic!("unexpected answer: {other:?}"),
        }
    }

    async fn inspect(&self) -> Inspection {
        self.server
            .coordinator
            .send(Inspect)
            .await
            .expect("answered")
            .expect("invariants hold")
    }

    /// Sweeps until memory holds at most `finished` finished jobs (their
    /// rows must be committed first).
    async fn sweep_until_at_most(&self, finished: usize) -> Inspection {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.server.coordinator.send(Sweep).await.expect("swept");
            let seen = self.inspect().await;
            if seen.finished_in_memory <= finished {
                return seen;
            }
            assert!(Instant::now() < deadline, "still {seen:?}");
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

async fn wait_for<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        actix_rt::time::sleep(Duration::from_millis(2)).await;
    }
}

fn count(list: &JobList, state: JobState) -> u64 {
    list.counts
        .iter()
        .find(|c| c.state == state)
        .map_or(0, |c| c.count)
}

#[actix_rt::test]
async fn memory_holds_at_most_the_configured_finished_window() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut node = Node::start(&config(dir.path(), 3), ManualClock::starting_at(1_000)).await;
    for _ in 0..40 {
        let job = node.submit(None).await;
        node.ask(ClientRequest::Cancel { job_id: job }).await;
    }
    let active = node.submit(None).await;
    let seen = node.sweep_until_at_most(3).await;
    assert_eq!(seen.finished_in_memory, 3);
    assert_eq!(seen.jobs_in_memory, 4, "the window and the active job");
    assert_eq!(seen.active_jobs, 1);
    let list = node.list(None).await;
    assert_eq!(list.jobs.len(), 41, "listed from the database");
    assert_eq!(list.jobs[0].job_id, active, "newest first");
    assert_eq!(count(&list, JobState::Cancelled), 40);
    assert_eq!(count(&list, JobState::Queued), 1);
    let footer_only = ClientRequest::List {
        state: None,
        limit: 0,
        task_type: None,
        cursor: None,
    };
    let ClientResponse::Jobs(footer) = node.ask(footer_only).await else {
        panic!("not a list");
    };
    assert!(footer.jobs.is_empty());
    assert_eq!(
        footer.counts, list.counts,
        "answered from the counters alone"
    );
}

#[actix_rt::test]
async fn status_of_a_job_finished_a_week_ago_is_read_from_the_database() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut node = Node::start(&config(dir.path(), 10), ManualClock::starting_at(1_000)).await;
    let job = node.run_to_success(b"forty-two").await;
    node.clock.advance(WEEK_MS - 1);
    let seen = node.sweep_until_at_most(0).await;
    assert_eq!(seen.jobs_in_memory, 0, "evicted by age");
    let view = node.status(job).await.expect("found in the database");
    assert_eq!(view.state, JobState::Succeeded);
    assert_eq!(
        view.result.as_deref(),
        Some(&b"forty-two"[..]),
        "its result"
    );
    assert_eq!(view.history.len(), 1, "its attempt history");
    assert_eq!(
        view.history[0].outcome,
        Some(AttemptOutcome::Succeeded),
        "{view:?}"
    );
    let refused = node.ask(ClientRequest::Cancel { job_id: job }).await;
    assert_eq!(
        refused,
        ClientResponse::CancelRefused {
            job_id: job,
            state: JobState::Succeeded
        }
    );
    let unknown = JobId::mint();
    assert_eq!(node.status(unknown).await, None);
    let succeeded = node.list(Some(JobState::Succeeded)).await;
    assert_eq!(succeeded.jobs.len(), 1);
    assert_eq!(
        succeeded.jobs[0].result_bytes,
        Some(9),
        "a list shows the size"
    );
    // Chunks of a job only the database holds are read by the history pool.
    let read = |offset, max_bytes| ClientRequest::ReadChunk {
        job_id: job,
        field: ByteField::Result,
        offset,
        max_bytes,
    };
    let ClientResponse::Chunk(chunk) = node.ask(read(5, 100)).await else {
        panic!("a chunk of the stored result");
    };
    assert_eq!((chunk.bytes.as_slice(), chunk.total), (&b"-two"[..], 9));
    match node.ask(read(10, 100)).await {
        ClientResponse::ChunkRefused { job_id, reason } => {
            assert_eq!(job_id, job);
            assert!(reason.contains("offset 10 is past the end"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(node.inspect().await.jobs_in_memory, 0, "still only stored");
}

#[actix_rt::test]
async fn the_idempotency_key_of_an_evicted_job_still_dedupes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut node = Node::start(&config(dir.path(), 0), ManualClock::starting_at(1_000)).await;
    let first = node.submit(Some("nightly")).await;
    node.ask(ClientRequest::Cancel { job_id: first }).await;
    node.sweep_until_at_most(0).await;
    assert_eq!(node.inspect().await.jobs_in_memory, 0);
    assert_eq!(node.submit(Some("nightly")).await, first);
    assert_eq!(node.inspect().await.jobs_in_memory, 0, "nothing created");
}

/// Phase one of a restart: `cancelled` jobs finished (the first with an
/// idempotency key) and one left QUEUED, through a real coordinator that
/// is then stopped.
fn stock_and_stop(dir: &std::path::Path, cancelled: usize) -> (JobId, JobId) {
    let coordinator = common::start_coordinator(config(dir, 10_000));
    let mut client = taskyard::client::Client::connect(&coordinator.client_addr.to_string())
        .expect("client connects");
    let mut keyed = None;
    for n in 0..cancelled {
        let mut req = SubmitRequest::new("echo", encode_json(&json!({ "message": "hi" })));
        req.idempotency_key = (n == 0).then(|| "first".to_string());
        let Ok(SubmitAnswer::Accepted { job_id, .. }) = client.submit(req) else {
            panic!("not accepted");
        };
        client.cancel(job_id).expect("cancelled");
        keyed.get_or_insert(job_id);
    }
    let req = SubmitRequest::new("echo", encode_json(&json!({ "message": "hi" })));
    let Ok(SubmitAnswer::Accepted { job_id: queued, .. }) = client.submit(req) else {
        panic!("not accepted");
    };
    assert_eq!(
        coordinator.stop(),
        taskyard::process::StopOutcome::Durable,
        "stopped cleanly"
    );
    (keyed.expect("one job"), queued)
}

#[test]
fn after_a_restart_only_the_active_set_and_the_window_are_loaded_and_footers_stay_right() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (keyed, queued) = stock_and_stop(dir.path(), 30);
    actix::System::new().block_on(async {
        let mut node = Node::start(&config(dir.path(), 4), ManualClock::starting_at(1_000)).await;
        let recovery = node.server.recovery;
        assert_eq!((recovery.loaded, recovery.stored), (5, 31), "{recovery:?}");
        let seen = node.inspect().await;
        assert_eq!((seen.jobs_in_memory, seen.finished_in_memory), (5, 4));
        let list = node.list(None).await;
        assert_eq!(count(&list, JobState::Cancelled), 30);
        assert_eq!(count(&list, JobState::Queued), 1);
        assert_eq!(list.jobs.len(), 31);
        assert_eq!(list.jobs[0].job_id, queued);
        let first = node.status(keyed).await.expect("read from the database");
        assert_eq!(first.state, JobState::Cancelled);
        assert_eq!(
            node.submit(Some("first")).await,
            keyed,
            "its key still dedupes"
        );
        let newest = node.submit(None).await;
        let list = node.list(None).await;
        assert_eq!(
            list.jobs[0].job_id, newest,
            "new jobs sort after stored ones"
        );
    });
}

#[actix_rt::test]
async fn expired_jobs_are_deleted_in_batches_and_their_status_says_not_found() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = CoordinatorConfig {
        expiry_batch_rows: 4,
        expiry_interval_millis: 10,
        ..config(dir.path(), 100)
    };
    let mut node = Node::start(&config, ManualClock::starting_at(1_000)).await;
    let keyed = node.submit(Some("weekly")).await;
    node.ask(ClientRequest::Cancel { job_id: keyed }).await;
    for _ in 0..9 {
        let job = node.submit(None).await;
        node.ask(ClientRequest::Cancel { job_id: job }).await;
    }
    let active = node.submit(None).await;
    node.clock.advance(WEEK_MS - 1);
    node.server.coordinator.send(Sweep).await.expect("swept");
    assert!(node.status(keyed).await.is_some(), "not expired yet");
    node.clock.advance(10);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        node.server.coordinator.send(Sweep).await.expect("swept");
        if count(&node.list(None).await, JobState::Cancelled) == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "jobs never expired");
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
    let list = node.list(None).await;
    assert_eq!(list.jobs.len(), 1, "only the active job is left");
    assert_eq!(list.jobs[0].job_id, active);
    assert_eq!(node.status(keyed).await, None, "expired: not found");
    let seen = node.inspect().await;
    assert_eq!(seen.jobs_in_memory, 1);
    let again = node.submit(Some("weekly")).await;
    assert_ne!(again, keyed, "the key expired with its job");
}

#[actix_rt::test]
async fn an_evicted_cancelled_job_can_be_requeued() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut node = Node::start(&config(dir.path(), 0), ManualClock::starting_at(1_000)).await;
    let job = node.submit(None).await;
    node.ask(ClientRequest::Cancel { job_id: job }).await;
    node.sweep_until_at_most(0).await;
    assert_eq!(node.inspect().await.jobs_in_memory, 0);
    let requeued = node.ask(ClientRequest::Requeue { job_id: job }).await;
    assert_eq!(
        requeued,
        ClientResponse::Requeued {
            job_ids: vec![job],
            refused: None
        }
    );
    let again = node.ask(ClientRequest::Requeue { job_id: job }).await;
    assert!(
        matches!(again, ClientResponse::RequeueRefused { .. }),
        "{again:?}"
    );
    let seen = node.inspect().await;
    assert_eq!((seen.jobs_in_memory, seen.active_jobs), (1, 1));
    assert_eq!(
        node.status(job).await.map(|v| v.state),
        Some(JobState::Queued)
    );
    let list = node.list(None).await;
    assert_eq!(count(&list, JobState::Cancelled), 0);
    assert_eq!(count(&list, JobState::Queued), 1);
}

#[actix_rt::test]
async fn retry_of_every_failed_job_includes_those_only_the_database_holds() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut node = Node::start(&config(dir.path(), 1), ManualClock::starting_at(1_000)).await;
    let permanent = || TaskOutcome::Failed {
        error: "bad input".into(),
        retryable: false,
    };
    let mut failed = Vec::new();
    for _ in 0..3 {
        failed.push(node.run_to(permanent(), JobState::Failed).await);
    }
    node.sweep_until_at_most(1).await;
    assert_eq!(
        node.inspect().await.jobs_in_memory,
        1,
        "two failed jobs evicted"
    );
    let request = ClientRequest::RequeueFailed {
        task_type: None,
        failed_before: None,
        state: None,
    };
    let ClientResponse::Requeued {
        mut job_ids,
        refused,
    } = node.ask(request).await
    else {
        panic!("not requeued");
    };
    assert_eq!(refused, None);
    job_ids.sort();
    failed.sort();
    assert_eq!(job_ids, failed, "every failed job, evicted or not");
    let list = node.list(None).await;
    assert_eq!(count(&list, JobState::Failed), 0);
    let active = count(&list, JobState::Queued) + count(&list, JobState::Running);
    assert_eq!(active, 3, "queued again (the stand-in worker may run one)");
    let again = node
        .ask(ClientRequest::RequeueFailed {
            task_type: None,
            failed_before: None,
            state: None,
        })
        .await;
    assert_eq!(
        again,
        ClientResponse::Requeued {
            job_ids: vec![],
            refused: None
        },
        "nothing is requeued twice"
    );

    // The stand-in worker runs one of them; it fails again, later.
    node.clock.advance(1_000);
    let (job, lease) = node.latest_assignment(|id| failed.contains(&id)).await;
    node.report(job, lease, permanent());
    let failed_again = node.status(job).await.map(|v| v.state);
    assert_eq!(failed_again, Some(JobState::Failed));
    let before_it = ClientRequest::RequeueFailed {
        task_type: None,
        failed_before: Some(1_500),
        state: None,
    };
    let ClientResponse::Requeued { job_ids, .. } = node.ask(before_it).await else {
        panic!("not requeued");
    };
    assert_eq!(job_ids, vec![], "failed after the bound: left alone");
    let any_time = ClientRequest::RequeueFailed {
        task_type: None,
        failed_before: None,
        state: None,
    };
    let ClientResponse::Requeued { job_ids, .. } = node.ask(any_time).await else {
        panic!("not requeued");
    };
    assert_eq!(job_ids, vec![job]);
}

#[actix_rt::test]
async fn evicted_jobs_are_resolved_retried_and_deleted_from_the_database() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut node = Node::start(&config(dir.path(), 0), ManualClock::starting_at(1_000)).await;
    let (first, second) = (node.submit(Some("k1")).await, node.submit(None).await);
    for job_id in [first, second] {
        node.ask(ClientRequest::Cancel { job_id }).await;
    }
    node.sweep_until_at_most(0).await;
    assert_eq!(node.inspect().await.jobs_in_memory, 0);

    let text = first.to_string();
    let prefix = IdPrefix::parse(&text[..30]).expect("prefix");
    let resolved = node.ask(ClientRequest::Resolve { prefix }).await;
    assert_eq!(resolved, ClientResponse::Resolved { job_id: first });
    let shared = IdPrefix::parse(&text[..4]).expect("prefix");
    let ClientResponse::Ambiguous { candidates, .. } =
        node.ask(ClientRequest::Resolve { prefix: shared }).await
    else {
        panic!("two jobs share the first four digits");
    };
    assert_eq!(candidates, vec![second, first], "newest first");

    // Deleted from the database only: its count and its key go with it.
    let deleted = node
        .ask(ClientRequest::Delete {
            job_ids: vec![first],
        })
        .await;
    let ClientResponse::Bulk(answer) = deleted else {
        panic!("{deleted:?}");
    };
    assert_eq!((answer.done, answer.refused), (vec![first], vec![]));
    assert!(node.status(first).await.is_none(), "gone");
    assert_eq!(count(&node.list(None).await, JobState::Cancelled), 1);
    let reused = node.submit(Some("k1")).await;
    assert_ne!(reused, first, "the key left with its job");

    // Retried by id straight from the database.
    let retried = node
        .ask(ClientRequest::RequeueJobs {
            job_ids: vec![second, first],
        })
        .await;
    let ClientResponse::Bulk(answer) = retried else {
        panic!("{retried:?}");
    };
    assert_eq!(answer.done, vec![second]);
    assert_eq!(answer.refused.len(), 1);
    assert!(
        answer.refused[0].reason.starts_with("not found"),
        "{answer:?}"
    );
    assert_eq!(
        node.status(second).await.map(|v| v.state),
        Some(JobState::Queued)
    );
}

/// With no time budget, every page of history walks a bounded stretch:
/// a filter matching few jobs comes back in short pages, each with a
/// cursor, and paging on finds every match once, newest first.
#[actix_rt::test]
async fn a_sparse_filter_pages_through_history_in_bounded_stretches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = CoordinatorConfig {
        history_read_budget_millis: 0,
        history_read_rows: 100,
        ..config(dir.path(), 0)
    };
    let plan = taskyard::bench::seed::SeedPlan {
        finished: 1_000,
        active: 0,
        keyed: false,
        finished_from: 1_000,
        task_type: "echo".into(),
    };
    taskyard::bench::seed::seed(&cfg.db_path, &plan).expect("seed");
    common::db::open(&cfg.db_path)
        .execute(
            "UPDATE jobs SET task_type = 'rare' WHERE sequence % 37 = 0",
            [],
        )
        .expect("make some jobs rare");
    let expected: Vec<JobId> = common::db::rows(
        &cfg.db_path,
        "SELECT id FROM jobs WHERE task_type = 'rare' ORDER BY sequence DESC",
        |row| row.get::<_, String>(0),
    )
    .iter()
    .map(|id| id.parse().expect("job id"))
    .collect();
    let mut node = Node::start(&cfg, ManualClock::starting_at(1_000_000)).await;

    let (mut found, mut short_pages, mut cursor) = (Vec::new(), 0, None);
    for _ in 0..100 {
        let request = ClientRequest::ListJobs(ListQuery {
            task_type: Some("rare".into()),
            limit: 5,
            cursor,
            ..ListQuery::default()
        });
        let ClientResponse::Jobs(page) = node.ask(request).await else {
            panic!("not a list");
        };
        if page.jobs.len() < 5 && page.next.is_some() {
            short_pages += 1;
        }
        found.extend(page.jobs.iter().map(|job| job.job_id));
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(found, expected, "every rare job once, newest first");
    assert!(short_pages >= 5, "{short_pages} short pages");

    // A read with no cursor to go on is not cut short: the oldest job's
    // prefix resolves though it lies 1,000 jobs from the newest.
    let oldest = *expected.last().expect("rare jobs");
    let prefix = IdPrefix::parse(&oldest.to_string()[..30]).expect("prefix");
    let resolved = node.ask(ClientRequest::Resolve { prefix }).await;
    assert_eq!(resolved, ClientResponse::Resolved { job_id: oldest });
}
