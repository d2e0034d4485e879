//! Per-key concurrency (issue 30, flow control): at most a limit's
//! `max_running` jobs of each concurrency key RUNNING at once. A ready job
//! whose key is full waits aside, in ready order, instead of in its ready
//! queue, so it never blocks jobs of other keys behind it; when a job of
//! that key stops running, the first one waiting aside goes back to its
//! ready queue. Every step is O(1) in the number of queued jobs (hash
//! lookups and the head of one ordered set); a key's limit is found by its
//! exact pattern or its longest prefix pattern.
//!
//! Pure: the state calls it at each start, stop, hold and cancel. Not yet
//! wired into `CoordinatorState`: the state's queues, persistence of the
//! key and the limits' commands come next (see the notes).

use crate::scheduler::hash_map::HashMap;
use crate::scheduler::job::ReadyKey;
use std::collections::BTreeSet;
use taskyard_protocol::flow::LimitPattern;

/// The `max_running` of every limit that has one, by pattern.
#[derive(Debug, Clone, Default)]
pub struct ConcurrencyLimits {
    exact: HashMap<String, u32>,
    /// Longest prefix first, so the first match is the most specific.
    prefixes: Vec<(String, u32)>,
}

impl ConcurrencyLimits {
    /// The limits of `patterns` (a later entry for the same pattern wins).
    pub fn new(patterns: impl IntoIterator<Item = (LimitPattern, u32)>) -> ConcurrencyLimits {
        let mut limits = ConcurrencyLimits::default();
        for (pattern, max_running) in patterns {
            match pattern {
                LimitPattern::Exact(key) => {
                    limits.exact.insert(key, max_running);
                }
                LimitPattern::Prefix(prefix) => {
                    limits.prefixes.retain(|(p, _)| *p != prefix);
                    limits.prefixes.push((prefix, max_running));
                }
            }
        }
        limits
            .prefixes
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        limits
    }

    /// The most jobs of `key` that may run at once: its exact pattern's
    /// limit, else its longest matching prefix's; `None`: unlimited.
    pub fn limit_of(&self, key: &str) -> Option<u32> {
        if let Some(&limit) = self.exact.get(key) {
            return Some(limit);
        }
        self.prefixes
            .iter()
            .find(|(prefix, _)| key.starts_with(prefix.as_str()))
            .map(|&(_, limit)| limit)
    }
}

/// Running counts and the jobs waiting aside, per concurrency key.
#[derive(Debug, Default)]
pub struct ConcurrencyGate {
    limits: ConcurrencyLimits,
    /// Jobs of each key RUNNING now; keys with none are absent.
    running: HashMap<String, u32>,
    /// Ready jobs held back by their full key, in ready order; keys with
    /// none are absent.
    aside: HashMap<String, BTreeSet<ReadyKey>>,
    waiting: usize,
}

impl ConcurrencyGate {
    pub fn new(limits: ConcurrencyLimits) -> ConcurrencyGate {
        ConcurrencyGate {
            limits,
            ..ConcurrencyGate::default()
        }
    }

    /// Whether a job of `key` may start now: its key has a limit it has
    /// not reached, or none.
    pub fn may_start(&self, key: &str) -> bool {
        self.limits
            .limit_of(key)
            .is_none_or(|limit| self.running_of(key) < limit)
    }

    /// A job of `key` started running. Counted whatever the limit: a
    /// recovered job that was running still runs.
    pub fn started(&mut self, key: &str) {
        *self.running.entry(key.to_string()).or_insert(0) += 1;
    }

    /// A job of `key` stopped running (finished, failed, retried, lost or
    /// cancelled). Returns the first job waiting aside for `key` if the
    /// key now has room: the caller puts it back into its ready queue.
    pub fn stopped(&mut self, key: &str) -> Option<ReadyKey> {
        if let Some(count) = self.running.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.running.remove(key);
            }
        }
        self.next_if_room(key)
    }

    /// Holds a ready job of `key` (whose key is full) until a job of that
    /// key stops running.
    pub fn hold(&mut self, key: &str, job: ReadyKey) {
        if self.aside.entry(key.to_string()).or_default().insert(job) {
            self.waiting += 1;
        }
    }

    /// Takes a job out of the waiting set (cancelled while it waited).
    /// Returns whether it was there.
    pub fn forget(&mut self, key: &str, job: &ReadyKey) -> bool {
        let Some(jobs) = self.aside.get_mut(key) else {
            return false;
        };
        let found = jobs.remove(job);
        if jobs.is_empty() {
            self.aside.remove(key);
        }
        if found {
            self.waiting -= 1;
        }
        found
    }

    /// The first job waiting aside for `key`, taken out, if the key has
    /// room now. Called after a stop, and after a ready job of the key left
    /// its queue without starting (cancelled), which may leave room no
    /// other event would use.
    pub fn next_if_room(&mut self, key: &str) -> Option<ReadyKey> {
        if !self.may_start(key) {
            return None;
        }
        let jobs = self.aside.get_mut(key)?;
        let first = jobs.pop_first();
        if jobs.is_empty() {
            self.aside.remove(key);
        }
        if first.is_some() {
            self.waiting -= 1;
        }
        first
    }

    /// Replaces the limits. Returns the jobs waiting aside that now have
    /// room, in each key's order (as many per key as its new room), for
    /// the caller to put back into their ready queues. Jobs already
    /// running above a lowered limit go on; no new one starts until the
    /// key is below it.
    pub fn set_limits(&mut self, limits: ConcurrencyLimits) -> Vec<ReadyKey> {
        self.limits = limits;
        let keys: Vec<String> = self.aside.keys().cloned().collect();
        let mut released = Vec::new();
        for key in keys {
            let room = match self.limits.limit_of(&key) {
                None => usize::MAX,
                Some(limit) => limit.saturating_sub(self.running_of(&key)) as usize,
            };
            let Some(jobs) = self.aside.get_mut(&key) else {
                continue;
            };
            let going = room.min(jobs.len());
            released.extend(std::iter::from_fn(|| jobs.pop_first()).take(going));
            self.waiting -= going;
            if jobs.is_empty() {
                self.aside.remove(&key);
            }
        }
        released
    }

    /// Whether `job` waits aside for `key`.
    pub fn holds(&self, key: &str, job: &ReadyKey) -> bool {
        self.aside.get(key).is_some_and(|jobs| jobs.contains(job))
    }

    /// Jobs of `key` running now.
    pub fn running_of(&self, key: &str) -> u32 {
        self.running.get(key).copied().unwrap_or(0)
    }

    /// Jobs of `key` waiting aside now.
    pub fn waiting_of(&self, key: &str) -> usize {
        self.aside.get(key).map_or(0, BTreeSet::len)
    }

    /// Jobs waiting aside, over every key.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// The limit that applies to `key`, if any.
    pub fn limit_of(&self, key: &str) -> Option<u32> {
        self.limits.limit_of(key)
    }
}

#[cfg(test)]
#[path = "concurrency_gate_tests.rs"]
mod tests;
