//! `FairQueue`: work of many sources shared out among a few slots, one
//! source at a time in turn, so a source with much work waiting delays
//! another's by at most one item per round, not by its whole backlog.
//!
//! What the coordinator puts in front of its history readers: a source is
//! a client connection (or an HTTP peer address), an item a database read,
//! a slot a reader thread.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Why an item was not queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueRefused {
    /// The source already has this many items waiting or running.
    #[error("{0} reads of this connection are already waiting or running")]
    SourceFull(usize),
    /// All sources together have this many items waiting.
    #[error("{0} reads are already waiting")]
    Full(usize),
}

/// Items waiting per source, taken in turn; at most `slots` running.
///
/// Guarantees: items of one source run in the order they were pushed;
/// while sources A and B both have items waiting, a take from A is
/// followed by a take from B before the next from A; a source holds at
/// most `per_source` items waiting or running, and all together at most
/// `max_waiting` wait.
#[derive(Debug)]
pub struct FairQueue<S, T> {
    waiting: HashMap<S, VecDeque<T>>,
    /// Sources with items waiting, in the order of their turns.
    turns: VecDeque<S>,
    /// Items taken and not yet done, per source (no entry: none).
    running: HashMap<S, usize>,
    running_total: usize,
    waiting_total: usize,
    slots: usize,
    per_source: usize,
    max_waiting: usize,
}

impl<S: Clone + Eq + Hash, T> FairQueue<S, T> {
    /// At most `slots` items running at once (at least one), `per_source`
    /// waiting or running per source (at least one), `max_waiting` in all.
    pub fn new(slots: usize, per_source: usize, max_waiting: usize) -> FairQueue<S, T> {
        FairQueue {
            waiting: HashMap::new(),
            turns: VecDeque::new(),
            running: HashMap::new(),
            running_total: 0,
            waiting_total: 0,
            slots: slots.max(1),
            per_source: per_source.max(1),
            max_waiting,
        }
    }

    /// Queues `item` behind the source's other items; a refused item
    /// comes back with the reason.
    pub fn push(&mut self, source: S, item: T) -> Result<(), (QueueRefused, T)> {
        let held = self.waiting.get(&source).map_or(0, VecDeque::len)
            + self.running.get(&source).copied().unwrap_or(0);
        if held >= self.per_source {
            return Err((QueueRefused::SourceFull(held), item));
        }
        if self.waiting_total >= self.max_waiting {
            return Err((QueueRefused::Full(self.waiting_total), item));
        }
        match self.waiting.entry(source) {
            Entry::Occupied(mut queue) => queue.get_mut().push_back(item),
            Entry::Vacant(empty) => {
                self.turns.push_back(empty.key().clone());
                empty.insert(VecDeque::from([item]));
            }
        }
        self.waiting_total += 1;
        Ok(())
    }

    /// The next item to run, if a slot is free: the first of the source
    /// whose turn it is; that source's turn then comes again last.
    pub fn take(&mut self) -> Option<(S, T)> {
        if self.running_total >= self.slots {
            return None;
        }
        let source = self.turns.pop_front()?;
        let Entry::Occupied(mut queue) = self.waiting.entry(source.clone()) else {
            return None;
        };
        let item = queue.get_mut().pop_front()?;
        match queue.get().is_empty() {
            true => {
                queue.remove();
            }
            false => self.turns.push_back(source.clone()),
        }
        self.waiting_total -= 1;
        self.running_total += 1;
        *self.running.entry(source.clone()).or_insert(0) += 1;
        Some((source, item))
    }

    /// An item `take` gave for `source` has finished: its slot is free.
    pub fn done(&mut self, source: &S) {
        if let Entry::Occupied(mut count) = self.running.entry(source.clone()) {
            *count.get_mut() -= 1;
            if *count.get() == 0 {
                count.remove();
            }
            self.running_total -= 1;
        }
    }

    /// Items waiting, of all sources.
    pub fn waiting(&self) -> usize {
        self.waiting_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(queue: &mut FairQueue<&'static str, u32>) -> Vec<(&'static str, u32)> {
        let mut taken = Vec::new();
        while let Some((source, item)) = queue.take() {
            queue.done(&source);
            taken.push((source, item));
        }
        taken
    }

    #[test]
    fn sources_take_turns_and_each_keeps_its_order() {
        let mut queue = FairQueue::new(1, 10, 100);
        for item in 1..=4 {
            queue.push("busy", item).expect("room");
        }
        queue.push("quiet", 10).expect("room");
        queue.push("other", 20).expect("room");
        queue.push("quiet", 11).expect("room");
        assert_eq!(
            drain(&mut queue),
            vec![
                ("busy", 1),
                ("quiet", 10),
                ("other", 20),
                ("busy", 2),
                ("quiet", 11),
                ("busy", 3),
                ("busy", 4),
            ]
        );
        assert_eq!(queue.waiting(), 0);
    }

    #[test]
    fn a_late_source_waits_one_item_per_busy_source_not_their_backlog() {
        let mut queue = FairQueue::new(2, 100, 1000);
        for source in ["a", "b", "c"] {
            for item in 0..50 {
                queue.push(source, item).expect("room");
            }
        }
        // Two reads are running; the plain page arrives now.
        let running: Vec<_> = (0..2).filter_map(|_| queue.take()).collect();
        queue.push("plain", 0).expect("room");
        let mut before_plain = 0;
        for (source, _) in &running {
            queue.done(source);
        }
        while let Some((source, _)) = queue.take() {
            queue.done(&source);
            if source == "plain" {
                break;
            }
            before_plain += 1;
        }
        assert!(before_plain <= 3, "{before_plain} reads ran first");
    }

    #[test]
    fn slots_bound_what_runs_at_once() {
        let mut queue = FairQueue::new(2, 10, 100);
        for item in 0..3 {
            queue.push("a", item).expect("room");
        }
        assert!(queue.take().is_some());
        assert!(queue.take().is_some());
        assert_eq!(queue.take(), None, "both slots are busy");
        queue.done(&"a");
        assert_eq!(queue.take(), Some(("a", 2)));
    }

    #[test]
    fn a_source_is_bounded_by_what_it_has_waiting_and_running() {
        let mut queue = FairQueue::new(1, 2, 100);
        queue.push("a", 1).expect("room");
        queue.push("a", 2).expect("room");
        assert_eq!(queue.push("a", 3), Err((QueueRefused::SourceFull(2), 3)));
        let (source, _) = queue.take().expect("one runs");
        assert_eq!(queue.push("a", 3), Err((QueueRefused::SourceFull(2), 3)));
        queue.push("b", 1).expect("another source has room");
        queue.done(&source);
        queue.push("a", 3).expect("a slot was freed");
        assert_eq!(queue.push("c", 1), Ok(()));
    }

    #[test]
    fn all_sources_together_are_bounded() {
        let mut queue = FairQueue::new(1, 5, 3);
        for source in ["a", "b", "c"] {
            queue.push(source, 0).expect("room");
        }
        assert_eq!(queue.push("d", 0), Err((QueueRefused::Full(3), 0)));
        let _ = queue.take();
        queue.push("d", 0).expect("one left the queue");
    }

    #[test]
    fn done_for_a_source_with_nothing_running_changes_nothing() {
        let mut queue: FairQueue<&str, u32> = FairQueue::new(1, 1, 1);
        queue.done(&"nobody");
        queue.push("a", 1).expect("room");
        assert_eq!(queue.take(), Some(("a", 1)));
        assert_eq!(queue.take(), None);
    }
}
