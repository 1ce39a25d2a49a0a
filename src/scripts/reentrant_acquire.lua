-- Reentrant acquire: take the lock for an owner, or add one more hold when that owner has it already.
-- KEYS[1] = the reentrant lock's hash.
-- ARGV[1] = owner field ('o:' .. owner), ARGV[2] = hold field ('h:' .. hold token), ARGV[3] = TTL in ms.
-- The hash maps the owner field to the owner's hold count, and each hold field to 1, so that
-- releasing one hold twice (a retried release) never takes away another hold.
-- The TTL only ever grows here: a short inner hold must not cut an outer hold's validity.
-- Returns the owner's hold count after this hold (1 or more), or -1 when another owner holds the lock.
-- A key of another type raises WRONGTYPE, which the client reports for this master.
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
if redis.call('HSETNX', KEYS[1], ARGV[2], 1) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
end
local ttl = tonumber(ARGV[3])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
