-- Read acquire: join the readers unless a writer holds the lock or waits for it here (after
-- rw_common.lua; keys and arguments as there).
-- Returns 1 when we joined the readers, -1 when a writer holds the lock, -3 when a writer waits.
local now = now_ms()
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
if any_left(KEYS[3], now) then
  return -3
end
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[2]) < ttl then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
