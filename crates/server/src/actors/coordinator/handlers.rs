//! One handler per coordinator message: read the clock once, apply the
//! event to the state, schedule, and finish (hold effects, flush).

use super::messages::*;
use super::stored_reads::Reply;
use super::Coordinator;
use crate::actors::outbox::{Delivery, QueryAnswer, QueryResult, Unheld};
use crate::scheduler::bulk::resolved;
use crate::scheduler::plan::{as_list_jobs, plan, Plan};
use crate::scheduler::{CancelRefused, Job, RequeueRefused};
use actix::{Context, Handler};
use slog::info;
use taskyard_client::clock::Now;
use taskyard_protocol::id_prefix::MAX_CANDIDATES;
use taskyard_protocol::{
    ByteField, ClientRequest, ClientResponse, JobId, JobState, Progress, SubmitRequest,
    MAX_REQUEUE_JOBS,
};

impl Handler<RegisterWorker> for Coordinator {
    type Result = ();

    fn handle(&mut self, m: RegisterWorker, ctx: &mut Context<Self>) {
        if self.commits.is_stopping() {
            return;
        }
        let now = self.now();
        self.sessions.insert(m.session, m.reply_to);
        self.state.register_worker_claiming(
            m.worker_id,
            m.session,
            m.capacity,
            m.task_types,
            m.running,
            now,
        );
        self.state.assign_queued(now);
        self.finish(None, ctx);
    }
}

impl Handler<WorkerHeartbeat> for Coordinator {
    type Result = ();

    fn handle(&mut self, m: WorkerHeartbeat, _: &mut Context<Self>) {
        let now = self.now();
        self.state.heartbeat(&m.worker_id, m.session, now);
    }
}

impl Handler<WorkerTaskResult> for Coordinator {
    type Result = ();

    fn handle(&mut self, m: WorkerTaskResult, ctx: &mut Context<Self>) {
        if self.commits.is_stopping() {
            return;
        }
        let now = self.now();
        self.commits.result_arrived();
        if !self.state.is_current_session(&m.worker_id, m.session) {
            info!(self.log, "result from a replaced session dropped"; "job" => %m.job_id,
                  "lease" => %m.lease, "worker" => %m.worker_id);
            return;
        }
        // A stale result is logged by the state and changes nothing.
        let _ = self
            .state
            .task_result(&m.worker_id, m.job_id, m.lease, m.outcome, now);
        self.state.assign_queued(now);
        self.finish(None, ctx);
    }
}

impl Handler<WorkerTaskProgress> for Coordinator {
    type Result = ();

    fn handle(&mut self, m: WorkerTaskProgress, _: &mut Context<Self>) {
        if !self.state.is_current_session(&m.worker_id, m.session) {
            return;
        }
        let progress = Progress {
            percent: m.percent.min(100),
            message: m.message,
            at: self.now().wall_ms,
        };
        self.state
            .task_progress(&m.worker_id, m.job_id, m.lease, progress);
    }
}

impl Handler<WorkerDraining> for Coordinator {
    type Result = ();

    fn handle(&mut self, m: WorkerDraining, _: &mut Context<Self>) {
        if self.state.is_current_session(&m.worker_id, m.session) {
            info!(self.log, "worker draining"; "worker" => %m.worker_id);
            self.state.worker_draining(&m.worker_id);
        }
    }
}

impl Handler<WorkerDisconnected> for Coordinator {
    type Result = ();

    fn handle(&mut self, m: WorkerDisconnected, ctx: &mut Context<Self>) {
        self.sessions.remove(&m.session);
        if self.commits.is_stopping() {
            return;
        }
        let now = self.now();
        self.state
            .worker_lost(&m.worker_id, m.session, &m.reason, now);
        self.state.assign_queued(now);
        self.finish(None, ctx);
    }
}

impl Handler<ClientCommand> for Coordinator {
    type Result = ();

    fn handle(&mut self, m: ClientCommand, ctx: &mut Context<Self>) {
        if self.commits.is_stopping() {
            return;
        }
        let (reads_stored, now) = (self.history.is_some(), self.now());
        let request = match plan(m.request, &self.state, reads_stored, now.wall_ms) {
            Plan::Refuse(response) => {
                let answer = Delivery::client(m.reply_to, m.request_id, response);
                return answer.deliver_unheld(Unheld::Refusal);
            }
            Plan::ReadStored(read) => {
                let reply = Reply {
                    to: m.reply_to,
                    request_id: m.request_id,
                };
                return self.read_stored(read, reply, m.peer, ctx);
            }
            Plan::Delete(job_ids) => {
                return self.delete_named(job_ids, false, m.reply_to, m.request_id, ctx)
            }
            Plan::Schedule(request) => {
                return self.schedule_request(request, m.reply_to, m.request_id, ctx)
            }
            Plan::Apply(request) => request,
        };
        let response = self.apply_request(request, now);
        let answer = Delivery::client(m.reply_to, m.request_id, response);
        self.finish(Some(answer), ctx);
    }
}

impl Handler<Query> for Coordinator {
    type Result = ();

    fn handle(&mut self, m: Query, ctx: &mut Context<Self>) {
        if let (QueryKind::Ready, Some(reason)) = (&m.query, self.not_ready()) {
            let answer = QueryAnswer {
                request_id: m.request_id,
                result: QueryResult::NotReady { reason },
            };
            // Reveals no job state, so it need not wait for a commit.
            return Delivery::Query(m.reply_to, answer).deliver_unheld(Unheld::NotReady);
        }
        if self.commits.is_stopping() {
            return;
        }
        let now = self.now();
        // During an outage counters and depths are answered at once, so an
        // operator can still scrape /metrics; they are aggregates and may
        // include changes that are not durable yet.
        let at_once = matches!(m.query, QueryKind::Stats | QueryKind::Timeline)
            && self.commits.outage().is_some();
        let result = match m.query {
            QueryKind::Stats => QueryResult::Stats(Box::new(self.state.stats(now))),
            QueryKind::Timeline => QueryResult::Timeline(Box::new(self.state.timeline(now))),
            QueryKind::Ready => QueryResult::Ready,
        };
        let answer = Delivery::Query(
            m.reply_to,
            QueryAnswer {
                request_id: m.request_id,
                result,
            },
        );
        if at_once {
            return answer.deliver_unheld(Unheld::OutageAggregates);
        }
        self.finish(Some(answer), ctx);
    }
}

impl Coordinator {
    /// Why the coordinator is not ready now, if it is not.
    fn not_ready(&self) -> Option<String> {
        if let Some(reason) = self.commits.abandoned() {
            return Some(format!(
                "the database refused a commit for good, so this coordinator is stopping and a \
                 restart recovers from the database: {reason}"
            ));
        }
        if self.commits.is_stopping() {
            return Some("the coordinator is stopping".into());
        }
        self.commits.outage().map(|outage| {
            format!(
                "commits to the database are failing ({} failed in a row; retried every \
                 second, requests meanwhile are answered not durable): {}",
                outage.failures, outage.last_error
            )
        })
    }

    fn apply_request(&mut self, request: ClientRequest, now: Now) -> ClientResponse {
        match request {
            ClientRequest::Submit(req) => {
                let answer = self.state.submit(req, now);
                self.state.assign_queued(now);
                ClientResponse::Submitted(answer)
            }
            ClientRequest::SubmitBatch(reqs) => {
                ClientResponse::BatchSubmitted(self.submit_all(reqs, now))
            }
            ClientRequest::Status { job_id } => self.job_response(job_id, now),
            list @ ClientRequest::List { .. } => self.apply_request(as_list_jobs(list), now),
            ClientRequest::ListJobs(query) => {
                ClientResponse::Jobs(self.state.list_query(&query, now))
            }
            ClientRequest::Resolve { prefix } => {
                let found = self.state.ids_with_prefix(&prefix, MAX_CANDIDATES + 1);
                resolved(prefix, found)
            }
            ClientRequest::RequeueJobs { job_ids } => {
                ClientResponse::Bulk(self.requeue_each(&job_ids, now))
            }
            ClientRequest::Delete { .. } | ClientRequest::DeleteFinished { .. } => {
                ClientResponse::Invalid {
                    reason: "deleting jobs needs the coordinator's database readers".into(),
                }
            }
            ClientRequest::Queues => ClientResponse::Queues(self.state.queue_stats(now)),
            ClientRequest::ReadChunk {
                job_id,
                field,
                offset,
                max_bytes,
            } => chunk_response(job_id, self.state.job(job_id), field, offset, max_bytes),
            ClientRequest::Cancel { job_id } => self.cancel(job_id, now),
            ClientRequest::Requeue { job_id } => self.requeue(job_id, now),
            ClientRequest::RequeueFailed {
                task_type,
                failed_before,
                state,
            } => self.requeue_failed(state, task_type.as_deref(), failed_before, now),
            ClientRequest::Workers => ClientResponse::Workers(self.state.worker_views(now)),
            // Sessions answer pings themselves; one forwarded here is harmless.
            ClientRequest::Ping => ClientResponse::Pong,
            // Taken by `schedule_request` before this.
            ClientRequest::CreateSchedule(_)
            | ClientRequest::UpdateSchedule(_)
            | ClientRequest::ListSchedules { .. }
            | ClientRequest::ShowSchedule { .. }
            | ClientRequest::PauseSchedule { .. }
            | ClientRequest::ResumeSchedule { .. }
            | ClientRequest::TriggerSchedule { .. }
            | ClientRequest::DeleteSchedule { .. } => ClientResponse::Invalid {
                reason: "schedule requests are handled apart".into(),
            },
        }
    }

    fn cancel(&mut self, job_id: JobId, now: Now) -> ClientResponse {
        match self.state.cancel(job_id, now) {
            Ok(()) => {
                // A cancelled RUNNING job freed a slot.
                self.state.assign_queued(now);
                self.job_response(job_id, now)
            }
            Err(CancelRefused::NotFound) => ClientResponse::NotFound { job_id },
            Err(CancelRefused::AlreadyFinished(state)) => {
                ClientResponse::CancelRefused { job_id, state }
            }
        }
    }

    /// Requeues at most `MAX_REQUEUE_JOBS` of the FAILED (or, if `state`
    /// says so, CANCELLED) jobs in memory.
    pub(super) fn requeue_failed(
        &mut self,
        state: Option<JobState>,
        task_type: Option<&str>,
        failed_before: Option<i64>,
        now: Now,
    ) -> ClientResponse {
        let state = state.unwrap_or(JobState::Failed);
        let (job_ids, refused) =
            self.state
                .requeue_finished(state, task_type, failed_before, MAX_REQUEUE_JOBS, now);
        self.state.assign_queued(now);
        ClientResponse::Requeued { job_ids, refused }
    }

    pub(super) fn requeue(&mut self, job_id: JobId, now: Now) -> ClientResponse {
        let reason = match self.state.requeue(job_id, now) {
            Ok(()) => {
                self.state.assign_queued(now);
                return ClientResponse::Requeued {
                    job_ids: vec![job_id],
                    refused: None,
                };
            }
            Err(RequeueRefused::NotFound) => return ClientResponse::NotFound { job_id },
            Err(RequeueRefused::NotFailed(state)) => {
                format!("job is {state}; only FAILED or CANCELLED jobs can be retried")
            }
            Err(RequeueRefused::Admission(reason)) => reason,
            Err(RequeueRefused::BeingDeleted) => "the job is being deleted".to_string(),
        };
        ClientResponse::RequeueRefused { job_id, reason }
    }

    fn job_response(&self, job_id: JobId, now: Now) -> ClientResponse {
        match self.state.status(job_id, now) {
            Some(view) => ClientResponse::Job(Box::new(view)),
            None => ClientResponse::NotFound { job_id },
        }
    }

    fn submit_all(
        &mut self,
        reqs: Vec<SubmitRequest>,
        now: Now,
    ) -> Vec<taskyard_protocol::SubmitAnswer> {
        let answers = reqs
            .into_iter()
            .map(|r| self.state.submit(r, now))
            .collect();
        self.state.assign_queued(now);
        answers
    }
}

/// The answer to a `ReadChunk` of `job` (`None`: no such job).
pub(super) fn chunk_response(
    job_id: JobId,
    job: Option<&Job>,
    field: ByteField,
    offset: u64,
    max_bytes: u32,
) -> ClientResponse {
    match job.map(|job| job.chunk(field, offset, max_bytes)) {
        Some(Ok(chunk)) => ClientResponse::Chunk(chunk),
        Some(Err(reason)) => ClientResponse::ChunkRefused { job_id, reason },
        None => ClientResponse::NotFound { job_id },
    }
}

impl Handler<Sweep> for Coordinator {
    type Result = ();

    fn handle(&mut self, _: Sweep, ctx: &mut Context<Self>) {
        if self.commits.is_stopping() {
            return;
        }
        let now = self.now();
        let more = self.state.sweep(now);
        self.evict_step(ctx);
        self.expire_if_due(now, ctx);
        self.wake_deletions(ctx);
        self.finish_schedule_step(more, now, ctx);
    }
}

impl Handler<Shutdown> for Coordinator {
    type Result = ();

    fn handle(&mut self, _: Shutdown, ctx: &mut Context<Self>) {
        info!(self.log, "shutting down: freezing state");
        self.give_up_parked_deletions(ctx);
        let commands = self.commits.stop_requested(&mut self.state);
        self.apply(commands, ctx);
    }
}

impl Handler<Depose> for Coordinator {
    type Result = ();

    fn handle(&mut self, m: Depose, ctx: &mut Context<Self>) {
        self.depose(&m.reason, ctx);
    }
}

impl Handler<Inspect> for Coordinator {
    type Result = Result<Inspection, String>;

    fn handle(&mut self, _: Inspect, _: &mut Context<Self>) -> Self::Result {
        self.state.check_invariants()?;
        Ok(Inspection {
            active_jobs: self.state.active_jobs(),
            held_effects: self.commits.held(),
            durable_batch: self.commits.durable(),
            batches_committed: self.commits.stats().batches,
            rows_committed: self.commits.stats().rows,
            jobs_in_memory: self.state.jobs_in_memory(),
            finished_in_memory: self.state.finished_in_memory(),
        })
    }
}
