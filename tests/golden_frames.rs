//! Golden frames: one value of every message kind, built from the real
//! protocol types, checked against `tests/golden/frames/`. Per kind the
//! directory holds `NAME.msgpack` (the frame body exactly as
//! `rmp_serde::to_vec_named` writes it, without the 4-byte length) and
//! `NAME.json` (the same value as JSON, for people writing a client).
//! Another language's client decodes and re-encodes every `.msgpack` byte
//! for byte (the Python package's tests do), so a change of the wire format
//! shows up here first. Regenerate after an intended change with
//! `TASKYARD_BLESS=1 cargo test --test golden_frames` and commit the files.

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use taskyard::protocol::*;
use uuid::Uuid;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/frames");

fn job(n: u8) -> JobId {
    JobId(Uuid::from_bytes([
        0x01, 0x93, 0x8f, 0x2a, 0x5c, 0x10, 0x7d, 0x21, 0x8a, 0x4e, 0x00, 0x11, 0x22, 0x33, 0x44, n,
    ]))
}

fn lease(n: u8) -> LeaseId {
    LeaseId(Uuid::from_bytes([
        0x6f, 0x1c, 0x9b, 0x03, 0x2e, 0x44, 0x4b, 0x7a, 0x9c, 0x55, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, n,
    ]))
}

fn worker() -> WorkerId {
    WorkerId("py-worker-1".into())
}

/// A payload as the CLI encodes `{"n": 7}`.
fn payload() -> Vec<u8> {
    vec![0x81, 0xa1, b'n', 0x07]
}

const AT: i64 = 1_764_806_400_000;

fn submit() -> SubmitRequest {
    SubmitRequest {
        task_type: "resize".into(),
        payload: payload(),
        priority: Priority::High,
        max_attempts: Some(5),
        timeout_ms: Some(60_000),
        idempotency_key: Some("order-42".into()),
        delay_ms: Some(1_500),
        concurrency_key: None,
    }
}

fn leader() -> LeaderAddresses {
    LeaderAddresses {
        node: "coord-a".into(),
        epoch: 3,
        client: Some("10.0.0.1:7400".into()),
        worker: Some("10.0.0.1:7401".into()),
        http: None,
    }
}

fn cursor() -> PageCursor {
    PageCursor((41, AT, job(1)))
}

fn prefix() -> IdPrefix {
    IdPrefix::parse("01938f2a").expect("prefix")
}

fn job_view() -> JobView {
    JobView {
        job_id: job(1),
        task_type: "resize".into(),
        payload: payload(),
        state: JobState::Running,
        priority: Priority::Normal,
        effective_level: 1,
        sequence: 41,
        attempts: 2,
        max_attempts: 3,
        timeout_ms: 30_000,
        submitted_at: AT,
        updated_at: AT + 2_000,
        worker_id: Some(worker()),
        lease: Some(lease(2)),
        result: None,
        error: Some("timed out".into()),
        next_retry_at: None,
        not_before: None,
        no_worker: false,
        history: vec![
            Attempt {
                number: 1,
                worker_id: worker(),
                lease: lease(1),
                started_at: AT + 10,
                ended_at: Some(AT + 1_010),
                outcome: Some(AttemptOutcome::Failed {
                    error: "timed out".into(),
                }),
            },
            Attempt {
                number: 2,
                worker_id: worker(),
                lease: lease(2),
                started_at: AT + 1_500,
                ended_at: None,
                outcome: None,
            },
        ],
        progress: Some(Progress {
            percent: 40,
            message: "resizing".into(),
            at: AT + 1_900,
        }),
        payload_bytes: 4,
        payload_omitted: false,
        result_bytes: None,
        result_omitted: false,
        history_omitted: 0,
        idempotency_key: Some("schedule:resize-nightly:2025-12-04T00:00:00Z".into()),
        schedule: Some("resize-nightly".into()),
        schedule_slot: Some(AT),
        key_omitted: false,
        waiting: None,
        concurrency_key: None,
    }
}

fn summary() -> JobSummary {
    JobSummary::of(&job_view())
}

fn request(request_id: u64, request: ClientRequest) -> ClientMessage {
    ClientMessage::Request {
        request_id,
        request,
    }
}

fn response(request_id: u64, response: ClientResponse) -> CoordinatorToClient {
    CoordinatorToClient::Response {
        request_id,
        response,
    }
}

/// One fixture: its file name, its MessagePack body and its JSON meaning.
struct Fixture {
    name: String,
    msgpack: Vec<u8>,
    json: String,
}

fn fixture<T: Serialize>(name: impl Into<String>, value: &T) -> Fixture {
    let msgpack = rmp_serde::to_vec_named(value).expect("encode msgpack");
    let mut json = serde_json::to_string_pretty(value).expect("encode json");
    json.push('\n');
    Fixture {
        name: name.into(),
        msgpack,
        json,
    }
}

/// The fixture name of a worker frame; exhaustive, so a new variant does
/// not compile until it has a fixture.
fn worker_kind(m: &WorkerMessage) -> &'static str {
    match m {
        WorkerMessage::Hello(_) => "worker_hello",
        WorkerMessage::Register { .. } => "worker_register",
        WorkerMessage::Heartbeat => "worker_heartbeat",
        WorkerMessage::TaskResult { .. } => "worker_task_result",
        WorkerMessage::TaskProgress { .. } => "worker_task_progress",
        WorkerMessage::Draining => "worker_draining",
    }
}

fn to_worker_kind(m: &CoordinatorToWorker) -> &'static str {
    match m {
        CoordinatorToWorker::Hello(_) => "to_worker_hello",
        CoordinatorToWorker::Registered { .. } => "to_worker_registered",
        CoordinatorToWorker::TaskAssign { .. } => "to_worker_task_assign",
        CoordinatorToWorker::TaskCancel { .. } => "to_worker_task_cancel",
        CoordinatorToWorker::Error { .. } => "to_worker_error",
        CoordinatorToWorker::NotLeader { .. } => "to_worker_not_leader",
        CoordinatorToWorker::HeartbeatAck => "to_worker_heartbeat_ack",
    }
}

fn request_kind(r: &ClientRequest) -> &'static str {
    match r {
        ClientRequest::Submit(_) => "submit",
        ClientRequest::SubmitBatch(_) => "submit_batch",
        ClientRequest::Status { .. } => "status",
        ClientRequest::List { .. } => "list",
        ClientRequest::ListJobs(_) => "list_jobs",
        ClientRequest::Resolve { .. } => "resolve",
        ClientRequest::ReadChunk { .. } => "read_chunk",
        ClientRequest::Workers => "workers",
        ClientRequest::Cancel { .. } => "cancel",
        ClientRequest::Requeue { .. } => "requeue",
        ClientRequest::RequeueFailed { .. } => "requeue_failed",
        ClientRequest::RequeueJobs { .. } => "requeue_jobs",
        ClientRequest::Delete { .. } => "delete",
        ClientRequest::DeleteFinished { .. } => "delete_finished",
        ClientRequest::Queues => "queues",
        ClientRequest::Ping => "ping",
        ClientRequest::CreateSchedule(_) => "create_schedule",
        ClientRequest::UpdateSchedule(_) => "update_schedule",
        ClientRequest::ListSchedules { .. } => "list_schedules",
        ClientRequest::ShowSchedule { .. } => "show_schedule",
        ClientRequest::PauseSchedule { .. } => "pause_schedule",
        ClientRequest::ResumeSchedule { .. } => "resume_schedule",
        ClientRequest::TriggerSchedule { .. } => "trigger_schedule",
        ClientRequest::DeleteSchedule { .. } => "delete_schedule",
    }
}

fn response_kind(r: &ClientResponse) -> &'static str {
    match r {
        ClientResponse::Submitted(SubmitAnswer::Accepted { .. }) => "submitted_accepted",
        ClientResponse::Submitted(SubmitAnswer::Rejected(_)) => "submitted_rejected",
        ClientResponse::BatchSubmitted(_) => "batch_submitted",
        ClientResponse::Job(_) => "job",
        ClientResponse::NotFound { .. } => "not_found",
        ClientResponse::Jobs(_) => "jobs",
        ClientResponse::Workers(_) => "workers",
        ClientResponse::CancelRefused { .. } => "cancel_refused",
        ClientResponse::Requeued { .. } => "requeued",
        ClientResponse::RequeueRefused { .. } => "requeue_refused",
        ClientResponse::Overloaded { .. } => "overloaded",
        ClientResponse::NotDurable { .. } => "not_durable",
        ClientResponse::Pong => "pong",
        ClientResponse::Resolved { .. } => "resolved",
        ClientResponse::NoMatch { .. } => "no_match",
        ClientResponse::Ambiguous { .. } => "ambiguous",
        ClientResponse::Invalid { .. } => "invalid",
        ClientResponse::Bulk(_) => "bulk",
        ClientResponse::Queues(_) => "queues",
        ClientResponse::Chunk(_) => "chunk",
        ClientResponse::ChunkRefused { .. } => "chunk_refused",
        ClientResponse::AnswerTooLarge { .. } => "answer_too_large",
        ClientResponse::Schedule(_) => "schedule",
        ClientResponse::Schedules { .. } => "schedules",
        ClientResponse::ScheduleDeleted { .. } => "schedule_deleted",
        ClientResponse::ScheduleRefused { .. } => "schedule_refused",
    }
}

fn worker_messages() -> Vec<WorkerMessage> {
    vec![
        WorkerMessage::Hello(Hello::new(Role::Worker, Some("worker-secret"))),
        WorkerMessage::Register {
            worker_id: worker(),
            capacity: 8,
            task_types: vec!["resize".into(), "echo".into()],
            running: vec![RunningAttempt {
                job_id: job(1),
                lease: lease(2),
            }],
        },
        WorkerMessage::Heartbeat,
        WorkerMessage::TaskResult {
            job_id: job(1),
            lease: lease(2),
            outcome: TaskOutcome::Succeeded(b"{\"width\":640}".to_vec()),
        },
        WorkerMessage::TaskProgress {
            job_id: job(1),
            lease: lease(2),
            percent: 40,
            message: "resizing".into(),
        },
        WorkerMessage::Draining,
    ]
}

fn coordinator_to_worker() -> Vec<CoordinatorToWorker> {
    vec![
        CoordinatorToWorker::Hello(Hello::new(Role::Worker, None)),
        CoordinatorToWorker::Registered {
            worker_id: worker(),
            epoch: 3,
        },
        CoordinatorToWorker::TaskAssign {
            job_id: job(1),
            lease: lease(2),
            task_type: "resize".into(),
            payload: payload(),
            timeout_ms: 30_000,
            epoch: 3,
            attempt: 2,
        },
        CoordinatorToWorker::TaskCancel {
            job_id: job(1),
            lease: lease(2),
            epoch: 3,
        },
        CoordinatorToWorker::Error {
            message: UNAUTHORIZED.into(),
        },
        CoordinatorToWorker::NotLeader {
            leader: Some(leader()),
        },
        CoordinatorToWorker::HeartbeatAck,
    ]
}

fn client_requests() -> Vec<ClientRequest> {
    vec![
        ClientRequest::Submit(submit()),
        ClientRequest::SubmitBatch(vec![submit(), SubmitRequest::new("echo", payload())]),
        ClientRequest::Status { job_id: job(1) },
        ClientRequest::List {
            state: Some(JobState::Failed),
            limit: 50,
            task_type: Some("resize".into()),
            cursor: Some(cursor()),
        },
        ClientRequest::ListJobs(ListQuery {
            state: Some(JobState::Queued),
            task_type: None,
            priority: Some(Priority::Low),
            id_prefix: Some(prefix()),
            order: ListOrder::OldestFirst,
            limit: 20,
            cursor: None,
        }),
        ClientRequest::Resolve { prefix: prefix() },
        ClientRequest::ReadChunk {
            job_id: job(1),
            field: ByteField::Result,
            offset: 0,
            max_bytes: 65_536,
        },
        ClientRequest::Workers,
        ClientRequest::Cancel { job_id: job(1) },
        ClientRequest::Requeue { job_id: job(1) },
        ClientRequest::RequeueFailed {
            task_type: Some("resize".into()),
            failed_before: Some(AT),
            state: Some(JobState::Cancelled),
        },
        ClientRequest::RequeueJobs {
            job_ids: vec![job(1), job(2)],
        },
        ClientRequest::Delete {
            job_ids: vec![job(3)],
        },
        ClientRequest::DeleteFinished {
            state: Some(JobState::Succeeded),
            task_type: None,
            finished_before: Some(AT),
        },
        ClientRequest::Queues,
        ClientRequest::Ping,
        ClientRequest::CreateSchedule(Box::new(schedule_spec())),
        ClientRequest::UpdateSchedule(Box::new(ScheduleSpec {
            cron: None,
            tz: None,
            every_ms: Some(30_000),
            ..schedule_spec()
        })),
        ClientRequest::ListSchedules {
            after: Some("hourly".into()),
        },
        ClientRequest::ShowSchedule {
            name: "nightly".into(),
        },
        ClientRequest::PauseSchedule {
            name: "nightly".into(),
        },
        ClientRequest::ResumeSchedule {
            name: "nightly".into(),
        },
        ClientRequest::TriggerSchedule {
            name: "nightly".into(),
        },
        ClientRequest::DeleteSchedule {
            name: "nightly".into(),
        },
    ]
}

fn schedule_spec() -> ScheduleSpec {
    ScheduleSpec {
        cron: Some("0 3 * * *".into()),
        tz: Some("Europe/Berlin".into()),
        overlap: Overlap::BufferOne,
        catchup_window_ms: Some(3_600_000),
        jitter_ms: 500,
        ..ScheduleSpec::new("nightly", "resize", payload())
    }
}

fn schedule_view() -> ScheduleView {
    ScheduleView {
        spec: schedule_spec(),
        next_fires: vec![AT, AT + 86_400_000],
        last_slot: Some(AT - 86_400_000),
        recent_runs: vec![ScheduleRun {
            slot: Some(AT - 86_400_000),
            job_id: job(1),
            state: Some(JobState::Succeeded),
        }],
        fired: 1,
        skipped: 0,
    }
}

fn client_responses() -> Vec<ClientResponse> {
    let accepted = SubmitAnswer::Accepted {
        job_id: job(1),
        no_worker: false,
    };
    let rejected = SubmitAnswer::Rejected(SubmitRejected {
        reason: "priority: unknown level \"urgent\" (expected high, normal or low)".into(),
    });
    vec![
        ClientResponse::Submitted(accepted.clone()),
        ClientResponse::Submitted(rejected.clone()),
        ClientResponse::BatchSubmitted(vec![accepted, rejected]),
        ClientResponse::Job(Box::new(job_view())),
        ClientResponse::NotFound { job_id: job(9) },
        ClientResponse::Jobs(JobList {
            jobs: vec![summary()],
            counts: vec![
                StateCount {
                    state: JobState::Running,
                    count: 1,
                },
                StateCount {
                    state: JobState::Succeeded,
                    count: 1_000_000,
                },
            ],
            next: Some(cursor()),
        }),
        ClientResponse::Workers(vec![WorkerView {
            worker_id: worker(),
            capacity: 8,
            active: 3,
            task_types: vec!["resize".into()],
            registered_at: AT,
            last_heartbeat_at: AT + 500,
            draining: false,
        }]),
        ClientResponse::CancelRefused {
            job_id: job(1),
            state: JobState::Succeeded,
        },
        ClientResponse::Requeued {
            job_ids: vec![job(1)],
            refused: None,
        },
        ClientResponse::RequeueRefused {
            job_id: job(1),
            reason: "job is RUNNING, not FAILED or CANCELLED".into(),
        },
        ClientResponse::Overloaded {
            reason: "max-in-flight-requests (64) reached".into(),
        },
        ClientResponse::Pong,
        ClientResponse::Resolved { job_id: job(1) },
        ClientResponse::NoMatch { prefix: prefix() },
        ClientResponse::Ambiguous {
            prefix: prefix(),
            candidates: vec![job(2), job(1)],
        },
        ClientResponse::Invalid {
            reason: "state: RUNNING is not a finished state".into(),
        },
        ClientResponse::Bulk(BulkAnswer {
            done: vec![job(1)],
            refused: vec![Refusal {
                job_id: job(2),
                reason: "not finished".into(),
            }],
            more: true,
        }),
        ClientResponse::Queues(QueueStats {
            at: AT,
            queues: vec![QueueRow {
                task_type: "resize".into(),
                priority: Priority::High,
                depth: 12,
                oldest_submitted_at: AT - 4_000,
                oldest_age_ms: 4_000,
                latency_ms: 35,
            }],
            task_types: vec![TaskTypeRow {
                task_type: "resize".into(),
                ready: 12,
                delayed: 1,
                retry_wait: 0,
                running: 3,
                oldest_age_ms: Some(4_000),
                latency_ms: None,
                workers: 1,
                free_slots: 5,
                no_worker: false,
            }],
        }),
        ClientResponse::Chunk(ByteChunk {
            job_id: job(1),
            field: ByteField::Result,
            offset: 0,
            total: 13,
            bytes: b"{\"width\":640}".to_vec(),
        }),
        ClientResponse::ChunkRefused {
            job_id: job(1),
            reason: "job has no result yet".into(),
        },
        ClientResponse::AnswerTooLarge {
            size: 2_000_000,
            max: 1_048_576,
        },
        ClientResponse::Schedule(Box::new(schedule_view())),
        ClientResponse::Schedules {
            schedules: vec![schedule_view()],
            more: false,
        },
        ClientResponse::ScheduleDeleted {
            name: "nightly".into(),
        },
        ClientResponse::ScheduleRefused {
            kind: ScheduleRefusal::Invalid,
            field: Some("cron".into()),
            reason: "cron: Component error: Number out of bounds.".into(),
        },
        ClientResponse::NotDurable {
            reason: "the commit carrying this request failed: database t.db: disk is full".into(),
        },
    ]
}

fn coordinator_to_client_frames() -> Vec<(String, CoordinatorToClient)> {
    let mut frames = vec![
        (
            "to_client_hello".to_string(),
            CoordinatorToClient::Hello(Hello::new(Role::Client, None)),
        ),
        (
            "to_client_error".to_string(),
            CoordinatorToClient::Error {
                message: UNAUTHORIZED.into(),
            },
        ),
        (
            "to_client_not_leader".to_string(),
            CoordinatorToClient::NotLeader {
                leader: Some(leader()),
            },
        ),
        (
            "to_client_not_leader_none".to_string(),
            CoordinatorToClient::NotLeader { leader: None },
        ),
    ];
    for (i, r) in client_responses().into_iter().enumerate() {
        let name = format!("response_{}", response_kind(&r));
        frames.push((name, response(100 + i as u64, r)));
    }
    frames
}

/// Every fixture, by name.
fn fixtures() -> Vec<Fixture> {
    let mut all = Vec::new();
    for m in worker_messages() {
        all.push(fixture(worker_kind(&m), &m));
    }
    for m in coordinator_to_worker() {
        all.push(fixture(to_worker_kind(&m), &m));
    }
    all.push(fixture(
        "client_hello",
        &ClientMessage::Hello(Hello::new(Role::Client, Some("client-secret"))),
    ));
    for (i, r) in client_requests().into_iter().enumerate() {
        let name = format!("request_{}", request_kind(&r));
        all.push(fixture(name, &request(i as u64 + 1, r)));
    }
    for (name, frame) in coordinator_to_client_frames() {
        all.push(fixture(name, &frame));
    }
    all
}

fn files_in(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).expect("read fixture"))
        })
        .collect()
}

fn expected_files() -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for f in fixtures() {
        let before = files.len();
        files.insert(format!("{}.msgpack", f.name), f.msgpack);
        files.insert(format!("{}.json", f.name), f.json.into_bytes());
        assert_eq!(
            files.len(),
            before + 2,
            "fixture name {} used twice",
            f.name
        );
    }
    files
}

#[test]
fn golden_frames_match_the_protocol_types() {
    let dir = PathBuf::from(DIR);
    let expected = expected_files();
    if std::env::var("TASKYARD_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(&dir).expect("create the fixture directory");
        for name in files_in(&dir).keys() {
            if !expected.contains_key(name) && name != "README.md" {
                std::fs::remove_file(dir.join(name)).expect("remove a stale fixture");
            }
        }
        for (name, bytes) in &expected {
            std::fs::write(dir.join(name), bytes).expect("write a fixture");
        }
    }
    let mut found = files_in(&dir);
    found.remove("README.md");
    let drifted: Vec<&String> = expected
        .iter()
        .filter(|(name, bytes)| found.get(*name) != Some(bytes))
        .map(|(name, _)| name)
        .collect();
    let stale: Vec<&String> = found
        .keys()
        .filter(|n| !expected.contains_key(*n))
        .collect();
    assert!(
        drifted.is_empty() && stale.is_empty(),
        "tests/golden/frames/ differs from the protocol types: changed or missing {drifted:?}, \
         no longer produced {stale:?}. If the wire change is intended, run \
         `TASKYARD_BLESS=1 cargo test --test golden_frames`, commit the files and update the \
         other clients (clients/python)."
    );
}

#[test]
fn every_golden_frame_decodes_back_to_its_value() {
    fn back<T>(value: T)
    where
        T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let bytes = rmp_serde::to_vec_named(&value).expect("encode");
        let decoded: T = rmp_serde::from_slice(&bytes).expect("decode");
        assert_eq!(decoded, value);
    }
    worker_messages().into_iter().for_each(back);
    coordinator_to_worker().into_iter().for_each(back);
    client_requests()
        .into_iter()
        .map(|r| request(1, r))
        .for_each(back);
    coordinator_to_client_frames()
        .into_iter()
        .map(|(_, f)| f)
        .for_each(back);
}
