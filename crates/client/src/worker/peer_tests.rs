//! The worker against an in-test coordinator: a real TCP listener speaking
//! the protocol from the coordinator's side.

use super::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use slog::{Drain, Level, Never, OwnedKVList, Record};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use taskyard_protocol::payloads::encode_json;
use taskyard_protocol::{
    CoordinatorToWorker, FrameCodec, Hello, JobId, LeaseId, ProtocolError, Role, RunningAttempt,
    TaskOutcome, WorkerMessage,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{timeout, Instant};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

mod blocking;
mod capacity;
mod follow;

type Peer = Framed<TcpStream, FrameCodec<WorkerMessage, CoordinatorToWorker>>;
type Lines = Arc<Mutex<Vec<(Level, String)>>>;

const HEARTBEAT: Duration = Duration::from_millis(1000);
/// Generous in virtual time: only reached if the worker really is silent.
const PATIENCE: Duration = Duration::from_secs(600);

/// A logger that keeps every record as (level, "message key=value ...").
fn capturing_logger() -> (Logger, Lines) {
    let lines = Lines::default();
    (Logger::root(Capture(lines.clone()), o!()), lines)
}

struct Capture(Lines);
struct KvText(String);

impl slog::Serializer for KvText {
    fn emit_arguments(&mut self, key: slog::Key, val: &std::fmt::Arguments) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

impl Drain for Capture {
    type Ok = ();
    type Err = Never;
    fn log(&self, record: &Record, values: &OwnedKVList) -> Result<(), Never> {
        let mut text = KvText(record.msg().to_string());
        let _ = slog::KV::serialize(&record.kv(), record, &mut text);
        let _ = slog::KV::serialize(values, record, &mut text);
        if let Ok(mut lines) = self.0.lock() {
            lines.push((record.level(), text.0));
        }
        Ok(())
    }
}

struct Harness {
    listener: TcpListener,
    shutdown: CancellationToken,
    worker: tokio::task::JoinHandle<Result<(), Refusal>>,
    lines: Lines,
}

impl Harness {
    /// A worker with the built-ins, its handlers on the test's runtime so
    /// that paused time drives them too.
    async fn start(worker_id: &str, capacity: u32) -> Harness {
        let registry = TaskRegistry::with_builtins();
        Harness::start_with(
            worker_id,
            capacity,
            HEARTBEAT,
            registry,
            TaskRuntime::current(),
        )
        .await
    }

    async fn start_with(
        worker_id: &str,
        capacity: u32,
        heartbeat: Duration,
        registry: TaskRegistry,
        tasks: TaskRuntime,
    ) -> Harness {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        Harness::start_on(
            listener, &addr, worker_id, capacity, heartbeat, registry, tasks, None,
        )
    }

    /// A worker whose `coordinator` list is `coordinators`, with `listener`
    /// the in-test coordinator (one of them, or the leader they name).
    #[allow(clippy::too_many_arguments)]
    fn start_on(
        listener: TcpListener,
        coordinators: &str,
        worker_id: &str,
        capacity: u32,
        heartbeat: Duration,
        registry: TaskRegistry,
        tasks: TaskRuntime,
        observer: Option<FrameObserver>,
    ) -> Harness {
        let config = WorkerConfig {
            coordinator: coordinators.to_string(),
            worker_id: worker_id.to_string(),
            capacity,
            heartbeat_interval_millis: heartbeat.as_millis() as u64,
            reconnect_max_millis: 1000,
            ..WorkerConfig::default()
        };
        Harness::start_config(listener, config, registry, tasks, observer)
    }

    /// A worker run with `config` (its `coordinator` naming `listener`).
    fn start_config(
        listener: TcpListener,
        config: WorkerConfig,
        registry: TaskRegistry,
        tasks: TaskRuntime,
        observer: Option<FrameObserver>,
    ) -> Harness {
        let (log, lines) = capturing_logger();
        let shutdown = CancellationToken::new();
        let run = Run {
            config,
            registry,
            tasks,
            observer,
        };
        let worker = tokio::spawn(run_with_task_runtime(
            run,
            log,
            Shutdown {
                stop: shutdown.clone(),
                drain: CancellationToken::new(),
            },
        ));
        Harness {
            listener,
            shutdown,
            worker,
            lines,
        }
    }

    /// The in-test coordinator's address, as the worker names it.
    fn addr(&self) -> String {
        self.listener.local_addr().expect("addr").to_string()
    }

    async fn accept(&self) -> Peer {
        let (stream, _) = timeout(PATIENCE, self.listener.accept())
            .await
            .expect("worker connects")
            .expect("accept");
        Framed::new(
            stream,
            FrameCodec::new(taskyard_protocol::DEFAULT_MAX_FRAME_BYTES),
        )
    }

    /// Accepts and completes Hello/Register; returns what was registered.
    async fn accept_registered(&self) -> (Peer, WorkerMessage) {
        let mut peer = self.accept().await;
        expect_hello(&mut peer).await;
        send(&mut peer, CoordinatorToWorker::Hello(hello())).await;
        let register = next(&mut peer).await.expect("Register");
        let WorkerMessage::Register { worker_id, .. } = &register else {
            panic!("expected Register, got {register:?}");
        };
        send(
            &mut peer,
            CoordinatorToWorker::Registered {
                worker_id: worker_id.clone(),
                epoch: 0,
            },
        )
        .await;
        (peer, register)
    }

    async fn stop(self) {
        self.shutdown.cancel();
        timeout(PATIENCE, self.worker)
            .await
            .expect("run returns")
            .expect("no panic")
            .expect("stopped, not refused");
    }

    /// Waits for the worker to stop on its own and returns its refusal.
    async fn refused(self) -> Refusal {
        timeout(PATIENCE, self.worker)
            .await
            .expect("run returns")
            .expect("no panic")
            .expect_err("refused")
    }
}

fn hello() -> Hello {
    Hello {
        protocol_version: taskyard_protocol::PROTOCOL_VERSION,
        role: Role::Worker,
        token: None,
        http: None,
    }
}

async fn send(peer: &mut Peer, frame: CoordinatorToWorker) {
    peer.send(frame).await.expect("peer send");
}

/// The next frame, or `None` when the worker closed (or reset) the
/// connection. A heartbeat is answered, as a live coordinator does.
async fn next(peer: &mut Peer) -> Option<WorkerMessage> {
    match timeout(PATIENCE, peer.next())
        .await
        .expect("a frame in time")
    {
        Some(Ok(WorkerMessage::Heartbeat)) => {
            // The worker may be gone already; then the next read says so.
            let _ = peer.send(CoordinatorToWorker::HeartbeatAck).await;
            Some(WorkerMessage::Heartbeat)
        }
        Some(Ok(frame)) => Some(frame),
        Some(Err(ProtocolError::Io(_))) | None => None,
        Some(Err(e)) => panic!("invalid frame from the worker: {e}"),
    }
}

async fn next_non_heartbeat(peer: &mut Peer) -> Option<WorkerMessage> {
    loop {
        match next(peer).await {
            Some(WorkerMessage::Heartbeat) => continue,
            other => return other,
        }
    }
}

async fn expect_hello(peer: &mut Peer) {
    assert_eq!(next(peer).await, Some(WorkerMessage::Hello(hello())));
}

fn assign(task_type: &str, payload: Value) -> (JobId, LeaseId, CoordinatorToWorker) {
    let (job_id, lease) = (JobId::mint(), LeaseId::new_random());
    let frame = CoordinatorToWorker::TaskAssign {
        job_id,
        lease,
        task_type: task_type.into(),
        payload: encode_json(&payload),
        timeout_ms: 60_000,
        epoch: 0,
        attempt: 1,
    };
    (job_id, lease, frame)
}

fn result(job_id: JobId, lease: LeaseId, outcome: TaskOutcome) -> Option<WorkerMessage> {
    Some(WorkerMessage::TaskResult {
        job_id,
        lease,
        outcome,
    })
}

#[tokio::test(start_paused = true)]
async fn hello_then_register_with_generated_id_capacity_and_sorted_types() {
    let h = Harness::start("", 3).await;
    let mut peer = h.accept().await;
    expect_hello(&mut peer).await;
    send(&mut peer, CoordinatorToWorker::Hello(hello())).await;
    match next(&mut peer).await {
        Some(WorkerMessage::Register {
            worker_id,
            capacity,
            task_types,
            running,
        }) => {
            assert!(running.is_empty(), "a fresh worker holds nothing");
            assert!(
                worker_id.0.starts_with("worker-") && worker_id.0.len() == 15,
                "{worker_id}"
            );
            assert!(
                worker_id.0[7..].chars().all(|c| c.is_ascii_hexdigit()),
                "{worker_id}"
            );
            assert_eq!(capacity, 3);
            assert_eq!(task_types, ["echo", "fail", "sleep"]);
        }
        other => panic!("expected Register, got {other:?}"),
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn echo_assignment_returns_its_result_under_the_same_lease() {
    let h = Harness::start("w-echo", 2).await;
    let (mut peer, _) = h.accept_registered().await;
    let (job_id, lease, frame) = assign("echo", json!({"message": "hello"}));
    send(&mut peer, frame).await;
    let expected = result(job_id, lease, TaskOutcome::Succeeded(b"hello".to_vec()));
    assert_eq!(next_non_heartbeat(&mut peer).await, expected);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn unknown_task_type_and_bad_payload_fail_with_a_reason() {
    let h = Harness::start("w-unknown", 1).await;
    let (mut peer, _) = h.accept_registered().await;
    let (job_id, lease, frame) = assign("thumbnail", json!({}));
    send(&mut peer, frame).await;
    let reason = "worker w-unknown does not run task type thumbnail".to_string();
    assert_eq!(
        next_non_heartbeat(&mut peer).await,
        result(job_id, lease, TaskOutcome::failed(reason))
    );
    let (job_id, lease, frame) = assign("sleep", json!({"millis": -5}));
    send(&mut peer, frame).await;
    match next_non_heartbeat(&mut peer).await {
        Some(WorkerMessage::TaskResult {
            job_id: j,
            lease: l,
            outcome:
                TaskOutcome::Failed {
                    error: reason,
                    retryable: false,
                },
        }) => {
            assert_eq!((j, l), (job_id, lease));
            assert!(reason.starts_with("payload.millis: "), "{reason}");
        }
        other => panic!("expected a failed result, got {other:?}"),
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn cancelled_task_sends_no_result_and_frees_its_slot() {
    let h = Harness::start("w-cancel", 1).await;
    let (mut peer, _) = h.accept_registered().await;
    let (sleep_job, sleep_lease, frame) = assign("sleep", json!({"millis": 60_000}));
    send(&mut peer, frame).await;
    send(
        &mut peer,
        CoordinatorToWorker::TaskCancel {
            job_id: sleep_job,
            lease: sleep_lease,
            epoch: 0,
        },
    )
    .await;
    let (job_id, lease, frame) = assign("echo", json!({"message": "after"}));
    send(&mut peer, frame).await;
    let expected = result(job_id, lease, TaskOutcome::Succeeded(b"after".to_vec()));
    let start = Instant::now();
    assert_eq!(
        next_non_heartbeat(&mut peer).await,
        expected,
        "capacity 1: the slot was freed"
    );
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "echo did not wait for the 60 s sleep"
    );
    // Well past the sleep's end: only heartbeats, never its result.
    while start.elapsed() < Duration::from_secs(90) {
        assert_eq!(next(&mut peer).await, Some(WorkerMessage::Heartbeat));
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn heartbeats_arrive_every_interval() {
    let h = Harness::start("w-beat", 1).await;
    let (mut peer, _) = h.accept_registered().await;
    let start = Instant::now();
    for n in 1..=5u32 {
        assert_eq!(next(&mut peer).await, Some(WorkerMessage::Heartbeat));
        assert_eq!(
            start.elapsed().as_millis() / 100,
            (HEARTBEAT * n).as_millis() / 100,
            "beat {n}"
        );
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn lost_connection_keeps_tasks_and_the_next_register_lists_them() {
    let h = Harness::start("", 1).await;
    let (mut peer, first) = h.accept_registered().await;
    let (job_id, lease, frame) = assign("sleep", json!({"millis": 5_000}));
    send(&mut peer, frame).await;
    drop(peer);
    let (mut peer, second) = h.accept_registered().await;
    let WorkerMessage::Register {
        worker_id, running, ..
    } = &second
    else {
        panic!("expected Register, got {second:?}");
    };
    assert!(matches!(&first, WorkerMessage::Register { worker_id: id, .. } if id == worker_id));
    assert_eq!(running, &[RunningAttempt { job_id, lease }]);
    assert_eq!(
        next_non_heartbeat(&mut peer).await,
        result(job_id, lease, TaskOutcome::Succeeded(Vec::new())),
        "the attempt went on and reports on the new connection"
    );
    drop(peer);
    let (_peer, third) = h.accept_registered().await;
    assert!(
        matches!(third, WorkerMessage::Register { ref running, .. } if running.is_empty()),
        "a reported attempt is not listed again: {third:?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_passing_error_answer_to_hello_is_logged_once_and_retried() {
    let h = Harness::start("w-refused", 1).await;
    let mut peer = h.accept().await;
    expect_hello(&mut peer).await;
    let message = "too many connections: max-connections (8) reached".to_string();
    send(
        &mut peer,
        CoordinatorToWorker::Error {
            message: message.clone(),
        },
    )
    .await;
    drop(peer);
    let (_peer, register) = h.accept_registered().await;
    assert!(matches!(register, WorkerMessage::Register { .. }));
    let logged = h.lines.lock().expect("lines").clone();
    let about: Vec<_> = logged
        .iter()
        .filter(|(_, line)| line.contains(&message))
        .collect();
    assert_eq!(about.len(), 1, "logged once: {logged:?}");
    assert_eq!(about[0].0, Level::Warning, "{logged:?}");
    assert!(
        about[0].1.contains(&format!("coordinator={}", h.addr())),
        "{logged:?}"
    );
    h.stop().await;
}

/// The worker stops on the refusal and leaves the one line about it to
/// its caller (`taskyard-worker` prints it; a `WorkerHandle` logs it).
#[tokio::test(start_paused = true)]
async fn an_unauthorized_answer_stops_the_worker_with_a_refusal_it_does_not_log() {
    let h = Harness::start("w-token", 1).await;
    let mut peer = h.accept().await;
    expect_hello(&mut peer).await;
    let message = taskyard_protocol::UNAUTHORIZED.to_string();
    send(&mut peer, CoordinatorToWorker::Error { message }).await;
    let (addr, lines) = (h.addr(), h.lines.clone());
    let refusal = h.refused().await;
    assert_eq!(refusal.addr, addr);
    assert!(refusal.to_string().contains("unauthorized"), "{refusal}");
    let logged = lines.lock().expect("lines").clone();
    assert!(
        logged
            .iter()
            .all(|(_, line)| !line.contains("unauthorized")),
        "{logged:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_registration_stops_the_worker() {
    let h = Harness::start("w-big", 1).await;
    let mut peer = h.accept().await;
    expect_hello(&mut peer).await;
    send(&mut peer, CoordinatorToWorker::Hello(hello())).await;
    assert!(matches!(
        next(&mut peer).await,
        Some(WorkerMessage::Register { .. })
    ));
    let message = "registration refused: capacity: 1 is outside 1..=0".to_string();
    send(&mut peer, CoordinatorToWorker::Error { message }).await;
    let refusal = h.refused().await;
    assert!(
        refusal
            .to_string()
            .ends_with(": registration refused: capacity: 1 is outside 1..=0"),
        "{refusal}"
    );
}

#[tokio::test(start_paused = true)]
async fn silent_coordinator_is_abandoned_and_retried() {
    let h = Harness::start("w-silent", 1).await;
    let mut silent = h.accept().await;
    expect_hello(&mut silent).await;
    let start = Instant::now();
    let (_peer, register) = h.accept_registered().await;
    assert!(matches!(register, WorkerMessage::Register { .. }));
    assert!(
        start.elapsed() >= Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        next(&mut silent).await,
        None,
        "the silent connection was closed"
    );
    h.stop().await;
}

/// A coordinator that answers heartbeats is kept however long no work
/// comes; one that stops answering (paused, partitioned) is left after
/// coordinator-timeout-millis for a new connection.
#[tokio::test(start_paused = true)]
async fn a_coordinator_that_stops_answering_heartbeats_is_left_for_a_new_connection() {
    let h = Harness::start("w-ack", 1).await;
    let (mut live, _) = h.accept_registered().await;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        assert_eq!(next(&mut live).await, Some(WorkerMessage::Heartbeat));
    }
    let silent = Instant::now();
    let (_next, register) = h.accept_registered().await;
    assert!(matches!(register, WorkerMessage::Register { .. }));
    let waited = silent.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(8),
        "left after the default coordinator-timeout-millis (6 s), not {waited:?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_closes_the_connection() {
    let h = Harness::start("w-stop", 1).await;
    let (mut peer, _) = h.accept_registered().await;
    let (_, _, frame) = assign("sleep", json!({"millis": 60_000}));
    send(&mut peer, frame).await;
    h.shutdown.cancel();
    assert_eq!(
        next_non_heartbeat(&mut peer).await,
        None,
        "closed without a result"
    );
    timeout(PATIENCE, h.worker)
        .await
        .expect("run returns")
        .expect("no panic")
        .expect("stopped, not refused");
}

#[tokio::test]
async fn handle_runs_on_its_own_thread_and_stops() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let config = WorkerConfig {
        coordinator: listener.local_addr().expect("addr").to_string(),
        capacity: 1,
        ..WorkerConfig::default()
    };
    let (log, _) = capturing_logger();
    let handle = WorkerHandle::spawn(config, log);
    let harness_like = Harness {
        listener,
        shutdown: CancellationToken::new(),
        worker: tokio::spawn(async { Ok(()) }),
        lines: Lines::default(),
    };
    let (mut peer, register) = timeout(Duration::from_secs(10), harness_like.accept_registered())
        .await
        .expect("registers");
    let WorkerMessage::Register { worker_id, .. } = register else {
        panic!("expected Register")
    };
    assert_eq!(&worker_id, handle.worker_id());
    tokio::task::spawn_blocking(move || handle.stop())
        .await
        .expect("stop");
    let closed = timeout(Duration::from_secs(10), next_non_heartbeat(&mut peer))
        .await
        .expect("closed in time");
    assert_eq!(closed, None);
}
