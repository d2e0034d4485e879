//! `PassMemo`: what one schedule pass works out once for the many
//! schedules that share it. Schedules on one cron expression and zone
//! (10,000 on `* * * * *`) come due together and have the same next slot
//! after the same instant and the same slot label, so a pass searches the
//! expression and formats the slot once instead of once per schedule.
//! Answers are exactly what `Cadence::next_after` and `slot_label` give.

use crate::scheduler::schedule::cadence::{slot_label, Cadence};
use taskyard_protocol::ScheduleSpec;

/// The last cron search and slot label of a pass. Start one per pass.
#[derive(Debug, Default)]
pub struct PassMemo {
    /// (expression, zone, after) and the slot found after it.
    next: Option<(String, Option<String>, i64, Option<i64>)>,
    /// (slot, its label).
    label: Option<(i64, String)>,
}

impl PassMemo {
    /// `cadence.next_after(after)`; `cadence` must be the one `spec`
    /// validates to (a cron cadence is its expression and zone, nothing
    /// else; an interval is arithmetic and not remembered).
    pub fn next_after(
        &mut self,
        spec: &ScheduleSpec,
        cadence: &Cadence,
        after: i64,
    ) -> Option<i64> {
        let (Cadence::Cron { .. }, Some(expression)) = (cadence, spec.cron.as_deref()) else {
            return cadence.next_after(after);
        };
        if let Some((e, tz, a, next)) = &self.next {
            if *a == after && e == expression && *tz == spec.tz {
                return *next;
            }
        }
        let next = cadence.next_after(after);
        self.next = Some((expression.to_string(), spec.tz.clone(), after, next));
        next
    }

    /// `slot_label(slot)`.
    pub fn label(&mut self, slot: i64) -> &str {
        if self.label.as_ref().is_none_or(|(s, _)| *s != slot) {
            self.label = Some((slot, slot_label(slot)));
        }
        self.label.as_ref().map_or("", |(_, label)| label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cron: &str, tz: Option<&str>) -> ScheduleSpec {
        ScheduleSpec {
            cron: Some(cron.into()),
            tz: tz.map(Into::into),
            ..ScheduleSpec::new("s", "echo", Vec::new())
        }
    }

    #[test]
    fn remembered_answers_are_the_cadences_own() {
        let mut memo = PassMemo::default();
        let t = 1_764_892_800_000; // 2026-12-05T00:00:00Z
        let cases = [
            ("* * * * *", None, t),
            ("* * * * *", None, t),
            ("* * * * *", Some("Europe/Berlin"), t),
            ("0 3 * * *", Some("Europe/Berlin"), t),
            ("0 3 * * *", None, t),
            ("0 3 * * *", None, t + 1),
            ("0 3 * * *", None, t + 4 * 3_600_000), // the next day's 03:00
            ("* * * * *", None, t),
        ];
        for (cron, tz, after) in cases {
            let s = spec(cron, tz);
            let cadence = Cadence::cron(cron, tz.unwrap_or("UTC")).expect("valid");
            assert_eq!(
                memo.next_after(&s, &cadence, after),
                cadence.next_after(after),
                "{cron} in {tz:?} after {after}"
            );
        }
        let every = Cadence::every(30_000, 0).expect("valid");
        assert_eq!(
            memo.next_after(&spec("* * * * *", None), &every, t),
            Some(t + 30_000),
            "an interval is its own, whatever the memo holds"
        );
        for slot in [t, t, t + 1, t] {
            assert_eq!(memo.label(slot), slot_label(slot));
        }
    }
}
