//! The blocking client library: one TCP connection to the coordinator's
//! client listener, one request at a time, no async runtime.
//!
//! The address may be a comma-separated list (every coordinator of a
//! high-availability group): the client tries them in turn, goes to the
//! leader a standby names in `NotLeader` (at most
//! [`MAX_REDIRECTS`](taskyard_protocol::MAX_REDIRECTS) times per round),
//! and, given several addresses or told that no leader is elected yet,
//! tries again with backoff until [`ClientOptions::failover_timeout`].
//! When the connection is lost it opens a new one the same way. A request
//! in flight when the connection died may or may not have been carried
//! out, so the client sends it again only when that is safe: a `submit`
//! or `submit_batch` whose every submission carries an idempotency key
//! (the coordinator answers a repeat with the first job's id). Every other
//! request in flight fails with the connection error; the next call
//! reconnects.
//!
//! ```no_run
//! use taskyard_client::client::Client;
//! use taskyard_protocol::{payloads, Priority, SubmitRequest};
//!
//! let mut client = Client::connect("127.0.0.1:7400")?;
//! let payload = payloads::encode_json(&serde_json::json!({ "message": "hi" }));
//! let answer = client.submit(SubmitRequest {
//!     priority: Priority::High,
//!     ..SubmitRequest::new("echo", payload)
//! })?;
//! # Ok::<(), taskyard_client::client::ClientError>(())
//! ```

mod admin;
pub mod connection;
mod error;
mod schedules;

pub use schedules::{ScheduleAnswer, ScheduleRefusedAnswer};

pub use error::ClientError;

use crate::security::{tls, Secret};
use connection::Connection;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};
use taskyard_protocol::LeaderSearch;
use taskyard_protocol::{
    fit, ByteChunk, ByteField, ClientMessage, ClientRequest, ClientResponse, CoordinatorToClient,
    Hello, JobId, JobList, JobState, JobSummary, JobView, PageCursor, Role, SubmitAnswer,
    SubmitRequest, WorkerView, DEFAULT_MAX_FRAME_BYTES, IDLE_CLOSED, MAX_LIST_JOBS,
    MAX_REQUEUE_JOBS, PROTOCOL_VERSION, UNAUTHORIZED,
};

/// How long `Client::connect` waits for each resolved address to accept.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long any single answer may take before the call fails with
/// `ClientError::NoAnswer`, so a hung coordinator cannot hang the caller.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest frame the client accepts. Larger than the coordinator's default
/// `max-frame-bytes` so that a coordinator configured above the default can
/// still answer a `List`; what we send is bounded by the coordinator itself.
pub const CLIENT_MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Most answers `list` (and the CLI's `list`) follow one after another:
/// a sparse filter over a large history comes in short pages, and past
/// this the caller gets what was found and the cursor to go on.
pub const MAX_LIST_ROUNDS: usize = 50;
/// Most bytes `Client::read_bytes` reserves before the bytes arrive.
const READ_RESERVE_BYTES: u64 = 16 * 1024 * 1024;
/// Default of [`ClientOptions::failover_timeout`]: longer than a default
/// leader lease (10 s) plus a takeover.
pub const FAILOVER_TIMEOUT: Duration = Duration::from_secs(20);
/// First pause between rounds through the address list; doubles up to
/// [`MAX_ROUND_BACKOFF`].
const FIRST_ROUND_BACKOFF: Duration = Duration::from_millis(50);
const MAX_ROUND_BACKOFF: Duration = Duration::from_secs(1);
/// Default of [`ClientOptions::ping_after_idle`]: a tenth of the
/// coordinator's default `client-idle-timeout-millis`.
pub const PING_AFTER_IDLE: Duration = Duration::from_secs(30);
const MIN_IDLE_TIMEOUT: Duration =
    Duration::from_millis(taskyard_protocol::MIN_CLIENT_IDLE_TIMEOUT_MILLIS);

/// What `Client::cancel` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The job is CANCELLED now.
    Cancelled(Box<JobView>),
    /// The job had already ended in this state; nothing changed.
    AlreadyFinished(JobState),
}

/// How `Client::wait` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The job reached a terminal state; this is its final view, with its
    /// payload and result whole (see `Client::complete`).
    Finished(JobView),
    /// The timeout passed first; this is the last view seen (not terminal).
    TimedOut(JobView),
}

/// A connection to a coordinator that has accepted our `Hello`. Calls block
/// until their answer arrives, and each answer is checked to carry the
/// request id of the call that is waiting for it. A call that lost the
/// connection fails (unless it was a keyed submission, sent again); the
/// next call opens a new connection through the address list first.
///
/// The coordinator closes client connections idle for
/// `client-idle-timeout-millis`. A `Client` idle for longer than
/// [`ClientOptions::ping_after_idle`] sends `Ping` before its next request
/// and, if the connection turns out to be gone, opens a new one; a request
/// answered by the coordinator's idle-close `Error` frame (which it sends
/// before reading anything more) is sent again on a new connection. So a
/// long-lived `Client` survives idle periods without ever sending a request
/// twice.
pub struct Client {
    /// Every coordinator given, in order.
    addrs: Vec<String>,
    /// The one connected to.
    addr: String,
    options: ClientOptions,
    connection: Connection,
    next_request_id: u64,
    /// When the last answer arrived (or the connection opened).
    last_answer: Instant,
    /// The connection was lost: the next request opens a new one first.
    lost: bool,
}

impl Client {
    /// Connects (at most `CONNECT_TIMEOUT` per resolved address) and
    /// exchanges `Hello`. `addr` is `host:port` or a comma-separated list
    /// of them (see the module documentation for how the leader is found).
    /// A coordinator that refuses us sends `Error` and closes; that is
    /// `ClientError::Refused`.
    pub fn connect(addr: &str) -> Result<Client, ClientError> {
        Client::connect_with(addr, &ClientOptions::default())
    }

    /// `connect` with a token and, if `options.tls_ca` is set, TLS.
    pub fn connect_with(addr: &str, options: &ClientOptions) -> Result<Client, ClientError> {
        let addrs =
            taskyard_protocol::parse_address_list(addr).map_err(|e| ClientError::BadAddress {
                list: addr.to_string(),
                reason: e.to_string(),
            })?;
        let (connection, addr) = find_leader(&addrs, 0, options)?;
        Ok(Client {
            addrs,
            addr,
            options: options.clone(),
            connection,
            next_request_id: 1,
            last_answer: Instant::now(),
            lost: false,
        })
    }

    /// Checks the connection is alive and resets the coordinator's idle
    /// timer for it. Needed only to hold a connection open while idle; other
    /// calls ping by themselves when they need to.
    pub fn ping(&mut self) -> Result<(), ClientError> {
        match self.exchange(ClientRequest::Ping)? {
            ClientResponse::Pong => Ok(()),
            other => Err(unexpected("Pong", &other)),
        }
    }

    /// The address of the coordinator connected to (one of those given
    /// to `connect`, or the leader a standby named).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The HTTP address (`advertise-http`, else `http-listen`) the
    /// coordinator connected to named in its `Hello`; `None` when it has no
    /// HTTP listener or predates the field.
    pub fn coordinator_http(&self) -> Option<&str> {
        self.connection.coordinator_http.as_deref()
    }

    /// Submits one job. A rejection is an answer (`SubmitAnswer::Rejected`),
    /// not an error. With an idempotency key it is sent again on a new
    /// connection if the connection is lost before the answer arrives.
    pub fn submit(&mut self, req: SubmitRequest) -> Result<SubmitAnswer, ClientError> {
        match self.request(ClientRequest::Submit(req))? {
            ClientResponse::Submitted(answer) => Ok(answer),
            other => Err(unexpected("Submitted", &other)),
        }
    }

    /// Submits many jobs, in frames of at most as many submissions as a
    /// default coordinator's answer frame holds; the answers are in request
    /// order, one each. A frame refused as `Overloaded` after earlier ones
    /// were submitted leaves the rest unsubmitted, answered `Rejected` with
    /// the reason, so no submitted job's id is lost. A frame whose every
    /// submission has an idempotency key is sent again on a new connection
    /// if the connection is lost before its answer arrives.
    pub fn submit_batch(
        &mut self,
        mut reqs: Vec<SubmitRequest>,
    ) -> Result<Vec<SubmitAnswer>, ClientError> {
        let most = fit::max_batch_submissions(DEFAULT_MAX_FRAME_BYTES);
        let mut all = Vec::with_capacity(reqs.len());
        while !reqs.is_empty() {
            let rest = reqs.split_off(reqs.len().min(most));
            let sent = reqs.len();
            match self.request(ClientRequest::SubmitBatch(reqs))? {
                ClientResponse::BatchSubmitted(answers) if answers.len() == sent => {
                    all.extend(answers)
                }
                ClientResponse::BatchSubmitted(answers) => {
                    return Err(ClientError::UnexpectedResponse(format!(
                        "{} answers to a batch of {sent}",
                        answers.len()
                    )))
                }
                // Part of the batch was submitted: its ids must not be lost,
                // so the rest (not submitted) is answered as rejected.
                ClientResponse::Overloaded { reason } if !all.is_empty() => {
                    let refused =
                        SubmitAnswer::Rejected(taskyard_protocol::SubmitRejected { reason });
                    all.extend(std::iter::repeat_n(refused, sent + rest.len()));
                    return Ok(all);
                }
                other => return Err(unexpected("BatchSubmitted", &other)),
            }
            reqs = rest;
        }
        Ok(all)
    }

    /// One job's current view; `None` if the coordinator does not know it.
    pub fn status(&mut self, job_id: JobId) -> Result<Option<JobView>, ClientError> {
        match self.request(ClientRequest::Status { job_id })? {
            ClientResponse::Job(view) => Ok(Some(*view)),
            ClientResponse::NotFound { .. } => Ok(None),
            other => Err(unexpected("Job", &other)),
        }
    }

    /// Summaries of at most `limit` jobs, newest first, optionally only
    /// those in `state`, following the coordinator's cursor across as many
    /// answers as it takes (one answer holds what fits one frame; a page
    /// of history read within its budget may be short, even empty), at
    /// most `MAX_LIST_ROUNDS` of them.
    pub fn list(
        &mut self,
        state: Option<JobState>,
        limit: u32,
    ) -> Result<Vec<JobSummary>, ClientError> {
        let limit = limit.min(MAX_LIST_JOBS);
        let mut jobs = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_LIST_ROUNDS {
            if jobs.len() >= limit as usize {
                break;
            }
            let left = limit - jobs.len() as u32;
            let page = self.list_from(state, None, left, cursor)?;
            jobs.extend(page.jobs);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        jobs.truncate(limit as usize);
        Ok(jobs)
    }

    /// One page of at most `limit` job summaries, newest first, filtered by
    /// state and task type, with the number of jobs in each state (of that
    /// task type). `next` on the page resumes after it.
    pub fn list_page(
        &mut self,
        state: Option<JobState>,
        task_type: Option<String>,
        limit: u32,
    ) -> Result<JobList, ClientError> {
        self.list_from(state, task_type, limit, None)
    }

    /// `list_page` resumed after `cursor` (a page's `next`, or an HTTP
    /// `next_cursor`).
    pub fn list_from(
        &mut self,
        state: Option<JobState>,
        task_type: Option<String>,
        limit: u32,
        cursor: Option<PageCursor>,
    ) -> Result<JobList, ClientError> {
        let request = ClientRequest::List {
            state,
            limit,
            task_type,
            cursor,
        };
        match self.request(request)? {
            ClientResponse::Jobs(page) => Ok(page),
            other => Err(unexpected("Jobs", &other)),
        }
    }

    /// Up to `max_bytes` of a job's payload or result from `offset` (the
    /// coordinator sends at most what fits its frame). An offset past the
    /// end, or the result of a job without one, is `ClientError::ChunkRefused`.
    pub fn read_chunk(
        &mut self,
        job_id: JobId,
        field: ByteField,
        offset: u64,
        max_bytes: u32,
    ) -> Result<ByteChunk, ClientError> {
        let request = ClientRequest::ReadChunk {
            job_id,
            field,
            offset,
            max_bytes,
        };
        match self.request(request)? {
            ClientResponse::Chunk(chunk) if chunk.offset == offset && chunk.job_id == job_id => {
                Ok(chunk)
            }
            ClientResponse::Chunk(chunk) => Err(ClientError::UnexpectedResponse(format!(
                "chunk of job {} at {} while asking for job {job_id} at {offset}",
                chunk.job_id, chunk.offset
            ))),
            ClientResponse::ChunkRefused { job_id, reason } => {
                Err(ClientError::ChunkRefused { job_id, reason })
            }
            ClientResponse::NotFound { job_id } => Err(ClientError::NotFound(job_id)),
            other => Err(unexpected("Chunk", &other)),
        }
    }

    /// A job's whole payload or result, read chunk by chunk: any size the
    /// coordinator accepts arrives byte-exact whatever its `max-frame-bytes`.
    pub fn read_bytes(&mut self, job_id: JobId, field: ByteField) -> Result<Vec<u8>, ClientError> {
        let first = self.read_chunk(job_id, field, 0, u32::MAX)?;
        let total = first.total;
        // The coordinator's size claim bounds what is read, not what is
        // reserved up front.
        let mut bytes = Vec::with_capacity(total.min(READ_RESERVE_BYTES) as usize);
        bytes.extend_from_slice(&first.bytes);
        while (bytes.len() as u64) < total {
            let chunk = self.read_chunk(job_id, field, bytes.len() as u64, u32::MAX)?;
            if chunk.bytes.is_empty() || chunk.total != total {
                return Err(ClientError::UnexpectedResponse(format!(
                    "the {field} of job {job_id} changed or stopped at {} of {total} bytes",
                    bytes.len()
                )));
            }
            bytes.extend_from_slice(&chunk.bytes);
        }
        bytes.truncate(total as usize);
        Ok(bytes)
    }

    /// A SUCCEEDED job's whole result (`read_bytes` of `ByteField::Result`).
    pub fn result(&mut self, job_id: JobId) -> Result<Vec<u8>, ClientError> {
        self.read_bytes(job_id, ByteField::Result)
    }

    /// A job's whole payload (`read_bytes` of `ByteField::Payload`).
    pub fn payload(&mut self, job_id: JobId) -> Result<Vec<u8>, ClientError> {
        self.read_bytes(job_id, ByteField::Payload)
    }

    /// Fills in what `view` left out to fit one frame: its payload and
    /// result, read in chunks. The attempt history stays as it came
    /// (`history_omitted` counts what is missing).
    pub fn complete(&mut self, view: &mut JobView) -> Result<(), ClientError> {
        if view.payload_omitted {
            view.payload = self.payload(view.job_id)?;
            view.payload_omitted = false;
        }
        if view.result_omitted {
            view.result = Some(self.result(view.job_id)?);
            view.result_omitted = false;
        }
        Ok(())
    }

    /// Cancels a job that has not finished. An unknown job is
    /// `ClientError::NotFound`.
    pub fn cancel(&mut self, job_id: JobId) -> Result<CancelOutcome, ClientError> {
        match self.request(ClientRequest::Cancel { job_id })? {
            ClientResponse::Job(view) => Ok(CancelOutcome::Cancelled(view)),
            ClientResponse::CancelRefused { state, .. } => {
                Ok(CancelOutcome::AlreadyFinished(state))
            }
            ClientResponse::NotFound { job_id } => Err(ClientError::NotFound(job_id)),
            other => Err(unexpected("Job", &other)),
        }
    }

    /// Puts a FAILED or CANCELLED job back in the queue with a fresh attempt
    /// budget. `Err(reason)` inside `Ok` when the coordinator refused.
    pub fn requeue(&mut self, job_id: JobId) -> Result<Result<(), String>, ClientError> {
        match self.request(ClientRequest::Requeue { job_id })? {
            ClientResponse::Requeued { .. } => Ok(Ok(())),
            ClientResponse::RequeueRefused { reason, .. } => Ok(Err(reason)),
            ClientResponse::NotFound { job_id } => Err(ClientError::NotFound(job_id)),
            other => Err(unexpected("Requeued", &other)),
        }
    }

    /// Requeues every FAILED job (of `task_type`, if given), including
    /// those only the database still holds: one `RequeueFailed` after
    /// another, each for jobs that failed before the first was sent (so a
    /// job that fails again meanwhile is not retried twice), until one
    /// requeues fewer than `MAX_REQUEUE_JOBS`, or as many jobs as were
    /// FAILED at the start have been requeued. "Before" is by this
    /// machine's clock: with the coordinator's clock ahead of it, jobs that
    /// failed within that offset of the start are left for the next run.
    /// Returns the requeued ids and why it stopped early, if it did.
    pub fn requeue_failed(
        &mut self,
        task_type: Option<String>,
    ) -> Result<(Vec<JobId>, Option<String>), ClientError> {
        self.requeue_finished(JobState::Failed, task_type)
    }

    /// `requeue_failed` of the jobs in `state`: FAILED, or CANCELLED.
    pub fn requeue_finished(
        &mut self,
        state: JobState,
        task_type: Option<String>,
    ) -> Result<(Vec<JobId>, Option<String>), ClientError> {
        let failed_at_start = self
            .list_page(Some(state), task_type.clone(), 0)?
            .counts
            .iter()
            .find(|c| c.state == state)
            .map_or(0, |c| c.count);
        // Jobs that fail again after their requeue are left alone: they
        // finished after this (by this machine's clock).
        let failed_before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(i64::MAX, |d| {
                i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
            });
        let mut all = Vec::new();
        loop {
            let request = ClientRequest::RequeueFailed {
                task_type: task_type.clone(),
                failed_before: Some(failed_before),
                state: Some(state),
            };
            let (job_ids, refused) = match self.request(request)? {
                ClientResponse::Requeued { job_ids, refused } => (job_ids, refused),
                other => return Err(unexpected("Requeued", &other)),
            };
            let last = job_ids.len() < MAX_REQUEUE_JOBS;
            all.extend(job_ids);
            if refused.is_some() || last || all.len() as u64 >= failed_at_start {
                return Ok((all, refused));
            }
        }
    }

    /// Every worker currently connected to the coordinator.
    pub fn workers(&mut self) -> Result<Vec<WorkerView>, ClientError> {
        match self.request(ClientRequest::Workers)? {
            ClientResponse::Workers(workers) => Ok(workers),
            other => Err(unexpected("Workers", &other)),
        }
    }

    /// Polls `status` every `poll` until the job is terminal or `timeout`
    /// has passed; the status is always asked at least once, and once more
    /// at the deadline. An unknown job is `ClientError::NotFound`.
    pub fn wait(
        &mut self,
        job_id: JobId,
        timeout: Duration,
        poll: Duration,
    ) -> Result<WaitOutcome, ClientError> {
        self.wait_watching(job_id, timeout, poll, |_| {})
    }

    /// `wait`, calling `watch` with every view seen before the end (to show
    /// progress while waiting).
    pub fn wait_watching(
        &mut self,
        job_id: JobId,
        timeout: Duration,
        poll: Duration,
        mut watch: impl FnMut(&JobView),
    ) -> Result<WaitOutcome, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut view = self.status(job_id)?.ok_or(ClientError::NotFound(job_id))?;
            watch(&view);
            if view.state.is_terminal() {
                self.complete(&mut view)?;
                return Ok(WaitOutcome::Finished(view));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(WaitOutcome::TimedOut(view));
            }
            thread::sleep(poll.min(deadline - now));
        }
    }

    /// Sends `request` on a live connection (see the type's documentation
    /// for how idle connections are handled) and returns its answer. A
    /// keyed submission whose connection is lost is sent again on a new
    /// one until [`ClientOptions::failover_timeout`] has passed.
    fn request(&mut self, request: ClientRequest) -> Result<ClientResponse, ClientError> {
        if self.lost
            || (self.last_answer.elapsed() >= self.options.ping_after_idle && self.ping().is_err())
        {
            self.reconnect()?;
        }
        let safe_to_repeat = carries_idempotency_keys(&request);
        if safe_to_repeat {
            return self.request_repeatable(request);
        }
        // An answer this recent means the coordinator cannot have closed the
        // connection as idle yet, so only a longer pause pays for a copy.
        let resend = (self.last_answer.elapsed() >= MIN_IDLE_TIMEOUT).then(|| request.clone());
        match (self.exchange(request), resend) {
            (Err(ClientError::Refused { message }), Some(request))
                if message.starts_with(IDLE_CLOSED) =>
            {
                self.reconnect()?;
                self.exchange(request)
            }
            (answered, _) => answered,
        }
    }

    /// `request` for one the coordinator may safely receive twice: sent
    /// again on a fresh connection (found through the address list) after
    /// an idle close or a lost connection, until the failover timeout.
    fn request_repeatable(
        &mut self,
        request: ClientRequest,
    ) -> Result<ClientResponse, ClientError> {
        let deadline = Instant::now() + self.options.failover_timeout;
        loop {
            let lost = match self.exchange(request.clone()) {
                Err(ClientError::Refused { message }) if message.starts_with(IDLE_CLOSED) => {
                    ClientError::Refused { message }
                }
                Err(e) if e.is_connection_loss() => e,
                answered => return answered,
            };
            if Instant::now() >= deadline {
                return Err(lost);
            }
            self.reconnect()?;
        }
    }

    /// A fresh connection in place of one that was closed or lost, found
    /// through the address list from the one last connected to.
    fn reconnect(&mut self) -> Result<(), ClientError> {
        let start = self.addrs.iter().position(|a| *a == self.addr).unwrap_or(0);
        let (connection, addr) = find_leader(&self.addrs, start, &self.options)?;
        self.connection = connection;
        self.addr = addr;
        self.last_answer = Instant::now();
        self.lost = false;
        Ok(())
    }

    /// Sends `request` under the next request id and returns the answer
    /// carrying that id.
    fn exchange(&mut self, request: ClientRequest) -> Result<ClientResponse, ClientError> {
        let answer = self.exchange_once(request);
        if let Err(e) = &answer {
            self.lost |= e.is_connection_loss();
        }
        answer
    }

    fn exchange_once(&mut self, request: ClientRequest) -> Result<ClientResponse, ClientError> {
        let id = self.next_request_id;
        self.next_request_id += 1;
        self.connection.send(ClientMessage::Request {
            request_id: id,
            request,
        })?;
        let frame = self.connection.receive()?;
        self.last_answer = Instant::now();
        let other = |got| format!("answer to request {got} while waiting for {id}");
        match response_to(id, frame, other)? {
            ClientResponse::Overloaded { reason } => Err(ClientError::Overloaded(reason)),
            ClientResponse::NotDurable { reason } => Err(ClientError::NotDurable(reason)),
            ClientResponse::AnswerTooLarge { size, max } => {
                Err(ClientError::AnswerTooLarge { size, max })
            }
            response => Ok(response),
        }
    }
}

/// How to reach a coordinator that requires a token or TLS, and how to
/// keep an idle connection.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The client token (`client-token` on the coordinator).
    pub token: Option<Secret>,
    /// A PEM file of the CA that signed the coordinator's certificate;
    /// `None` for plain TCP.
    pub tls_ca: Option<PathBuf>,
    /// The name in the coordinator's certificate; empty: the host of `addr`.
    pub tls_server_name: String,
    /// Idle for longer than this, the client checks its connection with a
    /// `Ping` before the next request (default [`PING_AFTER_IDLE`]). Keep it
    /// below the coordinator's `client-idle-timeout-millis`.
    pub ping_after_idle: Duration,
    /// How long connecting (or reconnecting) may keep trying the address
    /// list when no coordinator there leads yet (default
    /// [`FAILOVER_TIMEOUT`]). A single address that cannot be reached
    /// fails at once.
    pub failover_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            token: None,
            tls_ca: None,
            tls_server_name: String::new(),
            ping_after_idle: PING_AFTER_IDLE,
            failover_timeout: FAILOVER_TIMEOUT,
        }
    }
}

fn tls_stream(
    tcp: TcpStream,
    addr: &str,
    ca: &std::path::Path,
    server_name: &str,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, ClientError> {
    let config = tls::client_config(ca).map_err(ClientError::Tls)?;
    let name = tls::server_name(server_name, addr).map_err(ClientError::Tls)?;
    let connection =
        rustls::ClientConnection::new(config, name).map_err(|e| ClientError::Tls(e.to_string()))?;
    Ok(rustls::StreamOwned::new(connection, tcp))
}

/// A framed connection to `addr` (TLS when `options.tls_ca` is set) that
/// has exchanged `Hello` with `options.token`: the base of `Client` and of
/// the benchmark's pipelined connections.
pub fn connect_handshaken(addr: &str, options: &ClientOptions) -> Result<Connection, ClientError> {
    let tcp = open_stream(addr)?;
    // A coordinator that is paused or cut off still accepts connections
    // (its kernel does) but never answers: the Hello gets a short wait, so
    // the next address is tried within the failover timeout.
    let control = tcp.try_clone().map_err(ClientError::Io)?;
    control
        .set_read_timeout(Some(CONNECT_TIMEOUT))
        .map_err(ClientError::Io)?;
    let stream: Box<dyn connection::Stream> = match &options.tls_ca {
        Some(ca) => Box::new(tls_stream(tcp, addr, ca, &options.tls_server_name)?),
        None => Box::new(tcp),
    };
    let mut connection = Connection::new(stream, CLIENT_MAX_FRAME_BYTES, CONNECT_TIMEOUT);
    let hello = Hello::new(Role::Client, options.token.as_ref().map(Secret::expose));
    connection.send(ClientMessage::Hello(hello))?;
    match connection.receive()? {
        CoordinatorToClient::Hello(hello) if hello.protocol_version == PROTOCOL_VERSION => {
            control
                .set_read_timeout(Some(READ_TIMEOUT))
                .map_err(ClientError::Io)?;
            connection.set_read_timeout(READ_TIMEOUT);
            connection.coordinator_http = hello.http;
            Ok(connection)
        }
        CoordinatorToClient::Hello(hello) => Err(ClientError::VersionMismatch {
            ours: PROTOCOL_VERSION,
            theirs: hello.protocol_version,
        }),
        CoordinatorToClient::Error { message } if message == UNAUTHORIZED => {
            Err(ClientError::Unauthorized)
        }
        CoordinatorToClient::Error { message } => Err(ClientError::Refused { message }),
        CoordinatorToClient::NotLeader { leader } => Err(ClientError::NotLeader {
            addr: addr.to_string(),
            leader: leader.map(Box::new),
        }),
        CoordinatorToClient::Response { request_id, .. } => Err(ClientError::UnexpectedResponse(
            format!("response {request_id} before Hello"),
        )),
    }
}

/// True when every submission in `request` carries an idempotency key, so
/// the coordinator answers a repeat with the job the first one created.
fn carries_idempotency_keys(request: &ClientRequest) -> bool {
    match request {
        ClientRequest::Submit(req) => req.idempotency_key.is_some(),
        ClientRequest::SubmitBatch(reqs) => {
            !reqs.is_empty() && reqs.iter().all(|r| r.idempotency_key.is_some())
        }
        _ => false,
    }
}

/// Rounds through `addrs` from index `start`, following `NotLeader`, until
/// a coordinator accepts our `Hello`. Another round follows, after a
/// backoff, while `options.failover_timeout` allows and there is reason to
/// hope (several addresses, or a standby said nobody leads yet); an error
/// no other address would change (token, TLS, version) returns at once.
fn find_leader(
    addrs: &[String],
    start: usize,
    options: &ClientOptions,
) -> Result<(Connection, String), ClientError> {
    let deadline = Instant::now() + options.failover_timeout;
    let mut backoff = FIRST_ROUND_BACKOFF;
    loop {
        let mut search = LeaderSearch::new(addrs, start);
        let mut last = None;
        let mut electing = false;
        while let Some(addr) = search.next_addr() {
            match connect_handshaken(&addr, options) {
                Ok(connection) => return Ok((connection, addr)),
                Err(e) if e.worth_another_address() => {
                    if let ClientError::NotLeader { leader, .. } = &e {
                        match leader.as_ref().and_then(|l| l.client.as_deref()) {
                            Some(to) => electing |= !search.follow(to),
                            None => electing = true,
                        }
                    }
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        let again = addrs.len() > 1 || electing;
        let Some(e) = last else {
            return Err(ClientError::BadAddress {
                list: String::new(),
                reason: "no address to try".to_string(),
            });
        };
        if !again || Instant::now() + backoff >= deadline {
            return Err(e);
        }
        thread::sleep(backoff);
        backoff = (backoff * 2).min(MAX_ROUND_BACKOFF);
    }
}

/// The response `frame` carries if it answers request `expected`. Any other
/// frame is an error: an answer to another request (`other` words it from
/// that request's id), the coordinator's `Error` frame, or a second `Hello`.
pub fn response_to(
    expected: u64,
    frame: CoordinatorToClient,
    other: impl FnOnce(u64) -> String,
) -> Result<ClientResponse, ClientError> {
    match frame {
        CoordinatorToClient::Response {
            request_id,
            response,
        } if request_id == expected => Ok(response),
        CoordinatorToClient::Response { request_id, .. } => {
            Err(ClientError::UnexpectedResponse(other(request_id)))
        }
        CoordinatorToClient::Error { message } => Err(ClientError::Refused { message }),
        CoordinatorToClient::Hello(_) => Err(ClientError::UnexpectedResponse(
            "a second Hello".to_string(),
        )),
        CoordinatorToClient::NotLeader { .. } => Err(ClientError::UnexpectedResponse(
            "NotLeader after Hello".to_string(),
        )),
    }
}

/// Resolves `addr` and connects to the first resolved address that accepts.
fn open_stream(addr: &str) -> Result<TcpStream, ClientError> {
    let unreachable = |reason: String| ClientError::Unreachable {
        addr: addr.to_string(),
        reason,
    };
    let candidates: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| unreachable(e.to_string()))?
        .collect();
    let mut last_error = None;
    for candidate in &candidates {
        match TcpStream::connect_timeout(candidate, CONNECT_TIMEOUT) {
            Ok(stream) => return configure(stream).map_err(|e| unreachable(e.to_string())),
            Err(e) => last_error = Some(e),
        }
    }
    Err(unreachable(match last_error {
        Some(e) => e.to_string(),
        None => "the address resolved to nothing".to_string(),
    }))
}

fn configure(stream: TcpStream) -> std::io::Result<TcpStream> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn unexpected(expected: &str, got: &ClientResponse) -> ClientError {
    let got = match got {
        ClientResponse::Submitted(_) => "Submitted",
        ClientResponse::BatchSubmitted(_) => "BatchSubmitted",
        ClientResponse::Job(_) => "Job",
        ClientResponse::NotFound { .. } => "NotFound",
        ClientResponse::Jobs(_) => "Jobs",
        ClientResponse::Workers(_) => "Workers",
        ClientResponse::CancelRefused { .. } => "CancelRefused",
        ClientResponse::Requeued { .. } => "Requeued",
        ClientResponse::RequeueRefused { .. } => "RequeueRefused",
        ClientResponse::Overloaded { .. } => "Overloaded",
        ClientResponse::NotDurable { .. } => "NotDurable",
        ClientResponse::Pong => "Pong",
        ClientResponse::Chunk(_) => "Chunk",
        ClientResponse::ChunkRefused { .. } => "ChunkRefused",
        ClientResponse::AnswerTooLarge { .. } => "AnswerTooLarge",
        ClientResponse::Resolved { .. } => "Resolved",
        ClientResponse::NoMatch { .. } => "NoMatch",
        ClientResponse::Ambiguous { .. } => "Ambiguous",
        ClientResponse::Invalid { .. } => "Invalid",
        ClientResponse::Bulk(_) => "Bulk",
        ClientResponse::Queues(_) => "Queues",
        ClientResponse::Schedule(_) => "Schedule",
        ClientResponse::Schedules { .. } => "Schedules",
        ClientResponse::ScheduleDeleted { .. } => "ScheduleDeleted",
        ClientResponse::ScheduleRefused { .. } => "ScheduleRefused",
    };
    ClientError::UnexpectedResponse(format!("expected {expected}, got {got}"))
}
