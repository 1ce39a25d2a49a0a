-- Write acquire: take the writer key unless a writer or an unexpired reader holds the lock here.
-- KEYS[1] = the writer key, KEYS[2] = the readers, KEYS[3] = the waiting writers (as rw_read.lua).
-- ARGV[1] = our token, ARGV[2] = TTL in ms, ARGV[3] = our waiter id (one per acquire, kept over
-- its rounds), ARGV[4] = how long a writer refused because of readers waits here, in ms.
-- Returns 1 when we hold the writer key, -1 when another writer holds it, -2 when readers do (we
-- now wait here, and new readers are refused until we hold it, leave, or our wait lapses).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) > 0 then
  local wait = tonumber(ARGV[4])
  redis.call('ZADD', KEYS[3], now + wait, ARGV[3])
  if redis.call('PTTL', KEYS[3]) < wait then
    redis.call('PEXPIRE', KEYS[3], wait)
  end
  return -2
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[3])
return 1
