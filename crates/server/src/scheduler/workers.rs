//! Connected workers: their sessions, advertised task types, heartbeats and
//! load, indexed so that the least-loaded worker for a task type is found
//! without scanning every worker.

use crate::scheduler::hash_map::{shrink_if_sparse, HashMap};
use std::cmp::Ordering;
use std::collections::BTreeSet;
use taskyard_client::clock::Now;
use taskyard_protocol::{JobId, WorkerId, WorkerView};

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
    /// Wall time, shown.
    pub registered_at: i64,
    /// Monotonic time of the last heartbeat (or of registration): the
    /// worker's silence is measured from here, whatever the wall clock does.
    pub last_heartbeat_mono: i64,
    /// Registration order: the last tie-breaker between equally loaded workers.
    pub order: u64,
    /// Jobs this worker is running; its active count.
    pub running: BTreeSet<JobId>,
    /// Shutting down: finishes what it runs, gets nothing new.
    pub draining: bool,
    /// The pool of workers advertising the same task types.
    pool: PoolId,
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

/// Workers that advertise exactly the same task types. A load change
/// moves a worker inside its pool's `free` set only, whatever the number
/// of types it advertises.
#[derive(Debug)]
struct Pool {
    task_types: Vec<String>,
    /// Members with a free slot, least loaded first.
    free: BTreeSet<LoadKey>,
    members: usize,
}

/// Identifies a `Pool` while it has members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct PoolId(u64);

/// Every registered worker, grouped into pools by the set of task types
/// they advertise and indexed by type through those pools.
///
/// Invariants: a worker is in its pool's `free` set, under its current
/// load, exactly when it is not draining and has a free slot;
/// `by_type[t]` lists exactly the pools whose types include `t`; a pool
/// with no members and a type no pool advertises have no entry.
///
/// Costs: a load change (start or finish of a job, draining) is one
/// remove and one insert in one pool, independent of how many types the
/// worker advertises and of its capacity. Finding the least-loaded worker
/// for a type compares the heads of the pools advertising it: one per
/// distinct set of types among the connected workers (typically a handful),
/// never more than the number of workers. Registering or removing a worker
/// costs O(its types).
#[derive(Debug, Default)]
pub struct WorkerRegistry {
    workers: HashMap<WorkerId, WorkerEntry>,
    pools: HashMap<PoolId, Pool>,
    pool_by_types: HashMap<Vec<String>, PoolId>,
    by_type: HashMap<String, Vec<PoolId>>,
    next_order: u64,
    next_pool: u64,
    index_writes: u64,
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
        now: Now,
    ) -> Option<WorkerEntry> {
        let previous = self.remove(&id);
        task_types.sort();
        task_types.dedup();
        let pool = self.join_pool(&task_types);
        self.next_order += 1;
        let entry = WorkerEntry {
            session,
            capacity,
            task_types,
            registered_at: now.wall_ms,
            last_heartbeat_mono: now.mono_ms,
            order: self.next_order,
            running: BTreeSet::new(),
            draining: false,
            pool,
        };
        self.index(&id, &entry);
        self.workers.insert(id, entry);
        previous
    }

    /// Removes a worker and returns it (with the jobs it was running).
    /// Its pool, and every type only that pool advertised, go with its
    /// last member, and the maps give the memory back.
    pub fn remove(&mut self, id: &WorkerId) -> Option<WorkerEntry> {
        let entry = self.workers.remove(id)?;
        self.unindex(id, &entry);
        self.leave_pool(entry.pool);
        shrink_if_sparse(&mut self.workers);
        Some(entry)
    }

    /// Insertions into the free-worker index so far: what load changes
    /// cost, for tests and benchmarks.
    pub fn index_writes(&self) -> u64 {
        self.index_writes
    }

    /// Slots allocated in the maps keyed by task type or by set of types
    /// (their capacity, not their length): what advertised types cost in
    /// memory.
    pub fn task_type_slots(&self) -> usize {
        self.by_type.capacity() + self.pool_by_types.capacity() + self.pools.capacity()
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

    /// Records a heartbeat at monotonic time `mono`; false if the worker
    /// is not registered.
    pub fn heartbeat(&mut self, id: &WorkerId, mono: i64) -> bool {
        match self.workers.get_mut(id) {
            Some(w) => {
                w.last_heartbeat_mono = w.last_heartbeat_mono.max(mono);
                true
            }
            None => false,
        }
    }

    /// True when any registered worker advertises `task_type`.
    pub fn advertised(&self, task_type: &str) -> bool {
        self.by_type.contains_key(task_type)
    }

    /// True when some worker for `task_type` has a free slot.
    pub fn has_free(&self, task_type: &str) -> bool {
        self.least_loaded(task_type).is_some()
    }

    /// The least-loaded worker with a free slot for `task_type`.
    pub fn least_loaded(&self, task_type: &str) -> Option<&WorkerId> {
        self.by_type
            .get(task_type)?
            .iter()
            .filter_map(|p| self.pools.get(p)?.free.first())
            .min()
            .map(|k| &k.worker)
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

    /// Workers whose last heartbeat is older than monotonic time `before`.
    pub fn silent_since(&self, before: i64) -> Vec<(WorkerId, SessionId)> {
        self.workers
            .iter()
            .filter(|(_, w)| w.last_heartbeat_mono < before)
            .map(|(id, w)| (id.clone(), w.session))
            .collect()
    }

    /// All workers in registration order, as seen at `now`: the last
    /// heartbeat is shown as the wall time `now` less its age.
    pub fn views(&self, now: Now) -> Vec<WorkerView> {
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
                    last_heartbeat_at: now.wall_at(w.last_heartbeat_mono),
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

    /// Verifies the registry's own indexes (see the type's invariants) and
    /// that no worker runs more jobs than its capacity; for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut members: HashMap<PoolId, usize> = HashMap::default();
        let mut free = 0;
        for (id, entry) in &self.workers {
            if entry.running.len() as u64 > u64::from(entry.capacity) {
                return Err(format!(
                    "worker {id} runs {} jobs, capacity {}",
                    entry.running.len(),
                    entry.capacity
                ));
            }
            let Some(pool) = self.pools.get(&entry.pool) else {
                return Err(format!("worker {id} is in a pool that does not exist"));
            };
            if pool.task_types != entry.task_types {
                return Err(format!("worker {id} is in the pool of other task types"));
            }
            let indexed = pool.free.contains(&entry.load_key(id));
            if indexed != entry.has_free_slot() {
                return Err(format!(
                    "worker {id} (running {}/{}, draining {}) {} its pool's free set",
                    entry.running.len(),
                    entry.capacity,
                    entry.draining,
                    if indexed { "is in" } else { "is missing from" }
                ));
            }
            free += usize::from(indexed);
            *members.entry(entry.pool).or_default() += 1;
        }
        let indexed: usize = self.pools.values().map(|p| p.free.len()).sum();
        if indexed != free {
            return Err(format!(
                "{indexed} free-set entries, {free} expected: a stale load key"
            ));
        }
        self.check_pools(&members)
    }

    /// The pool and type maps agree with the members counted per pool.
    fn check_pools(&self, members: &HashMap<PoolId, usize>) -> Result<(), String> {
        let mut listed = 0;
        for (pid, pool) in &self.pools {
            let counted = members.get(pid).copied().unwrap_or(0);
            if pool.members != counted || counted == 0 {
                return Err(format!(
                    "pool {pid:?} counts {} members, {counted} registered",
                    pool.members
                ));
            }
            if self.pool_by_types.get(&pool.task_types) != Some(pid) {
                return Err(format!("pool {pid:?} is not found by its task types"));
            }
            for t in &pool.task_types {
                if !self.by_type.get(t).is_some_and(|ps| ps.contains(pid)) {
                    return Err(format!("pool {pid:?} is missing from the pools of {t:?}"));
                }
            }
            listed += pool.task_types.len();
        }
        let by_type: usize = self.by_type.values().map(Vec::len).sum();
        if by_type != listed || self.pool_by_types.len() != self.pools.len() {
            return Err(format!(
                "{by_type} (type, pool) entries for {listed} advertised: a stale entry"
            ));
        }
        Ok(())
    }

    /// The pool of workers advertising exactly `task_types` (sorted and
    /// deduplicated), created if none is connected, with one more member.
    fn join_pool(&mut self, task_types: &[String]) -> PoolId {
        if let Some(pid) = self.pool_by_types.get(task_types) {
            if let Some(pool) = self.pools.get_mut(pid) {
                pool.members += 1;
                return *pid;
            }
        }
        self.next_pool += 1;
        let pid = PoolId(self.next_pool);
        for t in task_types {
            self.by_type.entry(t.clone()).or_default().push(pid);
        }
        self.pool_by_types.insert(task_types.to_vec(), pid);
        let pool = Pool {
            task_types: task_types.to_vec(),
            free: BTreeSet::new(),
            members: 1,
        };
        self.pools.insert(pid, pool);
        pid
    }

    /// One member fewer; the last one out removes the pool and every type
    /// entry that only pointed to it.
    fn leave_pool(&mut self, pid: PoolId) {
        let Some(pool) = self.pools.get_mut(&pid) else {
            return;
        };
        pool.members -= 1;
        if pool.members > 0 {
            return;
        }
        let Some(pool) = self.pools.remove(&pid) else {
            return;
        };
        for t in &pool.task_types {
            if let Some(pools) = self.by_type.get_mut(t) {
                pools.retain(|p| *p != pid);
                if pools.is_empty() {
                    self.by_type.remove(t);
                }
            }
        }
        self.pool_by_types.remove(&pool.task_types);
        shrink_if_sparse(&mut self.pools);
        shrink_if_sparse(&mut self.pool_by_types);
        shrink_if_sparse(&mut self.by_type);
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
        if let Some(pool) = self.pools.get_mut(&entry.pool) {
            self.index_writes += 1;
            pool.free.insert(entry.load_key(id));
        }
    }

    fn unindex(&mut self, id: &WorkerId, entry: &WorkerEntry) {
        if let Some(pool) = self.pools.get_mut(&entry.pool) {
            pool.free.remove(&entry.load_key(id));
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
                Now::both(0),
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
            .register(w("a"), SessionId(9), 2, vec!["echo".into()], Now::both(5))
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
        assert!(r.views(Now::both(0)).iter().all(|v| v.draining));
        r.check_invariants().expect("draining workers are not free");
    }

    /// `n` distinct task types, "t0".."t{n-1}".
    fn types(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("t{i}")).collect()
    }

    #[test]
    fn a_load_change_costs_the_same_however_many_types_a_worker_advertises() {
        let writes_per_job = |task_types: usize| {
            let mut r = WorkerRegistry::default();
            r.register(
                w("a"),
                SessionId(1),
                10_000,
                types(task_types),
                Now::both(0),
            );
            r.register(
                w("b"),
                SessionId(2),
                10_000,
                types(task_types),
                Now::both(0),
            );
            let before = r.index_writes();
            for _ in 0..100 {
                let worker = r.least_loaded("t0").cloned().expect("a free worker");
                r.start_job(&worker, JobId::mint());
            }
            r.check_invariants().expect("indexes right");
            (r.index_writes() - before) / 100
        };
        let few = writes_per_job(1);
        assert!(few <= 2, "{few} index writes per assignment");
        assert_eq!(writes_per_job(256), few, "256 types cost what 1 does");
    }

    #[test]
    fn maps_keyed_by_task_type_are_emptied_when_the_last_advertiser_leaves() {
        let mut r = WorkerRegistry::default();
        for i in 0..10 {
            let name = format!("w{i}");
            let own: Vec<String> = (0..100).map(|j| format!("w{i}-t{j}")).collect();
            r.register(w(&name), SessionId(i), 2, own, Now::both(0));
            r.start_job(&w(&name), JobId::mint());
        }
        for i in 0..10 {
            r.remove(&w(&format!("w{i}")));
        }
        r.check_invariants().expect("indexes right");
        // 1,000 types were advertised; what stays is a small map's minimum.
        let slots = r.task_type_slots();
        assert!(slots <= 64, "{slots} slots kept for types nobody runs");
    }

    #[test]
    fn silent_workers_are_found_by_last_heartbeat() {
        let mut r = registry(&[("a", 1), ("b", 1)]);
        r.heartbeat(&w("b"), 100);
        let silent: Vec<WorkerId> = r.silent_since(50).into_iter().map(|s| s.0).collect();
        assert_eq!(silent, vec![w("a")]);
    }
}
