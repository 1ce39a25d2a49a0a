//! Wall-clock jumps on one master. With libfaketime (when this redis-server build runs
//! under it) the master's clock really jumps; otherwise the jump is emulated exactly for
//! key expiry by shifting every key's remaining TTL, which is all a clock jump changes for
//! lock keys: absolute expiry times stay, "now" moves.

use redis::aio::MultiplexedConnection;

use crate::error::HarnessError;

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
