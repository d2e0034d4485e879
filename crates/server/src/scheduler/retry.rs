//! How long a failed attempt waits before the next one.

/// delay = base × 2^(attempts−1), capped. Pure: no clock, no state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base_ms: u64,
    pub cap_ms: u64,
}

impl RetryPolicy {
    /// The wait after the `attempts`-th attempt failed (`attempts` ≥ 1).
    pub fn delay_ms(&self, attempts: u32) -> u64 {
        let doublings = attempts.saturating_sub(1).min(63);
        self.base_ms
            .saturating_mul(1u64 << doublings)
            .min(self.cap_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_the_base_up_to_the_cap() {
        let policy = RetryPolicy {
            base_ms: 1000,
            cap_ms: 30_000,
        };
        let delays: Vec<u64> = (1..=7).map(|a| policy.delay_ms(a)).collect();
        assert_eq!(delays, [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        assert_eq!(policy.delay_ms(u32::MAX), 30_000, "no overflow");
    }
}
