//! The queues as an operator looks at them (`Queues`, `GET /api/queues`):
//! built from the ready FIFOs' heads, the per-type counters and the worker
//! registry, so its cost grows with the number of task types, queues and
//! workers, never with the number of jobs.

use crate::scheduler::state::CoordinatorState;
use std::collections::btree_map::{BTreeMap, Entry};
use taskyard_client::clock::Now;
use taskyard_protocol::{JobState, QueueRow, QueueStats, TaskTypeRow, WorkerView};

fn age(now: i64, since: i64) -> u64 {
    u64::try_from(now.saturating_sub(since)).unwrap_or(0)
}

impl CoordinatorState {
    /// Every ready queue and every task type with work or a worker, at `now`.
    pub fn queue_stats(&self, now: Now) -> QueueStats {
        let mut queues: Vec<QueueRow> = self
            .queues
            .heads()
            .map(|(task_type, priority, depth, (ready_at, _, head))| {
                let submitted_at = self.jobs.get(&head).map_or(ready_at, |j| j.submitted_at);
                QueueRow {
                    task_type: task_type.to_string(),
                    priority,
                    depth: depth as u64,
                    oldest_submitted_at: submitted_at,
                    oldest_age_ms: age(now.wall_ms, submitted_at),
                    latency_ms: age(now.wall_ms, ready_at),
                }
            })
            .collect();
        queues.sort_by(|a, b| (&a.task_type, b.priority).cmp(&(&b.task_type, a.priority)));
        let workers = self.worker_views(now);
        let mut types: BTreeMap<String, TaskTypeRow> = BTreeMap::new();
        let names = self
            .state_counts
            .active_types()
            .map(str::to_string)
            .chain(workers.iter().flat_map(|w| w.task_types.iter().cloned()));
        for name in names {
            if let Entry::Vacant(slot) = types.entry(name) {
                let row = self.task_type_row(slot.key(), &queues, &workers);
                slot.insert(row);
            }
        }
        QueueStats {
            at: now.wall_ms,
            queues,
            task_types: types.into_values().collect(),
        }
    }

    fn task_type_row(
        &self,
        name: &str,
        queues: &[QueueRow],
        workers: &[WorkerView],
    ) -> TaskTypeRow {
        let own: Vec<&QueueRow> = queues.iter().filter(|q| q.task_type == name).collect();
        let ready: u64 = own.iter().map(|q| q.depth).sum();
        let count = |state| self.state_counts.count(name, state);
        let delayed = count(JobState::Queued).saturating_sub(ready);
        let retry_wait = count(JobState::RetryWait);
        let runners: Vec<&WorkerView> = workers
            .iter()
            .filter(|w| w.task_types.iter().any(|t| t == name))
            .collect();
        let free_slots = runners
            .iter()
            .filter(|w| !w.draining)
            .map(|w| u64::from(w.capacity.saturating_sub(w.active)))
            .sum();
        TaskTypeRow {
            task_type: name.to_string(),
            ready,
            delayed,
            retry_wait,
            running: count(JobState::Running),
            oldest_age_ms: own.iter().map(|q| q.oldest_age_ms).max(),
            latency_ms: own.iter().map(|q| q.latency_ms).max(),
            workers: runners.len() as u32,
            free_slots,
            no_worker: runners.is_empty() && ready + delayed + retry_wait > 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::scheduler::tests::{echo, state, w};
    use crate::scheduler::SessionId;
    use taskyard_client::clock::Now;
    use taskyard_protocol::{Priority, SubmitRequest};

    #[test]
    fn queues_show_depth_age_latency_and_who_runs_each_type() {
        let mut s = state();
        let mut high = echo("h");
        high.priority = Priority::High;
        s.submit(echo("a"), Now::both(1_000));
        s.submit(high, Now::both(2_000));
        let mut later = echo("later");
        later.delay_ms = Some(60_000);
        s.submit(later, Now::both(2_000));
        s.submit(SubmitRequest::new("resize", vec![0x90]), Now::both(3_000));
        s.register_worker_claiming(
            w("w1"),
            SessionId(1),
            2,
            vec!["sleep".into()],
            vec![],
            Now::both(3_000),
        );

        let stats = s.queue_stats(Now::both(5_000));
        let rows: Vec<_> = stats
            .queues
            .iter()
            .map(|q| (q.task_type.as_str(), q.priority, q.depth, q.oldest_age_ms))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("echo", Priority::High, 1, 3_000),
                ("echo", Priority::Normal, 1, 4_000),
                ("resize", Priority::Normal, 1, 2_000),
            ]
        );
        let names: Vec<_> = stats
            .task_types
            .iter()
            .map(|t| t.task_type.as_str())
            .collect();
        assert_eq!(names, vec!["echo", "resize", "sleep"]);
        let echo_row = &stats.task_types[0];
        assert_eq!((echo_row.ready, echo_row.delayed), (2, 1));
        assert_eq!(echo_row.latency_ms, Some(4_000));
        assert!(echo_row.no_worker, "no worker runs echo");
        let sleep_row = &stats.task_types[2];
        assert_eq!((sleep_row.workers, sleep_row.free_slots), (1, 2));
        assert!(!sleep_row.no_worker, "nothing waits for sleep");
        assert_eq!(sleep_row.oldest_age_ms, None);
    }
}
