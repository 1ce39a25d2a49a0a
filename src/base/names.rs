//! Names on the wire: the keys, the channels and the TTL argument every lock kind writes.
//!
//! A plain lock's key is the resource name after the configured prefix (none by default), so plain
//! locks stay interoperable with other RedLock clients on the same masters. Every other kind keeps
//! its state under keys of its own, derived here from the resource name, and every release is
//! announced on a channel derived from the key it frees. One place makes them all, so a key a
//! kind writes and the key a waiter listens for can never disagree.

use std::sync::Arc;
use std::time::Duration;

/// Prefix of the pub/sub channel a release is announced on; the lock key follows it.
pub const RELEASE_CHANNEL_PREFIX: &str = "quorlock:released:";
/// Key of the fencing counter on every master (after the configured key prefix); one counter serves
/// every resource.
pub const FENCE_COUNTER_KEY: &str = "quorlock:fence:counter";
/// Key of the fencing epoch on every master (after the configured key prefix): the master's `run_id`
/// when its counter was last initialised or repaired. A master whose epoch is not its current
/// `run_id` restarted since, and its counter is repaired before it votes in a fenced acquire.
pub const FENCE_EPOCH_KEY: &str = "quorlock:fence:epoch";
/// The hash each master keeps about itself for quorlock (after the key prefix): when a client first
/// saw its current incarnation, whether that may lack acknowledged writes, whether it persisted
/// every write at every check, the longest grace a client declared, and its fencing high-water
/// mark. It has no TTL, like the fencing counter.
pub const MASTER_RECORD_KEY: &str = "quorlock:master";
/// Put between the key prefix and the resource name to form a reentrant lock's hash key.
pub const REENTRANT_TAG: &str = "quorlock:reentrant:";
/// Put between the key prefix and the resource name to form a fair lock's keys.
pub const FAIR_TAG: &str = "quorlock:fair:";
/// Put between the key prefix and the resource name to form a semaphore's slot keys.
pub const SEMAPHORE_TAG: &str = "quorlock:semaphore:";
/// Put between a semaphore's tagged name and the slot's index to form the slot's key.
pub const SLOT_INFIX: &str = ":slot:";
/// Put after a semaphore's base key to form its permits key, which holds the number of permits its
/// holders count, so that a client asking for another number is refused.
pub const PERMITS_SUFFIX: &str = ":permits";
/// Put between the key prefix and the resource name to form a read-write lock's keys.
pub const RWLOCK_TAG: &str = "quorlock:rw:";
/// Appended to a read-write lock's tagged name to form its readers (a sorted set by expiry).
pub const RW_READERS_SUFFIX: &str = ":readers";
/// Appended to a read-write lock's tagged name to form its waiting writers (a sorted set by expiry).
pub const RW_WAITING_SUFFIX: &str = ":waiting";
/// Appended to a fair lock's key to form its queue (a sorted set of tickets by ticket time).
pub const FAIR_QUEUE_SUFFIX: &str = ":queue";
/// Appended to a fair lock's key to form its waiters' heartbeat deadlines (a sorted set).
pub const FAIR_DEADLINES_SUFFIX: &str = ":deadlines";
/// Appended to a lock key to form its hand-off queue: the processes waiting for the key, a sorted
/// set of their wake channels by the time each first registered. A release wakes the first of them
/// only (`mechanisms/handoff.rs`).
pub const WAITERS_SUFFIX: &str = ":quorlock:waiters";
/// Prefix of a waiting process's own pub/sub channel, on which a release hands it the key; the
/// process's random id follows it.
pub const WAKE_CHANNEL_PREFIX: &str = "quorlock:wake:";

/// The keys of one client: every name it writes starts with its prefix.
#[derive(Debug, Clone, Default)]
pub(crate) struct Names {
    prefix: String,
}

impl Names {
    /// The names of a client whose keys start with `prefix`.
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    /// The key of a plain lock on `resource`.
    pub(crate) fn key(&self, resource: &str) -> String {
        self.tagged("", resource)
    }

    /// The key of a plain lock on `resource`, made once for everything that shares it (the local
    /// queue, the rounds, the guard): one allocation when it is short enough to be joined on the
    /// stack first.
    pub(crate) fn shared_key(&self, resource: &str) -> Arc<str> {
        let prefix = self.prefix.as_bytes();
        let mut joined = [0u8; 256];
        let len = prefix.len() + resource.len();
        match joined.get_mut(..len) {
            Some(buf) => {
                let (head, tail) = buf.split_at_mut(prefix.len());
                head.copy_from_slice(prefix);
                tail.copy_from_slice(resource.as_bytes());
                // Two joined strings are valid UTF-8: the other arm only avoids a panic path.
                match std::str::from_utf8(buf) {
                    Ok(key) => Arc::from(key),
                    Err(_) => self.key(resource).into(),
                }
            }
            None => self.key(resource).into(),
        }
    }

    /// The key of a kind's state: the prefix, the kind's tag, then the resource name.
    pub(crate) fn tagged(&self, tag: &str, resource: &str) -> String {
        let mut key = String::with_capacity(self.prefix.len() + tag.len() + resource.len());
        key.push_str(&self.prefix);
        key.push_str(tag);
        key.push_str(resource);
        key
    }

    /// The slot keys of a semaphore on `resource` with `permits` permits, in slot order.
    pub(crate) fn slots(&self, resource: &str, permits: u32) -> Vec<String> {
        let base = self.tagged(SEMAPHORE_TAG, resource);
        (0..permits).map(|i| format!("{base}{SLOT_INFIX}{i}")).collect()
    }

    /// A semaphore's permits key on `resource`: how many permits its holders count.
    pub(crate) fn semaphore_permits(&self, resource: &str) -> String {
        format!("{}{PERMITS_SUFFIX}", self.tagged(SEMAPHORE_TAG, resource))
    }

    /// A read-write lock's keys on `resource`: the writer, the readers, the waiting writers.
    ///
    /// The writer key is the plain lock's key on `resource`: the write hold, the plain lock and
    /// the fenced lock on one resource are one exclusive hold on the wire (each refuses while
    /// another holds), and readers are refused while any of them holds. Only the readers and the
    /// waiting writers have keys of their own.
    pub(crate) fn rwlock(&self, resource: &str) -> [String; 3] {
        let base = self.tagged(RWLOCK_TAG, resource);
        [
            self.key(resource),
            format!("{base}{RW_READERS_SUFFIX}"),
            format!("{base}{RW_WAITING_SUFFIX}"),
        ]
    }

    /// The record each master keeps about itself for quorlock (`core::master::record`).
    pub(crate) fn master_record(&self) -> String {
        self.key(MASTER_RECORD_KEY)
    }

    /// The fencing counter key on every master.
    pub(crate) fn fence_counter(&self) -> String {
        self.key(FENCE_COUNTER_KEY)
    }

    /// The fencing epoch key on every master.
    pub(crate) fn fence_epoch(&self) -> String {
        self.key(FENCE_EPOCH_KEY)
    }
}

/// The pub/sub channel a release of `key` is announced on.
pub(crate) fn release_channel(key: &str) -> String {
    let mut channel = String::with_capacity(RELEASE_CHANNEL_PREFIX.len() + key.len());
    channel.push_str(RELEASE_CHANNEL_PREFIX);
    channel.push_str(key);
    channel
}

/// The hand-off queue of `key`: the processes waiting for it.
pub(crate) fn waiters_key(key: &str) -> String {
    let mut queue = String::with_capacity(key.len() + WAITERS_SUFFIX.len());
    queue.push_str(key);
    queue.push_str(WAITERS_SUFFIX);
    queue
}

/// The wake channel of the process (the client) whose random id is `id`.
pub(crate) fn wake_channel(id: &str) -> String {
    format!("{WAKE_CHANNEL_PREFIX}{id}")
}

/// The hand-off queue of a key as one command argument, written straight into the command.
pub(crate) struct WaitersArg<'a>(pub(crate) &'a str);

impl redis::ToRedisArgs for WaitersArg<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        use std::io::Write;
        let mut arg = out.writer_for_next_arg();
        let _ = arg.write_all(self.0.as_bytes());
        let _ = arg.write_all(WAITERS_SUFFIX.as_bytes());
    }
}

/// The release channel of a key as one command argument, written straight into the command.
pub(crate) struct ChannelArg<'a>(pub(crate) &'a str);

impl redis::ToRedisArgs for ChannelArg<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        use std::io::Write;
        let mut arg = out.writer_for_next_arg();
        // Writing into the command's own buffer cannot fail.
        let _ = arg.write_all(RELEASE_CHANNEL_PREFIX.as_bytes());
        let _ = arg.write_all(self.0.as_bytes());
    }
}

/// A TTL in whole milliseconds, rounded up and at least 1 (PX 0 is an error on the server).
///
/// Rounding up keeps the key alive at least as long as the validity computed from the exact TTL
/// assumes; rounding down would overstate the validity by up to a millisecond.
pub(crate) fn ttl_millis(ttl: Duration) -> u64 {
    let whole = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let rounded = if ttl.subsec_nanos().is_multiple_of(1_000_000) {
        whole
    } else {
        whole.saturating_add(1)
    };
    rounded.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_argument_is_the_release_channel() {
        for key in ["", "k", "prefix:long key with spaces", "clé-ü"] {
            let (mut joined, mut plain) = (redis::cmd("PUBLISH"), redis::cmd("PUBLISH"));
            joined.arg(ChannelArg(key)).arg("x");
            plain.arg(release_channel(key)).arg("x");
            assert_eq!(joined.get_packed_command(), plain.get_packed_command(), "{key:?}");
        }
    }

    #[test]
    fn a_shared_key_is_the_key_at_any_length() {
        let names = Names::new("app:ü:");
        // The prefix is 7 bytes: 249 more fill the 256 joined on the stack, 250 take the other path.
        let long = "r".repeat(600);
        for resource in ["x", "ключ", &long[..249], &long[..250], &long[..]] {
            assert_eq!(
                &*names.shared_key(resource),
                names.key(resource),
                "{}",
                resource.len()
            );
        }
    }

    #[test]
    fn kinds_keep_their_state_under_their_own_tag() {
        let names = Names::new("p:");
        assert_eq!(names.key("r"), "p:r");
        assert_eq!(names.tagged(REENTRANT_TAG, "r"), "p:quorlock:reentrant:r");
        assert_eq!(names.fence_counter(), "p:quorlock:fence:counter");
        assert_eq!(
            names.slots("r", 2),
            ["p:quorlock:semaphore:r:slot:0", "p:quorlock:semaphore:r:slot:1"]
        );
        assert_eq!(
            names.rwlock("r"),
            [
                // The writer key is the plain lock's key.
                "p:r",
                "p:quorlock:rw:r:readers",
                "p:quorlock:rw:r:waiting"
            ]
        );
        assert_eq!(names.fence_epoch(), "p:quorlock:fence:epoch");
        assert_eq!(release_channel("p:r"), "quorlock:released:p:r");
        assert_eq!(waiters_key("p:r"), "p:r:quorlock:waiters");
        assert_eq!(wake_channel("ab12"), "quorlock:wake:ab12");
        let (mut joined, mut plain) = (redis::cmd("X"), redis::cmd("X"));
        joined.arg(WaitersArg("p:r"));
        plain.arg(waiters_key("p:r"));
        assert_eq!(joined.get_packed_command(), plain.get_packed_command());
    }

    #[test]
    fn ttl_in_millis_is_never_zero_and_never_shorter() {
        assert_eq!(ttl_millis(Duration::from_micros(10)), 1);
        assert_eq!(ttl_millis(Duration::from_secs(2)), 2000);
        assert_eq!(ttl_millis(Duration::from_micros(100_900)), 101);
        assert_eq!(ttl_millis(Duration::from_millis(100)), 100);
    }
}
