//! `DeletionQueue`: the deletions clients asked for, on their way to the
//! database. A plain value (no actors, no timers): each method takes an
//! event and says what to send or answer.
//!
//! The database deletes in a transaction of its own, which it cannot open
//! while rows of the next batch are staged; it then answers "busy". A busy
//! deletion is parked, not polled: it is sent again when the commit that
//! carries those staged rows has been answered (`wake`), or at the next
//! sweep, whichever comes first, so it never waits on an idle coordinator.
//!
//! Guarantees: at most `max_out` deletions are out (sent, or parked) at
//! once; another is refused; a deletion answered busy `MAX_BUSY_ANSWERS`
//! times, or busy while the coordinator stops, is answered (as failed),
//! so nobody waits forever.

/// Busy answers after which a deletion is given up (answered as failed).
pub const MAX_BUSY_ANSWERS: u32 = 50;

/// A deletion and how often the database answered it busy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked<D> {
    pub deletion: D,
    busy_answers: u32,
}

/// How the database's answer to a deletion ends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled<D> {
    /// Answer the request with the database's answer.
    Answered(D),
    /// Answer the request as failed: the database stayed busy.
    GaveUp(D),
}

/// Deletions out, and those parked until the next commit or sweep.
#[derive(Debug)]
pub struct DeletionQueue<D> {
    out: usize,
    parked: Vec<Tracked<D>>,
    max_out: usize,
}

impl<D> DeletionQueue<D> {
    pub fn new(max_out: usize) -> DeletionQueue<D> {
        DeletionQueue {
            out: 0,
            parked: Vec::new(),
            max_out,
        }
    }

    /// A new deletion, to send now; refused (with why) when `max_out` are
    /// out already.
    pub fn admit(&mut self, deletion: D) -> Result<Tracked<D>, (String, D)> {
        if self.out >= self.max_out {
            let reason = format!(
                "{} deletions are waiting for the database; try again",
                self.max_out
            );
            return Err((reason, deletion));
        }
        self.out += 1;
        Ok(Tracked {
            deletion,
            busy_answers: 0,
        })
    }

    /// The database answered a deletion (`busy`: it did nothing, rows were
    /// staged). `None`: parked until `wake`; else how it ends.
    pub fn answered(
        &mut self,
        mut sent: Tracked<D>,
        busy: bool,
        stopping: bool,
    ) -> Option<Settled<D>> {
        if busy {
            sent.busy_answers += 1;
            if sent.busy_answers < MAX_BUSY_ANSWERS && !stopping {
                self.parked.push(sent);
                return None;
            }
        }
        self.out = self.out.saturating_sub(1);
        Some(match busy {
            true => Settled::GaveUp(sent.deletion),
            false => Settled::Answered(sent.deletion),
        })
    }

    /// A commit was answered, or a sweep came: the parked deletions, to
    /// send again.
    pub fn wake(&mut self) -> Vec<Tracked<D>> {
        std::mem::take(&mut self.parked)
    }

    /// Deletions out now (sent, or parked). Read-only, for tests that
    /// check the `max_out` bound.
    #[cfg(test)]
    pub(crate) fn out(&self) -> usize {
        self.out
    }

    /// Deletions parked until the next `wake`. Read-only, for tests.
    #[cfg(test)]
    pub(crate) fn parked(&self) -> usize {
        self.parked.len()
    }

    /// The coordinator stops: the parked deletions, to answer as failed
    /// (nothing will wake them).
    pub fn give_up_parked(&mut self) -> Vec<D> {
        let parked = std::mem::take(&mut self.parked);
        self.out = self.out.saturating_sub(parked.len());
        parked.into_iter().map(|t| t.deletion).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_max_out_deletions_are_out_parked_ones_included() {
        let mut queue = DeletionQueue::new(2);
        let a = queue.admit("a").expect("room");
        let _b = queue.admit("b").expect("room");
        assert_eq!(queue.admit("c").map_err(|(_, d)| d), Err("c"));
        assert_eq!(queue.answered(a, true, false), None, "parked, still out");
        assert!(queue.admit("c").is_err());
        let a = queue.wake().pop().expect("parked");
        assert_eq!(
            queue.answered(a, false, false),
            Some(Settled::Answered("a"))
        );
        assert!(queue.admit("c").is_ok(), "one left");
    }

    #[test]
    fn a_busy_deletion_waits_for_a_wake_not_a_timer() {
        let mut queue = DeletionQueue::new(4);
        let a = queue.admit("a").expect("room");
        assert_eq!(queue.answered(a, true, false), None);
        let woken = queue.wake();
        assert_eq!(woken.len(), 1);
        assert!(queue.wake().is_empty(), "sent once per wake");
    }

    #[test]
    fn a_deletion_busy_too_often_or_while_stopping_is_given_up() {
        let mut queue = DeletionQueue::new(4);
        let mut sent = queue.admit("a").expect("room");
        for _ in 1..MAX_BUSY_ANSWERS {
            assert_eq!(queue.answered(sent, true, false), None);
            sent = queue.wake().pop().expect("parked");
        }
        assert_eq!(
            queue.answered(sent, true, false),
            Some(Settled::GaveUp("a"))
        );
        let b = queue.admit("b").expect("room");
        assert_eq!(queue.answered(b, true, true), Some(Settled::GaveUp("b")));
        assert_eq!(queue.out, 0);
    }

    #[test]
    fn a_stop_gives_up_the_parked_deletions_and_frees_their_places() {
        let mut queue = DeletionQueue::new(2);
        let a = queue.admit("a").expect("room");
        let _b = queue.admit("b").expect("room");
        assert_eq!(queue.answered(a, true, false), None);
        assert_eq!(queue.give_up_parked(), vec!["a"]);
        assert!(queue.wake().is_empty());
        assert_eq!(queue.out, 1, "b is still out");
    }
}
