//! Wall-clock jumps on one master. With libfaketime (when this redis-server build runs
//! under it) the master's clock really jumps; otherwise the jump is emulated exactly for
//! key expiry by shifting every key's remaining TTL, which is all a clock jump changes for
//! lock keys: absolute expiry times stay, "now" moves.

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::error::HarnessError;
use crate::faketime::FakeClock;
use crate::server::connect;

/// Shifts every key's remaining TTL on one master as if its clock jumped forward by
/// `forward_ms` (negative: backward): keys whose TTL would fall to zero are deleted.
/// Runs as one script, so clients see the jump atomically. Returns how many keys changed.
const SHIFT_TTLS: &str = r#"
local jump = tonumber(ARGV[1])
local changed = 0
local cursor = "0"
repeat
  local page = redis.call('SCAN', cursor, 'COUNT', 1000)
  cursor = page[1]
  for _, key in ipairs(page[2]) do
    local left = redis.call('PTTL', key)
    if left > 0 then
      if left - jump <= 0 then
        redis.call('DEL', key)
      else
        redis.call('PEXPIRE', key, left - jump)
      end
      changed = changed + 1
    end
  end
until cursor == "0"
return changed
"#;

/// Emulates a wall-clock jump of `forward_ms` on the master behind `conn` (see module doc).
pub async fn shift_ttls(conn: &mut MultiplexedConnection, forward_ms: i64) -> Result<u64, HarnessError> {
    redis::Script::new(SHIFT_TTLS)
        .arg(forward_ms)
        .invoke_async(conn)
        .await
        .map_err(|e| HarnessError::redis(format!("shifting TTLs by {forward_ms} ms"), e))
}

/// How a master's clock is jumped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockMethod {
    /// The master runs under libfaketime; its real clock jumps.
    Faketime,
    /// The jump is emulated with [`shift_ttls`].
    TtlShift,
}

/// The clocks of a run's masters: libfaketime for some, TTL-shift emulation for the rest.
#[derive(Debug, Default)]
pub struct MasterClocks {
    fake: HashMap<usize, (FakeClock, i64)>,
}

impl MasterClocks {
    /// Every master's clock jumps by TTL-shift emulation.
    pub fn emulated() -> MasterClocks {
        MasterClocks::default()
    }

    /// Master `master` follows `clock` (it must have been started with `clock.env()`).
    pub fn with_fake_clock(mut self, master: usize, clock: FakeClock) -> MasterClocks {
        self.fake.insert(master, (clock, 0));
        self
    }

    /// How `master`'s clock is jumped.
    pub fn method(&self, master: usize) -> ClockMethod {
        if self.fake.contains_key(&master) {
            ClockMethod::Faketime
        } else {
            ClockMethod::TtlShift
        }
    }

    /// Jumps `master`'s wall clock forward by `forward` (whole seconds under libfaketime,
    /// rounded up). `url` reaches the master for the emulation.
    pub async fn jump(&mut self, master: usize, url: &str, forward: Duration) -> Result<(), HarnessError> {
        if let Some((clock, offset)) = self.fake.get_mut(&master) {
            let secs = i64::try_from(forward.as_millis().div_ceil(1000)).unwrap_or(i64::MAX);
            *offset = offset.saturating_add(secs);
            return clock.set_offset_secs(*offset);
        }
        let mut conn = connect(url, Duration::from_secs(5))
            .await
            .map_err(|e| HarnessError::redis(format!("connecting to master {master} for a clock jump"), e))?;
        let forward_ms = i64::try_from(forward.as_millis()).unwrap_or(i64::MAX);
        shift_ttls(&mut conn, forward_ms).await.map(drop)
    }
}
