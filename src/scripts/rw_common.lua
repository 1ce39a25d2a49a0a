-- Shared by the read acquire (rw_read.lua) and the write acquires, plain (rw_write.lua) and fenced
-- (rw_write_fenced.lua), which are sent with this text in front of them. KEYS[1] = the writer key
-- (a token), KEYS[2] = the readers (a sorted set: token -> expiry in ms on this master's clock),
-- KEYS[3] = the waiting writers (a sorted set: waiter id -> expiry). ARGV[1] = our token, ARGV[2] =
-- TTL in ms; for a write, ARGV[3] = our waiter id (one per acquire, kept over its rounds) and
-- ARGV[4] = how long a writer refused because of readers waits here, in ms.

-- This master's clock in milliseconds. Expiries are only ever compared on the master that set them.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Drops the members of the sorted set `set` whose expiry has passed; whether any is left.
local function any_left(set, now)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
  return redis.call('ZCARD', set) > 0
end

-- The write rule: takes the writer key and returns nil unless a writer or an unexpired reader
-- holds the lock here. Returns -1 when another writer holds it, and `readers` when readers do: we
-- then wait here, and new readers are refused until we hold it, leave, or our wait lapses.
local function take_writer(readers)
  local now = now_ms()
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return -1
  end
  if any_left(KEYS[2], now) then
    local wait = tonumber(ARGV[4])
    redis.call('ZADD', KEYS[3], now + wait, ARGV[3])
    if redis.call('PTTL', KEYS[3]) < wait then
      redis.call('PEXPIRE', KEYS[3], wait)
    end
    return readers
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[3])
  return nil
end
