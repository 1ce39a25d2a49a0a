-- Reentrant extend: make the lock live at least TTL more milliseconds while our hold is in it
-- (after reentrant_common.lua).
-- KEYS[1] = the reentrant lock's hash.
-- ARGV[1] = owner field, ARGV[2] = hold field, ARGV[3] = TTL in ms.
-- The TTL only grows: another hold of the same owner may need the lock for longer.
-- Returns 1 when our hold is there (the lock lives at least TTL more), 0 when our hold is absent,
-- -1 when another owner holds the lock.
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  local ttl = tonumber(ARGV[3])
  if redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
  return 1
end
return hold_missing(KEYS[1], ARGV[1])
