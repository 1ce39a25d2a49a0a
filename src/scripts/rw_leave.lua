-- A waiting writer gives up: remove its waiter id, and announce on the writer key's channel when
-- no writer waits any more, so that readers held back by it try again at once.
-- KEYS[1] = the waiting writers (waiter id -> expiry). ARGV[1] = waiter id, ARGV[2] = channel.
-- Returns 1 when the id was removed, 0 when it was absent.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('PUBLISH', ARGV[2], ARGV[1])
end
return 1
