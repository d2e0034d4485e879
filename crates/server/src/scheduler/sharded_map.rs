//! `ShardedMap`: a hash map that never rehashes more than a small share of
//! its entries in one insert.
//!
//! A `HashMap` that outgrows its table moves every entry to one twice the
//! size, inside the insert that crossed the line: work that grows with
//! everything the map holds, done by whichever coordinator step happened
//! to insert. The idempotency map holds a key for every job the database
//! still holds (600,000 after an hour of 10,000 schedules firing each
//! minute, millions with a long retention), and its doublings past 28,000
//! and 57,000 keys stalled a schedule pass for 4.6 to 6.5 ms (docs/performance-log.md,
//! "Schedules"). Split over `SHARDS` maps picked by hash, each insert
//! rehashes at most one shard, about `1/SHARDS` of the entries; the shards
//! grow at about the same time, but in different steps, with requests
//! handled between them.

use crate::scheduler::hash_map::HashMap;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

/// Shards a map is split over.
pub const SHARDS: usize = 256;

/// A hash map split over `SHARDS` maps; see the module's documentation.
pub struct ShardedMap<K, V> {
    shards: Box<[HashMap<K, V>]>,
    /// Picks a key's shard. Seeded apart from the shards' own hashers, so
    /// the keys of one shard do not share the bits those use.
    picker: foldhash::quality::RandomState,
    len: usize,
}

impl<K, V> Default for ShardedMap<K, V> {
    fn default() -> Self {
        ShardedMap {
            shards: (0..SHARDS).map(|_| HashMap::default()).collect(),
            picker: Default::default(),
            len: 0,
        }
    }
}

impl<K, V> ShardedMap<K, V> {
    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.shards.iter().flat_map(|shard| shard.iter())
    }
}

impl<K: Eq + Hash, V> ShardedMap<K, V> {
    fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        // The high bits: the low ones of a multiplicative hash mix less.
        (self.picker.hash_one(key) >> 56) as usize % SHARDS
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards[self.shard(key)].get(key)
    }

    /// Inserts or replaces; the value replaced, if any.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let shard = self.shard(&key);
        let old = self.shards[shard].insert(key, value);
        self.len += usize::from(old.is_none());
        old
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let shard = self.shard(key);
        let old = self.shards[shard].remove(key);
        self.len -= usize::from(old.is_some());
        old
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries the largest shard has room for: the most one insert can
    /// rehash.
    pub fn largest_shard_capacity(&self) -> usize {
        self.shards.iter().map(|s| s.capacity()).max().unwrap_or(0)
    }
}

impl<K: std::fmt::Debug, V: std::fmt::Debug> std::fmt::Debug for ShardedMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Eq + Hash, V> Extend<(K, V)> for ShardedMap<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, entries: I) {
        for (key, value) in entries {
            self.insert(key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_one_map() {
        let mut map = ShardedMap::default();
        assert!(map.is_empty());
        for i in 0..10_000u32 {
            assert_eq!(map.insert(format!("k{i}"), i), None);
        }
        assert_eq!(map.insert("k7".to_string(), 70), Some(7));
        assert_eq!(map.len(), 10_000);
        assert_eq!(map.get("k7"), Some(&70));
        assert_eq!(map.get("k9999"), Some(&9_999));
        assert_eq!(map.get("absent"), None);
        assert_eq!(map.remove("k7"), Some(70));
        assert_eq!(map.remove("k7"), None);
        assert_eq!(map.len(), 9_999);
        assert_eq!(map.iter().count(), 9_999);
        let sum: u64 = map.iter().map(|(_, v)| u64::from(*v)).sum();
        assert_eq!(sum, (0..10_000u64).sum::<u64>() - 7);
    }

    #[test]
    fn no_insert_rehashes_more_than_a_shard() {
        let mut map = ShardedMap::default();
        map.extend((0..200_000u32).map(|i| (format!("schedule:s{i}:1700000000000"), i)));
        assert_eq!(map.len(), 200_000);
        // Keys spread evenly: the largest shard holds a small multiple of
        // an even share, so a doubling moves a few thousand entries, not
        // the 200,000 one map would.
        let even = 200_000 / SHARDS;
        assert!(
            map.largest_shard_capacity() <= 4 * even,
            "largest shard has room for {}, an even share is {even}",
            map.largest_shard_capacity()
        );
    }
}
