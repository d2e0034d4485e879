//! The gate alone, and driven by random events the way the state will
//! drive it: submissions, assignment passes, results, cancels and limit
//! changes, with the invariants checked after every step.

use super::*;
use proptest::prelude::*;
use taskyard_protocol::JobId;

fn pattern(text: &str) -> LimitPattern {
    LimitPattern::parse("pattern", text).expect("pattern")
}

fn limits(entries: &[(&str, u32)]) -> ConcurrencyLimits {
    ConcurrencyLimits::new(entries.iter().map(|&(p, n)| (pattern(p), n)))
}

fn ready(seq: u64) -> ReadyKey {
    (1_000, seq, JobId::mint())
}

#[test]
fn an_exact_pattern_wins_then_the_longest_prefix() {
    let l = limits(&[
        ("*", 9),
        ("stripe:*", 5),
        ("stripe:acct_*", 3),
        ("stripe:acct_42", 1),
    ]);
    assert_eq!(l.limit_of("stripe:acct_42"), Some(1));
    assert_eq!(l.limit_of("stripe:acct_7"), Some(3));
    assert_eq!(l.limit_of("stripe:other"), Some(5));
    assert_eq!(l.limit_of("github"), Some(9));
    assert_eq!(limits(&[("a:*", 2)]).limit_of("b"), None);
    // A later entry for the same pattern replaces the earlier one.
    assert_eq!(limits(&[("a:*", 2), ("a:*", 4)]).limit_of("a:x"), Some(4));
}

#[test]
fn a_full_key_holds_its_jobs_aside_and_releases_them_in_order() {
    let mut gate = ConcurrencyGate::new(limits(&[("k", 2)]));
    assert!(gate.may_start("k"));
    gate.started("k");
    gate.started("k");
    assert!(!gate.may_start("k"), "2 of 2 running");
    assert!(gate.may_start("other"), "another key is not held back");
    let (first, second) = (ready(1), ready(2));
    gate.hold("k", second);
    gate.hold("k", first);
    assert_eq!(gate.waiting_of("k"), 2);
    assert_eq!(gate.stopped("k"), Some(first), "the oldest goes back first");
    assert_eq!(gate.running_of("k"), 1);
    assert_eq!(gate.next_if_room("k"), Some(second), "room for one more");
    assert_eq!(gate.waiting(), 0);
    assert_eq!(gate.stopped("k"), None, "nothing waits");
}

#[test]
fn raising_or_lifting_a_limit_releases_as_many_as_the_room() {
    let mut gate = ConcurrencyGate::new(limits(&[("k:*", 1)]));
    gate.started("k:a");
    let held: Vec<ReadyKey> = (0..5).map(ready).collect();
    for &job in &held {
        gate.hold("k:a", job);
    }
    assert_eq!(gate.set_limits(limits(&[("k:*", 3)])), held[..2].to_vec());
    assert_eq!(
        gate.set_limits(limits(&[])),
        held[2..].to_vec(),
        "lifted: all go"
    );
    assert_eq!(gate.waiting(), 0);
}

#[test]
fn a_cancelled_job_waiting_aside_is_forgotten() {
    let mut gate = ConcurrencyGate::new(limits(&[("k", 1)]));
    gate.started("k");
    let job = ready(1);
    gate.hold("k", job);
    assert!(gate.forget("k", &job));
    assert!(!gate.forget("k", &job));
    assert_eq!(gate.stopped("k"), None);
}

/// Where a job of the model is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Ready,
    Aside,
    Running,
    Done,
}

#[derive(Debug, Clone)]
enum Event {
    Submit {
        key: usize,
    },
    /// One step of an assignment pass: the best ready job starts or is
    /// held aside.
    AssignOne,
    /// A whole pass: until no ready job is left (workers are plenty).
    AssignAll,
    Finish {
        pick: usize,
    },
    CancelReady {
        pick: usize,
    },
    CancelAside {
        pick: usize,
    },
    SetLimits {
        limits: Vec<(usize, u32)>,
    },
}

const KEYS: [&str; 4] = ["a:1", "a:2", "b:1", "c"];
const PATTERNS: [&str; 4] = ["a:*", "a:1", "b:1", "*"];

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (0..KEYS.len()).prop_map(|key| Event::Submit { key }),
        3 => Just(Event::AssignOne),
        1 => Just(Event::AssignAll),
        3 => any::<usize>().prop_map(|pick| Event::Finish { pick }),
        1 => any::<usize>().prop_map(|pick| Event::CancelReady { pick }),
        1 => any::<usize>().prop_map(|pick| Event::CancelAside { pick }),
        1 => prop::collection::vec((0..PATTERNS.len(), 1..4u32), 0..3)
            .prop_map(|limits| Event::SetLimits { limits }),
    ]
}

struct Model {
    gate: ConcurrencyGate,
    limits: ConcurrencyLimits,
    jobs: Vec<(usize, ReadyKey, Place)>,
    next_seq: u64,
}

impl Model {
    fn new() -> Model {
        let limits = limits(&[("a:*", 2), ("b:1", 1)]);
        Model {
            gate: ConcurrencyGate::new(limits.clone()),
            limits,
            jobs: Vec::new(),
            next_seq: 0,
        }
    }

    fn running(&self, key: usize) -> u32 {
        self.jobs
            .iter()
            .filter(|(k, _, p)| *k == key && *p == Place::Running)
            .count() as u32
    }

    fn pick(&self, place: Place, pick: usize) -> Option<usize> {
        let at: Vec<usize> = (0..self.jobs.len())
            .filter(|&i| self.jobs[i].2 == place)
            .collect();
        (!at.is_empty()).then(|| at[pick % at.len()])
    }

    /// A job the gate released goes back to its ready queue; it must be
    /// the oldest of its key waiting aside.
    fn release(&mut self, job: ReadyKey) -> Result<(), TestCaseError> {
        let i = self
            .jobs
            .iter()
            .position(|(_, r, _)| *r == job)
            .ok_or_else(|| TestCaseError::fail("released an unknown job"))?;
        let (key, _, place) = self.jobs[i];
        prop_assert_eq!(place, Place::Aside, "released a job that was not aside");
        let oldest = self
            .jobs
            .iter()
            .filter(|(k, _, p)| *k == key && *p == Place::Aside)
            .map(|(_, r, _)| *r)
            .min();
        prop_assert_eq!(oldest, Some(job), "released out of order");
        self.jobs[i].2 = Place::Ready;
        Ok(())
    }

    fn assign_one(&mut self) -> Result<bool, TestCaseError> {
        let best = (0..self.jobs.len())
            .filter(|&i| self.jobs[i].2 == Place::Ready)
            .min_by_key(|&i| self.jobs[i].1);
        let Some(i) = best else {
            return Ok(false);
        };
        let (key, job, _) = self.jobs[i];
        let name = KEYS[key];
        if self.gate.may_start(name) {
            if let Some(limit) = self.limits.limit_of(name) {
                prop_assert!(self.running(key) < limit, "{name} started at its limit");
            }
            self.gate.started(name);
            self.jobs[i].2 = Place::Running;
        } else {
            prop_assert!(
                self.limits
                    .limit_of(name)
                    .is_some_and(|limit| self.running(key) >= limit),
                "{name} held back with room"
            );
            self.gate.hold(name, job);
            self.jobs[i].2 = Place::Aside;
        }
        Ok(true)
    }

    fn apply(&mut self, event: &Event) -> Result<(), TestCaseError> {
        match event {
            Event::Submit { key } => {
                self.next_seq += 1;
                self.jobs.push((*key, ready(self.next_seq), Place::Ready));
            }
            Event::AssignOne => {
                self.assign_one()?;
            }
            Event::AssignAll => {
                while self.assign_one()? {}
                self.no_job_waits_with_room(true)?;
            }
            Event::Finish { pick } => {
                if let Some(i) = self.pick(Place::Running, *pick) {
                    self.jobs[i].2 = Place::Done;
                    if let Some(job) = self.gate.stopped(KEYS[self.jobs[i].0]) {
                        self.release(job)?;
                    }
                }
            }
            Event::CancelReady { pick } => {
                if let Some(i) = self.pick(Place::Ready, *pick) {
                    self.jobs[i].2 = Place::Done;
                    if let Some(job) = self.gate.next_if_room(KEYS[self.jobs[i].0]) {
                        self.release(job)?;
                    }
                }
            }
            Event::CancelAside { pick } => {
                if let Some(i) = self.pick(Place::Aside, *pick) {
                    let (key, job, _) = self.jobs[i];
                    prop_assert!(self.gate.forget(KEYS[key], &job));
                    self.jobs[i].2 = Place::Done;
                }
            }
            Event::SetLimits { limits } => {
                let entries: Vec<(&str, u32)> =
                    limits.iter().map(|&(p, n)| (PATTERNS[p], n)).collect();
                self.limits = super::tests::limits(&entries);
                for job in self.gate.set_limits(self.limits.clone()) {
                    self.release(job)?;
                }
            }
        }
        Ok(())
    }

    /// A job waits aside only while its key is full, unless a job of its
    /// key is back in a ready queue (it will start or be held again at the
    /// next pass). After a whole pass no job of that key is ready, so the
    /// key must be full.
    fn no_job_waits_with_room(&self, after_pass: bool) -> Result<(), TestCaseError> {
        for (key, name) in KEYS.iter().enumerate() {
            let waiting = self
                .jobs
                .iter()
                .any(|(k, _, p)| *k == key && *p == Place::Aside);
            if !waiting {
                continue;
            }
            let full = self
                .limits
                .limit_of(name)
                .is_some_and(|limit| self.running(key) >= limit);
            let one_ready = self
                .jobs
                .iter()
                .any(|(k, _, p)| *k == key && *p == Place::Ready);
            prop_assert!(
                full || (!after_pass && one_ready),
                "{name} has room but jobs wait aside"
            );
        }
        Ok(())
    }

    fn check(&self) -> Result<(), TestCaseError> {
        for (key, name) in KEYS.iter().enumerate() {
            prop_assert_eq!(
                self.gate.running_of(name),
                self.running(key),
                "{} running",
                name
            );
            let aside = self
                .jobs
                .iter()
                .filter(|(k, _, p)| *k == key && *p == Place::Aside)
                .count();
            prop_assert_eq!(self.gate.waiting_of(name), aside, "{} aside", name);
        }
        let aside = self.jobs.iter().filter(|j| j.2 == Place::Aside).count();
        prop_assert_eq!(self.gate.waiting(), aside);
        self.no_job_waits_with_room(false)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Running per key never passes its limit at a start; a job waits
    /// aside only while its key is full; waiting jobs go back in order;
    /// the gate's counts are the jobs'.
    #[test]
    fn random_events_keep_the_gate_exact(events in prop::collection::vec(event(), 1..120)) {
        let mut model = Model::new();
        for (step, event) in events.iter().enumerate() {
            model.apply(event).map_err(|e| TestCaseError::fail(format!("step {step} {event:?}: {e}")))?;
            model.check().map_err(|e| TestCaseError::fail(format!("after step {step} {event:?}: {e}")))?;
        }
    }
}
