-- Fair acquire: join (or stay in) the queue, and take the lock only when we are its first live waiter.
-- ARGV[1] = our ticket id, ARGV[2] = our ticket time in ms (the queue score, the same on every
-- master), ARGV[3] = the lock's TTL in ms, ARGV[4] = our heartbeat in ms, ARGV[5] = this
-- acquisition's random token (the lock's value while we hold it).
-- The ticket's score is written on every call, so every master orders the same tickets the same way
-- whatever was there before; stale waiters are purged first.
-- The lock is ours only when it holds our token: a lock held under any other token refuses us, even
-- when that holder drew the same ticket, so a reused ticket can never grant the lock twice.
-- Returns 1 when the lock is ours, -1 when another holder has it, 0 when an earlier waiter is ahead.
local now = now_ms()
local heartbeat = tonumber(ARGV[4])
purge(now)
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], now + heartbeat, ARGV[1])
for i = 2, 3 do
  if redis.call('PTTL', KEYS[i]) < heartbeat then
    redis.call('PEXPIRE', KEYS[i], heartbeat)
  end
end
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[5] then
  return -1
end
if not current and live_head(nil) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[5], 'PX', ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
