//! The simulated master's data: keys holding strings, hashes or sorted sets, each with an
//! optional expiry in milliseconds on the master's own clock. Keys expire lazily when touched (as
//! in Redis, a key is gone once the clock is strictly past its deadline) and all at once through
//! [`Keyspace::expire_due`]. Ordered maps keep every listing deterministic. Each key also carries
//! what the eviction policies read (its last access and how often it was used, stamped on the
//! master's clock) and what it costs in memory.

use std::collections::BTreeMap;

use super::zset::ZSet;

/// A hash: fields in insertion order, as a small Redis hash (listpack) keeps them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Hash {
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Hash {
    /// The value of `field`.
    pub(crate) fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(f, _)| f.as_slice() == field)
            .map(|(_, v)| v.as_slice())
    }

    /// Sets `field`; returns `true` when the field is new.
    pub(crate) fn set(&mut self, field: &[u8], value: Vec<u8>) -> bool {
        match self.fields.iter_mut().find(|(f, _)| f.as_slice() == field) {
            Some(slot) => {
                slot.1 = value;
                false
            }
            None => {
                self.fields.push((field.to_vec(), value));
                true
            }
        }
    }

    /// Removes `field`; returns `true` when it was there.
    pub(crate) fn remove(&mut self, field: &[u8]) -> bool {
        match self.fields.iter().position(|(f, _)| f.as_slice() == field) {
            Some(i) => {
                self.fields.remove(i);
                true
            }
            None => false,
        }
    }

    /// Number of fields.
    pub(crate) fn len(&self) -> usize {
        self.fields.len()
    }

    /// `true` when there is no field.
    pub(crate) fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Fields and values in order.
    pub(crate) fn fields(&self) -> &[(Vec<u8>, Vec<u8>)] {
        &self.fields
    }
}

/// What a key holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Data {
    /// A string.
    Str(Vec<u8>),
    /// A hash.
    Hash(Hash),
    /// A sorted set.
    ZSet(ZSet),
}

impl Data {
    /// The bytes its value takes, as the master estimates its memory.
    pub(crate) fn bytes(&self) -> u64 {
        match self {
            Data::Str(bytes) => bytes.len() as u64,
            Data::Hash(hash) => hash
                .fields()
                .iter()
                .map(|(f, v)| ITEM_OVERHEAD + (f.len() + v.len()) as u64)
                .sum(),
            Data::ZSet(zset) => zset
                .items()
                .iter()
                .map(|(_, m)| ITEM_OVERHEAD + 8 + m.len() as u64)
                .sum(),
        }
    }

    /// The name `TYPE` replies with.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Data::Str(_) => "string",
            Data::Hash(_) => "hash",
            Data::ZSet(_) => "zset",
        }
    }
}

/// One key's value and deadline.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// The value.
    pub(crate) data: Data,
    /// Milliseconds on the master's clock after which the key is gone; `None`: no expiry.
    pub(crate) expires_at: Option<u64>,
}

impl Entry {
    /// A value without expiry.
    pub(crate) fn new(data: Data) -> Entry {
        Entry {
            data,
            expires_at: None,
        }
    }

    fn expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|at| now > at)
    }
}

/// One stored key: its entry, and what the eviction policies read of its use (the approximate LRU
/// and LFU of a real server, stamped on every access).
#[derive(Debug, Clone, PartialEq)]
struct Slot {
    entry: Entry,
    /// The master's clock at the last access, in ms.
    touched: u64,
    /// Accesses so far (saturating), for the LFU policies.
    hits: u32,
}

/// Every key of the master.
#[derive(Debug, Clone, Default)]
pub(crate) struct Keyspace {
    map: BTreeMap<Vec<u8>, Slot>,
    /// The master's clock for the command being run, which every access stamps.
    clock: u64,
}

/// What an eviction policy reads of a key when it picks one to evict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    /// The last access, on the master's clock (ms).
    pub(crate) touched: u64,
    /// Accesses so far.
    pub(crate) hits: u32,
    /// Its deadline, if it has one.
    pub(crate) expires_at: Option<u64>,
}

impl Keyspace {
    /// Sets the clock that the accesses of the command about to run are stamped with.
    pub(crate) fn set_clock(&mut self, now: u64) {
        self.clock = now;
    }

    /// Drops `key` if its deadline passed; `true` when a live key remains.
    fn expire_if_due(&mut self, key: &[u8], now: u64) -> bool {
        match self.map.get(key) {
            None => false,
            Some(slot) if slot.entry.expired(now) => {
                self.map.remove(key);
                false
            }
            Some(_) => true,
        }
    }

    /// The live slot at `key`, stamped as accessed.
    fn touch(&mut self, key: &[u8], now: u64) -> Option<&mut Slot> {
        if !self.expire_if_due(key, now) {
            return None;
        }
        let clock = self.clock;
        let slot = self.map.get_mut(key)?;
        slot.touched = clock;
        slot.hits = slot.hits.saturating_add(1);
        Some(slot)
    }

    /// The live entry at `key`.
    pub(crate) fn get(&mut self, key: &[u8], now: u64) -> Option<&Entry> {
        self.touch(key, now).map(|slot| &slot.entry)
    }

    /// The live entry at `key`, to change.
    pub(crate) fn get_mut(&mut self, key: &[u8], now: u64) -> Option<&mut Entry> {
        self.touch(key, now).map(|slot| &mut slot.entry)
    }

    /// Stores `entry` at `key`, replacing whatever was there.
    pub(crate) fn insert(&mut self, key: &[u8], entry: Entry) {
        let clock = self.clock;
        match self.map.get_mut(key) {
            Some(slot) => {
                slot.entry = entry;
                slot.touched = clock;
                slot.hits = slot.hits.saturating_add(1);
            }
            None => {
                self.map.insert(
                    key.to_vec(),
                    Slot {
                        entry,
                        touched: clock,
                        hits: 1,
                    },
                );
            }
        }
    }

    /// Deletes `key`; `true` when a live key was deleted.
    pub(crate) fn remove(&mut self, key: &[u8], now: u64) -> bool {
        match self.map.remove(key) {
            Some(slot) => !slot.entry.expired(now),
            None => false,
        }
    }

    /// Deletes `key` without looking at its deadline (after a command emptied it).
    pub(crate) fn remove_now(&mut self, key: &[u8]) {
        self.map.remove(key);
    }

    /// Deletes every key whose deadline has passed; returns how many.
    pub(crate) fn expire_due(&mut self, now: u64) -> usize {
        let before = self.map.len();
        self.map.retain(|_, slot| !slot.entry.expired(now));
        before - self.map.len()
    }

    /// Live keys, in byte order.
    pub(crate) fn live_keys(&self, now: u64) -> impl Iterator<Item = (&[u8], &Entry)> + '_ {
        self.map
            .iter()
            .filter(move |(_, slot)| !slot.entry.expired(now))
            .map(|(key, slot)| (key.as_slice(), &slot.entry))
    }

    /// The `n`-th key stored (in byte order, live or not) and its usage, for eviction's samples.
    pub(crate) fn nth(&self, n: usize) -> Option<(&[u8], Usage)> {
        self.map.iter().nth(n).map(|(key, slot)| {
            (
                key.as_slice(),
                Usage {
                    touched: slot.touched,
                    hits: slot.hits,
                    expires_at: slot.entry.expires_at,
                },
            )
        })
    }

    /// Keys stored with a deadline, in byte order, for the `volatile-*` policies' samples.
    pub(crate) fn volatile(&self) -> impl Iterator<Item = (&[u8], Usage)> + '_ {
        self.map
            .iter()
            .filter(|(_, slot)| slot.entry.expires_at.is_some())
            .map(|(key, slot)| {
                (
                    key.as_slice(),
                    Usage {
                        touched: slot.touched,
                        hits: slot.hits,
                        expires_at: slot.entry.expires_at,
                    },
                )
            })
    }

    /// The memory the keys take, as this master estimates it: their names and values and a fixed
    /// overhead per key, field and member (see `memory.rs`).
    pub(crate) fn bytes(&self) -> u64 {
        self.map
            .iter()
            .map(|(key, slot)| KEY_OVERHEAD + key.len() as u64 + slot.entry.data.bytes())
            .sum()
    }

    /// Number of keys stored, counting keys past their deadline not yet removed (as `DBSIZE`).
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Deletes everything.
    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }
}

/// What a key costs beyond its name and value (the dictionary entry, the object header, the
/// expiry entry), roughly as a real server's `MEMORY USAGE` shows for small keys.
const KEY_OVERHEAD: u64 = 56;
/// What each field of a hash or member of a sorted set costs beyond its bytes.
const ITEM_OVERHEAD: u64 = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_live_until_strictly_past_their_deadline() {
        let mut ks = Keyspace::default();
        ks.insert(
            b"k",
            Entry {
                data: Data::Str(b"v".to_vec()),
                expires_at: Some(100),
            },
        );
        assert!(ks.get(b"k", 100).is_some());
        assert!(ks.get(b"k", 101).is_none());
        assert_eq!(ks.len(), 0, "the lookup removed it");
    }

    #[test]
    fn expire_due_removes_only_the_due() {
        let mut ks = Keyspace::default();
        for (key, at) in [(&b"a"[..], Some(10)), (b"b", Some(20)), (b"c", None)] {
            ks.insert(
                key,
                Entry {
                    data: Data::Str(Vec::new()),
                    expires_at: at,
                },
            );
        }
        assert_eq!(ks.expire_due(15), 1);
        let keys: Vec<&[u8]> = ks.live_keys(15).map(|(k, _)| k).collect();
        assert_eq!(keys, vec![&b"b"[..], b"c"]);
    }

    #[test]
    fn hashes_keep_insertion_order() {
        let mut h = Hash::default();
        assert!(h.set(b"z", b"1".to_vec()));
        assert!(h.set(b"a", b"2".to_vec()));
        assert!(!h.set(b"z", b"3".to_vec()));
        assert_eq!(h.fields()[0], (b"z".to_vec(), b"3".to_vec()));
        assert!(h.remove(b"z"));
        assert_eq!(h.get(b"a"), Some(&b"2"[..]));
        assert_eq!(h.len(), 1);
    }
}
