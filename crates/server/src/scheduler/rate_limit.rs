//! At most one log line per interval for a repeated warning, with a count
//! of the lines held back, so a peer that repeats a mistake cannot flood
//! the log. Pure: the caller passes `now`.

/// Decides, per occurrence of one warning, whether to log it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLimiter {
    interval_ms: i64,
    last_logged: Option<i64>,
    suppressed: u64,
}

impl LogLimiter {
    /// Allows one line per `interval_ms`.
    pub fn new(interval_ms: i64) -> Self {
        LogLimiter {
            interval_ms,
            last_logged: None,
            suppressed: 0,
        }
    }

    /// `Some(held_back)` when this occurrence should be logged, with how
    /// many occurrences were not logged since the last line; `None` when it
    /// should not be (it is counted instead). The first occurrence, and the
    /// first one `interval_ms` or more after the last line, are logged; a
    /// clock that stepped back also lets a line through.
    pub fn admit(&mut self, now: i64) -> Option<u64> {
        let due = self
            .last_logged
            .is_none_or(|last| now < last || now - last >= self.interval_ms);
        if !due {
            self.suppressed += 1;
            return None;
        }
        self.last_logged = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_held_back() {
        let mut limiter = LogLimiter::new(1000);
        assert_eq!(limiter.admit(0), Some(0), "the first is logged");
        assert_eq!(limiter.admit(1), None);
        assert_eq!(limiter.admit(999), None);
        assert_eq!(limiter.admit(1000), Some(2), "two were held back");
        assert_eq!(limiter.admit(1500), None);
        assert_eq!(limiter.admit(5000), Some(1));
        assert_eq!(limiter.admit(6000), Some(0));
    }

    #[test]
    fn a_clock_stepping_back_lets_a_line_through() {
        let mut limiter = LogLimiter::new(1000);
        assert_eq!(limiter.admit(10_000), Some(0));
        assert_eq!(limiter.admit(10_001), None);
        assert_eq!(limiter.admit(5_000), Some(1));
    }
}
