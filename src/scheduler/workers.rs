//! Connected workers: their sessions, advertised task types, heartbeats and
//! load, indexed so that the least-loaded worker for a task type is found
//! without scanning every worker.

use crate::protocol::{JobId, WorkerId, WorkerView};
use crate::scheduler::hash_map::HashMap;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// One connection's identity, minted by its session. A worker that
/// reconnects gets a new session id; events from the old one are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u64);

/// A registered worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEntry {
    pub session: SessionId,
    pub capacity: u32,
    pub task_types: Vec<String>,
    pub registered_at: i64,
    pub last_heartbeat_at: i64,
    /// Registration order: the last tie-breaker between equally loaded workers.
    pub order: u64,
    /// Jobs this worker is running; its active count.
    pub running: BTreeSet<JobId>,
    /// Shutting down: finishes what it runs, gets nothing new.
    pub draining: bool,
}

impl WorkerEntry {
    fn load_key(&self, id: &WorkerId) -> LoadKey {
        LoadKey {
            active: self.running.len() as u64,
            capacity: u64::from(self.capacity),
            order: self.order,
            worker: id.clone(),
        }
    }

    fn has_free_slot(&self) -> bool {
        !self.draining && (self.running.len() as u64) < u64::from(self.capacity)
    }
}

/// Orders workers by active/capacity (compared exactly, by cross
/// multiplication), then fewest active, then registration order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LoadKey {
    active: u64,
    capacity: u64,
    order: u64,
    worker: WorkerId,
}

impl Ord for LoadKey {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.active * other.capacity)
            .cmp(&(other.active * self.capacity))
            .then(self.active.cmp(&other.active))
            .then(self.order.cmp(&other.order))
            .then_with(|| self.worker.cmp(&other.worker))
    }
}

impl PartialOrd for LoadKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Every registered worker. Invariant: a worker is in `free[t]` exactly when
/// it advertises `t` and has a free slot, keyed by its current load.
#[derive(Debug, Default)]
pub struct WorkerRegistry {
    workers: HashMap<WorkerId, WorkerEntry>,
    free: HashMap<String, BTreeSet<LoadKey>>,
    advertisers: HashMap<String, usize>,
    next_order: u64,
}

impl WorkerRegistry {
    /// Adds a worker; returns the entry it replaced if the id was already
    /// registered (a reconnect before the old session was noticed dead).
    pub fn register(
        &mut self,
        id: WorkerId,
        session: SessionId,
        capacity: u32,
        mut task_types: Vec<String>,
        now: i64,
    ) -> Option<WorkerEntry> {
        let previous = self.remove(&id);
        task_types.sort();
        task_types.dedup();
        for t in &task_types {
            *self.advertisers.entry(t.clone()).or_default() += 1;
        }
        self.next_order += 1;
        let entry = WorkerEntry {
            session,
            capacity,
            task_types,
            registered_at: now,
            last_heartbeat_at: now,
            order: self.next_order,
            running: BTreeSet::new(),
            draining: false,
        };
        self.index(&id, &entry);
        self.workers.insert(id, entry);
        previous
    }

    /// Removes a worker and returns it (with the jobs it was running).
    pub fn remove(&mut self, id: &WorkerId) -> Option<WorkerEntry> {
        let entry = self.workers.remove(id)?;
        self.unindex(id, &entry);
        for t in &entry.task_types {
            if let Some(n) = self.advertisers.get_mut(t) {
                *n -= 1;
                if *n == 0 {
                    self.advertisers.remove(t);
                }
            }
        }
        Some(entry)
    }

    pub fn get(&self, id: &WorkerId) -> Option<&WorkerEntry> {
        self.workers.get(id)
    }

    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// True when `id` is registered through exactly this session.
    pub fn is_current(&self, id: &WorkerId, session: SessionId) -> bool {
        self.workers.get(id).is_some_and(|w| w.session == session)
    }

    /// Records a heartbeat; false if the worker is not registered.
    pub fn heartbeat(&mut self, id: &WorkerId, now: i64) -> bool {
        match self.workers.get_mut(id) {
            Some(w) => {
                w.last_heartbeat_at = w.last_heartbeat_at.max(now);
                true
            }
            None => false,
        }
    }

    /// True when any registered worker advertises `task_type`.
    pub fn advertised(&self, task_type: &str) -> bool {
        self.advertisers.contains_key(task_type)
    }

    /// True when some worker for `task_type` has a free slot.
    pub fn has_free(&self, task_type: &str) -> bool {
        self.free.get(task_type).is_some_and(|s| !s.is_empty())
    }

    /// The least-loaded worker with a free slot for `task_type`.
    pub fn least_loaded(&self, task_type: &str) -> Option<&WorkerId> {
        self.free.get(task_type)?.first().map(|k| &k.worker)
    }

    /// Counts `job` against the worker's capacity.
    pub fn start_job(&mut self, id: &WorkerId, job: JobId) {
        self.update(id, |w| {
            w.running.insert(job);
        });
    }

    /// Stops offering the worker new tasks; its running tasks stay.
    pub fn set_draining(&mut self, id: &WorkerId) {
        self.update(id, |w| w.draining = true);
    }

    /// Releases the slot `job` held on the worker, if it is still registered.
    pub fn finish_job(&mut self, id: &WorkerId, job: JobId) {
        self.update(id, |w| {
            w.running.remove(&job);
        });
    }

    /// Workers whose last heartbeat is older than `before`.
    pub fn silent_since(&self, before: i64) -> Vec<(WorkerId, SessionId)> {
        self.workers
            .iter()
            .filter(|(_, w)| w.last_heartbeat_at < before)
            .map(|(id, w)| (id.clone(), w.session))
            .collect()
    }

    /// All workers in registration order.
    pub fn views(&self) -> Vec<WorkerView> {
        let mut views: Vec<(u64, WorkerView)> = self
            .workers
            .iter()
            .map(|(id, w)| {
                let view = WorkerView {
                    worker_id: id.clone(),
                    capacity: w.capacity,
                    active: w.running.len() as u32,
                    task_types: w.task_types.clone(),
                    registered_at: w.registered_at,
                    last_heartbeat_at: w.last_heartbeat_at,
                    draining: w.draining,
                };
                (w.order, view)
            })
            .collect();
        views.sort_by_key(|(order, _)| *order);
        views.into_iter().map(|(_, v)| v).collect()
    }

    /// Every registered worker with its entry, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (&WorkerId, &WorkerEntry)> + '_ {
        self.workers.iter()
    }

    /// Verifies the registry's own indexes; for tests. A worker is in
    /// `free[t]`, under its current load, exactly when it advertises `t`,
    /// is not draining and runs fewer jobs than its capacity; `free` holds
    /// nothing else and no empty set; `advertisers[t]` counts the workers
    /// advertising `t`; no worker runs more jobs than its capacity.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut expected_free = 0;
        let mut advertisers: HashMap<&str, usize> = HashMap::default();
        for (id, entry) in &self.workers {
            if entry.running.len() as u64 > u64::from(entry.capacity) {
                return Err(format!(
                    "worker {id} runs {} jobs, capacity {}",
                    entry.running.len(),
                    entry.capacity
                ));
            }
            let key = entry.load_key(id);
            for t in &entry.task_types {
                *advertisers.entry(t).or_default() += 1;
                let indexed = self.free.get(t).is_some_and(|set| set.contains(&key));
                if indexed != entry.has_free_slot() {
                    return Err(format!(
                        "worker {id} (running {}/{}, draining {}) {} the free index of {t:?}",
                        entry.running.len(),
                        entry.capacity,
                        entry.draining,
                        if indexed { "is in" } else { "is missing from" }
                    ));
                }
                expected_free += usize::from(indexed);
            }
        }
        if let Some((t, _)) = self.free.iter().find(|(_, set)| set.is_empty()) {
            return Err(format!("empty free set kept for {t:?}"));
        }
        let indexed: usize = self.free.values().map(BTreeSet::len).sum();
        if indexed != expected_free {
            return Err(format!(
                "{indexed} free-index entries, {expected_free} expected: a stale load key"
            ));
        }
        for (t, n) in &self.advertisers {
            let counted = advertisers.get(t.as_str()).copied().unwrap_or(0);
            if *n != counted {
                return Err(format!(
                    "{t:?} has {n} advertisers counted, {counted} registered"
                ));
            }
        }
        if advertisers.len() != self.advertisers.len() {
            return Err(format!(
                "{} task types advertised, {} counted",
                advertisers.len(),
                self.advertisers.len()
            ));
        }
        Ok(())
    }

    fn update(&mut self, id: &WorkerId, change: impl FnOnce(&mut WorkerEntry)) {
        let Some(mut entry) = self.workers.remove(id) else {
            return;
        };
        self.unindex(id, &entry);
        change(&mut entry);
        self.index(id, &entry);
        self.workers.insert(id.clone(), entry);
    }

    fn index(&mut self, id: &WorkerId, entry: &WorkerEntry) {
        if !entry.has_free_slot() {
            return;
        }
        let key = entry.load_key(id);
        for t in &entry.task_types {
            self.free.entry(t.clone()).or_default().insert(key.clone());
        }
    }

    fn unindex(&mut self, id: &WorkerId, entry: &WorkerEntry) {
        let key = entry.load_key(id);
        for t in &entry.task_types {
            if let Some(set) = self.free.get_mut(t) {
                set.remove(&key);
                if set.is_empty() {
                    self.free.remove(t);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(name: &str) -> WorkerId {
        WorkerId(name.into())
    }

    fn registry(workers: &[(&str, u32)]) -> WorkerRegistry {
        let mut r = WorkerRegistry::default();
        for (i, (name, capacity)) in workers.iter().enumerate() {
            r.register(
                w(name),
                SessionId(i as u64),
                *capacity,
                vec!["echo".into()],
                0,
            );
        }
        r
    }

    #[test]
    fn least_loaded_by_ratio_then_active_then_registration_order() {
        let mut r = registry(&[("a", 2), ("b", 4), ("c", 4)]);
        assert_eq!(
            r.least_loaded("echo"),
            Some(&w("a")),
            "all idle: first registered"
        );
        r.start_job(&w("a"), JobId::mint());
        assert_eq!(r.least_loaded("echo"), Some(&w("b")), "a is at 1/2");
        r.start_job(&w("b"), JobId::mint());
        r.start_job(&w("c"), JobId::mint());
        r.start_job(&w("c"), JobId::mint());
        // a 1/2, b 1/4, c 2/4: b lowest ratio.
        assert_eq!(r.least_loaded("echo"), Some(&w("b")));
        r.start_job(&w("b"), JobId::mint());
        // a 1/2 and b 2/4 and c 2/4 tie on ratio: a has fewest active.
        assert_eq!(r.least_loaded("echo"), Some(&w("a")));
    }

    #[test]
    fn full_workers_are_not_offered_and_freed_slots_come_back() {
        let mut r = registry(&[("a", 1)]);
        let job = JobId::mint();
        r.start_job(&w("a"), job);
        assert!(!r.has_free("echo"));
        assert_eq!(r.least_loaded("echo"), None);
        r.finish_job(&w("a"), job);
        assert_eq!(r.least_loaded("echo"), Some(&w("a")));
        r.check_invariants().expect("indexes right");
    }

    #[test]
    fn re_registration_replaces_the_old_session() {
        let mut r = registry(&[("a", 1)]);
        r.start_job(&w("a"), JobId::mint());
        let old = r
            .register(w("a"), SessionId(9), 2, vec!["echo".into()], 5)
            .expect("previous entry returned");
        assert_eq!(old.running.len(), 1);
        assert!(r.is_current(&w("a"), SessionId(9)));
        assert!(!r.is_current(&w("a"), SessionId(0)));
        assert!(r.advertised("echo"));
        r.remove(&w("a"));
        assert!(!r.advertised("echo"));
        assert!(!r.has_free("echo"));
    }

    #[test]
    fn a_draining_worker_is_offered_no_new_tasks() {
        let mut r = registry(&[("a", 2), ("b", 2)]);
        r.set_draining(&w("a"));
        assert_eq!(r.least_loaded("echo"), Some(&w("b")));
        r.set_draining(&w("b"));
        assert!(!r.has_free("echo"));
        assert!(r.views().iter().all(|v| v.draining));
        r.check_invariants().expect("draining workers are not free");
    }

    #[test]
    fn silent_workers_are_found_by_last_heartbeat() {
        let mut r = registry(&[("a", 1), ("b", 1)]);
        r.heartbeat(&w("b"), 100);
        let silent: Vec<WorkerId> = r.silent_since(50).into_iter().map(|s| s.0).collect();
        assert_eq!(silent, vec![w("a")]);
    }
}
