//! The QUEUED jobs, one FIFO per (task type, base priority), and the ordering
//! policy that picks the next job to run.

use crate::scheduler::hash_map::HashMap;
use crate::scheduler::job::ReadyKey;
use std::cmp::Reverse;
use std::collections::BTreeSet;
use taskyard_protocol::{JobId, Priority};

/// Effective level = base + floor(age / aging step), capped at HIGH. Age is
/// measured from the time the job became ready (its submission, unless it
/// was delayed); a clock that went backwards counts as age 0.
pub fn effective_level(base: Priority, ready_at: i64, now: i64, aging_step_ms: u64) -> u8 {
    let age = u64::try_from(now.saturating_sub(ready_at)).unwrap_or(0);
    let steps = age / aging_step_ms.max(1);
    let level = u64::from(base.level()).saturating_add(steps);
    level.min(u64::from(Priority::High.level())) as u8
}

/// How a queued job ranks against others at `now`: smaller is sooner.
/// Highest effective level first, then ready order.
pub type Rank = (Reverse<u8>, ReadyKey);

fn rank(priority: Priority, key: ReadyKey, now: i64, aging_step_ms: u64) -> Rank {
    (
        Reverse(effective_level(priority, key.0, now, aging_step_ms)),
        key,
    )
}

/// All QUEUED jobs that are ready to run, one FIFO per (task type, base
/// level) ordered by `ReadyKey`. Selection looks at three heads per task
/// type, never at the whole queue, and still finds the job a full sort by
/// (effective level desc, ready time, sequence, id) puts first. Why: within
/// one FIFO, keys ascend by ready time, and age is measured from ready time,
/// so the head is the oldest job of its FIFO; effective level never
/// decreases with age, so the head also has the highest level there and
/// ranks first in its FIFO. The global first job is therefore the best head.
/// For jobs submitted without a delay, ready time is submission time, which
/// never goes back as sequence grows (`CoordinatorState::admit`), so this is
/// the submission-sequence order; legacy rows (sequence 0) predate every
/// sequenced row. `ordering_tests` checks this by property test.
#[derive(Debug, Default)]
pub struct ReadyQueues {
    by_type: HashMap<String, [BTreeSet<ReadyKey>; 3]>,
    len: usize,
}

impl ReadyQueues {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Ready jobs per (task type, base priority), non-empty FIFOs only.
    pub fn depths(&self) -> impl Iterator<Item = (&str, Priority, usize)> + '_ {
        self.by_type.iter().flat_map(|(task_type, levels)| {
            Priority::ALL.into_iter().filter_map(move |p| {
                let n = levels[usize::from(p.level())].len();
                (n > 0).then_some((task_type.as_str(), p, n))
            })
        })
    }

    /// Each non-empty FIFO: (task type, base priority, depth, head key).
    pub fn heads(&self) -> impl Iterator<Item = (&str, Priority, usize, ReadyKey)> + '_ {
        self.by_type.iter().flat_map(|(task_type, levels)| {
            Priority::ALL.into_iter().filter_map(move |p| {
                let fifo = &levels[usize::from(p.level())];
                Some((task_type.as_str(), p, fifo.len(), *fifo.first()?))
            })
        })
    }

    pub fn push(&mut self, task_type: &str, priority: Priority, key: ReadyKey) {
        let levels = self.by_type.entry(task_type.to_string()).or_default();
        if levels[usize::from(priority.level())].insert(key) {
            self.len += 1;
        }
    }

    /// Whether the job with `key` waits in its FIFO.
    pub fn contains(&self, task_type: &str, priority: Priority, key: ReadyKey) -> bool {
        self.by_type
            .get(task_type)
            .is_some_and(|levels| levels[usize::from(priority.level())].contains(&key))
    }

    /// Removes a job (when it is assigned or cancelled); false if absent.
    pub fn remove(&mut self, task_type: &str, priority: Priority, key: ReadyKey) -> bool {
        let Some(levels) = self.by_type.get_mut(task_type) else {
            return false;
        };
        let removed = levels[usize::from(priority.level())].remove(&key);
        if removed {
            self.len -= 1;
            if levels.iter().all(BTreeSet::is_empty) {
                self.by_type.remove(task_type);
            }
        }
        removed
    }

    /// The job that should run next among task types for which `runnable`
    /// is true, with its task type and base priority.
    pub fn best<F>(
        &self,
        now: i64,
        aging_step_ms: u64,
        runnable: F,
    ) -> Option<(JobId, &str, Priority)>
    where
        F: Fn(&str) -> bool,
    {
        self.by_type
            .iter()
            .filter(|(task_type, _)| runnable(task_type))
            .flat_map(|(task_type, levels)| {
                Priority::ALL.into_iter().filter_map(move |p| {
                    let head = *levels[usize::from(p.level())].first()?;
                    Some((rank(p, head, now, aging_step_ms), task_type.as_str(), p))
                })
            })
            .min_by(|a, b| a.0.cmp(&b.0))
            .map(|(rank, task_type, p)| (rank.1 .2, task_type, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sequence: u64, submitted_at: i64) -> ReadyKey {
        (submitted_at, sequence, JobId::mint())
    }

    fn any(_: &str) -> bool {
        true
    }

    #[test]
    fn aging_raises_one_level_per_step_up_to_high() {
        assert_eq!(effective_level(Priority::Low, 0, 999, 1000), 0);
        assert_eq!(effective_level(Priority::Low, 0, 1000, 1000), 1);
        assert_eq!(effective_level(Priority::Low, 0, 2000, 1000), 2);
        assert_eq!(effective_level(Priority::Low, 0, 90_000, 1000), 2);
        assert_eq!(
            effective_level(Priority::Normal, 5000, 0, 1000),
            1,
            "clock went back"
        );
    }

    #[test]
    fn fifo_within_a_level() {
        let mut q = ReadyQueues::default();
        let (first, second) = (key(1, 5), key(2, 5));
        q.push("echo", Priority::Normal, second);
        q.push("echo", Priority::Normal, first);
        assert_eq!(q.best(100, 1000, any).map(|b| b.0), Some(first.2));
    }

    #[test]
    fn higher_priority_first_then_aged_low_overtakes_younger_jobs() {
        let mut q = ReadyQueues::default();
        let low = key(1, 0);
        let normal = key(2, 1500);
        let high = key(3, 1500);
        q.push("a", Priority::Low, low);
        q.push("b", Priority::Normal, normal);
        q.push("a", Priority::High, high);
        assert_eq!(q.best(1500, 1000, any).map(|b| b.0), Some(high.2));
        // At 2000 the LOW job is two steps old: level 2, older than the HIGH one.
        assert_eq!(q.best(2000, 1000, any).map(|b| b.0), Some(low.2));
        assert!(q.remove("a", Priority::Low, low));
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn only_runnable_task_types_are_considered() {
        let mut q = ReadyQueues::default();
        let echo = key(1, 0);
        let sleep = key(2, 0);
        q.push("echo", Priority::High, echo);
        q.push("sleep", Priority::Low, sleep);
        let best = q.best(0, 1000, |t| t == "sleep");
        assert_eq!(best, Some((sleep.2, "sleep", Priority::Low)));
        assert_eq!(q.best(0, 1000, |_| false), None);
    }
}
