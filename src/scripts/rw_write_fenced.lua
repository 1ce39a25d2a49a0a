-- Fenced write acquire, round 1: the write rule of rw_write.lua and the counter rule of
-- fence_acquire.lua in one step, so the writer key is taken and the counter drawn together.
-- KEYS[1] = the writer key, KEYS[2] = the readers, KEYS[3] = the waiting writers (as rw_read.lua),
-- KEYS[4] = the fencing counter, KEYS[5] = the fencing epoch (as fence_acquire.lua).
-- ARGV[1] = our token, ARGV[2] = TTL in ms, ARGV[3] = our waiter id, ARGV[4] = how long a writer
-- refused because of readers waits here, in ms, ARGV[5] = the highest counter value this client
-- has seen from this master, ARGV[6] = the run_id this client has verified for this master.
-- Returns the counter after INCR (>= 1) when we hold the writer key; -1 when another writer holds
-- it; -2 when the counter is missing, -3 when it is below ARGV[5], -4 when the epoch is not ARGV[6]
-- (in these three cases nothing is set: the master is repaired before its vote counts); -5 when
-- unexpired readers hold the lock (we now wait here, and new readers are refused). The codes are
-- fence_acquire.lua's, plus -5: rw_write.lua's -2 (readers) would collide with "counter missing".
local counter = redis.call('GET', KEYS[4])
if counter == false then
  return -2
end
if tonumber(counter) < tonumber(ARGV[5]) then
  return -3
end
if redis.call('GET', KEYS[5]) ~= ARGV[6] then
  return -4
end
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
  return -5
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[3])
return redis.call('INCR', KEYS[4])
