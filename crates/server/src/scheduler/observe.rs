//! Read-only views for the HTTP API: pages of jobs resumed from a cursor,
//! and one snapshot of everything `/api/stats` and `/metrics` show. Both are
//! taken inside a coordinator handler and answered through the outbox, so
//! they are never ahead of the database.

use crate::scheduler::job::Job;
use crate::scheduler::job::OrderKey;
use crate::scheduler::metrics::Metrics;
use crate::scheduler::state::CoordinatorState;
use serde::Serialize;
use std::ops::Bound;
use taskyard_client::clock::Now;
use taskyard_protocol::{
    IdPrefix, JobList, JobState, JobView, ListOrder, ListQuery, Priority, StateCount, WorkerView,
};

pub use taskyard_protocol::PageCursor;

/// One page of jobs, newest submission first. `next` is present when more
/// jobs may follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPage {
    pub jobs: Vec<JobView>,
    pub next: Option<PageCursor>,
    /// Jobs per state (of the filtered task type), for the whole table.
    pub counts: Vec<StateCount>,
}

/// Ready jobs of one task type at one base priority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueDepth {
    pub task_type: String,
    pub priority: Priority,
    pub depth: u64,
    /// When the oldest of them became ready (unix milliseconds).
    pub oldest_ready_at: i64,
}

/// The state and counters at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsSnapshot {
    /// Unix milliseconds when it was taken.
    pub at: i64,
    /// Every state, zeros included, in `JobState::ALL` order.
    pub counts: Vec<StateCount>,
    pub queues: Vec<QueueDepth>,
    /// QUEUED jobs waiting for their `not_before`.
    pub delayed: u64,
    /// Jobs finished in each of the last 60 seconds, oldest first.
    pub throughput: Vec<u32>,
    pub workers: Vec<WorkerView>,
    pub metrics: Metrics,
    /// Per schedule, by name: (name, slots fired, skipped per
    /// `SkipReason`); at most `max-schedules` entries.
    pub schedules: Vec<(String, u64, [u64; 2])>,
    /// Fire time minus nominal slot of every slot fired.
    pub schedule_lag: crate::scheduler::metrics::Histogram,
}

impl StatsSnapshot {
    /// Ready QUEUED jobs per base priority, HIGH first, summed over task types.
    pub fn depth_by_priority(&self) -> Vec<(Priority, u64)> {
        Priority::ALL
            .into_iter()
            .rev()
            .map(|p| {
                let depth = self
                    .queues
                    .iter()
                    .filter(|q| q.priority == p)
                    .map(|q| q.depth)
                    .sum();
                (p, depth)
            })
            .collect()
    }
}

impl CoordinatorState {
    /// Up to `limit` jobs after `cursor` (newest first), filtered by state
    /// and task type.
    pub fn list_after(
        &self,
        state: Option<JobState>,
        task_type: Option<&str>,
        cursor: Option<PageCursor>,
        limit: usize,
        now: Now,
    ) -> JobPage {
        let (page, next) = self.page_keys(state, task_type, cursor, limit);
        JobPage {
            jobs: page
                .iter()
                .filter_map(|key| self.status(key.2, now))
                .collect(),
            next,
            counts: self.state_counts.counts(task_type),
        }
    }

    /// `list_after` as summaries, for the TCP `List`: no payload, result or
    /// history is copied.
    pub fn list_summaries(
        &self,
        state: Option<JobState>,
        task_type: Option<&str>,
        cursor: Option<PageCursor>,
        limit: usize,
        now: Now,
    ) -> JobList {
        let query = ListQuery {
            state,
            task_type: task_type.map(str::to_string),
            cursor,
            limit: u32::try_from(limit).unwrap_or(u32::MAX),
            ..ListQuery::default()
        };
        self.list_query(&query, now)
    }

    /// The order keys of up to `limit` matching jobs after `cursor`, and
    /// the cursor of the next page if more match.
    fn page_keys(
        &self,
        state: Option<JobState>,
        task_type: Option<&str>,
        cursor: Option<PageCursor>,
        limit: usize,
    ) -> (Vec<OrderKey>, Option<PageCursor>) {
        let query = ListQuery {
            state,
            task_type: task_type.map(str::to_string),
            cursor,
            ..ListQuery::default()
        };
        self.query_keys(&query, limit)
    }

    /// `ListJobs` answered from memory: summaries of up to `query.limit`
    /// matching jobs after its cursor, in its order, with the counts of
    /// its task type.
    pub fn list_query(&self, query: &ListQuery, now: Now) -> JobList {
        let (page, next) = self.query_keys(query, query.limit as usize);
        JobList {
            jobs: page
                .iter()
                .filter_map(|key| self.jobs.get(&key.2))
                .map(|job| self.summary(job, now))
                .collect(),
            next,
            counts: self.state_counts.counts(query.task_type.as_deref()),
        }
    }

    /// The order keys of up to `limit` jobs matching `query` after its
    /// cursor, in its order, and the cursor of the next page if more match.
    fn query_keys(&self, query: &ListQuery, limit: usize) -> (Vec<OrderKey>, Option<PageCursor>) {
        let after = query
            .cursor
            .map_or(Bound::Unbounded, |c| Bound::Excluded(c.0));
        let matching = |key: &&OrderKey| {
            self.jobs
                .get(&key.2)
                .is_some_and(|job| matches_query(job, query))
        };
        let mut keys: Box<dyn Iterator<Item = &OrderKey>> = match query.order {
            ListOrder::NewestFirst => Box::new(
                self.by_sequence
                    .range((Bound::Unbounded, after))
                    .rev()
                    .filter(matching),
            ),
            ListOrder::OldestFirst => Box::new(
                self.by_sequence
                    .range((after, Bound::Unbounded))
                    .filter(matching),
            ),
        };
        let page: Vec<OrderKey> = keys.by_ref().take(limit).copied().collect();
        let more = keys.next().is_some();
        let next = page.last().filter(|_| more).map(|key| PageCursor(*key));
        (page, next)
    }

    /// The last hour per task type and minute, ending at `now`.
    pub fn timeline(&self, now: Now) -> crate::scheduler::TimelineSnapshot {
        self.timeline.snapshot(now.wall_ms)
    }

    /// Tracks up to `max_types` task types one by one in the timeline
    /// (`timeline-task-types`); forgets what it held.
    pub fn set_timeline_task_types(&mut self, max_types: usize) {
        self.timeline = crate::scheduler::Timeline::new(max_types);
    }

    /// Up to `limit` ids of jobs in memory that start with `prefix`, newest first.
    pub fn ids_with_prefix(
        &self,
        prefix: &IdPrefix,
        limit: usize,
    ) -> Vec<taskyard_protocol::JobId> {
        self.by_sequence
            .iter()
            .rev()
            .filter(|key| prefix.matches(&key.2))
            .take(limit)
            .map(|key| key.2)
            .collect()
    }

    /// For the `Coordinator`, which records persistence batches.
    pub fn metrics_mut(&mut self) -> &mut Metrics {
        &mut self.metrics
    }

    /// Everything `/api/stats` and `/metrics` report, at `now`.
    pub fn stats(&self, now: Now) -> StatsSnapshot {
        let present = self.state_counts.counts(None);
        let counts = JobState::ALL
            .into_iter()
            .map(|state| StateCount {
                state,
                count: present
                    .iter()
                    .find(|c| c.state == state)
                    .map_or(0, |c| c.count),
            })
            .collect();
        let mut queues: Vec<QueueDepth> = self
            .queues
            .heads()
            .map(|(task_type, priority, depth, head)| QueueDepth {
                task_type: task_type.to_string(),
                priority,
                depth: depth as u64,
                oldest_ready_at: head.0,
            })
            .collect();
        queues.sort_by(|a, b| (&a.task_type, b.priority).cmp(&(&b.task_type, a.priority)));
        StatsSnapshot {
            at: now.wall_ms,
            counts,
            queues,
            delayed: self.delayed.len() as u64,
            throughput: self.metrics.throughput.per_second(now.wall_ms),
            workers: self.worker_views(now),
            metrics: self.metrics.clone(),
            schedules: self
                .schedules
                .all()
                .into_iter()
                .map(|e| (e.spec.name.clone(), e.fired, e.skipped))
                .collect(),
            schedule_lag: self.schedules.lag.clone(),
        }
    }
}

/// True when `job` passes every filter of `query` (the cursor and order aside).
pub fn matches_query(job: &Job, query: &ListQuery) -> bool {
    query.state.is_none_or(|s| job.state == s)
        && query
            .task_type
            .as_deref()
            .is_none_or(|t| job.task_type == t)
        && query.priority.is_none_or(|p| job.priority == p)
        && query.id_prefix.as_ref().is_none_or(|p| p.matches(&job.id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::retry::RetryPolicy;
    use crate::scheduler::Policy;
    use taskyard_protocol::payloads::encode_json;
    use taskyard_protocol::SubmitRequest;

    fn state() -> CoordinatorState {
        let policy = Policy {
            aging_step_ms: 1000,
            max_active_jobs: 100,
            retry: RetryPolicy {
                base_ms: 10,
                cap_ms: 100,
            },
            default_max_attempts: 3,
            default_timeout_ms: 1000,
            heartbeat_timeout_ms: 1000,
            max_payload_bytes: 1024,
            max_result_bytes: 1024,
        };
        CoordinatorState::new(policy, slog::Logger::root(slog::Discard, slog::o!()))
    }

    fn submit(state: &mut CoordinatorState, task_type: &str, now: Now) {
        let payload = encode_json(&serde_json::json!({ "message": "hi" }));
        state.submit(SubmitRequest::new(task_type, payload), now);
    }

    #[test]
    fn pages_cover_every_job_once_newest_first() {
        let mut s = state();
        for i in 0..7 {
            submit(
                &mut s,
                if i % 2 == 0 { "echo" } else { "fail" },
                Now::both(i),
            );
        }
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let page = s.list_after(None, None, cursor, 3, Now::both(10));
            seen.extend(page.jobs.iter().map(|j| j.sequence));
            match page.next {
                Some(next) => cursor = Some(next.to_string().parse().expect("round-trips")),
                None => break,
            }
        }
        assert_eq!(seen, vec![7, 6, 5, 4, 3, 2, 1]);
        let echo = s.list_after(None, Some("echo"), None, 10, Now::both(10));
        assert_eq!(echo.jobs.len(), 4);
        assert!(echo.next.is_none());
    }

    #[test]
    fn queries_filter_by_priority_and_id_prefix_and_page_oldest_first() {
        let mut s = state();
        for i in 0..6 {
            let payload = encode_json(&serde_json::json!({ "message": "hi" }));
            let mut req = SubmitRequest::new("echo", payload);
            req.priority = if i % 2 == 0 {
                Priority::High
            } else {
                Priority::Low
            };
            s.submit(req, Now::both(i));
        }
        let mut query = ListQuery {
            priority: Some(Priority::High),
            order: ListOrder::OldestFirst,
            limit: 2,
            ..ListQuery::default()
        };
        let first = s.list_query(&query, Now::both(10));
        assert_eq!(
            first.jobs.iter().map(|j| j.sequence).collect::<Vec<_>>(),
            vec![1, 3]
        );
        query.cursor = first.next;
        let second = s.list_query(&query, Now::both(10));
        assert_eq!(
            second.jobs.iter().map(|j| j.sequence).collect::<Vec<_>>(),
            vec![5]
        );
        assert!(second.next.is_none());
        assert_eq!(
            second.counts[0].count, 6,
            "counts ignore the priority filter"
        );
        let one = second.jobs[0].job_id;
        let text = one.to_string();
        let by_id = ListQuery {
            id_prefix: Some(IdPrefix::parse(&text[..30]).expect("prefix")),
            limit: 10,
            ..ListQuery::default()
        };
        let found = s.list_query(&by_id, Now::both(10));
        assert_eq!(found.jobs.len(), 1);
        assert_eq!(found.jobs[0].job_id, one);
        let prefix = IdPrefix::parse(&text[..30]).expect("prefix");
        assert_eq!(s.ids_with_prefix(&prefix, 5), vec![one]);
    }

    #[test]
    fn stats_count_every_state_and_queue() {
        let mut s = state();
        submit(&mut s, "echo", Now::both(0));
        submit(&mut s, "echo", Now::both(1));
        let stats = s.stats(Now::both(5));
        assert_eq!(stats.counts.len(), JobState::ALL.len());
        assert_eq!(stats.counts[0].count, 2, "two QUEUED");
        assert_eq!(stats.queues[0].depth, 2);
        assert_eq!(stats.queues[0].oldest_ready_at, 0);
        let echo = stats
            .metrics
            .by_task_type
            .iter()
            .next()
            .expect("echo counted");
        assert_eq!((echo.0, echo.1.submitted), ("echo", 2));
        assert!("garbage".parse::<PageCursor>().is_err());
    }
}
