//! The hash map the scheduler's indexes use.

/// A `std` hash map hashed with foldhash instead of SipHash: several times
/// cheaper per lookup (SipHash was a fifth of `assign_queued`'s CPU). It is
/// still seeded at random per process, so keys a client chooses (task
/// types, idempotency keys) cannot be precomputed to collide; foldhash
/// claims only minimal resistance to an attacker who can measure timings
/// at length, which SipHash resists better.
pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Gives a map's memory back once it holds under a quarter of what it has
/// room for, so a burst (of registrations, of queued jobs) is not paid for
/// forever. Amortised O(1) per removal: the map at least halves each time
/// it shrinks, and the cost is a rehash of the entries left.
pub fn shrink_if_sparse<K: Eq + std::hash::Hash, V, S: std::hash::BuildHasher>(
    map: &mut std::collections::HashMap<K, V, S>,
) {
    if map.capacity() > 4 * map.len() + 16 {
        map.shrink_to_fit();
    }
}
