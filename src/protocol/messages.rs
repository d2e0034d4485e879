//! Every frame body that crosses the wire, grouped by direction.
//!
//! Bodies are MessagePack maps with named fields, so a field added later is
//! ignored by an older peer instead of breaking it.

use crate::protocol::ids::{JobId, LeaseId, WorkerId};
use crate::protocol::job_state::JobState;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Bumped on any incompatible change; peers with different versions refuse
/// each other in the `Hello` exchange.
pub const PROTOCOL_VERSION: u32 = 1;

/// The `Error` frame text for a missing or wrong token; clients match on it.
pub const UNAUTHORIZED: &str = "unauthorized";

/// Which listener a peer believes it is talking to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Worker,
    Client,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Worker => "worker",
            Role::Client => "client",
        })
    }
}

/// The first frame on every connection, in both directions: the peer
/// announces itself, the coordinator answers with its own version.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: u32,
    pub role: Role,
    /// The peer's shared secret for this listener, when one is configured.
    /// Never sent by the coordinator.
    #[serde(default)]
    pub token: Option<String>,
}

impl Hello {
    /// A `Hello` of this protocol version, with `token` if given.
    pub fn new(role: Role, token: Option<&str>) -> Hello {
        Hello {
            protocol_version: PROTOCOL_VERSION,
            role,
            token: token.map(str::to_string),
        }
    }
}

impl fmt::Debug for Hello {
    /// The token is never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hello")
            .field("protocol_version", &self.protocol_version)
            .field("role", &self.role)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Base scheduling priority chosen at submission.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Low = 0,
    #[default]
    Normal = 1,
    High = 2,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Priority::Low, Priority::Normal, Priority::High];

    /// The numeric level: LOW 0, NORMAL 1, HIGH 2.
    pub fn level(self) -> u8 {
        self as u8
    }

    pub fn from_level(level: i64) -> Option<Priority> {
        Priority::ALL
            .into_iter()
            .find(|p| i64::from(p.level()) == level)
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
        })
    }
}

impl FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "low" => Ok(Priority::Low),
            "normal" => Ok(Priority::Normal),
            "high" => Ok(Priority::High),
            _ => Err(format!(
                "unknown priority {s:?} (expected high, normal or low)"
            )),
        }
    }
}

// ---------------------------------------------------------------- workers

/// Frames a worker sends to the coordinator's worker listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WorkerMessage {
    Hello(Hello),
    /// Sent once after `Hello`; answered by `Registered`.
    Register {
        worker_id: WorkerId,
        capacity: u32,
        task_types: Vec<String>,
    },
    /// Liveness signal on the worker's own timer.
    Heartbeat,
    /// The outcome of the attempt identified by `lease`.
    TaskResult {
        job_id: JobId,
        lease: LeaseId,
        outcome: TaskOutcome,
    },
    /// How far the attempt under `lease` has got (0–100) and what it is
    /// doing; the coordinator keeps the latest, in memory only.
    TaskProgress {
        job_id: JobId,
        lease: LeaseId,
        percent: u8,
        message: String,
    },
    /// The worker is shutting down: it takes no new tasks and finishes (or,
    /// at its drain timeout, abandons) the ones it has.
    Draining,
}

/// What an attempt produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskOutcome {
    #[serde(with = "serde_bytes_compat")]
    Succeeded(Vec<u8>),
    /// A retryable failure is retried while the job's budget lasts; one that
    /// is not (an invalid payload, a program not allowed) fails the job at once.
    Failed {
        error: String,
        #[serde(default = "retryable_by_default")]
        retryable: bool,
    },
}

fn retryable_by_default() -> bool {
    true
}

impl TaskOutcome {
    /// A failure another attempt might not repeat.
    pub fn failed(error: impl Into<String>) -> Self {
        TaskOutcome::Failed {
            error: error.into(),
            retryable: true,
        }
    }

    /// A failure every attempt would repeat: the job fails at once.
    pub fn failed_permanently(error: impl Into<String>) -> Self {
        TaskOutcome::Failed {
            error: error.into(),
            retryable: false,
        }
    }
}

/// Frames the coordinator sends to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CoordinatorToWorker {
    Hello(Hello),
    /// The registration is accepted; tasks may follow.
    Registered {
        worker_id: WorkerId,
    },
    /// Run this attempt; report its result under `lease`.
    TaskAssign {
        job_id: JobId,
        lease: LeaseId,
        task_type: String,
        #[serde(with = "serde_bytes_compat")]
        payload: Vec<u8>,
        timeout_ms: u64,
    },
    /// Stop the attempt under `lease`; its result will be ignored.
    TaskCancel {
        job_id: JobId,
        lease: LeaseId,
    },
    /// The connection is about to be closed for the stated reason.
    Error {
        message: String,
    },
}

// ---------------------------------------------------------------- clients

/// One job as a client asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitRequest {
    pub task_type: String,
    /// MessagePack encoding of the task's payload.
    #[serde(with = "serde_bytes_compat")]
    pub payload: Vec<u8>,
    #[serde(default)]
    pub priority: Priority,
    /// `None`: the coordinator's `default-max-attempts`.
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// `None`: the coordinator's `task-timeout-millis`.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// A client-chosen key: a second submission with the same key returns
    /// the first job's id instead of creating a job, also after a restart.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Not to run before this many milliseconds after admission.
    #[serde(default)]
    pub delay_ms: Option<u64>,
}

impl SubmitRequest {
    /// A submission with the coordinator's defaults for everything optional.
    pub fn new(task_type: impl Into<String>, payload: Vec<u8>) -> Self {
        SubmitRequest {
            task_type: task_type.into(),
            payload,
            priority: Priority::Normal,
            max_attempts: None,
            timeout_ms: None,
            idempotency_key: None,
            delay_ms: None,
        }
    }
}

/// Requests a client may send after `Hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    Submit(SubmitRequest),
    /// Many submissions in one frame; answered with one `SubmitAnswer` each, in order.
    SubmitBatch(Vec<SubmitRequest>),
    Status {
        job_id: JobId,
    },
    /// Newest first; `None` filters mean every state or task type.
    List {
        state: Option<JobState>,
        limit: u32,
        #[serde(default)]
        task_type: Option<String>,
    },
    Workers,
    /// QUEUED or RETRY_WAIT: cancelled at once; RUNNING: its lease is
    /// revoked and the worker told to stop. Answered with the job, or
    /// `CancelRefused` for a job already finished.
    Cancel {
        job_id: JobId,
    },
    /// Puts a FAILED or CANCELLED job back to QUEUED with a fresh attempt
    /// budget, keeping its history. Answered with `Requeued` or `RequeueRefused`.
    Requeue {
        job_id: JobId,
    },
    /// Requeues every FAILED job (of one task type, if given), oldest first.
    RequeueFailed {
        #[serde(default)]
        task_type: Option<String>,
    },
}

/// Frames a client sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientMessage {
    Hello(Hello),
    /// `request_id` is chosen by the client and echoed in the answer, so a
    /// client may pipeline requests.
    Request {
        request_id: u64,
        request: ClientRequest,
    },
}

/// The answer to one submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubmitAnswer {
    /// Admitted and durable. `no_worker` is true when no connected worker
    /// advertises the task type (the job waits for one).
    Accepted { job_id: JobId, no_worker: bool },
    /// Not admitted; nothing was stored.
    Rejected(SubmitRejected),
}

/// Why a submission was refused. The reason names the offending field or limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}")]
pub struct SubmitRejected {
    pub reason: String,
}

/// Answers to `ClientRequest`s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientResponse {
    Submitted(SubmitAnswer),
    BatchSubmitted(Vec<SubmitAnswer>),
    Job(Box<JobView>),
    NotFound {
        job_id: JobId,
    },
    Jobs(JobList),
    Workers(Vec<WorkerView>),
    /// The job had already finished; nothing changed.
    CancelRefused {
        job_id: JobId,
        state: JobState,
    },
    /// These jobs are QUEUED again. `refused` says why requeueing stopped
    /// early (the admission limit), if it did.
    Requeued {
        job_ids: Vec<JobId>,
        refused: Option<String>,
    },
    /// Nothing changed, for the stated reason.
    RequeueRefused {
        job_id: JobId,
        reason: String,
    },
    /// The request was not run: a per-connection limit was hit.
    Overloaded {
        reason: String,
    },
}

/// A page of jobs and how many jobs are in each state (of the listed task
/// type, if one was given).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobList {
    pub jobs: Vec<JobView>,
    pub counts: Vec<StateCount>,
}

/// How many jobs are in `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: JobState,
    pub count: u64,
}

/// Frames the coordinator sends to a client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CoordinatorToClient {
    Hello(Hello),
    Response {
        request_id: u64,
        response: ClientResponse,
    },
    /// The connection is about to be closed for the stated reason.
    Error {
        message: String,
    },
}

/// A read-only snapshot of one job, as durable as the answer carrying it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    pub job_id: JobId,
    pub task_type: String,
    #[serde(with = "serde_bytes_compat")]
    pub payload: Vec<u8>,
    pub state: JobState,
    pub priority: Priority,
    /// The level the job is scheduled at when the view is taken: its base
    /// priority raised by aging (LOW 0, NORMAL 1, HIGH 2).
    #[serde(default)]
    pub effective_level: u8,
    pub sequence: u64,
    pub attempts: u32,
    pub max_attempts: u32,
    pub timeout_ms: u64,
    /// Unix milliseconds.
    pub submitted_at: i64,
    pub updated_at: i64,
    pub worker_id: Option<WorkerId>,
    pub lease: Option<LeaseId>,
    #[serde(default, with = "serde_bytes_compat::option")]
    pub result: Option<Vec<u8>>,
    pub error: Option<String>,
    pub next_retry_at: Option<i64>,
    /// Not to run before this time (a delayed or requeued job).
    #[serde(default)]
    pub not_before: Option<i64>,
    /// True when no connected worker advertises `task_type`.
    pub no_worker: bool,
    /// Every attempt so far, oldest first.
    #[serde(default)]
    pub history: Vec<Attempt>,
    /// The running attempt's latest progress report, if any.
    #[serde(default)]
    pub progress: Option<Progress>,
}

/// A running task's own account of how far it has got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// 0 to 100.
    pub percent: u8,
    pub message: String,
    /// When the coordinator received it (unix milliseconds).
    pub at: i64,
}

/// One assignment of a job to a worker and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    pub worker_id: WorkerId,
    pub lease: LeaseId,
    /// Unix milliseconds.
    pub started_at: i64,
    pub ended_at: Option<i64>,
    /// `None` while the attempt is running.
    pub outcome: Option<AttemptOutcome>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttemptOutcome {
    Succeeded,
    /// The task reported failure.
    Failed {
        error: String,
    },
    /// The attempt passed its deadline and its lease was revoked.
    TimedOut {
        timeout_ms: u64,
    },
    /// The worker died, disconnected or was replaced while running it.
    WorkerLost {
        reason: String,
    },
    /// A client cancelled the job while it ran.
    Cancelled,
    /// The coordinator restarted while it ran; its outcome is unknown.
    Interrupted,
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptOutcome::Succeeded => f.write_str("succeeded"),
            AttemptOutcome::Failed { error } => write!(f, "failed: {error}"),
            AttemptOutcome::TimedOut { timeout_ms } => write!(f, "timed out after {timeout_ms} ms"),
            AttemptOutcome::WorkerLost { reason } => write!(f, "worker lost: {reason}"),
            AttemptOutcome::Cancelled => f.write_str("cancelled"),
            AttemptOutcome::Interrupted => f.write_str("interrupted by a coordinator restart"),
        }
    }
}

/// A connected worker's advertised shape and current load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerView {
    pub worker_id: WorkerId,
    pub capacity: u32,
    pub active: u32,
    pub task_types: Vec<String>,
    /// Unix milliseconds.
    pub registered_at: i64,
    pub last_heartbeat_at: i64,
    /// The worker is shutting down and takes no new tasks.
    #[serde(default)]
    pub draining: bool,
}

/// Byte vectors as MessagePack `bin` rather than an array of integers: a
/// third of the size and one memcpy to decode.
pub mod serde_bytes_compat {
    use serde::de::{Deserializer, Error, SeqAccess, Visitor};
    use serde::Serializer;
    use std::fmt;

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(BytesVisitor)
    }

    struct BytesVisitor;

    impl<'de> Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a byte string")
        }
        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<Vec<u8>, E> {
            Ok(v.as_bytes().to_vec())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }

    /// The same for `Option<Vec<u8>>`.
    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
            match bytes {
                Some(b) => s.serialize_some(&Bytes(b)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
            Ok(Option::<Wrapped>::deserialize(d)?.map(|w| w.0))
        }

        struct Bytes<'a>(&'a [u8]);

        impl serde::Serialize for Bytes<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }

        struct Wrapped(Vec<u8>);

        impl<'de> Deserialize<'de> for Wrapped {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                super::deserialize(d).map(Wrapped)
            }
        }
    }
}
