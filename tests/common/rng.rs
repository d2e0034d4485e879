//! xorshift64: reproducible randomness from a printed seed, no dependency.

use std::time::SystemTime;

/// A small deterministic generator: the same seed gives the same sequence,
/// and a clone continues exactly as the original would.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator starting from `seed` (0, which xorshift never leaves,
    /// is taken as 1).
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }

    /// Seeded from the environment variable `var` when it holds a number,
    /// otherwise from the clock. Prints `<what> seed: <var>=<seed>` to
    /// stderr, so a failing run can be replayed by setting that variable.
    pub fn seeded(what: &str, var: &str) -> XorShift {
        let seed = std::env::var(var)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(clock_seed);
        eprintln!("{what} seed: {var}={seed}");
        XorShift::new(seed)
    }

    /// The next number in `0..n`; `n` must not be 0.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// An odd (so non-zero) seed from the clock's nanoseconds.
fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1
}
