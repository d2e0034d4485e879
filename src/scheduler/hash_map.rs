//! The hash map the scheduler's indexes use.

/// A `std` hash map hashed with foldhash instead of SipHash: several times
/// cheaper per lookup (SipHash was a fifth of `schedule`'s CPU). It is
/// still seeded at random per process, so keys a client chooses (task
/// types, idempotency keys) cannot be precomputed to collide; foldhash
/// claims only minimal resistance to an attacker who can measure timings
/// at length, which SipHash resists better.
pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
