-- Fenced store, write: apply a write only when its fencing token is at least the highest seen.
-- KEYS[1] = the data key, KEYS[2] = its fence (the highest token accepted so far).
-- ARGV[1] = the writer's fencing token, ARGV[2] = the value to store.
-- Returns {1, token} when written (the fence is now the token), {0, highest} when rejected.
local highest = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < highest then
  return {0, highest}
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[1])
return {1, token}
