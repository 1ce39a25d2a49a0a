-- Read release: leave the readers; the last unexpired reader to leave announces it.
-- KEYS[1] = the readers (token -> expiry on this master's clock).
-- ARGV[1] = our token, ARGV[2] = channel to announce on ('' for none).
-- Returns 1 when our entry was removed, 0 when it was absent (expired, or released already).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[2] ~= '' and redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('PUBLISH', ARGV[2], ARGV[1])
end
return 1
