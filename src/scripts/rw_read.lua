-- Read acquire: join the readers unless a writer holds the lock or waits for it here.
-- KEYS[1] = the writer key (a token), KEYS[2] = the readers (a sorted set: token -> expiry in ms
-- on this master's clock), KEYS[3] = the waiting writers (a sorted set: waiter id -> expiry).
-- ARGV[1] = our token, ARGV[2] = TTL in ms.
-- Returns 1 when we joined the readers, -1 when a writer holds the lock, -3 when a writer waits.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('ZCARD', KEYS[3]) > 0 then
  return -3
end
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[2]) < ttl then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
