//! Framing: a 4-byte big-endian length, then that many bytes of MessagePack
//! with named fields.

use crate::hello::Role;
use bytes::{Buf, BufMut, BytesMut};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io;
use std::marker::PhantomData;
use thiserror::Error;
use tokio_util::codec::{Decoder, Encoder};

const HEADER_BYTES: usize = 4;

/// Default for `max-frame-bytes`: 1 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 1024 * 1024;

/// Why a frame could not be read or written. Any of these ends the
/// connection; none of them affects another connection.
#[derive(Debug, Error)]
pub enum ProtocolError {
    #[error("frame of {size} bytes exceeds max-frame-bytes ({max})")]
    FrameTooLarge { size: usize, max: usize },
    #[error("malformed frame: {0}")]
    Malformed(#[from] rmp_serde::decode::Error),
    #[error("cannot encode frame: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    #[error("connection error: {0}")]
    Io(#[from] io::Error),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    /// What came back is not taskyard at all but another protocol on the
    /// port dialled; `hint` says which port to use or which flag to pass.
    #[error("{hint}")]
    WrongPort { hint: &'static str },
}

/// The hints of `ProtocolError::WrongPort`.
pub const TLS_PORT_HINT: &str = "this port speaks TLS: pass --tls-ca";
pub const HTTP_CLIENT_PORT_HINT: &str =
    "this is an HTTP port; the client port is the one in client-listen (default 7400)";
pub const HTTP_WORKER_PORT_HINT: &str =
    "this is an HTTP port; the worker port is the one in worker-listen (default 7401)";

/// What a frame header too large to be ours says about the server that sent
/// it, for a peer dialling a coordinator's `role` port: a TLS record
/// (content type 20-23, version 3.x; a TLS server answers a plain `Hello`
/// with an alert) or an HTTP response.
fn foreign_server(header: &[u8], role: Role) -> Option<&'static str> {
    match header {
        [0x14..=0x17, 0x03, ..] => Some(TLS_PORT_HINT),
        [b'H', b'T', b'T', b'P', ..] => Some(match role {
            Role::Client => HTTP_CLIENT_PORT_HINT,
            Role::Worker => HTTP_WORKER_PORT_HINT,
        }),
        _ => None,
    }
}

/// Decodes frames of `In` and encodes frames of `Out`. The length is checked
/// before any of the body is buffered, so a peer cannot make us allocate more
/// than `max_frame_bytes` per connection. The codec keeps no state between
/// calls: a partial frame stays in the buffer until it is complete.
pub struct FrameCodec<In, Out> {
    max_frame_bytes: usize,
    /// Set on the side that dials a coordinator's port for this role.
    dialled: Option<Role>,
    _types: PhantomData<fn(Out) -> In>,
}

impl<In, Out> FrameCodec<In, Out> {
    pub fn new(max_frame_bytes: usize) -> Self {
        FrameCodec {
            max_frame_bytes,
            dialled: None,
            _types: PhantomData,
        }
    }

    /// For a peer that dialled the coordinator's `role` port: an oversized
    /// first header that is really TLS or HTTP is reported as
    /// `ProtocolError::WrongPort` saying what to do instead.
    pub fn dialling(mut self, role: Role) -> Self {
        self.dialled = Some(role);
        self
    }
}

impl<In, Out> Clone for FrameCodec<In, Out> {
    fn clone(&self) -> Self {
        FrameCodec {
            dialled: self.dialled,
            ..FrameCodec::new(self.max_frame_bytes)
        }
    }
}

impl<In: DeserializeOwned, Out> Decoder for FrameCodec<In, Out> {
    type Item = In;
    type Error = ProtocolError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<In>, ProtocolError> {
        if src.len() < HEADER_BYTES {
            return Ok(None);
        }
        let size = (&src[..HEADER_BYTES]).get_u32() as usize;
        if size > self.max_frame_bytes {
            if let Some(hint) = self.dialled.and_then(|role| foreign_server(src, role)) {
                return Err(ProtocolError::WrongPort { hint });
            }
            return Err(ProtocolError::FrameTooLarge {
                size,
                max: self.max_frame_bytes,
            });
        }
        if src.len() < HEADER_BYTES + size {
            src.reserve(HEADER_BYTES + size - src.len());
            return Ok(None);
        }
        src.advance(HEADER_BYTES);
        let body = src.split_to(size);
        Ok(Some(rmp_serde::from_slice(&body)?))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<In>, ProtocolError> {
        match self.decode(src)? {
            Some(item) => Ok(Some(item)),
            None if src.is_empty() => Ok(None),
            None => Err(ProtocolError::Truncated),
        }
    }
}

impl<In, Out: Serialize> Encoder<Out> for FrameCodec<In, Out> {
    type Error = ProtocolError;

    fn encode(&mut self, item: Out, dst: &mut BytesMut) -> Result<(), ProtocolError> {
        let body = rmp_serde::to_vec_named(&item)?;
        if body.len() > self.max_frame_bytes {
            return Err(ProtocolError::FrameTooLarge {
                size: body.len(),
                max: self.max_frame_bytes,
            });
        }
        dst.reserve(HEADER_BYTES + body.len());
        dst.put_u32(body.len() as u32);
        dst.put_slice(&body);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{JobId, LeaseId, WorkerId};
    use crate::job_state::JobState;
    use crate::*;

    #[test]
    fn a_dialling_peer_names_tls_and_http_instead_of_a_frame_size() {
        let decode = |bytes: &[u8], role| {
            let mut codec = FrameCodec::<ClientMessage, ClientMessage>::new(1024).dialling(role);
            codec.decode(&mut BytesMut::from(bytes))
        };
        let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46];
        let http = b"HTTP/1.1 400 Bad Request\r\n";
        let hint = |r: Result<Option<ClientMessage>, ProtocolError>| match r {
            Err(ProtocolError::WrongPort { hint }) => hint,
            other => panic!("{other:?}"),
        };
        assert_eq!(hint(decode(&alert, Role::Client)), TLS_PORT_HINT);
        assert_eq!(hint(decode(http, Role::Client)), HTTP_CLIENT_PORT_HINT);
        assert_eq!(hint(decode(http, Role::Worker)), HTTP_WORKER_PORT_HINT);
        let mut listening = FrameCodec::<ClientMessage, ClientMessage>::new(1024);
        assert!(matches!(
            listening.decode(&mut BytesMut::from(&http[..])),
            Err(ProtocolError::FrameTooLarge { .. })
        ));
    }

    fn round_trip<T>(message: T)
    where
        T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug + Clone,
    {
        let mut codec = FrameCodec::<T, T>::new(DEFAULT_MAX_FRAME_BYTES);
        let mut buf = BytesMut::new();
        codec.encode(message.clone(), &mut buf).expect("encode");
        let decoded = codec
            .decode(&mut buf)
            .expect("decode")
            .expect("whole frame");
        assert_eq!(decoded, message);
        assert!(buf.is_empty(), "frame fully consumed");
    }

    fn submit() -> SubmitRequest {
        SubmitRequest {
            task_type: "echo".into(),
            payload: vec![0x81, 0xa1, b'm', 0xa1, b'x'],
            priority: Priority::High,
            max_attempts: Some(5),
            timeout_ms: None,
            idempotency_key: Some("order-42".into()),
            delay_ms: Some(30_000),
            concurrency_key: Some("stripe:acct_42".into()),
        }
    }

    fn job_view() -> JobView {
        JobView {
            job_id: JobId::mint(),
            task_type: "echo".into(),
            payload: vec![1, 2, 3],
            state: JobState::RetryWait,
            priority: Priority::Low,
            effective_level: 1,
            sequence: 7,
            attempts: 1,
            max_attempts: 3,
            timeout_ms: 1000,
            submitted_at: 1,
            updated_at: 2,
            worker_id: Some(WorkerId("w1".into())),
            lease: Some(LeaseId::new_random()),
            result: Some(b"done".to_vec()),
            error: Some("boom".into()),
            next_retry_at: Some(3),
            not_before: Some(4),
            no_worker: true,
            history: vec![
                Attempt {
                    number: 1,
                    worker_id: WorkerId("w1".into()),
                    lease: LeaseId::new_random(),
                    started_at: 1,
                    ended_at: Some(2),
                    outcome: Some(AttemptOutcome::TimedOut { timeout_ms: 1 }),
                },
                Attempt {
                    number: 2,
                    worker_id: WorkerId("w2".into()),
                    lease: LeaseId::new_random(),
                    started_at: 3,
                    ended_at: None,
                    outcome: None,
                },
            ],
            progress: Some(Progress {
                percent: 40,
                message: "resizing".into(),
                at: 5,
            }),
            payload_bytes: 3,
            payload_omitted: false,
            result_bytes: Some(4),
            result_omitted: true,
            history_omitted: 1,
            idempotency_key: Some("schedule:nightly:2026-12-05T02:00:00Z".into()),
            schedule: Some("nightly".into()),
            schedule_slot: Some(1_764_900_000_000),
            key_omitted: false,
            waiting: None,
            concurrency_key: None,
        }
    }

    #[test]
    fn every_worker_message_round_trips() {
        let (job_id, lease) = (JobId::mint(), LeaseId::new_random());
        for m in [
            WorkerMessage::Hello(Hello {
                protocol_version: PROTOCOL_VERSION,
                role: Role::Worker,
                token: None,
                http: None,
            }),
            WorkerMessage::Register {
                worker_id: WorkerId("w-1".into()),
                capacity: 4,
                task_types: vec!["echo".into(), "sleep".into()],
                running: vec![RunningAttempt { job_id, lease }],
            },
            WorkerMessage::Heartbeat,
            WorkerMessage::Draining,
            WorkerMessage::TaskProgress {
                job_id,
                lease,
                percent: 40,
                message: "resizing".into(),
            },
            WorkerMessage::TaskResult {
                job_id,
                lease,
                outcome: TaskOutcome::Succeeded(b"ok".to_vec()),
            },
            WorkerMessage::TaskResult {
                job_id,
                lease,
                outcome: TaskOutcome::failed_permanently("nope"),
            },
        ] {
            round_trip(m);
        }
        for m in [
            CoordinatorToWorker::Hello(Hello {
                protocol_version: PROTOCOL_VERSION,
                role: Role::Worker,
                token: None,
                http: None,
            }),
            CoordinatorToWorker::Registered {
                worker_id: WorkerId("w-1".into()),
                epoch: 3,
            },
            CoordinatorToWorker::TaskAssign {
                job_id,
                lease,
                task_type: "sleep".into(),
                payload: vec![9; 100],
                timeout_ms: 30_000,
                epoch: 3,
                attempt: 2,
            },
            CoordinatorToWorker::TaskCancel {
                job_id,
                lease,
                epoch: 3,
            },
            CoordinatorToWorker::Error {
                message: "bye".into(),
            },
        ] {
            round_trip(m);
        }
    }

    #[test]
    fn every_client_message_round_trips() {
        let job_id = JobId::mint();
        let requests = [
            ClientRequest::Submit(submit()),
            ClientRequest::SubmitBatch(vec![submit(), submit()]),
            ClientRequest::Status { job_id },
            ClientRequest::List {
                state: Some(JobState::Failed),
                limit: 10,
                task_type: Some("echo".into()),
                cursor: Some(PageCursor((9, 8, job_id))),
            },
            ClientRequest::List {
                state: None,
                limit: 1,
                task_type: None,
                cursor: None,
            },
            ClientRequest::ReadChunk {
                job_id,
                field: ByteField::Result,
                offset: 7,
                max_bytes: 1 << 20,
            },
            ClientRequest::Workers,
            ClientRequest::Cancel { job_id },
            ClientRequest::Requeue { job_id },
            ClientRequest::RequeueFailed {
                task_type: Some("echo".into()),
                failed_before: Some(1_700_000_000_000),
                state: Some(JobState::Cancelled),
            },
            ClientRequest::ListJobs(ListQuery {
                state: Some(JobState::Failed),
                task_type: Some("echo".into()),
                priority: Some(Priority::High),
                id_prefix: Some(IdPrefix::parse("0193ab").expect("prefix")),
                order: ListOrder::OldestFirst,
                limit: 7,
                cursor: None,
            }),
            ClientRequest::Resolve {
                prefix: IdPrefix::parse("0193-ab").expect("prefix"),
            },
            ClientRequest::RequeueJobs {
                job_ids: vec![JobId::mint()],
            },
            ClientRequest::Delete {
                job_ids: vec![JobId::mint(), JobId::mint()],
            },
            ClientRequest::DeleteFinished {
                state: Some(JobState::Succeeded),
                task_type: None,
                finished_before: Some(5),
            },
            ClientRequest::Queues,
        ];
        round_trip(ClientMessage::Hello(Hello {
            protocol_version: PROTOCOL_VERSION,
            role: Role::Client,
            token: None,
            http: None,
        }));
        for (i, request) in requests.into_iter().enumerate() {
            round_trip(ClientMessage::Request {
                request_id: i as u64,
                request,
            });
        }
        let accepted = SubmitAnswer::Accepted {
            job_id,
            no_worker: false,
        };
        let rejected = SubmitAnswer::Rejected(SubmitRejected {
            reason: "payload.message: missing".into(),
        });
        let responses = [
            ClientResponse::Submitted(accepted.clone()),
            ClientResponse::Submitted(rejected.clone()),
            ClientResponse::BatchSubmitted(vec![accepted, rejected]),
            ClientResponse::Job(Box::new(job_view())),
            ClientResponse::NotFound { job_id },
            ClientResponse::Jobs(JobList {
                jobs: vec![JobSummary::of(&job_view()), JobSummary::of(&job_view())],
                counts: vec![StateCount {
                    state: JobState::Queued,
                    count: 2,
                }],
                next: Some(PageCursor((1, 2, job_id))),
            }),
            ClientResponse::Chunk(ByteChunk {
                job_id,
                field: ByteField::Payload,
                offset: 3,
                total: 10,
                bytes: vec![1, 2],
            }),
            ClientResponse::ChunkRefused {
                job_id,
                reason: "offset 11 is past the end".into(),
            },
            ClientResponse::AnswerTooLarge { size: 9, max: 8 },
            ClientResponse::Resolved {
                job_id: JobId::mint(),
            },
            ClientResponse::NoMatch {
                prefix: IdPrefix::parse("abcd").expect("prefix"),
            },
            ClientResponse::Ambiguous {
                prefix: IdPrefix::parse("abcd").expect("prefix"),
                candidates: vec![JobId::mint(), JobId::mint()],
            },
            ClientResponse::Invalid {
                reason: "too many".into(),
            },
            ClientResponse::Bulk(BulkAnswer {
                done: vec![JobId::mint()],
                refused: vec![Refusal {
                    job_id: JobId::mint(),
                    reason: "job is RUNNING".into(),
                }],
                more: true,
            }),
            ClientResponse::Queues(QueueStats::default()),
            ClientResponse::CancelRefused {
                job_id,
                state: JobState::Succeeded,
            },
            ClientResponse::Requeued {
                job_ids: vec![job_id],
                refused: Some("max-active-jobs (1) reached".into()),
            },
            ClientResponse::RequeueRefused {
                job_id,
                reason: "job is RUNNING".into(),
            },
            ClientResponse::Workers(vec![WorkerView {
                worker_id: WorkerId("w".into()),
                capacity: 2,
                active: 1,
                task_types: vec!["echo".into()],
                registered_at: 5,
                last_heartbeat_at: 6,
                draining: true,
            }]),
        ];
        for (i, response) in responses.into_iter().enumerate() {
            round_trip(CoordinatorToClient::Response {
                request_id: i as u64,
                response,
            });
        }
        round_trip(CoordinatorToClient::Error {
            message: "x".into(),
        });
    }

    #[test]
    fn oversized_frame_is_refused_before_its_body_arrives() {
        let mut codec = FrameCodec::<WorkerMessage, WorkerMessage>::new(64);
        let mut buf = BytesMut::from(&[0u8, 0, 1, 0][..]); // claims 256 bytes
        match codec.decode(&mut buf) {
            Err(ProtocolError::FrameTooLarge { size: 256, max: 64 }) => {}
            other => panic!("expected FrameTooLarge, got {other:?}"),
        }
    }

    #[test]
    fn oversized_message_is_refused_by_the_encoder() {
        let mut codec = FrameCodec::<WorkerMessage, WorkerMessage>::new(64);
        let big = WorkerMessage::Register {
            worker_id: WorkerId("w".repeat(100)),
            capacity: 1,
            task_types: vec![],
            running: vec![],
        };
        let mut buf = BytesMut::new();
        assert!(matches!(
            codec.encode(big, &mut buf),
            Err(ProtocolError::FrameTooLarge { .. })
        ));
        assert!(buf.is_empty());
    }

    #[test]
    fn frame_split_across_many_reads_decodes_once_complete() {
        let mut codec = FrameCodec::<ClientMessage, ClientMessage>::new(DEFAULT_MAX_FRAME_BYTES);
        let message = ClientMessage::Request {
            request_id: 42,
            request: ClientRequest::Submit(submit()),
        };
        let mut whole = BytesMut::new();
        codec.encode(message.clone(), &mut whole).expect("encode");
        let mut buf = BytesMut::new();
        for (i, byte) in whole.iter().enumerate() {
            assert!(
                codec.decode(&mut buf).expect("partial is fine").is_none(),
                "nothing before byte {i}"
            );
            buf.extend_from_slice(&[*byte]);
        }
        assert_eq!(codec.decode(&mut buf).expect("decode"), Some(message));
    }

    #[test]
    fn garbage_bytes_are_a_malformed_frame() {
        let mut codec = FrameCodec::<ClientMessage, ClientMessage>::new(DEFAULT_MAX_FRAME_BYTES);
        let mut buf = BytesMut::from(&[0u8, 0, 0, 5, 0xc1, 0xff, 0x00, 0x13, 0x37][..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(ProtocolError::Malformed(_))
        ));
    }

    #[test]
    fn connection_closed_mid_frame_is_truncated() {
        let mut codec = FrameCodec::<ClientMessage, ClientMessage>::new(DEFAULT_MAX_FRAME_BYTES);
        let mut buf = BytesMut::from(&[0u8, 0, 0, 10, 1, 2][..]);
        assert!(matches!(
            codec.decode_eof(&mut buf),
            Err(ProtocolError::Truncated)
        ));
    }
}
