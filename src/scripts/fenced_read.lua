-- Fenced store, read: read a value on behalf of a token holder, and raise the fence to that token so
-- that no holder of a lower token can write after this read (read-modify-write stays in token order).
-- KEYS[1] = the data key, KEYS[2] = its fence. ARGV[1] = the reader's fencing token.
-- Returns {1, token, value-or-false} when allowed, {0, highest} when the token is stale.
local highest = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < highest then
  return {0, highest}
end
if token > highest then
  redis.call('SET', KEYS[2], ARGV[1])
end
return {1, token, redis.call('GET', KEYS[1])}
