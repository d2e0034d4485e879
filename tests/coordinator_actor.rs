//! The `Coordinator` actor driven by messages, with a manual clock and a
//! persistence stand-in that holds every commit until the test releases or
//! fails it (staged rows count towards the commit that ends their batch).
//! No sockets, no SQLite. Tokio time is paused: `settle` returns once every
//! actor is idle, and timers (coalescing, commit retry, stop deadline) fire
//! only when the test advances time past them.

use actix::prelude::*;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use taskyard::actors::coordinator::*;
use taskyard::actors::outbox::{ClientAnswer, QueryAnswer, QueryResult, SendToWorker};
use taskyard::actors::persistence::{CommitBatch, PersistenceLink, StageRows, WriteSchedule};
use taskyard::clock::ManualClock;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::*;
use taskyard::scheduler::*;
use taskyard::store::StoreError;
use tokio::sync::oneshot;

type Answer = Result<(), StoreError>;
type Pending = Arc<Mutex<Vec<(u64, usize, oneshot::Sender<Answer>)>>>;

/// Persistence stand-in: each commit waits until `release` is called.
struct HeldPersistence {
    pending: Pending,
    /// Sizes of the `StageRows` received, in order.
    stages: Arc<Mutex<Vec<usize>>>,
    /// Rows staged since the last commit.
    staged_rows: usize,
}

impl Handler<StageRows> for HeldPersistence {
    type Result = ();

    fn handle(&mut self, staged: StageRows, _: &mut Context<Self>) {
        self.staged_rows += staged.rows.len();
        if let Ok(mut stages) = self.stages.lock() {
            stages.push(staged.rows.len());
        }
    }
}

impl Actor for HeldPersistence {
    type Context = Context<Self>;
}

impl Handler<CommitBatch> for HeldPersistence {
    type Result = ResponseFuture<Result<(), StoreError>>;

    fn handle(&mut self, batch: CommitBatch, _: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        let rows = std::mem::take(&mut self.staged_rows);
        if let Ok(mut pending) = self.pending.lock() {
            pending.push((batch.number, rows + batch.rows.len(), tx));
        }
        Box::pin(async move { rx.await.unwrap_or_else(|_| Err(store_error("dropped"))) })
    }
}

/// Schedule changes are stored at once.
impl Handler<WriteSchedule> for HeldPersistence {
    type Result = Result<(), StoreError>;

    fn handle(&mut self, _: WriteSchedule, _: &mut Context<Self>) -> Self::Result {
        Ok(())
    }
}

fn store_error(reason: &str) -> StoreError {
    StoreError::sqlite(std::path::Path::new("test.db"), reason)
}

/// Records everything sent to a session.
#[derive(Default, Clone)]
struct Recorder {
    worker_frames: Arc<Mutex<Vec<CoordinatorToWorker>>>,
    answers: Arc<Mutex<Vec<ClientAnswer>>>,
    queries: Arc<Mutex<Vec<QueryAnswer>>>,
}

impl Actor for Recorder {
    type Context = Context<Self>;
}

impl Handler<SendToWorker> for Recorder {
    type Result = ();
    fn handle(&mut self, m: SendToWorker, _: &mut Context<Self>) {
        self.worker_frames.lock().expect("lock").push(m.frame);
    }
}

impl Handler<ClientAnswer> for Recorder {
    type Result = ();
    fn handle(&mut self, m: ClientAnswer, _: &mut Context<Self>) {
        self.answers.lock().expect("lock").push(m);
    }
}

impl Handler<QueryAnswer> for Recorder {
    type Result = ();
    fn handle(&mut self, m: QueryAnswer, _: &mut Context<Self>) {
        self.queries.lock().expect("lock").push(m);
    }
}

fn policy() -> Policy {
    Policy {
        aging_step_ms: 60_000,
        max_active_jobs: 1000,
        retry: RetryPolicy {
            base_ms: 1000,
            cap_ms: 30_000,
        },
        default_max_attempts: 3,
        default_timeout_ms: 10_000,
        heartbeat_timeout_ms: 6000,
        max_payload_bytes: 4096,
        max_result_bytes: 1024,
    }
}

fn quiet() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

struct Harness {
    coordinator: Addr<Coordinator>,
    pending: Pending,
    stages: Arc<Mutex<Vec<usize>>>,
    clock: ManualClock,
    worker: Recorder,
    worker_addr: Addr<Recorder>,
    client: Recorder,
    client_addr: Addr<Recorder>,
}

impl Harness {
    /// Commit coalescing off: every change is sent as soon as nothing is in
    /// flight, so these tests see batches without waiting on a timer.
    fn start() -> Harness {
        Harness::start_with_window(Duration::ZERO)
    }

    fn start_with_window(window: Duration) -> Harness {
        Harness::start_at(window, 0)
    }

    /// A coordinator stamping `epoch` on its frames to workers.
    fn start_at(window: Duration, epoch: u64) -> Harness {
        Harness::build(window, epoch, None)
    }

    /// A coordinator whose leader lease is trusted until `trust` says.
    fn start_trusting(trust: taskyard::ha::TrustDeadline) -> Harness {
        Harness::build(Duration::ZERO, 1, Some(trust))
    }

    fn build(window: Duration, epoch: u64, trust: Option<taskyard::ha::TrustDeadline>) -> Harness {
        tokio::time::pause();
        let pending = Pending::default();
        let stages = Arc::new(Mutex::new(Vec::new()));
        let persistence = HeldPersistence {
            pending: pending.clone(),
            stages: stages.clone(),
            staged_rows: 0,
        }
        .start();
        let clock = ManualClock::starting_at(1_000_000);
        let state = CoordinatorState::new(policy(), quiet());
        let mut coordinator = Coordinator::new(
            state,
            Arc::new(clock.clone()),
            PersistenceLink::to(&persistence),
            quiet(),
        )
        .with_coalesce_window(window)
        .with_schedule_writes(persistence.clone().recipient())
        .with_epoch(epoch);
        if let Some(trust) = trust {
            coordinator = coordinator.with_trust(trust);
        }
        let coordinator = coordinator.start();
        let worker = Recorder::default();
        let client = Recorder::default();
        Harness {
            coordinator,
            pending,
            stages,
            clock,
            worker_addr: worker.clone().start(),
            worker,
            client_addr: client.clone().start(),
            client,
        }
    }

    async fn register_worker(&self) {
        self.register(1, "w1", 2).await;
    }

    /// Registers an `echo` worker on session `session`.
    async fn register(&self, session: u64, name: &str, capacity: u32) {
        let m = RegisterWorker {
            session: SessionId(session),
            reply_to: self.worker_addr.clone().recipient(),
            worker_id: WorkerId(name.into()),
            capacity,
            task_types: vec!["echo".into()],
            running: Vec::new(),
        };
        self.coordinator.send(m).await.expect("delivered");
    }

    async fn request(&self, request_id: u64, request: ClientRequest) {
        let m = ClientCommand {
            reply_to: self.client_addr.clone().recipient(),
            request_id,
            request,
            peer: None,
        };
        self.coordinator.send(m).await.expect("delivered");
    }

    fn pending_batches(&self) -> Vec<(u64, usize)> {
        let pending = self.pending.lock().expect("lock");
        pending.iter().map(|(n, rows, _)| (*n, *rows)).collect()
    }

    fn stages(&self) -> Vec<usize> {
        self.stages.lock().expect("lock").clone()
    }

    /// Lets every held commit complete.
    async fn release(&self) {
        self.answer_commits(|| Ok(())).await;
    }

    /// Fails every held commit, as a full disk would.
    async fn fail(&self, reason: &str) {
        self.answer_commits(|| Err(store_error(reason))).await;
    }

    async fn answer_commits(&self, answer: impl Fn() -> Answer) {
        settle().await;
        let held: Vec<_> = self.pending.lock().expect("lock").drain(..).collect();
        for (_, _, tx) in held {
            let _ = tx.send(answer());
        }
        settle().await;
    }

    /// Asks the coordinator whether it is ready; `None` means ready.
    async fn not_ready(&self) -> Option<String> {
        let query = Query {
            reply_to: self.client_addr.clone().recipient(),
            request_id: 99,
            query: QueryKind::Ready,
        };
        self.coordinator.send(query).await.expect("delivered");
        settle().await;
        let answer = self.client.queries.lock().expect("lock").pop();
        match answer.map(|a| a.result) {
            Some(QueryResult::Ready) => None,
            Some(QueryResult::NotReady { reason }) => Some(reason),
            other => panic!("no readiness answer: {other:?}"),
        }
    }

    fn answers(&self) -> Vec<ClientAnswer> {
        self.client.answers.lock().expect("lock").clone()
    }

    fn frames(&self) -> Vec<CoordinatorToWorker> {
        self.worker.worker_frames.lock().expect("lock").clone()
    }

    async fn inspect(&self) -> Inspection {
        self.coordinator
            .send(Inspect)
            .await
            .expect("delivered")
            .expect("invariants hold")
    }
}

/// Returns once every actor of the test is idle: with tokio time paused,
/// the runtime moves time on to this sleep's end (a millisecond later:
/// tokio's timer resolution) only when no task can run. Tests keep their
/// timer assertions clear of those few milliseconds.
async fn settle() {
    tokio::time::sleep(Duration::from_micros(1)).await;
}

/// Moves paused time on by `by`, firing every timer due by then.
async fn advance(by: Duration) {
    tokio::time::advance(by).await;
    settle().await;
}

fn echo(message: &str) -> ClientRequest {
    ClientRequest::Submit(SubmitRequest::new(
        "echo",
        encode_json(&json!({ "message": message })),
    ))
}

fn assigned(frames: &[CoordinatorToWorker]) -> Vec<(JobId, LeaseId)> {
    frames
        .iter()
        .filter_map(|f| match f {
            CoordinatorToWorker::TaskAssign { job_id, lease, .. } => Some((*job_id, *lease)),
            _ => None,
        })
        .collect()
}

#[actix_rt::test]
async fn every_frame_to_a_worker_carries_the_coordinators_epoch() {
    let h = Harness::start_at(Duration::ZERO, 7);
    h.register_worker().await;
    h.request(1, echo("stamped")).await;
    settle().await;
    h.release().await;
    let (job_id, _) = assigned(&h.frames())[0];
    h.request(2, ClientRequest::Cancel { job_id }).await;
    settle().await;
    h.release().await;
    let epochs: Vec<(&str, u64)> = h
        .frames()
        .iter()
        .filter_map(|f| match f {
            CoordinatorToWorker::Registered { epoch, .. } => Some(("Registered", *epoch)),
            CoordinatorToWorker::TaskAssign { epoch, .. } => Some(("TaskAssign", *epoch)),
            CoordinatorToWorker::TaskCancel { epoch, .. } => Some(("TaskCancel", *epoch)),
            _ => None,
        })
        .collect();
    assert_eq!(
        epochs,
        [("Registered", 7), ("TaskAssign", 7), ("TaskCancel", 7)]
    );
}

/// A leader whose lease is no longer trusted (paused past it, say) wakes
/// with requests queued ahead of its watchdog: even a committed batch's
/// answers are not released; the coordinator deposes itself.
#[actix_rt::test]
async fn nothing_is_released_once_the_leases_trust_has_ended() {
    let h = Harness::start_trusting(taskyard::ha::TrustDeadline::default());
    h.request(1, echo("late")).await;
    settle().await;
    h.release().await;
    settle().await;
    assert!(h.answers().is_empty(), "{:?}", h.answers());
    assert!(!h.coordinator.connected(), "the coordinator deposed itself");
}

#[actix_rt::test]
async fn submit_assign_result_succeeds_with_answers_released_only_after_commit() {
    let h = Harness::start();
    h.register_worker().await;
    settle().await;
    assert!(matches!(
        h.frames().as_slice(),
        [CoordinatorToWorker::Registered { .. }]
    ));

    h.request(1, echo("hello")).await;
    settle().await;
    assert_eq!(
        h.pending_batches(),
        vec![(1, 1)],
        "one batch with the new row"
    );
    assert!(
        h.answers().is_empty(),
        "no answer before the batch is durable"
    );
    assert!(
        assigned(&h.frames()).is_empty(),
        "no TaskAssign before the batch is durable"
    );
    assert_eq!(h.inspect().await.held_effects, 2);

    h.release().await;
    let answers = h.answers();
    let job_id = match &answers[..] {
        [ClientAnswer {
            request_id: 1,
            response:
                ClientResponse::Submitted(SubmitAnswer::Accepted {
                    job_id,
                    no_worker: false,
                }),
        }] => *job_id,
        other => panic!("unexpected answers {other:?}"),
    };
    let (assigned_job, lease) = assigned(&h.frames())[0];
    assert_eq!(assigned_job, job_id);

    h.clock.advance(5);
    let result = WorkerTaskResult {
        session: SessionId(1),
        worker_id: WorkerId("w1".into()),
        job_id,
        lease,
        outcome: TaskOutcome::Succeeded(b"hello".to_vec()),
    };
    h.coordinator.send(result).await.expect("delivered");
    // A read while the result's batch is in flight waits for that batch.
    h.request(2, ClientRequest::Status { job_id }).await;
    settle().await;
    assert_eq!(
        h.answers().len(),
        1,
        "status held behind the in-flight batch"
    );
    h.release().await;
    let answers = h.answers();
    match &answers[1].response {
        ClientResponse::Job(view) => {
            assert_eq!(view.state, JobState::Succeeded);
            assert_eq!(view.result.as_deref(), Some(&b"hello"[..]));
        }
        other => panic!("unexpected {other:?}"),
    }
    let inspection = h.inspect().await;
    assert_eq!((inspection.active_jobs, inspection.held_effects), (0, 0));
}

#[actix_rt::test]
async fn changes_made_while_a_batch_is_in_flight_are_committed_together() {
    let h = Harness::start();
    for i in 0..5 {
        h.request(i, echo(&i.to_string())).await;
    }
    settle().await;
    assert_eq!(
        h.pending_batches(),
        vec![(1, 1)],
        "first submit in flight alone"
    );
    h.release().await;
    assert_eq!(
        h.pending_batches(),
        vec![(2, 4)],
        "the other four share one batch"
    );
    assert_eq!(h.answers().len(), 1);
    h.release().await;
    assert_eq!(h.answers().len(), 5);
    let order: Vec<u64> = h.answers().iter().map(|a| a.request_id).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4], "answers keep request order");
}

/// Rows a handler changes while a batch is in flight are staged ahead of
/// the next commit once there are enough; nothing they show is released
/// before that commit, not even a read made when nothing else is dirty.
#[actix_rt::test]
async fn rows_staged_behind_a_batch_in_flight_are_answered_only_after_their_commit() {
    let h = Harness::start();
    h.register(7, "big", 20).await;
    let batch: Vec<_> = (0..20)
        .map(|i| SubmitRequest::new("echo", encode_json(&json!({ "message": i.to_string() }))))
        .collect();
    h.request(1, ClientRequest::SubmitBatch(batch)).await;
    settle().await;
    h.release().await;
    let running = assigned(&h.frames());
    assert_eq!(running.len(), 20);

    h.request(2, echo("keeps a batch in flight")).await;
    settle().await;
    assert_eq!(h.pending_batches(), vec![(2, 1)]);
    let lost = WorkerDisconnected {
        session: SessionId(7),
        worker_id: WorkerId("big".into()),
        reason: "test".into(),
    };
    h.coordinator.send(lost).await.expect("delivered");
    // The 20 requeued rows are staged, so nothing is dirty: the read must
    // still wait for the batch that holds them.
    h.request(
        3,
        ClientRequest::Status {
            job_id: running[0].0,
        },
    )
    .await;
    h.request(4, echo("one row is not worth staging")).await;
    settle().await;
    assert_eq!(h.stages(), vec![20]);
    assert_eq!(h.pending_batches(), vec![(2, 1)], "one commit in flight");
    // Once their retry delay has passed, a second worker (20 slots) takes
    // the echoes and most requeued jobs: rows staged before change again
    // and are staged again, still behind the same commit.
    let frames_before = h.frames().len();
    h.register(8, "other", 20).await;
    h.clock.advance(1000);
    h.coordinator.send(Sweep).await.expect("delivered");
    settle().await;
    assert_eq!(h.stages(), vec![20, 22]);
    let committed_before = h.inspect().await.rows_committed;

    h.release().await;
    let answered: Vec<u64> = h.answers().iter().map(|a| a.request_id).collect();
    assert_eq!(
        answered,
        vec![1, 2],
        "the staged requeues are not durable yet"
    );
    assert_eq!(
        assigned(&h.frames()[frames_before..]).len(),
        0,
        "nor are the new assignments"
    );
    assert_eq!(
        h.pending_batches(),
        vec![(3, 42)],
        "the next commit carries both stagings and the rest"
    );
    h.release().await;
    let answered: Vec<u64> = h.answers().iter().map(|a| a.request_id).collect();
    assert_eq!(answered, vec![1, 2, 3, 4]);
    let slots = 20;
    assert_eq!(assigned(&h.frames()[frames_before..]).len(), slots);
    let inspection = h.inspect().await;
    assert_eq!(inspection.held_effects, 0);
    assert_eq!(
        inspection.rows_committed - committed_before,
        1 + 22,
        "batch 2's row and batch 3's 22 jobs: a row written twice counts once"
    );
}

#[actix_rt::test]
async fn sweep_with_manual_clock_detects_a_silent_worker() {
    let h = Harness::start();
    h.register_worker().await;
    h.request(1, echo("x")).await;
    h.release().await;
    let (job_id, _) = assigned(&h.frames())[0];
    h.clock.advance(6000);
    h.coordinator.send(Sweep).await.expect("delivered");
    h.request(2, ClientRequest::Status { job_id }).await;
    h.request(3, ClientRequest::Workers).await;
    h.release().await;
    let answers = h.answers();
    assert!(
        matches!(&answers[1].response, ClientResponse::Job(v) if v.state == JobState::Running),
        "at the timeout the job still runs: {:?}",
        answers[1]
    );
    assert!(
        matches!(&answers[2].response, ClientResponse::Workers(w) if w.len() == 1),
        "and the worker is still registered"
    );
    assert!(!h
        .frames()
        .iter()
        .any(|f| matches!(f, CoordinatorToWorker::Error { .. })));

    h.clock.advance(1);
    h.coordinator.send(Sweep).await.expect("delivered");
    h.release().await;
    assert!(matches!(
        h.frames().last(),
        Some(CoordinatorToWorker::Error { message }) if message.contains("no heartbeat")
    ));
    h.request(4, ClientRequest::Workers).await;
    h.request(5, ClientRequest::Status { job_id }).await;
    h.release().await;
    let answers = h.answers();
    assert!(matches!(
        &answers[3].response,
        ClientResponse::Workers(w) if w.is_empty()
    ));
    assert!(
        matches!(&answers[4].response, ClientResponse::Job(v) if v.state == JobState::RetryWait),
        "its job waits for a retry: {:?}",
        answers[4]
    );
}

const HOUR: i64 = 3_600_000;

/// Sweeps, then asks for the job's state and the number of workers.
async fn sweep_and_look(h: &Harness, first_request: u64, job_id: JobId) -> (JobState, usize) {
    h.coordinator.send(Sweep).await.expect("delivered");
    h.request(first_request, ClientRequest::Status { job_id })
        .await;
    h.request(first_request + 1, ClientRequest::Workers).await;
    h.release().await;
    let answers = h.answers();
    let n = answers.len();
    let state = match &answers[n - 2].response {
        ClientResponse::Job(v) => v.state,
        other => panic!("not a job: {other:?}"),
    };
    let workers = match &answers[n - 1].response {
        ClientResponse::Workers(w) => w.len(),
        other => panic!("not workers: {other:?}"),
    };
    (state, workers)
}

#[actix_rt::test]
async fn a_wall_clock_set_an_hour_ahead_neither_loses_the_worker_nor_times_its_task_out() {
    let h = Harness::start();
    h.register_worker().await;
    h.request(1, echo("x")).await;
    h.release().await;
    let (job_id, _) = assigned(&h.frames())[0];
    h.clock.step_wall(HOUR);
    h.clock.advance(1000);
    let heartbeat = WorkerHeartbeat {
        session: SessionId(1),
        worker_id: WorkerId("w1".into()),
    };
    h.coordinator.send(heartbeat).await.expect("delivered");
    assert_eq!(sweep_and_look(&h, 2, job_id).await, (JobState::Running, 1));
    assert!(!h.frames().iter().any(|f| matches!(
        f,
        CoordinatorToWorker::Error { .. } | CoordinatorToWorker::TaskCancel { .. }
    )));
}

#[actix_rt::test]
async fn a_wall_clock_set_an_hour_back_still_loses_a_silent_worker_at_the_timeout() {
    let h = Harness::start();
    h.register_worker().await;
    h.request(1, echo("x")).await;
    h.release().await;
    let (job_id, _) = assigned(&h.frames())[0];
    h.clock.step_wall(-HOUR);
    h.clock.advance(6000);
    assert_eq!(sweep_and_look(&h, 2, job_id).await, (JobState::Running, 1));
    h.clock.advance(1);
    assert_eq!(
        sweep_and_look(&h, 4, job_id).await,
        (JobState::RetryWait, 0),
        "6 s of silence on the monotonic clock lose the worker"
    );
    assert!(matches!(
        h.frames().last(),
        Some(CoordinatorToWorker::Error { message }) if message.contains("no heartbeat")
    ));
}

fn succeeded(job_id: JobId, lease: LeaseId) -> WorkerTaskResult {
    WorkerTaskResult {
        session: SessionId(1),
        worker_id: WorkerId("w1".into()),
        job_id,
        lease,
        outcome: TaskOutcome::Succeeded(Vec::new()),
    }
}

/// Submits two jobs as one batch and commits them: the worker (two slots)
/// has been sent both `TaskAssign`s.
async fn two_jobs_running(h: &Harness) -> Vec<(JobId, LeaseId)> {
    h.register_worker().await;
    let batch = vec![
        SubmitRequest::new("echo", encode_json(&json!({ "message": "a" }))),
        SubmitRequest::new("echo", encode_json(&json!({ "message": "b" }))),
    ];
    h.request(1, ClientRequest::SubmitBatch(batch)).await;
    settle().await;
    assert_eq!(
        h.pending_batches(),
        vec![(1, 2)],
        "sent at once: nothing outstanding"
    );
    h.release().await;
    let running = assigned(&h.frames());
    assert_eq!(running.len(), 2);
    running
}

#[actix_rt::test]
async fn a_round_of_results_shares_one_batch_and_a_change_at_rest_goes_at_once() {
    // A window far longer than the test: only arriving results send a batch.
    let h = Harness::start_with_window(Duration::from_secs(3600));
    let running = two_jobs_running(&h).await;

    h.coordinator
        .send(succeeded(running[0].0, running[0].1))
        .await
        .expect("delivered");
    settle().await;
    assert!(
        h.pending_batches().is_empty(),
        "the first result waits for the rest of its round"
    );
    h.coordinator
        .send(succeeded(running[1].0, running[1].1))
        .await
        .expect("delivered");
    settle().await;
    assert_eq!(
        h.pending_batches(),
        vec![(2, 2)],
        "the last result of the round sends both rows in one batch"
    );
    h.release().await;
    assert_eq!(h.inspect().await.active_jobs, 0);

    // Nothing outstanding: a lone change is sent at once.
    h.request(2, echo("later")).await;
    settle().await;
    assert_eq!(h.pending_batches(), vec![(3, 1)]);
    assert_eq!(
        h.answers().len(),
        1,
        "its answer still waits for the commit"
    );
    h.release().await;
    assert_eq!(h.answers().len(), 2);
}

#[actix_rt::test]
async fn a_missing_result_delays_the_batch_only_for_the_window() {
    let h = Harness::start_with_window(Duration::from_millis(50));
    let running = two_jobs_running(&h).await;
    h.coordinator
        .send(succeeded(running[0].0, running[0].1))
        .await
        .expect("delivered");
    settle().await;
    // The second job's result never comes; the window bounds the wait.
    advance(Duration::from_millis(40)).await;
    assert!(
        h.pending_batches().is_empty(),
        "held back within the window"
    );
    advance(Duration::from_millis(20)).await;
    assert_eq!(h.pending_batches(), vec![(2, 1)], "sent once it passed");
    assert_eq!(
        assigned(&h.frames()).len(),
        2,
        "nothing new released before the commit"
    );
    h.release().await;
    assert_eq!(h.inspect().await.active_jobs, 1);
}

#[actix_rt::test]
async fn a_failing_commit_fails_every_held_answer_reports_not_ready_and_recovers_on_retry() {
    let h = Harness::start();
    h.register_worker().await;
    h.release().await;
    assert_eq!(h.not_ready().await, None);
    h.request(1, echo("x")).await;
    h.fail("disk I/O error").await;
    let reason = h.not_ready().await.expect("not ready while commits fail");
    assert!(
        reason.contains("disk I/O error") && reason.contains("1 failed"),
        "{reason}"
    );
    settle().await;
    let not_durable = |answers: &[ClientAnswer]| -> Vec<u64> {
        answers
            .iter()
            .filter(|a| matches!(&a.response, ClientResponse::NotDurable { reason } if reason.contains("disk I/O error")))
            .map(|a| a.request_id)
            .collect()
    };
    assert_eq!(
        not_durable(&h.answers()),
        vec![1],
        "the submit's outcome is unknown"
    );
    assert!(
        assigned(&h.frames()).is_empty(),
        "its assignment is not durable"
    );

    // Reads wait too, and the retry comes after COMMIT_RETRY_DELAY.
    h.request(2, ClientRequest::Workers).await;
    advance(COMMIT_RETRY_DELAY / 2).await;
    assert!(h.pending_batches().is_empty(), "no retry before the delay");
    advance(COMMIT_RETRY_DELAY / 2).await;
    assert_eq!(h.pending_batches(), vec![(2, 1)], "the row is sent again");
    h.fail("disk I/O error").await;
    let reason = h.not_ready().await.expect("still failing");
    assert!(reason.contains("2 failed"), "{reason}");

    settle().await;
    assert_eq!(
        not_durable(&h.answers()),
        vec![1, 2],
        "the read held then failed too"
    );

    advance(COMMIT_RETRY_DELAY).await;
    h.release().await;
    assert_eq!(h.answers().len(), 2, "nothing answered twice");
    assert_eq!(
        assigned(&h.frames()).len(),
        1,
        "the assignment, once durable"
    );
    assert_eq!(h.not_ready().await, None, "ready again");
    assert_eq!(h.inspect().await.held_effects, 0);
}

/// Runs a coordinator in its own actor system (so `Shutdown` can stop it)
/// with every commit answered by `answer`; submits one job, asks it to stop
/// and returns the system's exit code and the commits persistence saw.
fn stop_with_commits_answered(answer: Answer, shutdown_timeout: Duration) -> (i32, usize) {
    let commits = Arc::new(Mutex::new(0));
    let seen = commits.clone();
    let code = std::thread::spawn(move || {
        let system = System::new();
        system.block_on(async move {
            tokio::time::pause();
            let persistence = AnsweringPersistence { answer, commits }.start();
            let state = CoordinatorState::new(policy(), quiet());
            let coordinator = Coordinator::new(
                state,
                Arc::new(ManualClock::starting_at(1_000_000)),
                PersistenceLink::to(&persistence),
                quiet(),
            )
            .with_shutdown_timeout(shutdown_timeout)
            .start();
            let client = Recorder::default().start();
            let submit = ClientCommand {
                reply_to: client.recipient(),
                request_id: 1,
                request: echo("x"),
                peer: None,
            };
            coordinator.send(submit).await.expect("delivered");
            coordinator.send(Shutdown).await.expect("delivered");
        });
        system.run_with_code().expect("system ran")
    })
    .join()
    .expect("thread");
    let commits = *seen.lock().expect("lock");
    (code, commits)
}

/// Persistence stand-in answering every commit at once with `answer`.
struct AnsweringPersistence {
    answer: Answer,
    commits: Arc<Mutex<usize>>,
}

impl Actor for AnsweringPersistence {
    type Context = Context<Self>;
}

impl Handler<StageRows> for AnsweringPersistence {
    type Result = ();
    fn handle(&mut self, _: StageRows, _: &mut Context<Self>) {}
}

impl Handler<CommitBatch> for AnsweringPersistence {
    type Result = Result<(), StoreError>;
    fn handle(&mut self, _: CommitBatch, _: &mut Context<Self>) -> Self::Result {
        let mut commits = self.commits.lock().expect("lock");
        *commits += 1;
        if *commits > 100 {
            // A stop that never ends would retry forever in paused time.
            System::current().stop_with_code(99);
        }
        match &self.answer {
            Ok(()) => Ok(()),
            Err(e) => Err(store_error(&e.reason)),
        }
    }
}

#[test]
fn a_stop_while_commits_keep_failing_ends_at_the_shutdown_timeout_with_exit_code_1() {
    let timeout = COMMIT_RETRY_DELAY * 10 + COMMIT_RETRY_DELAY / 2;
    let (code, commits) = stop_with_commits_answered(Err(store_error("readonly")), timeout);
    assert_eq!(code, NOT_DURABLE_EXIT_CODE);
    // The first try, then one retry per COMMIT_RETRY_DELAY until the timeout.
    assert_eq!(commits, 11, "retried once a second until the deadline");
}

#[test]
fn a_stop_with_healthy_commits_ends_once_everything_is_durable_with_exit_code_0() {
    let (code, commits) = stop_with_commits_answered(Ok(()), Duration::from_secs(10));
    assert_eq!((code, commits), (0, 1));
}

fn every_second(name: &str) -> ScheduleSpec {
    let payload = encode_json(&json!({ "message": "tick" }));
    ScheduleSpec {
        every_ms: Some(1000),
        overlap: Overlap::Allow,
        ..ScheduleSpec::new(name, "echo", payload)
    }
}

/// Sweeps at the manual clock's time and commits what it did.
async fn sweep(h: &Harness) {
    h.coordinator.send(Sweep).await.expect("delivered");
    h.release().await;
}

#[actix_rt::test]
async fn a_schedule_fires_each_slot_once_catches_up_one_slot_and_stops_when_paused() {
    let h = Harness::start();
    h.register(1, "w1", 100).await;
    let create = ClientRequest::CreateSchedule(Box::new(every_second("tick")));
    h.request(1, create).await;
    h.release().await;
    assert!(
        matches!(&h.answers()[0].response, ClientResponse::Schedule(v) if v.next_fires[0] == 1_001_000),
        "created, answered once stored: {:?}",
        h.answers()
    );
    sweep(&h).await;
    assert!(assigned(&h.frames()).is_empty(), "no slot has come yet");
    h.clock.advance(1000);
    sweep(&h).await;
    sweep(&h).await;
    assert_eq!(assigned(&h.frames()).len(), 1, "slot 1 001 000 fires once");
    // The clock jumps 5 s (less than the heartbeat timeout: the worker
    // stays): of the five slots missed, the default catch-up window (one
    // slot) fires only the most recent.
    h.clock.advance(5000);
    sweep(&h).await;
    assert_eq!(assigned(&h.frames()).len(), 2);
    h.request(
        2,
        ClientRequest::PauseSchedule {
            name: "tick".into(),
        },
    )
    .await;
    h.release().await;
    h.clock.advance(5000);
    sweep(&h).await;
    assert_eq!(assigned(&h.frames()).len(), 2, "paused: nothing fires");
    h.request(
        3,
        ClientRequest::ShowSchedule {
            name: "tick".into(),
        },
    )
    .await;
    h.release().await;
    let answers = h.answers();
    let ClientResponse::Schedule(view) = &answers[answers.len() - 1].response else {
        panic!("a schedule: {answers:?}");
    };
    assert_eq!((view.fired, view.skipped), (2, 4));
    assert!(view.spec.paused && view.next_fires.is_empty());
}

#[actix_rt::test]
async fn a_slot_fires_when_it_comes_without_waiting_for_a_sweep() {
    let h = Harness::start();
    h.register(1, "w1", 100).await;
    let create = ClientRequest::CreateSchedule(Box::new(every_second("tick")));
    h.request(1, create).await;
    h.release().await;
    h.clock.advance(999);
    advance(Duration::from_millis(999)).await;
    h.release().await;
    assert!(assigned(&h.frames()).is_empty(), "not before its slot");
    // No `Sweep` is sent in this test: the slot timer decides the slot.
    h.clock.advance(1);
    advance(Duration::from_millis(2)).await;
    h.release().await;
    assert_eq!(assigned(&h.frames()).len(), 1, "fired at its slot");
    h.clock.advance(1000);
    advance(Duration::from_millis(1001)).await;
    h.release().await;
    assert_eq!(
        assigned(&h.frames()).len(),
        2,
        "and the next one at its own"
    );
}

#[actix_rt::test]
async fn many_schedules_due_at_once_fire_a_bounded_pass_per_commit() {
    use taskyard::scheduler::schedule::firing::SCHEDULES_PER_PASS;
    let h = Harness::start();
    h.register(1, "w1", 1000).await;
    let rest = SCHEDULES_PER_PASS / 2 + 1;
    let n = 2 * SCHEDULES_PER_PASS + rest;
    for i in 0..n {
        let spec = every_second(&format!("s{i:04}"));
        h.request(i as u64, ClientRequest::CreateSchedule(Box::new(spec)))
            .await;
    }
    h.release().await;
    h.clock.advance(1000);
    advance(Duration::from_millis(1001)).await;
    // Each pass runs once the commit carrying the one before is sent (and
    // decides while it is written): its jobs go in the next commit.
    for (expected, next) in [
        (SCHEDULES_PER_PASS, Some(SCHEDULES_PER_PASS)),
        (SCHEDULES_PER_PASS, Some(rest)),
        (rest, None),
    ] {
        settle().await;
        let rows: Vec<usize> = h.pending_batches().iter().map(|(_, r)| *r).collect();
        assert_eq!(rows, vec![expected], "one pass's jobs per commit");
        if let Some(next) = next {
            assert_eq!(
                h.stages().last(),
                Some(&next),
                "the next pass decided while this commit is held, its jobs staged"
            );
        }
        h.release().await;
    }
    assert!(h.pending_batches().is_empty(), "nothing more to fire");
    assert_eq!(assigned(&h.frames()).len(), n, "every schedule's slot once");
}
