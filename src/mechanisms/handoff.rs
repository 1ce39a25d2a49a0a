//! The plain lock's hand-off on the wire: a waiting process's registration in the key's queue, its
//! look at the key between attempts, its leave, and the pass-on of a hand-off it can no longer use.
//!
//! The queue itself, and the release that hands the key to its first process, are scripts
//! (`handoff_common.lua`, `release.lua`); what a look's answers mean is decided in
//! `core::handoff`; which process hears what is the pub/sub hub's business (`pubsub.rs`). This file
//! only sends: it knows masters and names, not waiters.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::base::lua::{lua, ScriptCall};
use crate::base::names::{waiters_key, ChannelArg, WaitersArg, RELEASE_CHANNEL_PREFIX, WAITERS_SUFFIX};
use crate::core::expiry::Pttl;
use crate::seam::link::Masters;
use crate::seam::Master;

lua! {
    /// A plain waiter's look: joins (or stays in) the key's queue, reads the key's PTTL and how
    /// many processes are ahead.
    static WAIT_REGISTER = concat!(
        include_str!("../scripts/handoff_common.lua"),
        include_str!("../scripts/wait_register.lua")
    );
    /// The pass-on of a hand-off that reached a process with nobody waiting any more.
    static WAIT_PASS_ON = concat!(
        include_str!("../scripts/handoff_common.lua"),
        include_str!("../scripts/wait_pass_on.lua")
    );
}

/// What one master said at a look: the key's PTTL and how many processes are ahead of ours, or
/// `None` when it did not answer usably.
pub(crate) type Look = Option<(Pttl, u64)>;

/// Registers this process (its wake channel `member`, first registered at `score`) in `key`'s
/// queue on every master, keeping the queue for `life`, and reads the PTTL of the lock (`key` and
/// the `also` keys: free when all are gone) and the place; one answer per master, in the masters'
/// order.
pub(crate) async fn look(
    masters: &Masters,
    (key, also): (&str, &[String]),
    member: &str,
    score: u64,
    life: Duration,
) -> Vec<Look> {
    let call = register_call(key, also, member, score, life);
    let replies = crate::mechanisms::fanout::all(masters.iter().map(|link| link.run_script(&call))).await;
    replies
        .into_iter()
        .map(|reply| match reply {
            Ok(Value::Array(items)) => match items.as_slice() {
                [Value::Int(pttl), Value::Int(ahead)] => {
                    Some((Pttl::from_reply(*pttl), u64::try_from(*ahead).ok()?))
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn register_call(key: &str, also: &[String], member: &str, score: u64, life: Duration) -> ScriptCall {
    let life_ms = u64::try_from(life.as_millis()).unwrap_or(u64::MAX).max(1);
    let also_bytes: usize = also.iter().map(String::len).sum();
    let mut call = WAIT_REGISTER
        .call(
            2 + also.len(),
            5 + also.len(),
            2 * key.len() + WAITERS_SUFFIX.len() + member.len() + also_bytes,
        )
        .arg(key)
        .arg(WaitersArg(key));
    for other in also {
        call.push(other.as_str());
    }
    call.arg(member).arg(score).arg(life_ms)
}

/// The lock key a release channel announces, if it is one.
pub(crate) fn key_of(channel: &str) -> Option<&str> {
    channel.strip_prefix(RELEASE_CHANNEL_PREFIX)
}

/// Takes this process (`member`) out of the queue of the key whose release channel is `channel`,
/// on `master`, within `timeout`: its last waiter for the key left before a hand-off reached it.
pub(crate) async fn leave(master: Arc<dyn Master>, channel: &str, member: &str, timeout: Duration) {
    let Some(key) = key_of(channel) else { return };
    let mut cmd = redis::cmd("ZREM");
    cmd.arg(waiters_key(key)).arg(member);
    let _ = master.send(Arc::new(cmd), timeout).await;
}

/// Passes a hand-off of `token` on `channel` that reached this process, which has no waiter for the
/// key any more, on to the next queued process on `master`, while the key is still free.
pub(crate) async fn pass_on(master: Arc<dyn Master>, channel: &str, token: &str, timeout: Duration) {
    let Some(key) = key_of(channel) else { return };
    // Rare: sent with its source, so no connection state is needed to send it.
    let call = WAIT_PASS_ON
        .call(2, 4, 0)
        .arg(key)
        .arg(WaitersArg(key))
        .arg(token)
        .arg(ChannelArg(key));
    let _ = master.send(Arc::new(call.with_source()), timeout).await;
}

/// The payload a hand-off carries to the process it wakes: the released token and the key's release
/// channel.
pub(crate) fn parse(payload: &str) -> Option<(&str, &str)> {
    payload.split_once('\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_off_names_the_token_and_the_channel_and_a_probe_names_nothing() {
        assert_eq!(
            parse("tok\nquorlock:released:k"),
            Some(("tok", "quorlock:released:k"))
        );
        assert_eq!(parse(""), None, "the liveness probe is ignored");
        assert_eq!(key_of("quorlock:released:p:k"), Some("p:k"));
        assert_eq!(key_of("quorlock:wake:x"), None);
    }
}
