//! The throughput phase: `clients` connections submit `jobs` as fast as
//! the coordinator answers, each keeping up to `window` jobs in flight,
//! while a watcher counts terminal jobs to time the drain.

use crate::pipeline::Pipeline;
use crate::BenchError;
use std::time::{Duration, Instant};
use taskyard_client::client::ClientOptions;
use taskyard_client::client::{Client, ClientError};
use taskyard_protocol::{ClientRequest, ClientResponse, SubmitAnswer, SubmitRequest};
use taskyard_server::config::CoordinatorConfig;

/// How often the watcher asks how many jobs are terminal.
const POLL: Duration = Duration::from_millis(2);
/// A drain that makes no progress for this long has failed.
const STALL: Duration = Duration::from_secs(60);

/// How to submit.
#[derive(Debug, Clone)]
pub struct SubmitPlan {
    pub addr: String,
    pub options: ClientOptions,
    pub jobs: u64,
    pub clients: u32,
    /// Jobs per request; 1 sends `Submit`, more send `SubmitBatch`.
    pub batch: u32,
    /// Jobs each client keeps in flight (at least one request).
    pub window: u32,
    pub template: SubmitRequest,
    /// Each job carries concurrency key `bench:I`, I counting through this
    /// many keys; 0: none.
    pub concurrency_keys: u32,
}

/// What the submitters got back.
#[derive(Debug, Clone, Default)]
pub struct Submitted {
    pub accepted: u64,
    pub rejected: u64,
    pub first_rejection: Option<String>,
    /// First request written to last answer read.
    pub elapsed: Duration,
}

/// The throughput phase's timings.
#[derive(Debug, Clone)]
pub struct Drained {
    pub submitted: Submitted,
    /// First request written to the watcher seeing every job terminal.
    pub elapsed: Duration,
    pub terminal: u64,
    pub succeeded: u64,
}

/// Terminal and succeeded jobs of one task type, from the per-state counts
/// a zero-length `list` returns.
pub fn finished_counts(client: &mut Client, task_type: &str) -> Result<(u64, u64), ClientError> {
    let page = client.list_page(None, Some(task_type.to_string()), 0)?;
    let terminal = page
        .counts
        .iter()
        .filter(|c| c.state.is_terminal())
        .map(|c| c.count)
        .sum();
    let succeeded = page
        .counts
        .iter()
        .filter(|c| c.state == taskyard_protocol::JobState::Succeeded)
        .map(|c| c.count)
        .sum();
    Ok((terminal, succeeded))
}

/// Submits everything and waits until every accepted job is terminal,
/// calling `progress(done, total)` as jobs finish.
pub fn submit_and_drain(
    plan: &SubmitPlan,
    progress: &dyn Fn(&str, u64, u64),
) -> Result<Drained, BenchError> {
    let mut watcher = Watcher::connect(plan)?;
    let connections = connect_all(plan)?;
    let started = Instant::now();
    std::thread::scope(|scope| {
        let mut submitting = Some(scope.spawn(|| submit_on(plan, connections, started)));
        let mut submitted: Option<Submitted> = None;
        watcher.until_drained(started, progress, || {
            if submitting.as_ref().is_some_and(|t| t.is_finished()) {
                if let Some(thread) = submitting.take() {
                    submitted = Some(join(thread)?);
                }
            }
            Ok(submitted.clone())
        })
    })
}

/// From a backlog: submits everything while no worker runs, then calls
/// `start_workers` and times from then until every accepted job is
/// terminal.
pub fn backlog_then_drain(
    plan: &SubmitPlan,
    start_workers: impl FnOnce() -> Result<(), BenchError>,
    progress: &dyn Fn(&str, u64, u64),
) -> Result<Drained, BenchError> {
    let mut watcher = Watcher::connect(plan)?;
    let submitted = submit_only(plan)?;
    let started = Instant::now();
    start_workers()?;
    watcher.until_drained(started, progress, || Ok(Some(submitted.clone())))
}

/// Counts the plan's jobs that are terminal, from the counts before it.
struct Watcher<'a> {
    client: Client,
    plan: &'a SubmitPlan,
    base_terminal: u64,
    base_succeeded: u64,
}

impl<'a> Watcher<'a> {
    fn connect(plan: &'a SubmitPlan) -> Result<Watcher<'a>, BenchError> {
        let mut client = Client::connect_with(&plan.addr, &plan.options)?;
        let (base_terminal, base_succeeded) =
            finished_counts(&mut client, &plan.template.task_type)?;
        Ok(Watcher {
            client,
            plan,
            base_terminal,
            base_succeeded,
        })
    }

    /// Polls until every job `submitted()` says was accepted is terminal
    /// (`submitted()` is `None` while submission goes on).
    fn until_drained(
        &mut self,
        started: Instant,
        progress: &dyn Fn(&str, u64, u64),
        mut submitted: impl FnMut() -> Result<Option<Submitted>, BenchError>,
    ) -> Result<Drained, BenchError> {
        let jobs = self.plan.jobs;
        let mut last = (0, Instant::now());
        loop {
            let submitted = submitted()?;
            // Rejected jobs never become terminal: wait only for the accepted.
            let target = submitted.as_ref().map_or(jobs, |s| s.accepted);
            let (terminal, succeeded) =
                finished_counts(&mut self.client, &self.plan.template.task_type)?;
            let done = terminal.saturating_sub(self.base_terminal);
            progress("drain", done, jobs);
            if let Some(submitted) = submitted.filter(|_| done >= target) {
                return Ok(Drained {
                    submitted,
                    elapsed: started.elapsed(),
                    terminal: done,
                    succeeded: succeeded.saturating_sub(self.base_succeeded),
                });
            }
            if done > last.0 {
                last = (done, Instant::now());
            } else if last.1.elapsed() > STALL {
                return Err(BenchError::Failed(format!(
                    "drain stalled at {done} of {target} jobs"
                )));
            }
            std::thread::sleep(POLL);
        }
    }
}

fn join(
    handle: std::thread::ScopedJoinHandle<'_, Result<Submitted, BenchError>>,
) -> Result<Submitted, BenchError> {
    handle
        .join()
        .map_err(|_| BenchError::Failed("a submitter thread panicked".into()))?
}

/// Submits everything and returns when every answer is in (no drain).
pub fn submit_only(plan: &SubmitPlan) -> Result<Submitted, BenchError> {
    let connections = connect_all(plan)?;
    submit_on(plan, connections, Instant::now())
}

fn connect_all(plan: &SubmitPlan) -> Result<Vec<Pipeline>, BenchError> {
    (0..plan.clients.max(1))
        .map(|_| Pipeline::connect(&plan.addr, &plan.options).map_err(BenchError::from))
        .collect()
}

/// Runs one thread per connection, each submitting its share.
fn submit_on(
    plan: &SubmitPlan,
    connections: Vec<Pipeline>,
    started: Instant,
) -> Result<Submitted, BenchError> {
    let count = connections.len() as u64;
    let results: Vec<Result<Submitted, BenchError>> = std::thread::scope(|scope| {
        let threads: Vec<_> = connections
            .into_iter()
            .enumerate()
            .map(|(i, connection)| {
                let share = plan.jobs / count + u64::from((i as u64) < plan.jobs % count);
                scope.spawn(move || submit_share(plan, connection, share))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .map_err(|_| BenchError::Failed("a submitter thread panicked".into()))?
            })
            .collect()
    });
    let mut total = Submitted::default();
    for result in results {
        let one = result?;
        total.accepted += one.accepted;
        total.rejected += one.rejected;
        total.first_rejection = total.first_rejection.or(one.first_rejection);
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

/// One connection's loop: fill the window, then one new request per answer.
fn submit_share(
    plan: &SubmitPlan,
    mut connection: Pipeline,
    share: u64,
) -> Result<Submitted, BenchError> {
    let batch = u64::from(plan.batch.max(1));
    // Requests (not jobs) in flight stay within the coordinator's default
    // max-in-flight-requests, so a remote coordinator never refuses them.
    let max_requests = CoordinatorConfig::default().max_in_flight_requests;
    let window = ((u64::from(plan.window) / batch).max(1) as usize).min(max_requests);
    let mut unsent = share;
    let mut tally = Submitted::default();
    let mut keys = Keys::new(plan.concurrency_keys);
    while unsent > 0 || connection.in_flight() > 0 {
        while unsent > 0 && connection.in_flight() < window {
            let n = unsent.min(batch);
            connection.queue(request(&plan.template, n, &mut keys))?;
            unsent -= n;
        }
        count(connection.receive()?, &mut tally)?;
    }
    Ok(tally)
}

/// The concurrency keys a submitter gives its jobs, in turn.
struct Keys {
    count: u32,
    next: u32,
}

impl Keys {
    fn new(count: u32) -> Keys {
        Keys { count, next: 0 }
    }

    fn job(&mut self, template: &SubmitRequest) -> SubmitRequest {
        let mut job = template.clone();
        if self.count > 0 {
            job.concurrency_key = Some(format!("bench:{}", self.next));
            self.next = (self.next + 1) % self.count;
        }
        job
    }
}

fn request(template: &SubmitRequest, n: u64, keys: &mut Keys) -> ClientRequest {
    if n == 1 {
        ClientRequest::Submit(keys.job(template))
    } else {
        ClientRequest::SubmitBatch((0..n).map(|_| keys.job(template)).collect())
    }
}

fn count(response: ClientResponse, tally: &mut Submitted) -> Result<(), BenchError> {
    let answers = match response {
        ClientResponse::Submitted(answer) => vec![answer],
        ClientResponse::BatchSubmitted(answers) => answers,
        _ => {
            return Err(BenchError::Failed(
                "unexpected answer to a submission".into(),
            ))
        }
    };
    for answer in answers {
        match answer {
            SubmitAnswer::Accepted { .. } => tally.accepted += 1,
            SubmitAnswer::Rejected(r) => {
                tally.rejected += 1;
                tally.first_rejection.get_or_insert(r.reason);
            }
        }
    }
    Ok(())
}
