//! How many jobs are in each state, per task type, kept up to date on every
//! transition so a list footer costs nothing per job. Counters, not a
//! count of jobs held: they include finished jobs evicted from memory, and
//! recovery initialises them from a COUNT over the stored rows.

use crate::scheduler::hash_map::HashMap;
use taskyard_protocol::{JobState, StateCount};

/// Counts per task type, one slot per state in `JobState::ALL` order.
#[derive(Debug, Default)]
pub struct StateCounts {
    by_type: HashMap<String, [u64; 6]>,
}

fn slot(state: JobState) -> usize {
    JobState::ALL.iter().position(|s| *s == state).unwrap_or(0)
}

impl StateCounts {
    pub fn add(&mut self, task_type: &str, state: JobState) {
        self.add_n(task_type, state, 1);
    }

    /// Counts `n` more jobs of `task_type` in `state` (recovery's COUNT).
    pub fn add_n(&mut self, task_type: &str, state: JobState, n: u64) {
        self.by_type.entry(task_type.to_string()).or_default()[slot(state)] += n;
    }

    /// One job of `task_type` in `state` no longer exists (it expired).
    pub fn remove(&mut self, task_type: &str, state: JobState) {
        if let Some(counts) = self.by_type.get_mut(task_type) {
            counts[slot(state)] = counts[slot(state)].saturating_sub(1);
        }
    }

    pub fn moved(&mut self, task_type: &str, from: JobState, to: JobState) {
        if let Some(counts) = self.by_type.get_mut(task_type) {
            counts[slot(from)] = counts[slot(from)].saturating_sub(1);
            counts[slot(to)] += 1;
        }
    }

    /// The count of jobs of `task_type` in `state`.
    pub fn count(&self, task_type: &str, state: JobState) -> u64 {
        self.by_type.get(task_type).map_or(0, |c| c[slot(state)])
    }

    /// The task types with at least one job not finished.
    pub fn active_types(&self) -> impl Iterator<Item = &str> + '_ {
        self.by_type
            .iter()
            .filter(|(_, c)| {
                JobState::ALL
                    .iter()
                    .any(|s| !s.is_terminal() && c[slot(*s)] > 0)
            })
            .map(|(t, _)| t.as_str())
    }

    /// Non-zero counts per state, for one task type or all of them.
    pub fn counts(&self, task_type: Option<&str>) -> Vec<StateCount> {
        let mut total = [0u64; 6];
        let selected = self
            .by_type
            .iter()
            .filter(|(t, _)| task_type.is_none_or(|wanted| t.as_str() == wanted));
        for (_, counts) in selected {
            for (sum, n) in total.iter_mut().zip(counts) {
                *sum += n;
            }
        }
        JobState::ALL
            .into_iter()
            .zip(total)
            .filter(|(_, count)| *count > 0)
            .map(|(state, count)| StateCount { state, count })
            .collect()
    }
}
