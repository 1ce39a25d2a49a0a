-- Read extend: give our reader entry a new expiry while it is still unexpired.
-- KEYS[1] = the readers (token -> expiry on this master's clock).
-- ARGV[1] = our token, ARGV[2] = new TTL in ms.
-- Returns 1 when extended, 0 when our entry is absent or expired (it is removed then).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) <= now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
