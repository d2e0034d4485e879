//! Answers that fit one frame. A TCP answer is one frame of at most
//! `max-frame-bytes`; what a job holds (a payload, a result, a long
//! history) can be larger. Before an answer is written the client session
//! passes it through [`fit_response`], which cuts what can be cut and says
//! so in the answer (nothing is cut silently):
//!
//! - a job view (`Job`) leaves out its payload, or its result if only
//!   the payload fits, or both, then its oldest attempts, then shortens
//!   its error, then (in the smallest frames only) leaves out its
//!   idempotency key and schedule, until it fits; the flags and
//!   sizes in `JobView` say what is missing, and `ReadChunk` reads
//!   payload and result;
//! - a page of summaries (`Jobs`) keeps the jobs that fit, in order, and
//!   sets `next` to resume after the last one kept;
//! - anything else that still does not fit becomes `AnswerTooLarge`.
//!
//! Pure code over encoded sizes; the HTTP API does not use it (its answers
//! are not frames).

use crate::messages::ClientResponse;
use crate::views::{summary_error, JobList, JobView};
use serde::Serialize;
use std::io;

/// Bytes of a frame kept for everything around one large byte field: the
/// response envelope, ids, task type and idempotency key of a submission
/// or an assignment, the fields of a worker's result frame. A payload or
/// result of up to `max-frame-bytes` less this always fits its frame; the
/// coordinator's config refuses limits that would not.
pub const FRAME_HEADROOM_BYTES: usize = 1024;

/// Bytes of an answer frame outside the response itself:
/// `{"Response": {"request_id": N, "response": {"<Variant>": ...}}}`.
const RESPONSE_ENVELOPE_BYTES: usize = 64;

/// Bytes of a `Chunk` answer besides its bytes (ids, offsets, envelope).
const CHUNK_OVERHEAD_BYTES: usize = 256;

/// The longest reason a rejected submission's answer gives (the coordinator
/// cuts longer ones).
pub const MAX_REJECTION_REASON_BYTES: usize = 512;

/// The most one submission's answer in a `BatchSubmitted` can take:
/// a rejection with the longest reason, and its framing.
const MAX_SUBMIT_ANSWER_BYTES: usize = MAX_REJECTION_REASON_BYTES + 64;

/// The most submissions one `SubmitBatch` may carry on a connection of
/// `max_frame_bytes`, so that its answer is sure to fit one frame: a
/// bigger batch is refused before anything is submitted, since an answer
/// cut down after the jobs were created would lose their ids.
pub fn max_batch_submissions(max_frame_bytes: usize) -> usize {
    (max_frame_bytes.saturating_sub(FRAME_HEADROOM_BYTES) / MAX_SUBMIT_ANSWER_BYTES).max(1)
}

/// The most bytes one `Chunk` answer carries in a frame of `max_frame_bytes`.
pub fn max_chunk_bytes(max_frame_bytes: usize) -> usize {
    max_frame_bytes.saturating_sub(CHUNK_OVERHEAD_BYTES).max(1)
}

/// The MessagePack length of `value` as frames encode it, counted without
/// building the encoding.
pub fn encoded_len<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = Counter(0);
    // Only a value serde cannot represent fails; such a value is never an
    // answer, and counting it as too large is the safe reading.
    match rmp_serde::encode::write_named(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

struct Counter(usize);

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `response` cut down (as the module documentation says) so that its
/// answer frame is at most `max_frame_bytes`.
pub fn fit_response(response: ClientResponse, max_frame_bytes: usize) -> ClientResponse {
    let budget = max_frame_bytes.saturating_sub(RESPONSE_ENVELOPE_BYTES);
    let fitted = match response {
        ClientResponse::Job(view) => {
            fit_view(*view, budget).map(|v| ClientResponse::Job(Box::new(v)))
        }
        ClientResponse::Jobs(list) => fit_list(list, budget).map(ClientResponse::Jobs),
        // A few ids and a reason: far below the smallest frame, not measured
        // (so the hot path of submissions pays nothing for this).
        small @ (ClientResponse::Submitted(_)
        | ClientResponse::NotFound { .. }
        | ClientResponse::CancelRefused { .. }
        | ClientResponse::Overloaded { .. }
        | ClientResponse::Pong
        | ClientResponse::ChunkRefused { .. }
        | ClientResponse::AnswerTooLarge { .. }) => Ok(small),
        other => match encoded_len(&other) {
            size if size <= budget => Ok(other),
            size => Err(size),
        },
    };
    fitted.unwrap_or_else(|size| ClientResponse::AnswerTooLarge {
        size: (size.saturating_add(RESPONSE_ENVELOPE_BYTES)) as u64,
        max: max_frame_bytes as u64,
    })
}

/// The view within `budget` bytes, or the size of the smallest cut.
fn fit_view(mut view: JobView, budget: usize) -> Result<JobView, usize> {
    if encoded_len(&view) <= budget {
        return Ok(view);
    }
    let payload = std::mem::take(&mut view.payload);
    let result = view.result.take();
    view.payload_omitted = true;
    view.result_omitted = result.is_some();
    let base = encoded_len(&view);
    let room = budget.saturating_sub(base);
    // Keep the result if it fits (it is what a finished job is for), else
    // the payload if that does. Each costs its bytes and a 5-byte header.
    let cost = |bytes: &[u8]| bytes.len().saturating_add(5);
    match (result, room) {
        (Some(result), room) if cost(&result) <= room => {
            view.result = Some(result);
            view.result_omitted = false;
        }
        _ if cost(&payload) <= room => {
            view.payload = payload;
            view.payload_omitted = false;
        }
        _ => {}
    }
    if view.payload_omitted && view.payload_bytes == 0 {
        view.payload_omitted = false;
    }
    let mut size = encoded_len(&view);
    if size <= budget {
        return Ok(view);
    }
    // The oldest attempts go first; the newest say how the job ended.
    let mut cut = 0;
    while size > budget && cut < view.history.len() {
        size = size.saturating_sub(encoded_len(&view.history[cut]));
        cut += 1;
    }
    if cut > 0 {
        view.history.drain(..cut);
        view.history_omitted = view.history_omitted.saturating_add(cut as u32);
        size = encoded_len(&view);
    }
    if size > budget {
        // Last, for the smallest frames: the error and progress text as
        // short as a list shows them.
        view.error = view.error.as_deref().map(summary_error);
        if let Some(progress) = &mut view.progress {
            progress.message = summary_error(&progress.message);
        }
        size = encoded_len(&view);
    }
    if size > budget
        && (view.idempotency_key.is_some()
            || view.concurrency_key.is_some()
            || view.waiting.is_some())
    {
        // Last of all: where the job came from and its keys (a 256-byte
        // key does not fit a 1 KiB frame beside every other field at its
        // longest).
        view.idempotency_key = None;
        view.concurrency_key = None;
        view.waiting = None;
        view.schedule = None;
        view.schedule_slot = None;
        view.key_omitted = true;
        size = encoded_len(&view);
    }
    if size <= budget {
        Ok(view)
    } else {
        Err(size)
    }
}

/// The most a page's `next` cursor takes encoded: its text is at most
/// 20 + 1 + 20 + 1 + 36 characters (`SEQUENCE.SUBMITTED.JOB_ID`).
const MAX_CURSOR_BYTES: usize = 96;

/// The longest prefix of the page within `budget`, with `next` after it.
fn fit_list(mut list: JobList, budget: usize) -> Result<JobList, usize> {
    let mut size = encoded_len(&list);
    if size <= budget {
        return Ok(list);
    }
    // Room for the cursor that will be set, beyond the one already counted.
    let cursor_room = MAX_CURSOR_BYTES.saturating_sub(encoded_len(&list.next));
    let mut keep = list.jobs.len();
    while keep > 0 && size.saturating_add(cursor_room) > budget {
        keep -= 1;
        size = size.saturating_sub(encoded_len(&list.jobs[keep]));
    }
    list.jobs.truncate(keep);
    // The sizes above are estimates (array headers, the cursor's length):
    // drop one more job until the page as encoded fits.
    loop {
        let Some(last) = list.jobs.last() else {
            return Err(size.saturating_add(cursor_room));
        };
        list.next = Some(last.cursor());
        match encoded_len(&list) {
            size if size <= budget => return Ok(list),
            _ => {
                list.jobs.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::{Attempt, AttemptOutcome, JobSummary, StateCount, SUMMARY_ERROR_BYTES};
    use crate::{
        ByteChunk, ByteField, CoordinatorToClient, FrameCodec, JobId, JobState, LeaseId,
        PageCursor, Priority, Progress, WorkerId,
    };
    use bytes::BytesMut;
    use tokio_util::codec::Encoder;

    /// The smallest `max-frame-bytes` a config accepts.
    const MIN_FRAME: usize = 1024;

    fn view(payload: usize, result: Option<usize>) -> JobView {
        JobView {
            job_id: JobId::mint(),
            task_type: "t".repeat(64),
            payload: vec![7; payload],
            state: JobState::Succeeded,
            priority: Priority::High,
            effective_level: 2,
            sequence: u64::MAX,
            attempts: 100,
            max_attempts: 100,
            timeout_ms: u64::MAX,
            submitted_at: i64::MIN,
            updated_at: i64::MIN,
            worker_id: Some(WorkerId("w".repeat(64))),
            lease: Some(LeaseId::new_random()),
            result: result.map(|n| vec![9; n]),
            error: Some("e".repeat(8 * 1024)),
            next_retry_at: Some(i64::MIN),
            not_before: Some(i64::MIN),
            no_worker: true,
            history: (1..=100)
                .map(|n| Attempt {
                    number: n,
                    worker_id: WorkerId("w".repeat(64)),
                    lease: LeaseId::new_random(),
                    started_at: i64::MIN,
                    ended_at: Some(i64::MIN),
                    outcome: Some(AttemptOutcome::Failed {
                        error: "x".repeat(8 * 1024),
                    }),
                })
                .collect(),
            progress: Some(Progress {
                percent: 100,
                message: "p".repeat(4096),
                at: i64::MIN,
            }),
            payload_bytes: payload as u64,
            payload_omitted: false,
            result_bytes: result.map(|n| n as u64),
            result_omitted: false,
            history_omitted: 0,
            idempotency_key: Some("k".repeat(256)),
            schedule: Some("s".repeat(64)),
            schedule_slot: Some(i64::MIN),
            key_omitted: false,
            waiting: Some(format!(
                "waiting for concurrency key {}: 9/9 running",
                "c".repeat(256)
            )),
            concurrency_key: Some("c".repeat(256)),
        }
    }

    /// Encodes the answer frame exactly as a session does.
    fn frame_len(response: ClientResponse) -> usize {
        let mut codec = FrameCodec::<(), CoordinatorToClient>::new(usize::MAX);
        let mut buf = BytesMut::new();
        let frame = CoordinatorToClient::Response {
            request_id: u64::MAX,
            response,
        };
        codec.encode(frame, &mut buf).expect("encodes");
        buf.len() - 4
    }

    fn fitted_view(response: ClientResponse) -> JobView {
        match response {
            ClientResponse::Job(view) => *view,
            other => panic!("not a job: {other:?}"),
        }
    }

    #[test]
    fn a_small_view_is_unchanged() {
        let mut small = view(10, Some(10));
        small.history.truncate(1);
        small.error = None;
        small.progress = None;
        let answer = ClientResponse::Job(Box::new(small.clone()));
        assert_eq!(
            fit_response(answer, MIN_FRAME * 64),
            ClientResponse::Job(Box::new(small))
        );
    }

    #[test]
    fn a_view_too_big_keeps_what_fits_and_says_what_it_left_out() {
        let mut big = view(250_000, Some(900_000));
        big.history.truncate(3);
        let max = 1024 * 1024;
        let fitted = fitted_view(fit_response(ClientResponse::Job(Box::new(big)), max));
        assert!(
            fitted.result_omitted ^ fitted.payload_omitted,
            "{}",
            fitted.history.len()
        );
        assert_eq!(
            (fitted.payload_bytes, fitted.result_bytes),
            (250_000, Some(900_000))
        );
        assert_eq!(
            fitted.result.as_ref().map(Vec::len),
            Some(900_000),
            "result kept"
        );
        assert!(fitted.payload.is_empty() && fitted.payload_omitted);
        assert_eq!(fitted.history.len(), 3);
        assert!(frame_len(ClientResponse::Job(Box::new(fitted))) <= max);
    }

    #[test]
    fn the_worst_view_fits_the_smallest_frame_with_its_newest_attempts() {
        let worst = view(256 * 1024, Some(1024 * 1024));
        for max in [MIN_FRAME, 64 * 1024, 1024 * 1024] {
            let answer = fit_response(ClientResponse::Job(Box::new(worst.clone())), max);
            let fitted = fitted_view(answer.clone());
            assert!(frame_len(answer) <= max, "{max}");
            assert!(fitted.payload_omitted && fitted.result_omitted, "{max}");
            assert_eq!(fitted.key_omitted, max == MIN_FRAME, "{max}");
            assert_eq!(fitted.idempotency_key.is_some(), max > MIN_FRAME, "{max}");
            assert_eq!(fitted.history_omitted as usize + fitted.history.len(), 100);
            if let Some(last) = fitted.history.last() {
                assert_eq!(last.number, 100, "the newest attempt is kept");
            }
        }
    }

    fn summary(n: u64) -> JobSummary {
        JobSummary {
            sequence: n,
            ..JobSummary::of(&view(1, Some(1)))
        }
    }

    fn list(jobs: usize) -> JobList {
        JobList {
            jobs: (0..jobs as u64).rev().map(summary).collect(),
            counts: JobState::ALL
                .iter()
                .map(|&state| StateCount {
                    state,
                    count: u64::MAX,
                })
                .collect(),
            next: Some(PageCursor((u64::MAX, i64::MIN, JobId::mint()))),
        }
    }

    #[test]
    fn a_summary_is_bounded_whatever_the_job_holds() {
        let s = summary(1);
        assert!(s
            .error
            .as_deref()
            .is_some_and(|e| e.len() <= SUMMARY_ERROR_BYTES + 3));
        assert!(encoded_len(&s) < 800, "{}", encoded_len(&s));
    }

    #[test]
    fn a_page_too_big_keeps_a_prefix_and_resumes_after_it() {
        for max in [MIN_FRAME, 64 * 1024, 1024 * 1024] {
            let answer = fit_response(ClientResponse::Jobs(list(500)), max);
            let ClientResponse::Jobs(page) = answer.clone() else {
                panic!("{max}: {answer:?}");
            };
            assert!(!page.jobs.is_empty(), "{max}: at least one job fits");
            assert!(frame_len(answer) <= max, "{max}");
            let kept = page.jobs.len() as u64;
            assert_eq!(page.jobs[0].sequence, 499);
            if kept < 500 {
                assert_eq!(
                    page.next,
                    Some(page.jobs[kept as usize - 1].cursor()),
                    "{max}"
                );
            }
        }
        let whole = fit_response(ClientResponse::Jobs(list(500)), 1024 * 1024);
        assert!(matches!(&whole, ClientResponse::Jobs(p) if p.jobs.len() == 500));
    }

    #[test]
    fn the_largest_submission_and_result_fit_their_frames_beside_the_headroom() {
        use crate::{ClientMessage, ClientRequest, SubmitRequest, TaskOutcome, WorkerMessage};
        for max in [2 * MIN_FRAME, 1024 * 1024] {
            let payload = vec![0; max - FRAME_HEADROOM_BYTES];
            let submit = ClientMessage::Request {
                request_id: u64::MAX,
                request: ClientRequest::Submit(SubmitRequest {
                    priority: Priority::Normal,
                    max_attempts: Some(u32::MAX),
                    timeout_ms: Some(u64::MAX),
                    idempotency_key: Some("k".repeat(256)),
                    delay_ms: Some(u64::MAX),
                    ..SubmitRequest::new("t".repeat(64), payload.clone())
                }),
            };
            assert!(encoded_len(&submit) <= max, "{max}");
            let result = WorkerMessage::TaskResult {
                job_id: JobId::mint(),
                lease: LeaseId::new_random(),
                outcome: TaskOutcome::Succeeded(payload.clone()),
            };
            assert!(encoded_len(&result) <= max, "{max}");
            let assign = crate::CoordinatorToWorker::TaskAssign {
                job_id: JobId::mint(),
                lease: LeaseId::new_random(),
                task_type: "t".repeat(64),
                payload,
                timeout_ms: u64::MAX,
                epoch: u64::MAX,
                attempt: u32::MAX,
            };
            assert!(encoded_len(&assign) <= max, "{max}");
        }
    }

    #[test]
    fn another_answer_too_big_is_named_not_sent() {
        let chunk = ClientResponse::Chunk(ByteChunk {
            job_id: JobId::mint(),
            field: ByteField::Result,
            offset: 0,
            total: 5000,
            bytes: vec![0; 5000],
        });
        match fit_response(chunk, MIN_FRAME) {
            ClientResponse::AnswerTooLarge { size, max } => {
                assert!(size > 5000 && max == MIN_FRAME as u64)
            }
            other => panic!("{other:?}"),
        }
        let ok = ClientResponse::Chunk(ByteChunk {
            job_id: JobId::mint(),
            field: ByteField::Result,
            offset: u64::MAX,
            total: u64::MAX,
            bytes: vec![0; max_chunk_bytes(MIN_FRAME)],
        });
        assert!(frame_len(fit_response(ok, MIN_FRAME)) <= MIN_FRAME);
    }
}
