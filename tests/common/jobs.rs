//! Small client-side steps for end-to-end tests: build, submit and watch
//! jobs and workers through the client library.

use serde_json::json;
use std::time::Duration;
use taskyard::client::Client;
use taskyard::protocol::payloads::encode_json;
use taskyard::protocol::{JobId, JobView, SubmitAnswer, SubmitRequest};

use super::wait_until;

pub fn request(task_type: &str, payload: serde_json::Value) -> SubmitRequest {
    SubmitRequest::new(task_type, encode_json(&payload))
}

pub fn sleep_job(millis: u64) -> SubmitRequest {
    request("sleep", json!({ "millis": millis }))
}

pub fn submit(client: &mut Client, req: SubmitRequest) -> JobId {
    match client.submit(req).expect("submit") {
        SubmitAnswer::Accepted { job_id, .. } => job_id,
        SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
    }
}

pub fn status(client: &mut Client, job: JobId) -> JobView {
    client.status(job).expect("status").expect("job known")
}

/// Waits until the job's view satisfies `done`; returns that view.
pub fn wait_for_job(
    client: &mut Client,
    job: JobId,
    what: &str,
    within: Duration,
    done: impl Fn(&JobView) -> bool,
) -> JobView {
    let mut last = None;
    wait_until(&format!("job {job}: {what}"), within, || {
        let view = status(client, job);
        let ok = done(&view);
        last = Some(view);
        ok
    });
    last.expect("seen")
}

pub fn is_listed(client: &mut Client, worker: &str) -> bool {
    let workers = client.workers().expect("workers");
    workers.iter().any(|w| w.worker_id.0 == worker)
}

pub fn result_text(view: &JobView) -> String {
    String::from_utf8(view.result.clone().unwrap_or_default()).expect("utf-8 result")
}

/// A client of `addrs` (one address or a list), retried until one accepts
/// within `within`: for coordinators that are restarting or taking over.
pub fn connect_within(addrs: &str, within: Duration) -> Client {
    let mut client = None;
    wait_until("a coordinator to accept clients", within, || {
        client = Client::connect(addrs).ok();
        client.is_some()
    });
    client.expect("connected")
}

/// Submits `batch` (every job with an idempotency key), sending it again
/// on a new connection while the answer is lost to a coordinator that
/// died or lost its lease: the keys make the repeat harmless. Returns the
/// acknowledged ids in order; a rejection fails the test.
pub fn submit_keyed_until_answered(
    client: &mut Client,
    addrs: &str,
    batch: Vec<SubmitRequest>,
) -> Vec<JobId> {
    let answers = loop {
        match client.submit_batch(batch.clone()) {
            Ok(answers) => break answers,
            Err(_) => *client = connect_within(addrs, Duration::from_secs(30)),
        }
    };
    answers
        .into_iter()
        .map(|answer| match answer {
            SubmitAnswer::Accepted { job_id, .. } => job_id,
            SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
        })
        .collect()
}
